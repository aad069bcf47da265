package replay

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/traces/timeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPhaseResources checks each phase's resources and binding resource:
// the list keeps only resources at least MinResourceUtil busy, the bound
// one is the busiest and its runner-up is of another kind, the Proxy
// backend's CPU threads are accounted, and with one step the report's
// binding is the step's.
func TestPhaseResources(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := tinyTrace(t, 16, 64)
	for _, backend := range []string{BackendGDAKI, BackendProxy} {
		t.Run(backend, func(t *testing.T) {
			rep, err := Run(tr, spec, Options{Mode: ModeLL, Backend: backend, Seed: 1, Backends: backends})
			require.NoError(t, err)
			require.Len(t, rep.Layers, 1)
			l := rep.Layers[0]
			var cpu bool
			for _, ph := range []PhaseReport{l.Dispatch, l.Combine} {
				require.NotEmpty(t, ph.Resources)
				b := ph.Bound
				require.NotEmpty(t, b.Top.Name)
				assert.NotEqual(t, b.Top.Kind, b.Other.Kind)
				var nicTx int64
				for _, r := range ph.Resources {
					assert.GreaterOrEqual(t, r.Util, MinResourceUtil, "%s %s", r.Name, r.Dir)
					assert.LessOrEqual(t, r.Util, b.Top.Util, "%s %s busier than the binding %v", r.Name, r.Dir, b)
					if r.Kind == machine.KindNIC && r.Dir == "tx" {
						nicTx += int64(r.Bytes)
					}
					cpu = cpu || r.Kind == machine.KindCPU
				}
				// Wire bytes carry headers: at least the RDMA payload.
				assert.GreaterOrEqual(t, nicTx, ph.RDMABytes)
			}
			assert.Equal(t, backend == BackendProxy, cpu, "proxy threads listed")
			for _, c := range []struct{ step, all machine.Binding }{{l.Dispatch.Bound, rep.Bound.Dispatch},
				{l.Combine.Bound, rep.Bound.Combine}} {
				assert.Equal(t, c.step.Top.Name, c.all.Top.Name)
				assert.Equal(t, c.step.Top.Dir, c.all.Top.Dir)
				assert.InDelta(t, c.step.Top.Util, c.all.Top.Util, 1e-9)
			}
		})
	}
}

// TestBoundByGPUPCIe replays on two 400G NICs per GPU: the GPU's PCIe link
// (both NICs write received tokens through it) binds dispatch, not a NIC,
// which is why the second NIC buys little (issue 19).
func TestBoundByGPUPCIe(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := tinyTrace(t, 16, 64)
	one, err := Run(tr, spec, Options{Mode: ModeLL, Backend: BackendGDAKI, Seed: 1, Backends: backends})
	require.NoError(t, err)
	spec.NICsPerGPU = 2
	two, err := Run(tr, spec, Options{Mode: ModeLL, Backend: BackendGDAKI, Seed: 1, Backends: backends})
	require.NoError(t, err)
	t.Logf("1 NIC: dispatch %.1f us, bound by %v", one.DispatchUS, one.Bound.Dispatch)
	t.Logf("2 NICs: dispatch %.1f us, bound by %v", two.DispatchUS, two.Bound.Dispatch)
	assert.NotEqual(t, machine.KindGPUPCIe, one.Bound.Dispatch.Top.Kind)
	assert.Equal(t, machine.KindGPUPCIe, two.Bound.Dispatch.Top.Kind)
	assert.Greater(t, two.DispatchUS, one.DispatchUS/2, "far from twice as fast")
}

// TestUtilTracks samples utilisation into the timeline: the report is the
// same as without sampling (event count included), the timeline keeps
// every other event and adds counter tracks of busy resources.
func TestUtilTracks(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := tinyTrace(t, 16, 16)
	run := func(every sim.Duration) (string, map[string]any) {
		var tl bytes.Buffer
		tw := timeline.NewWriter(&tl)
		rep, err := Run(tr, spec, Options{Mode: ModeLL, Backend: BackendProxy, Seed: 1, Backends: backends,
			Timeline: tw, UtilEvery: every})
		require.NoError(t, err)
		require.NoError(t, tw.Close())
		var js bytes.Buffer
		require.NoError(t, rep.WriteJSON(&js))
		var doc map[string]any
		require.NoError(t, json.Unmarshal(tl.Bytes(), &doc))
		return js.String(), doc
	}
	plainJSON, plain := run(0)
	utilJSON, util := run(sim.Microsecond)
	assert.Equal(t, plainJSON, utilJSON, "sampling changes nothing in the report")

	var kept []any
	tracks := map[string]int{}
	for _, e := range util["traceEvents"].([]any) {
		ev := e.(map[string]any)
		if ev["pid"] == float64(16) {
			if ev["ph"] == "C" {
				tracks[ev["name"].(string)]++
			}
			continue
		}
		kept = append(kept, e)
	}
	assert.Equal(t, plain["traceEvents"], kept, "every other event unchanged")
	assert.Contains(t, tracks, "nic n0g0/nic0 tx util%")
	assert.Contains(t, tracks, "cpu cpu0/proxy util%")
	assert.Greater(t, tracks["nic n0g0/nic0 tx util%"], 5, "several samples")
}

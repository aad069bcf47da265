package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ginsim/ginsim/traces/workload"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/traces/timeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPhaseResources checks each phase's resources and binding resource:
// the list holds the busiest resources, most utilised first, at most
// MaxPhaseResources of them and each at least MinResourceUtil busy; the
// bound one heads it and its runner-up is of another kind; and with one
// step the report's binding is the step's.
func TestPhaseResources(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := tinyTrace(t, 16, 64)
	for _, backend := range []string{BackendGDAKI, BackendProxy} {
		t.Run(backend, func(t *testing.T) {
			rep, err := Run(tr, spec, Options{Mode: ModeLL, Backend: backend, Seed: 1, Backends: backends})
			require.NoError(t, err)
			require.Len(t, rep.Layers, 1)
			l := rep.Layers[0]
			for _, ph := range []PhaseReport{l.Dispatch, l.Combine} {
				require.NotEmpty(t, ph.Resources)
				require.LessOrEqual(t, len(ph.Resources), MaxPhaseResources)
				b := ph.Bound
				require.NotEmpty(t, b.Top.Name)
				assert.NotEqual(t, b.Top.Kind, b.Other.Kind)
				assert.Equal(t, b.Top.Name, ph.Resources[0].Name)
				assert.Equal(t, b.Top.Dir, ph.Resources[0].Dir)
				for i, r := range ph.Resources {
					assert.GreaterOrEqual(t, r.Util, MinResourceUtil, "%s %s", r.Name, r.Dir)
					if i > 0 {
						assert.LessOrEqual(t, r.Util, ph.Resources[i-1].Util, "%s %s out of order", r.Name, r.Dir)
					}
				}
			}
			for _, c := range []struct{ step, all machine.Binding }{{l.Dispatch.Bound, rep.Bound.Dispatch},
				{l.Combine.Bound, rep.Bound.Combine}} {
				assert.Equal(t, c.step.Top.Name, c.all.Top.Name)
				assert.Equal(t, c.step.Top.Dir, c.all.Top.Dir)
				assert.InDelta(t, c.step.Top.Util, c.all.Top.Util, 1e-9)
			}
		})
	}
}

// phaseOf keeps the busiest resources above the floor, most utilised
// first, ties in the snapshot's order, and caps the list.
func TestPhaseOfKeepsTheBusiest(t *testing.T) {
	var all []machine.Resource
	for i := range 3 * MaxPhaseResources {
		all = append(all, machine.Resource{Name: fmt.Sprintf("r%02d", i), Kind: machine.KindNIC, Dir: "tx",
			Util: float64(i%7) / 10})
	}
	all = append(all, machine.Resource{Name: "cold", Kind: machine.KindCPU, Util: MinResourceUtil / 2})
	p := phaseOf(workload.PhaseReport{}, critical{}, all)
	require.Len(t, p.Resources, MaxPhaseResources)
	assert.Equal(t, "r06", p.Resources[0].Name) // the first of the busiest (0.6)
	assert.Equal(t, "r13", p.Resources[1].Name)
	for _, r := range p.Resources {
		assert.GreaterOrEqual(t, r.Util, 0.4, r.Name) // six 0.6s, seven 0.5s, three 0.4s
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

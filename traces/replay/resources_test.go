package replay

import (
	"testing"

	"github.com/ginsim/ginsim/gin/machine"
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

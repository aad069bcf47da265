package replay

import (
	"testing"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/traces/workload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Over the Proxy backend the breakdown carries a proxy-queue part (the GFD
// waits for the CPU thread); over GDAKI it has none. Either way the parts
// add up to the critical path's total.
func TestBreakdownProxyQueue(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	for _, c := range []struct {
		mode, backend string
	}{{ModeLL, BackendProxy}, {ModeLL, BackendGDAKI}, {ModeV2Direct, BackendProxy},
		{ModeV2Hybrid, BackendGDAKI}, {ModeV2Hybrid, BackendProxy}, {ModeHT, BackendProxy}, {ModeHT, BackendGDAKI}} {
		tr := tinyTrace(t, 16, 16)
		rep, err := Run(tr, spec, Options{Mode: c.mode, Backend: c.backend, Seed: 1, Backends: backends})
		require.NoError(t, err)
		for _, b := range []workload.Breakdown{rep.Breakdown.Dispatch, rep.Breakdown.Combine} {
			if c.backend == BackendProxy {
				assert.Positive(t, b.ProxyQueueUS, "%s/%s: proxy queue", c.mode, c.backend)
			} else {
				assert.Zero(t, b.ProxyQueueUS, "%s/%s: proxy queue", c.mode, c.backend)
			}
			sum := b.GPUIssueUS + b.ProxyQueueUS + b.DoorbellPCIeUS + b.NICUS + b.WireSwitchUS + b.RemoteWriteUS + b.SignalVisibilityUS
			assert.InDelta(t, b.TotalUS, sum, 0.02, "%s/%s: parts add up", c.mode, c.backend)
		}
	}
}

package replay

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/traces/workload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// partsSum adds a breakdown's parts (they add up to its total).
func partsSum(b workload.Breakdown) float64 {
	return b.GPUIssueUS + b.ProxyUS + b.PCIeUS + b.NICUS + b.WireUS + b.RemoteWriteUS + b.SignalSeenUS + b.ReceiverUS
}

// Over the Proxy backend the breakdown carries a proxy part (the GFD
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
				assert.Positive(t, b.ProxyUS, "%s/%s: proxy", c.mode, c.backend)
			} else {
				assert.Zero(t, b.ProxyUS, "%s/%s: proxy", c.mode, c.backend)
			}
			assert.InDelta(t, b.TotalUS, partsSum(b), 0.02, "%s/%s: parts add up", c.mode, c.backend)
		}
	}
}

// The critical path follows the signal's operation through the machine:
// PCIe, the NIC and the wire each have a part, and each part names a
// resource of the path it took: the sending rank's PCIe links, the NIC
// port the crossing says the signal left, a port of the wire, the
// receiving rank's PCIe links.
func TestBreakdownNamesThePathsResources(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := tinyTrace(t, 16, 16)
	rep, err := Run(tr, spec, Options{Mode: ModeLL, Backend: BackendGDAKI, Seed: 1, Backends: backends})
	require.NoError(t, err)
	for _, l := range rep.Layers {
		for _, ph := range []PhaseReport{l.Dispatch, l.Combine} {
			b, c := ph.Breakdown, ph.Critical
			require.NotNil(t, c)
			require.Equal(t, "rdma", c.Via)
			require.Len(t, c.Links, 2)
			assert.Positive(t, b.PCIeUS)
			assert.Positive(t, b.WireUS)
			require.NotNil(t, b.Bound)
			require.NotNil(t, b.Bound.PCIe)
			require.NotNil(t, b.Bound.Wire)
			require.NotNil(t, b.Bound.RemoteWrite)
			// rankR/nic0 is NIC nNgL/nic0 with R = N*GPUs per node + L.
			nicOf := func(link string) string {
				var r, j int
				_, err := fmt.Sscanf(link, "rank%d/nic%d", &r, &j)
				require.NoError(t, err)
				return "n" + strconv.Itoa(r/spec.GPUsPerNode) + "g" + strconv.Itoa(r%spec.GPUsPerNode) + "/nic0"
			}
			src, dst := nicOf(c.Links[0]), nicOf(c.Links[1])
			if b.NICUS > 0 {
				require.NotNil(t, b.Bound.NIC)
				assert.Equal(t, src, b.Bound.NIC.Name)
				assert.Equal(t, "tx", b.Bound.NIC.Dir)
			}
			for _, u := range []*workload.ResourceUse{b.Bound.PCIe, b.Bound.RemoteWrite} {
				assert.Contains(t, []string{"gpu-pcie", "nic-pcie", "pcie-switch"}, u.Kind)
			}
			if b.Bound.PCIe.Kind == "nic-pcie" {
				assert.Equal(t, src, b.Bound.PCIe.Name)
			}
			if b.Bound.RemoteWrite.Kind == "nic-pcie" {
				assert.Equal(t, dst, b.Bound.RemoteWrite.Name)
			}
			w := b.Bound.Wire
			assert.True(t, w.Kind == "switch" || w.Kind == "nic" && (w.Name == src && w.Dir == "tx" ||
				w.Name == dst && w.Dir == "rx"), "wire resource %v", w)
			assert.True(t, strings.HasPrefix(c.Links[0], "rank"+strconv.Itoa(c.From)+"/"), "%v from %d", c.Links, c.From)
		}
	}
}

package replay

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/replay/replaytest"
	"github.com/ginsim/ginsim/traces/workload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ncclReplay(t *testing.T, tr *traces.Trace, nvlink bool, seed uint64) *Report {
	spec, ok := machine.Preset("h100-ib")
	require.True(t, ok)
	rep, err := Run(tr, spec, Options{Mode: ModeLL, Backend: BackendNCCL, NVLink: nvlink, RDMAOnly: !nvlink, Seed: seed, Layers: 1,
		TraceName: "tiny"})
	require.NoError(t, err)
	return rep
}

func TestNCCLReplayEP16(t *testing.T) {
	tr := tinyTrace(t, 16, 8)
	rep := ncclReplay(t, tr, false, 1)
	require.Len(t, rep.Layers, 1)
	l := rep.Layers[0]
	for _, ph := range []workload.PhaseReport{l.Dispatch.PhaseReport, l.Combine.PhaseReport} {
		assert.Len(t, ph.RecvDoneUS, 16)
		assert.Greater(t, ph.US, 5.0)
		assert.Greater(t, ph.GBps, 0.0)
		b := ph.Breakdown
		sum := partsSum(b)
		assert.InDelta(t, b.TotalUS, sum, 0.01, "breakdown parts add up")
	}
	// Dispatch waits for the counts all-gather and the host sync before
	// the all-to-all kernel starts; combine does not.
	assert.Greater(t, l.Dispatch.Breakdown.GPUIssueUS, l.Combine.Breakdown.GPUIssueUS+10)
	// Over NET the critical step's WR chain is followed as an operation:
	// the proxy thread, PCIe, the NIC and the wire each take their part.
	for _, b := range []workload.Breakdown{l.Dispatch.Breakdown, l.Combine.Breakdown} {
		assert.Positive(t, b.ProxyUS)
		assert.Positive(t, b.PCIeUS)
		assert.Positive(t, b.WireUS)
	}
	joined := strings.Join(rep.Notes, "\n")
	assert.Contains(t, joined, "cudaStreamSynchronize")
	assert.Contains(t, joined, "sends <= 16 KiB per channel (NCCL_P2P_LL_THRESHOLD)")
	assert.Contains(t, joined, "LL protocol on NET hops")
	assert.Contains(t, joined, "and on NVLink hops")
	assert.Contains(t, joined, "no PXN")
}

// TestNCCLBytesMatchRouting checks the payload the NICs carried against the
// all-to-all-v matrix computed from the routing: dispatch moves
// sel[s][d] × token bytes (FP8 payload and scales, no DeepEP header) for
// every s != d whose path is the NET transport, plus the ring all-gather of
// E int64 counts in LL lines (16 bytes per 8 data bytes: twice the block,
// ep-1 NET steps per NET ring hop); combine moves
// sel[s][d] × 2H back. Data RDMA WRITEs count as messages; without PXN
// every chunk adds a 48-byte CTS WRITE and, above 8 KiB, a 0-byte
// WRITE_WITH_IMM (signals), which are not in RDMABytes; with PXN the
// receives of one rail's senders are grouped.
func TestNCCLBytesMatchRouting(t *testing.T) {
	tr := tinyTrace(t, 16, 8)
	sel := replaytest.A2AMatrix(t, tr)
	tok, comb, blk := replaytest.A2ASizes(t, tr)
	ep := tr.EP()
	for _, nvlink := range []bool{false, true} {
		rep := ncclReplay(t, tr, nvlink, 1)
		l := rep.Layers[0]
		net := func(a, b int) bool { return a/8 != b/8 || !nvlink }
		var disp, cmb, selAll int64
		for s := range ep {
			for d := range ep {
				selAll += sel[s][d]
				if s != d && net(s, d) {
					disp += sel[s][d] * tok
					cmb += sel[s][d] * comb
				}
			}
			if net(s, (s+1)%ep) {
				disp += int64(ep-1) * 2 * blk // LL: data and flags
			}
		}
		assert.Equal(t, disp, l.Dispatch.RDMABytes, "nvlink=%v", nvlink)
		assert.Equal(t, cmb, l.Combine.RDMABytes, "nvlink=%v", nvlink)
		for _, ph := range []workload.PhaseReport{l.Dispatch.PhaseReport, l.Combine.PhaseReport} {
			if !nvlink {
				assert.GreaterOrEqual(t, ph.Signals, ph.Messages, "a CTS per chunk")
				assert.LessOrEqual(t, ph.Signals, 2*ph.Messages, "at most a CTS and an immediate per chunk")
			} else {
				// PXN: one CTS and one immediate per step of a receive
				// group of up to 8 senders, one WRITE per member.
				assert.Less(t, ph.Signals, ph.Messages, "receives grouped")
			}
		}
		// The bandwidth numerator is ll.go's: every selection (local
		// included) × the DeepEP message size.
		assert.Equal(t, selAll*(tok+int64(traces.LLHeaderBytes)), l.Dispatch.BandwidthBytes)
		assert.Equal(t, selAll*comb, l.Combine.BandwidthBytes)
	}
}

func TestNCCLDeterministic(t *testing.T) {
	for _, nvlink := range []bool{false, true} {
		run := func() string {
			rep := ncclReplay(t, tinyTrace(t, 16, 8), nvlink, 7)
			var b bytes.Buffer
			require.NoError(t, rep.WriteJSON(&b))
			return b.String()
		}
		assert.Equal(t, run(), run(), "nvlink=%v", nvlink)
	}
}

func TestNCCLNeedsModeLL(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	_, err := Run(tinyTrace(t, 16, 2), spec, Options{Mode: ModeHT, Backend: BackendNCCL})
	assert.ErrorContains(t, err, "use --mode ll")
}

// TestNCCLSlowerThanGDAKI replays the 128-token DeepSeek-V3 EP16 decode
// trace with both: NCCL's dispatch pays the counts all-gather, the host
// sync and the proxy, which the breakdown shows (host path in the
// GPU-issue column, the proxy in its own), while GDAKI has no proxy.
func TestNCCLSlowerThanGDAKI(t *testing.T) {
	if testing.Short() {
		t.Skip("two EP16 replays of 128 tokens")
	}
	tr, err := traces.OpenExample("deepseek-v3-ll-ep16.jsonl.gz")
	require.NoError(t, err)
	require.Equal(t, 16, tr.EP())
	require.Equal(t, 128, tr.Header().MaxTokensPerRank)
	spec, _ := machine.Preset("h100-ib")
	gdaki, err := Run(tr, spec, Options{Mode: ModeLL, Backend: BackendGDAKI, Seed: 1, Layers: 1, Backends: backends})
	require.NoError(t, err)
	nccl, err := Run(tr, spec, Options{Mode: ModeLL, Backend: BackendNCCL, Seed: 1, Layers: 1})
	require.NoError(t, err)
	t.Logf("EP16 128 tokens: dispatch GDAKI %.1f us / NCCL %.1f us, combine GDAKI %.1f us / NCCL %.1f us",
		gdaki.DispatchUS, nccl.DispatchUS, gdaki.CombineUS, nccl.CombineUS)
	t.Logf("NCCL dispatch breakdown %+v", nccl.Breakdown.Dispatch)
	assert.Greater(t, nccl.DispatchUS, gdaki.DispatchUS)
	assert.Less(t, nccl.DispatchGBps, gdaki.DispatchGBps)
	assert.Greater(t, nccl.DispatchUS+nccl.CombineUS, gdaki.DispatchUS+gdaki.CombineUS)
	nb, gb := nccl.Breakdown.Dispatch, gdaki.Breakdown.Dispatch
	assert.Greater(t, nb.GPUIssueUS, gb.GPUIssueUS+10, "the host path before the all-to-all")
	assert.Greater(t, nb.ProxyUS, 1.0, "the host proxy")
	assert.Zero(t, gb.ProxyUS)
}

// The report says how NCCL moved each phase: every send is P2P or NET;
// with --rdma-only everything is NET with no PXN and no LL (NET has no LL
// buffers by default); with it the same-node sends are P2P, remote sends
// on another rail go through PXN and small P2P sends run LL. GIN
// workloads carry no NCCL facts.
func TestNCCLFacts(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := tinyTrace(t, 16, 8)
	for _, nvlink := range []bool{false, true} {
		rep, err := Run(tr, spec, Options{Mode: ModeLL, Backend: BackendNCCL, NVLink: nvlink, RDMAOnly: !nvlink, Seed: 1, Layers: 1, Backends: backends})
		require.NoError(t, err)
		for i, f := range []*workload.NCCLFacts{rep.Layers[0].Dispatch.NCCL, rep.Layers[0].Combine.NCCL} {
			require.NotNil(t, f)
			assert.Positive(t, f.Sends)
			assert.Equal(t, f.Sends, f.P2P+f.NET, "nvlink=%v phase %d", nvlink, i)
			assert.LessOrEqual(t, f.PXN, f.NET)
			if i == 0 {
				assert.Equal(t, tr.EP(), f.RingSends, "the counts ring: one send per rank")
			} else {
				assert.Zero(t, f.RingSends)
			}
			if !nvlink {
				assert.Zero(t, f.P2P+f.PXN+f.LL, "nvlink=%v phase %d: %v", nvlink, i, f)
				assert.Equal(t, f.NET+f.RingSends, f.IBConns, "one IB connection per NET send without PXN")
				continue
			}
			assert.Positive(t, f.P2P)
			assert.Positive(t, f.PXN)
			assert.Positive(t, f.LL, "8 tokens: P2P sends under the LL threshold")
			assert.Less(t, f.IBConns, f.NET+f.RingSends, "PXN sends share IB connections")
		}
	}
	gin, err := Run(tr, spec, Options{Mode: ModeLL, Backend: BackendGDAKI, Seed: 1, Layers: 1, Backends: backends})
	require.NoError(t, err)
	assert.Nil(t, gin.Layers[0].Dispatch.NCCL)
}

// Metamorphic: splitting each GPU's 400 Gb/s into two 200 Gb/s NICs keeps
// the bandwidth-bound replays within a quarter of their time, for GIN
// (contexts spread over the NICs) and for the NCCL baseline (channels
// spread over them); sending everything through the first NIC took
// 1.5-2x as long.
func TestTwoNICsPerGPUAreBothUsed(t *testing.T) {
	one, _ := machine.Preset("h100-ib")
	two := one
	two.Name, two.NICsPerGPU, two.LinkRate = "h100-2x200", 2, machine.Rate(200*sim.Gbps)
	tr, err := traces.OpenExample("deepseek-v3-ll-ep16.jsonl.gz")
	require.NoError(t, err)
	for _, be := range []string{BackendGDAKI, BackendNCCL} {
		run := func(spec machine.Spec) *Report {
			rep, err := Run(tr, spec, Options{Mode: ModeLL, Backend: be, Seed: 1, Layers: 1, Backends: backends})
			require.NoError(t, err)
			return rep
		}
		a, b := run(one), run(two)
		assert.Less(t, b.DispatchUS, 1.25*a.DispatchUS, "%s dispatch: 2 x 200G %.1f us, 1 x 400G %.1f us", be, b.DispatchUS, a.DispatchUS)
		assert.Less(t, b.CombineUS, 1.25*a.CombineUS, "%s combine: 2 x 200G %.1f us, 1 x 400G %.1f us", be, b.CombineUS, a.CombineUS)
	}
}

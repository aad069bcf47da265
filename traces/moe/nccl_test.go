package moe

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/traces"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// a2aMatrix is the Megatron all-to-all-v matrix of the first step of tr,
// from the routing alone: sel[s][d] = selections of rank s to experts homed
// on rank d.
func a2aMatrix(t *testing.T, tr *traces.Trace) [][]int64 {
	layer := tr.Layers()[0]
	home := tr.Placement(layer)
	ep := tr.EP()
	sel := make([][]int64, ep)
	routes := tr.StepRoutes(tr.Iterations()[0], layer)
	require.Len(t, routes, ep)
	for s, rt := range routes {
		sel[s] = make([]int64, ep)
		for _, tk := range rt.TopK {
			for _, x := range tk {
				if x >= 0 {
					sel[s][home[x]]++
				}
			}
		}
	}
	return sel
}

func ncclReplay(t *testing.T, tr *traces.Trace, nvlink bool, seed uint64) *Report {
	spec, ok := machine.Preset("h100-ib")
	require.True(t, ok)
	rep, err := Replay(tr, spec, Options{Mode: ModeLL, Backend: BackendNCCL, NVLink: nvlink, Seed: seed, Layers: 1,
		TraceName: "tiny"})
	require.NoError(t, err)
	return rep
}

func TestNCCLReplayEP16(t *testing.T) {
	tr := tinyTrace(t, 16, 8)
	rep := ncclReplay(t, tr, false, 1)
	require.Len(t, rep.Layers, 1)
	l := rep.Layers[0]
	for _, ph := range []PhaseReport{l.Dispatch, l.Combine} {
		assert.Len(t, ph.RecvDoneUS, 16)
		assert.Greater(t, ph.US, 5.0)
		assert.Greater(t, ph.GBps, 0.0)
		b := ph.Breakdown
		sum := b.GPUIssueUS + b.ProxyQueueUS + b.DoorbellPCIeUS + b.NICUS + b.WireSwitchUS + b.RemoteWriteUS + b.SignalVisibilityUS
		assert.InDelta(t, b.TotalUS, sum, 0.01, "breakdown parts add up")
	}
	// Dispatch waits for the counts all-gather and the host sync before
	// the all-to-all kernel starts; combine does not.
	assert.Greater(t, l.Dispatch.Breakdown.GPUIssueUS, 10.0)
	assert.Zero(t, l.Combine.Breakdown.GPUIssueUS)
	assert.Greater(t, l.Combine.Breakdown.ProxyQueueUS, 0.0)
	joined := strings.Join(rep.Notes, "\n")
	assert.Contains(t, joined, "cudaStreamSynchronize")
	assert.Contains(t, joined, "Simple protocol")
	assert.Contains(t, joined, "LL protocol on NET hops")
}

// TestNCCLBytesMatchRouting checks the payload the NICs carried against the
// all-to-all-v matrix computed from the routing: dispatch moves
// sel[s][d] × token bytes (FP8 payload and scales, no DeepEP header) for
// every s != d whose path is the NET transport, plus the ring all-gather of
// E int64 counts in LL lines (16 bytes per 8 data bytes: twice the block,
// ep-1 NET steps per NET ring hop); combine moves
// sel[s][d] × 2H back. Data RDMA WRITEs count as messages; every chunk
// adds a 48-byte CTS WRITE and, above 8 KiB, a 0-byte WRITE_WITH_IMM
// (signals), which are not in RDMABytes.
func TestNCCLBytesMatchRouting(t *testing.T) {
	tr := tinyTrace(t, 16, 8)
	sel := a2aMatrix(t, tr)
	h := tr.Header()
	prec, err := h.DispatchPrecision()
	require.NoError(t, err)
	tok := int64(traces.LLDispatchBytes(7168, prec) - traces.LLHeaderBytes)
	comb := int64(traces.LLCombineBytes(7168))
	blk := int64(tr.Slots() * 8)
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
		for _, ph := range []PhaseReport{l.Dispatch, l.Combine} {
			assert.GreaterOrEqual(t, ph.Signals, ph.Messages, "a CTS per chunk")
			assert.LessOrEqual(t, ph.Signals, 2*ph.Messages, "at most a CTS and an immediate per chunk")
		}
		// The bandwidth numerator is ll.go's: every selection (local
		// included) × the DeepEP message size.
		assert.Equal(t, selAll*int64(traces.LLDispatchBytes(7168, prec)), l.Dispatch.BandwidthBytes)
		assert.Equal(t, selAll*comb, l.Combine.BandwidthBytes)
	}
}

func TestNCCLDeterministic(t *testing.T) {
	run := func() string {
		rep := ncclReplay(t, tinyTrace(t, 16, 8), false, 7)
		var b bytes.Buffer
		require.NoError(t, rep.WriteJSON(&b))
		return b.String()
	}
	assert.Equal(t, run(), run())
}

func TestNCCLNeedsModeLL(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	_, err := Replay(tinyTrace(t, 16, 2), spec, Options{Mode: ModeHT, Backend: BackendNCCL})
	assert.ErrorContains(t, err, "use --mode ll")
}

func TestNCCLConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*NCCLConfig)
		want string
	}{
		{"default", func(*NCCLConfig) {}, ""},
		{"steps", func(c *NCCLConfig) { c.Steps = 0 }, "Steps"},
		{"cts slots", func(c *NCCLConfig) { c.CTSSlots = 4 }, "CTSSlots"},
		{"chunk", func(c *NCCLConfig) { c.NetChunk = 16 }, "chunks"},
		{"threads", func(c *NCCLConfig) { c.OpThreads = 2048 }, "OpThreads"},
		{"cts bytes", func(c *NCCLConfig) { c.CTSBytes = 8 }, "CTSBytes"},
		{"idle pass", func(c *NCCLConfig) { c.OpCheck, c.YieldCost = 0, 0 }, "idle"},
		{"ll line check", func(c *NCCLConfig) { c.LLLineCheck = -1 }, "LLLineCheck"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultNCCLConfig()
			c.mod(&cfg)
			err := cfg.Validate()
			if c.want == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, c.want)
			}
		})
	}
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
	gdaki, err := Replay(tr, spec, Options{Mode: ModeLL, Backend: BackendGDAKI, Seed: 1, Layers: 1, Backends: backends})
	require.NoError(t, err)
	nccl, err := Replay(tr, spec, Options{Mode: ModeLL, Backend: BackendNCCL, Seed: 1, Layers: 1})
	require.NoError(t, err)
	t.Logf("EP16 128 tokens: dispatch GDAKI %.1f us / NCCL %.1f us, combine GDAKI %.1f us / NCCL %.1f us",
		gdaki.DispatchUS, nccl.DispatchUS, gdaki.CombineUS, nccl.CombineUS)
	t.Logf("NCCL dispatch breakdown %+v", nccl.Breakdown.Dispatch)
	assert.Greater(t, nccl.DispatchUS, gdaki.DispatchUS)
	assert.Less(t, nccl.DispatchGBps, gdaki.DispatchGBps)
	assert.Greater(t, nccl.DispatchUS+nccl.CombineUS, gdaki.DispatchUS+gdaki.CombineUS)
	nb, gb := nccl.Breakdown.Dispatch, gdaki.Breakdown.Dispatch
	assert.Greater(t, nb.GPUIssueUS, gb.GPUIssueUS+10, "the host path before the all-to-all")
	assert.Greater(t, nb.ProxyQueueUS, 1.0, "the host proxy")
	assert.Zero(t, gb.ProxyQueueUS)
}

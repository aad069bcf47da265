package v2_test

import (
	"testing"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/gdaki"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/traces"
	v2 "github.com/ginsim/ginsim/traces/deepep/v2"
	"github.com/ginsim/ginsim/traces/replay"
	"github.com/ginsim/ginsim/traces/replay/replaytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// v2Pairs counts, from the trace's routing alone, the distinct (token,
// destination rank) pairs of the first step: all of them and those whose
// rank is not the token's own. It also returns the valid selections.
func v2Pairs(t *testing.T, tr *traces.Trace) (all, remote, selections int64) {
	layer := tr.Layers()[0]
	home := tr.Placement(layer)
	for src, rt := range tr.StepRoutes(tr.Iterations()[0], layer) {
		require.NotNil(t, rt)
		for _, sel := range rt.TopK {
			seen := map[int]bool{}
			for _, x := range sel {
				if x < 0 {
					continue
				}
				selections++
				d := home[x]
				if seen[d] {
					continue
				}
				seen[d] = true
				all++
				if d != src {
					remote++
				}
			}
		}
	}
	return all, remote, selections
}

// replayOne replays the first step of tr on h100-ib with o (GDAKI when o
// names no backend; seed 1, replaytest.Backends).
func replayOne(t *testing.T, tr *traces.Trace, o replay.Options) *replay.Report {
	t.Helper()
	spec, _ := machine.Preset("h100-ib")
	if o.Backend == "" {
		o.Backend = replay.BackendGDAKI
	}
	o.Seed, o.Layers, o.Backends = 1, 1, replaytest.Backends
	rep, err := replay.Run(tr, spec, o)
	require.NoError(t, err)
	return rep
}

func TestV2Replay(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	for _, backend := range []string{replay.BackendGDAKI, replay.BackendProxy} {
		t.Run(backend, func(t *testing.T) {
			tr := replaytest.TinyTrace(t, 16, 8)
			var gd *gdaki.Backend
			bk := func() map[gin.Type]gin.Backend {
				g, err := gdaki.New(gdaki.DefaultConfig())
				require.NoError(t, err)
				p, err := proxy.New(proxy.DefaultConfig())
				require.NoError(t, err)
				gd = g
				return map[gin.Type]gin.Backend{gin.TypeGDAKI: g, gin.TypeProxy: p}
			}
			rep, err := replay.Run(tr, spec, replay.Options{Mode: replay.ModeV2Direct, Backend: backend, RDMAOnly: true, Seed: 1,
				Layers: 1, TraceName: "tiny", Backends: bk})
			require.NoError(t, err)
			require.Len(t, rep.Layers, 1)
			l := rep.Layers[0]
			all, remote, _ := v2Pairs(t, tr)
			const R = 16
			L := tr.Slots() / R
			rec := int64(traces.V2TokenBytes(rep.Hidden, rep.TopK, traces.FP8))
			crec := int64(v2.CombineBytes(rep.Hidden, rep.TopK))
			// One record per distinct (token, rank) pair each way; only
			// the remote ones are puts (RDMA only: no NVLink).
			assert.Equal(t, all, l.Dispatch.Messages)
			assert.Equal(t, all, l.Combine.Messages)
			notify := int64(R * (R - 1) * (8 + 8*L))
			assert.Equal(t, remote*rec+notify, l.Dispatch.RDMABytes, "data puts = distinct (token, remote rank) pairs")
			assert.Equal(t, remote*crec, l.Combine.RDMABytes)
			// Signals: per rank a rank-count put_value and an expert-count
			// put to every peer, and every rank per barrier (two per
			// kernel) signals every rank, itself included.
			assert.Equal(t, int64(2*R*(R-1)+2*R*R), l.Dispatch.Signals)
			assert.Equal(t, int64(2*R*R), l.Combine.Signals)
			if backend == replay.BackendGDAKI {
				// Every operation the backend saw: data puts both ways,
				// notify puts, four barriers' remote signals.
				assert.Equal(t, uint64(2*remote+int64(2*R*(R-1))+int64(4*R*(R-1))), gd.Stats().Ops)
			}
			assert.Greater(t, l.Dispatch.US, 3.0)
			assert.Greater(t, l.Combine.US, l.Dispatch.US/4)
			b := rep.Breakdown.Dispatch
			sum := b.GPUIssueUS + b.ProxyUS + b.PCIeUS + b.NICUS + b.WireUS + b.RemoteWriteUS + b.SignalSeenUS + b.ReceiverUS
			assert.InDelta(t, b.TotalUS, sum, 0.01, "breakdown parts add up")
		})
	}
}

// TestV2DedupSavesRDMA: tokens that pick several experts on one rank are
// sent once to that rank by V2 and once per expert by V1 LL.
func TestV2DedupSavesRDMA(t *testing.T) {
	tr := replaytest.TinyTrace(t, 16, 32)
	all, _, sel := v2Pairs(t, tr)
	require.Less(t, all, sel, "the routing must have tokens with several experts on one rank")
	v2 := replayOne(t, tr, replay.Options{Mode: replay.ModeV2Direct, RDMAOnly: true})
	ll := replayOne(t, tr, replay.Options{Mode: replay.ModeLL, RDMAOnly: true})
	assert.Less(t, v2.Layers[0].Dispatch.RDMABytes, ll.Layers[0].Dispatch.RDMABytes)
	assert.Less(t, v2.Layers[0].Combine.RDMABytes, ll.Layers[0].Combine.RDMABytes)
	assert.Less(t, v2.Layers[0].Dispatch.Messages, ll.Layers[0].Dispatch.Messages)
}

// DeepEP V2's direct kernels store to the peers of their node (LSA) by
// default; RDMAOnly sends every record through the NIC.
func TestV2NVLink(t *testing.T) {
	tr := replaytest.TinyTrace(t, 16, 8)
	_, remote, _ := v2Pairs(t, tr)
	rep := replayOne(t, tr, replay.Options{Mode: replay.ModeV2Direct})
	assert.True(t, rep.NVLink)
	assert.False(t, rep.RDMAOnly)
	rdma := replayOne(t, tr, replay.Options{Mode: replay.ModeV2Direct, RDMAOnly: true})
	assert.False(t, rdma.NVLink)
	assert.Greater(t, rdma.Layers[0].Dispatch.RDMABytes, rep.Layers[0].Dispatch.RDMABytes)
	rec := int64(traces.V2TokenBytes(rep.Hidden, rep.TopK, traces.FP8))
	assert.Less(t, rep.Layers[0].Dispatch.RDMABytes, remote*rec, "same-node records go over NVLink")
	assert.Greater(t, rep.Layers[0].Dispatch.RDMABytes, int64(0))
}

func TestNCCLEPStillLL(t *testing.T) {
	tr := replaytest.TinyTrace(t, 16, 4)
	_, _, sel := v2Pairs(t, tr)
	rep := replayOne(t, tr, replay.Options{Mode: replay.ModeNCCLEP})
	l := rep.Layers[0]
	assert.Equal(t, sel, l.Dispatch.Messages, "one message per selection, no dedup")
	assert.Equal(t, int64(16*tr.Slots()), l.Dispatch.Signals)
	assert.Contains(t, rep.Notes[len(rep.Notes)-1], "ncclep")
}

func TestV2NumSMs(t *testing.T) {
	p := v2.DefaultParams()
	for _, c := range []struct {
		experts, topK, ranks, nvl, rdma int
		nvlGBps                         float64
		want                            int
	}{
		// Expected values computed separately from elastic.py's formula.
		{256, 8, 16, 8, 2, 405, 16},
		{288, 8, 16, 8, 2, 405, 16},
		{256, 8, 8, 8, 1, 405, 12},
		{256, 8, 16, 1, 16, 405, 132}, // no NVLink traffic: every SM
		{256, 8, 64, 8, 8, 405, 24},
		{128, 8, 16, 8, 2, 144, 6},
	} {
		assert.Equal(t, c.want, v2.NumSMs(c.experts, c.topK, c.ranks, c.nvl, c.rdma, c.nvlGBps, p, 132), "%+v", c)
	}
	assert.Equal(t, 9, v2.NumQPs(16, p))
	assert.Equal(t, 4, v2.NumQPs(4, p))
	assert.InDelta(t, 6.5233, v2.ExpectedTopK(256, 8, 16), 1e-4)
}

func TestV2QP(t *testing.T) {
	for _, c := range []struct {
		sms, qps, ch, sm, chIdx int
		notify                  bool
		want                    int
		sharing                 gin.Sharing
	}{
		{16, 9, 28, 0, 0, true, 1, gin.SharingGPU},  // 16 SMs share 8 data QPs
		{16, 9, 28, 1, 0, true, 5, gin.SharingGPU},  // (1*28+0)%8 = 4
		{3, 10, 28, 0, 1, false, 3, gin.SharingCTA}, // SM 0: QPs 0 3 6 9
		{3, 10, 28, 2, 5, false, 8, gin.SharingCTA}, // SM 2: QPs 2 5 8
		{3, 10, 28, 1, 2, true, 8, gin.SharingCTA},  // 9 data QPs from 1: SM 1 gets 2 5 8
		{4, 1, 28, 3, 7, true, 0, gin.SharingGPU},   // one QP for everyone
	} {
		q, s := v2.QPFor(c.sms, c.qps, c.ch, c.sm, c.chIdx, c.notify)
		assert.Equal(t, c.want, q, "%+v", c)
		assert.Equal(t, c.sharing, s, "%+v", c)
	}
}

// processOnly is a backend that issues only for groups with a process
// (it hides IssueThen and FlushThen).
type processOnly struct{ gin.Backend }

// The V2 warps have no process: both modes refuse a backend that cannot
// issue for them, naming it, instead of failing mid-run.
func TestV2NeedsThenBackend(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	bk := func() map[gin.Type]gin.Backend {
		m := replaytest.Backends()
		for k, b := range m {
			m[k] = processOnly{b}
		}
		return m
	}
	for _, mode := range []string{replay.ModeV2Direct, replay.ModeV2Hybrid} {
		_, err := replay.Run(replaytest.TinyTrace(t, 16, 4), spec, replay.Options{Mode: mode, Backend: replay.BackendGDAKI, Seed: 1, Layers: 1,
			Backends: bk})
		require.Error(t, err, mode)
		assert.Contains(t, err.Error(), "GIN backend gdaki issues only for a group with a process", mode)
	}
}

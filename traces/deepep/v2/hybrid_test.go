package v2_test

import (
	"testing"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/traces"
	v2 "github.com/ginsim/ginsim/traces/deepep/v2"
	"github.com/ginsim/ginsim/traces/replay"
	"github.com/ginsim/ginsim/traces/replay/replaytest"
	"github.com/ginsim/ginsim/traces/workload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// v2hExpect is what the hybrid kernels must send, computed from the
// trace's routing alone (ranks node-major, U per node) and the channel
// count nch.
type v2hExpect struct {
	records    int64   // (token, node) pairs, the own node included
	puts       []int64 // per rank: (token, remote node) pairs it sends in dispatch
	combPuts   []int64 // per rank: records it returns to another node in combine
	fwd        []int64 // [forwarder*U + d]: tokens the forwarder stores into GPU d of its node
	tails      []int64 // per rank: remote tail signals (finish included)
	localTails int64
	counts     [][]uint64 // per rank: notify's rank counts per scale-up peer, then expert counts
}

func v2hExpected(t *testing.T, tr *traces.Trace, U, nch int) v2hExpect {
	layer := tr.Layers()[0]
	home := tr.Placement(layer)
	routes := tr.StepRoutes(tr.Iterations()[0], layer)
	R := tr.EP()
	S, L := R/U, tr.Slots()/R
	localIdx := make([]int, tr.Slots())
	seen := make([]int, R)
	for x, r := range home {
		localIdx[x] = seen[r]
		seen[r]++
	}
	x := v2hExpect{puts: make([]int64, R), combPuts: make([]int64, R), fwd: make([]int64, R*U),
		tails: make([]int64, R), counts: make([][]uint64, R)}
	for r := range R {
		x.counts[r] = make([]uint64, U+L)
	}
	for src, rt := range routes {
		require.NotNil(t, rt)
		me := src / U
		perNode := make([][]int, nch) // per channel: records per node
		for c := range perNode {
			perNode[c] = make([]int, S)
		}
		for tok, sel := range rt.TopK {
			nodes := map[int]bool{}
			gpus := map[int]bool{}
			for _, e := range sel {
				if e < 0 {
					continue
				}
				d := home[e]
				nodes[d/U] = true
				if !gpus[d] {
					gpus[d] = true
					x.fwd[(d/U*U+src%U)*U+d%U]++
					x.counts[d][src%U]++
				}
				x.counts[d][U+localIdx[e]]++
			}
			for n := range nodes {
				x.records++
				perNode[tok%nch][n]++
				if n != me {
					x.puts[src]++
					x.combPuts[n*U+src%U]++
				}
			}
		}
		for c := range nch {
			for n, k := range perNode[c] {
				if n == me {
					x.localTails += int64(k/6 + 1)
				} else {
					x.tails[src] += int64(k/6 + 1)
				}
			}
		}
	}
	return x
}

func sum64(xs []int64) int64 {
	var s int64
	for _, v := range xs {
		s += v
	}
	return s
}

// The hybrid kernels send exactly what the routing asks for: one put per
// (token, remote node) each way, one NVLink store per (token, GPU) by the
// forwarder of the token's rail, a tail signal per 6 records per (channel,
// node) plus a finish flag; notify delivers every rank its counts. On the
// wire: a rank's NIC sends exactly its records' bytes, only to its rail
// peers on other nodes, never between GPUs of one node.
func TestV2HybridReplay(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	for _, c := range []struct {
		name    string
		ep      int
		tokens  int
		backend string
	}{
		{"ep16-gdaki", 16, 64, replay.BackendGDAKI},
		{"ep16-proxy", 16, 16, replay.BackendProxy},
		{"ep32-gdaki", 32, 24, replay.BackendGDAKI},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := replaytest.TinyTrace(t, c.ep, c.tokens)
			var w *v2.Hybrid
			obs := func(x replay.Workload) { w, _ = x.(*v2.Hybrid) }
			rep, err := replay.Run(tr, spec, replay.Options{Observe: obs, Mode: replay.ModeV2Hybrid, Backend: c.backend, Seed: 1, Layers: 1,
				TraceName: "tiny", Backends: replaytest.Backends})
			require.NoError(t, err)
			require.NotNil(t, w)
			R, U, S, L := c.ep, 8, c.ep/8, tr.Slots()/c.ep
			require.Equal(t, S, w.S)
			x := v2hExpected(t, tr, U, w.NCh())
			l := rep.Layers[0]
			st := w.Stats()

			// Records and puts, both ways.
			assert.Equal(t, x.records, l.Dispatch.Messages, "dispatch records = (token, node) pairs")
			assert.Equal(t, x.records, l.Combine.Messages, "combine records = (token, node) pairs")
			puts := sum64(x.puts)
			assert.Equal(t, puts, st.DPuts, "dispatch puts = (token, remote node) pairs")
			assert.Equal(t, puts, st.CPuts, "combine puts = (token, remote node) pairs")
			notify := int64(R * (S - 1) * (U*4 + U*L*4))
			assert.Equal(t, puts*int64(w.Rec())+notify, l.Dispatch.RDMABytes)
			assert.Equal(t, puts*int64(w.CRec()), l.Combine.RDMABytes)

			// NVLink forwarding: per forwarder and GPU of its node, in
			// dispatch and back in combine.
			assert.Equal(t, x.fwd, st.Fwd, "tokens forwarded per (forwarder, NVLink peer)")
			back := make([]int64, R*U) // [rank*U+forwarder]
			for f := range R {
				for d := range U {
					back[(f/U*U+d)*U+f%U] = x.fwd[f*U+d]
				}
			}
			assert.Equal(t, back, st.Back, "expert outputs returned per (rank, forwarder)")

			// Tail updates: every 6 records per (channel, node) + finish.
			assert.Equal(t, sum64(x.tails), st.DTails)
			assert.Equal(t, x.localTails, st.DLocalTails)
			assert.Equal(t, int64(R*w.NCh()*(S-1)), st.CFinish)
			assert.Equal(t, st.DTails+int64(R*S), l.Dispatch.Signals, "tails and the rail barrier's signals")
			assert.Equal(t, st.CFinish+int64(R*S), l.Combine.Signals)

			// Notify delivered every rank its counts.
			assert.Equal(t, x.counts, st.Counts)

			// The wire: exactly the records' bytes, rail peers only.
			for r := range R {
				want := x.puts[r]*int64(w.Rec()) + x.combPuts[r]*int64(w.CRec()) + int64((S-1)*(U*4+U*L*4))
				assert.Equal(t, want, st.WriteBytes[r], "rank %d NIC write bytes", r)
				assert.Equal(t, x.tails[r]+int64(w.NCh()*(S-1))+int64(2*(S-1)), st.Atomics[r], "rank %d atomics", r)
			}
			assert.Zero(t, st.SameNode, "no RDMA between GPUs of one node")
			assert.Zero(t, st.CrossRail, "RDMA only between rail peers")

			assert.Greater(t, l.Dispatch.US, 3.0)
			assert.Greater(t, l.Combine.US, 3.0)
			for _, b := range []workload.Breakdown{rep.Breakdown.Dispatch, rep.Breakdown.Combine} {
				sum := b.GPUIssueUS + b.ProxyUS + b.PCIeUS + b.NICUS + b.WireUS + b.RemoteWriteUS + b.SignalSeenUS + b.ReceiverUS
				assert.InDelta(t, b.TotalUS, sum, 0.02, "breakdown parts add up")
				assert.Positive(t, b.WireUS, "the critical path ends in an RDMA tail")
			}
		})
	}
}

// Direct mode puts one record per (token, remote rank), hybrid one per
// (token, remote node): on the same routing hybrid moves fewer RDMA bytes,
// and its NICs never talk to another local index.
func TestV2HybridDedupsByNode(t *testing.T) {
	tr := replaytest.TinyTrace(t, 16, 32)
	_, remote, _ := v2Pairs(t, tr)
	x := v2hExpected(t, tr, 8, 1)
	require.Less(t, sum64(x.puts), remote, "the routing must have tokens with several GPUs on one remote node")
	d := replayOne(t, tr, replay.Options{Mode: replay.ModeV2Direct, RDMAOnly: true})
	h := replayOne(t, tr, replay.Options{Mode: replay.ModeV2Hybrid})
	assert.Less(t, h.Layers[0].Dispatch.RDMABytes, d.Layers[0].Dispatch.RDMABytes)
	assert.Less(t, h.Layers[0].Combine.RDMABytes, d.Layers[0].Combine.RDMABytes)
	assert.Equal(t, d.Layers[0].Dispatch.BandwidthBytes, h.Layers[0].Dispatch.BandwidthBytes,
		"both modes count DeepEP's scale-up bytes")
}

// --mode v2 runs what ElasticBuffer picks with allow_hybrid_mode=True:
// hybrid across nodes, direct inside one; hybrid cannot be forced on one
// node.
func TestV2ModeChoice(t *testing.T) {
	for _, c := range []struct {
		ep     int
		mode   string
		want   string
		nvlink bool
	}{
		{16, replay.ModeV2, replay.ModeV2Hybrid, true},
		// Direct stores to the peers of its node by default.
		{8, replay.ModeV2, replay.ModeV2Direct, true},
		{16, replay.ModeV2Direct, replay.ModeV2Direct, true},
	} {
		rep := replayOne(t, replaytest.TinyTrace(t, c.ep, 4), replay.Options{Mode: c.mode})
		assert.Equal(t, c.want, rep.Mode, "EP%d --mode %s", c.ep, c.mode)
		assert.Equal(t, c.nvlink, rep.NVLink, "EP%d --mode %s", c.ep, c.mode)
		if c.mode == replay.ModeV2 {
			assert.Contains(t, rep.Notes[2], "DeepEP's own choice")
		}
	}
	spec, _ := machine.Preset("h100-ib")
	_, err := replay.Run(replaytest.TinyTrace(t, 8, 4), spec, replay.Options{Mode: replay.ModeV2Hybrid, Backend: replay.BackendGDAKI, Backends: replaytest.Backends})
	assert.ErrorContains(t, err, "two or more whole nodes")
}

func TestV2HybridNumSMs(t *testing.T) {
	p := v2.DefaultParams()
	for _, c := range []struct {
		experts, topK, ranks, scaleout int
		rdma, nvl                      float64
		want                           int
	}{
		// Expected values computed separately from elastic.py's formula.
		{256, 8, 16, 2, 50, 405, 12}, // RDMA-bound
		{256, 8, 64, 8, 50, 405, 4},
		{256, 8, 32, 4, 50, 405, 6},
		{288, 8, 16, 2, 50, 405, 12},
		{256, 8, 16, 2, 400, 405, 16}, // NVLink-bound
		{256, 8, 16, 2, 50, 144, 6},
		{128, 6, 16, 2, 25, 405, 6},
		{256, 8, 128, 16, 50, 405, 4},
	} {
		assert.Equal(t, c.want, v2.HybridNumSMs(c.experts, c.topK, c.ranks, c.scaleout, c.rdma, c.nvl, p, 132), "%+v", c)
	}
	assert.Equal(t, 129, v2.HybridNumQPs(12, p))
	assert.Equal(t, 65, v2.HybridNumQPs(4, p))
	// DeepSeek-V3 FP8 at EP16: 7,520-B records, 14,400-B combine records:
	// 16 combine records fit 227 KiB, so 8 channels per SM.
	assert.Equal(t, 8, v2.HybridChannels(7520, v2.CombineBytes(7168, 8), 16, 256, p))
	assert.Equal(t, 4, v2.HybridChannels(7520, 2*14400, 16, 256, p))
}

// Metamorphic: hybrid dispatch with fewer tokens is not slower. Kimi K2
// (24 local experts at EP16) makes notify red_add 192 expert counts over
// NVLink while the forwarders store records: when the NVLink ports served
// calls in order, each atomic's response, reserved for later, held the
// port and the atomics convoyed at one round trip each (8 tokens took
// 85 us, 64 tokens 49 us).
func TestV2HybridFewerTokensNotSlower(t *testing.T) {
	m, err := traces.ModelByName("kimi-k2")
	require.NoError(t, err)
	dispatch := func(tokens int) float64 {
		tr, err := traces.Generate(traces.GenConfig{Model: m, EP: 16, RanksPerNode: 8, TokensPerRank: tokens, Seed: 3})
		require.NoError(t, err)
		return replayOne(t, tr, replay.Options{Mode: replay.ModeV2Hybrid}).DispatchUS
	}
	few, more := dispatch(8), dispatch(64)
	assert.LessOrEqual(t, few, more, "8 tokens per rank dispatched in %.1f us, 64 in %.1f us", few, more)
}

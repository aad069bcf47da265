package replay

import (
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/workload"
)

// Bandwidths names a phase's bandwidths, GB/s per rank (the mean over ranks
// of each rank's bytes over the phase time), under every definition its
// library's test prints. JSON sorts the names.
type Bandwidths map[string]float64

// PhaseBandwidths pairs the named bandwidths of the two phases.
type PhaseBandwidths struct {
	Dispatch Bandwidths `json:"dispatch"`
	Combine  Bandwidths `json:"combine"`
}

// Names of the bandwidth definitions.
const (
	// BWRDMA and BWNVLink are DeepEP V1 HT's (tests/legacy/test_internode.py:
	// 224-243, 258, 301): RDMA counts the unique (token, node) pairs a rank
	// sends, the local node included; NVLink the tokens a rank receives
	// (recv_x); both × 2H × fp8_factor in dispatch, × 2H in combine.
	BWRDMA   = "rdma_GBps"
	BWNVLink = "nvlink_GBps"
	// BWScaleout and BWScaleup are DeepEP V2's (tests/elastic/test_ep.py:
	// 239-262, 287-345, with its defaults ignore_local_traffic=False and
	// allow_multiple_reduction=True): scale-out (SO) counts the unique
	// (token, node) pairs a rank sends, the local node included, and is
	// zero on one node; scale-up (SU) the tokens a rank receives; both ×
	// count_bytes(recv_x, recv_topk_idx, recv_topk_weights) per token in
	// dispatch, × count_bytes(recv_x_bf16, recv_topk_weights) in combine.
	BWScaleout = "scaleout_GBps"
	BWScaleup  = "scaleup_GBps"
)

// definitionBytes returns, per definition, each rank's bytes of one step's
// dispatch and combine under mode's library (nil for a library that prints
// one bandwidth). hidden is the DeepEP-padded hidden size.
func definitionBytes(mode string, st *workload.Step, hidden int, prec traces.Precision) (disp, comb map[string][]int64) {
	var dTok, cTok int64
	switch {
	case mode == ModeHT:
		dTok, cTok = traces.HTBandwidthBytes(1, hidden, prec), traces.HTBandwidthBytes(1, hidden, traces.BF16)
	case isV2(mode):
		// recv_x, recv_topk_idx (int64) and recv_topk_weights (float).
		dTok = traces.HTBandwidthBytes(1, hidden, prec) + int64(12*st.TopK)
		cTok = int64(2*hidden + 4*st.TopK)
	default:
		return nil, nil
	}
	ep := st.EP
	sent, recv := make([]int64, ep), make([]int64, ep)
	multiNode := false
	for s := range ep {
		multiNode = multiNode || len(st.NodeTokens[s]) > 1
		for _, n := range st.NodeTokens[s] {
			sent[s] += int64(n)
		}
		for d, n := range st.RankTokens[s] {
			recv[d] += int64(n)
		}
	}
	scale := func(xs []int64, b int64) []int64 {
		out := make([]int64, len(xs))
		for i, x := range xs {
			out[i] = x * b
		}
		return out
	}
	if mode == ModeHT {
		return map[string][]int64{BWRDMA: scale(sent, dTok), BWNVLink: scale(recv, dTok)},
			map[string][]int64{BWRDMA: scale(sent, cTok), BWNVLink: scale(recv, cTok)}
	}
	if !multiNode {
		clear(sent) // test_ep.py counts no scale-out traffic on one node
	}
	return map[string][]int64{BWScaleout: scale(sent, dTok), BWScaleup: scale(recv, dTok)},
		map[string][]int64{BWScaleout: scale(sent, cTok), BWScaleup: scale(recv, cTok)}
}

// perRankGBps is the mean over ranks of bytes / t in GB/s, rounded as the
// report's other figures (workload.Env.Result's arithmetic).
func perRankGBps(bytes []int64, t sim.Duration) float64 {
	if t <= 0 || len(bytes) == 0 {
		return 0
	}
	var g float64
	for _, b := range bytes {
		g += float64(b) / t.Seconds() / 1e9
	}
	return round3(g / float64(len(bytes)))
}

// phaseTime is a phase's time: its start to the last rank done.
func phaseTime(ph *workload.Phase) sim.Duration {
	var end sim.Time
	for _, d := range ph.Done {
		end = max(end, d)
	}
	return end.Sub(ph.Start)
}

// bandwidths computes the named bandwidths of one step (nil if the mode's
// library prints one).
func bandwidths(mode string, st *workload.Step, hidden int, prec traces.Precision, disp, comb *workload.Phase) *PhaseBandwidths {
	db, cb := definitionBytes(mode, st, hidden, prec)
	if db == nil {
		return nil
	}
	pb := &PhaseBandwidths{Dispatch: Bandwidths{}, Combine: Bandwidths{}}
	for k, v := range db {
		pb.Dispatch[k] = perRankGBps(v, phaseTime(disp))
	}
	for k, v := range cb {
		pb.Combine[k] = perRankGBps(v, phaseTime(comb))
	}
	return pb
}

package moe

import (
	"fmt"

	"github.com/ginsim/ginsim/traces"
)

// step is the routing of one (iteration, layer), resolved for replay:
// selections per (source rank, expert), the token lists every expert
// receives from every source, and expert homes.
type step struct {
	iter, layer int
	ep          int
	slots       int // expert slots E
	local       int // experts per rank L (max over ranks)
	topK        int
	tokens      []int   // per source rank
	maxTokens   int     // receive slots per (local expert, source)
	home        []int   // expert -> rank
	localIdx    []int   // expert -> index among its home's experts
	experts     [][]int // rank -> its experts in local order
	topk        [][][]int32
	// count[r][e]: selections of source rank r to expert e.
	count [][]int
	// recvTokens[r][e]: source token indices of rank r sent to expert e, in
	// issue order (token order; a token selects an expert at most once).
	recvTokens [][][]int32
	// nodeTokens[r][n]: distinct tokens of rank r bound for node n.
	nodeTokens [][]int
	// rankTokens[r][d]: distinct tokens of rank r bound for rank d.
	rankTokens [][]int
	selections []int64 // per source rank, valid selections
}

// newStep resolves (iter, layer) of tr; it needs route records.
func newStep(tr *traces.Trace, iter, layer int) (*step, error) {
	h := tr.Header()
	routes := tr.StepRoutes(iter, layer)
	ep := tr.EP()
	st := &step{iter: iter, layer: layer, ep: ep, slots: tr.Slots(), topK: h.Model.TopK,
		maxTokens: h.MaxTokensPerRank}
	st.home = tr.Placement(layer)
	if len(st.home) != st.slots {
		return nil, fmt.Errorf("moe: layer %d: placement has %d experts, want %d", layer, len(st.home), st.slots)
	}
	st.experts = make([][]int, ep)
	st.localIdx = make([]int, st.slots)
	for e, r := range st.home {
		st.localIdx[e] = len(st.experts[r])
		st.experts[r] = append(st.experts[r], e)
	}
	for _, xs := range st.experts {
		st.local = max(st.local, len(xs))
	}
	nodes := tr.Nodes()
	st.tokens = make([]int, ep)
	st.topk = make([][][]int32, ep)
	st.count = make([][]int, ep)
	st.recvTokens = make([][][]int32, ep)
	st.nodeTokens = make([][]int, ep)
	st.rankTokens = make([][]int, ep)
	st.selections = make([]int64, ep)
	for r := range ep {
		if r >= len(routes) || routes[r] == nil {
			return nil, fmt.Errorf("moe: iter %d layer %d: no route record for rank %d "+
				"(replay needs route records, not counts)", iter, layer, r)
		}
		rt := routes[r]
		st.tokens[r] = rt.Tokens
		st.maxTokens = max(st.maxTokens, rt.Tokens)
		st.topk[r] = rt.TopK
		st.count[r] = make([]int, st.slots)
		st.recvTokens[r] = make([][]int32, st.slots)
		st.nodeTokens[r] = make([]int, nodes)
		st.rankTokens[r] = make([]int, ep)
		seenNode := make([]int, nodes)
		seenRank := make([]int, ep)
		for i := range seenNode {
			seenNode[i] = -1
		}
		for i := range seenRank {
			seenRank[i] = -1
		}
		for t, sel := range rt.TopK {
			for _, e := range sel {
				if e < 0 {
					continue
				}
				st.count[r][e]++
				st.selections[r]++
				st.recvTokens[r][e] = append(st.recvTokens[r][e], int32(t))
				d := st.home[e]
				if seenRank[d] != t {
					seenRank[d] = t
					st.rankTokens[r][d]++
				}
				if n := tr.NodeOf(d); seenNode[n] != t {
					seenNode[n] = t
					st.nodeTokens[r][n]++
				}
			}
		}
	}
	return st, nil
}

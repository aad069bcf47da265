package workload

import (
	"fmt"

	"github.com/ginsim/ginsim/traces"
)

// Step is the routing of one (iteration, layer), resolved for replay:
// selections per (source rank, expert), the token lists every expert
// receives from every source, and expert homes.
type Step struct {
	Iter, Layer int
	EP          int
	Slots       int // expert slots E
	Local       int // experts per rank L (max over ranks)
	TopK        int
	Tokens      []int   // per source rank
	MaxTokens   int     // receive slots per (local expert, source)
	Home        []int   // expert -> rank
	LocalIdx    []int   // expert -> index among its home's experts
	Experts     [][]int // rank -> its experts in local order
	TopKIdx     [][][]int32
	// Count[r][e]: selections of source rank r to expert e.
	Count [][]int
	// RecvTokens[r][e]: source token indices of rank r sent to expert e, in
	// issue order (token order; a token selects an expert at most once).
	RecvTokens [][][]int32
	// NodeTokens[r][n]: distinct tokens of rank r bound for node n.
	NodeTokens [][]int
	// RankTokens[r][d]: distinct tokens of rank r bound for rank d.
	RankTokens [][]int
	Selections []int64 // per source rank, valid selections
}

// PlacedStep gives the part of step (iter, layer) that every record kind
// shares: the header's shape and layer's expert placement (Home, Experts,
// LocalIdx, Local). The caller fills the traffic from route or counts
// records.
func PlacedStep(tr *traces.Trace, iter, layer int) (*Step, error) {
	h := tr.Header()
	ep := tr.EP()
	st := &Step{Iter: iter, Layer: layer, EP: ep, Slots: tr.Slots(), TopK: h.Model.TopK,
		MaxTokens: h.MaxTokensPerRank}
	st.Home = tr.Placement(layer)
	if len(st.Home) != st.Slots {
		return nil, fmt.Errorf("workload: layer %d: placement has %d experts, want %d", layer, len(st.Home), st.Slots)
	}
	st.Experts = make([][]int, ep)
	st.LocalIdx = make([]int, st.Slots)
	for e, r := range st.Home {
		st.LocalIdx[e] = len(st.Experts[r])
		st.Experts[r] = append(st.Experts[r], e)
	}
	for _, xs := range st.Experts {
		st.Local = max(st.Local, len(xs))
	}
	return st, nil
}

// NewStep resolves (iter, layer) of tr; it needs route records.
func NewStep(tr *traces.Trace, iter, layer int) (*Step, error) {
	routes := tr.StepRoutes(iter, layer)
	st, err := PlacedStep(tr, iter, layer)
	if err != nil {
		return nil, err
	}
	ep := st.EP
	nodes := tr.Nodes()
	st.Tokens = make([]int, ep)
	st.TopKIdx = make([][][]int32, ep)
	st.Count = make([][]int, ep)
	st.RecvTokens = make([][][]int32, ep)
	st.NodeTokens = make([][]int, ep)
	st.RankTokens = make([][]int, ep)
	st.Selections = make([]int64, ep)
	for r := range ep {
		if r >= len(routes) || routes[r] == nil {
			return nil, fmt.Errorf("workload: iter %d layer %d: no route record for rank %d "+
				"(replay needs route records, not counts)", iter, layer, r)
		}
		rt := routes[r]
		st.Tokens[r] = rt.Tokens
		st.MaxTokens = max(st.MaxTokens, rt.Tokens)
		st.TopKIdx[r] = rt.TopK
		st.Count[r] = make([]int, st.Slots)
		st.RecvTokens[r] = make([][]int32, st.Slots)
		st.NodeTokens[r] = make([]int, nodes)
		st.RankTokens[r] = make([]int, ep)
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
				st.Count[r][e]++
				st.Selections[r]++
				st.RecvTokens[r][e] = append(st.RecvTokens[r][e], int32(t))
				d := st.Home[e]
				if seenRank[d] != t {
					seenRank[d] = t
					st.RankTokens[r][d]++
				}
				if n := tr.NodeOf(d); seenNode[n] != t {
					seenNode[n] = t
					st.NodeTokens[r][n]++
				}
			}
		}
	}
	return st, nil
}

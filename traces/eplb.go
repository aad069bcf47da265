package traces

import (
	"cmp"
	"fmt"
	"slices"
)

// PlacementEPLB is the generator's EPLB placement policy (GenConfig.Placement):
// the trace then has explicit placement records.
const PlacementEPLB = "eplb"

// EPLB places len(load) logical experts and redundant replicas on ep ranks,
// slots/ep slots per rank, in the manner of DeepSeek's expert-parallel load
// balancer: first each redundant slot goes, one at a time, to the expert
// with the highest load per replica (an expert has at most one copy per
// rank); then the replicas, heaviest first (load / replicas), are packed
// onto the rank with the least load that has a free slot and no copy of
// that expert. Slots are numbered rank by rank; logical[s] is the expert
// slot s holds and ranks[s] its rank. Ties go to the lower expert or rank,
// so the result depends only on load. This is the global policy; DeepSeek's
// hierarchical variant (nodes first) is not modelled.
func EPLB(load []int64, redundant, ep int) (logical, ranks []int, err error) {
	e := len(load)
	slots := e + redundant
	switch {
	case e == 0 || ep <= 0 || redundant < 0:
		return nil, nil, fmt.Errorf("traces: eplb: %d experts, %d redundant, %d ranks", e, redundant, ep)
	case slots%ep != 0:
		return nil, nil, fmt.Errorf("traces: eplb: %d expert slots (%d + %d redundant) must divide evenly over %d ranks", slots, e, redundant, ep)
	case redundant > e*(ep-1):
		return nil, nil, fmt.Errorf("traces: eplb: %d redundant slots exceed one copy of each of %d experts on each of %d ranks", redundant, e, ep)
	}
	for x, l := range load {
		if l < 0 {
			return nil, nil, fmt.Errorf("traces: eplb: expert %d has negative load %d", x, l)
		}
	}
	replicas := make([]int, e)
	for x := range replicas {
		replicas[x] = 1
	}
	for range redundant {
		best := -1
		for x := range e {
			if replicas[x] < ep && (best < 0 || load[x]*int64(replicas[best]) > load[best]*int64(replicas[x])) {
				best = x
			}
		}
		replicas[best]++
	}
	type item struct {
		expert int
		w      float64
	}
	items := make([]item, 0, slots)
	for x, n := range replicas {
		for range n {
			items = append(items, item{x, float64(load[x]) / float64(n)})
		}
	}
	slices.SortStableFunc(items, func(a, b item) int { return cmp.Compare(b.w, a.w) })
	per := slots / ep
	held := make([][]int, ep)
	rankLoad := make([]float64, ep)
	for _, it := range items {
		best := -1
		for _, allowCopy := range []bool{false, true} {
			for r := range ep {
				if len(held[r]) == per || (!allowCopy && slices.Contains(held[r], it.expert)) {
					continue
				}
				if best < 0 || rankLoad[r] < rankLoad[best] {
					best = r
				}
			}
			if best >= 0 {
				break
			}
		}
		held[best] = append(held[best], it.expert)
		rankLoad[best] += it.w
	}
	logical = make([]int, 0, slots)
	ranks = make([]int, 0, slots)
	for r, xs := range held {
		for _, x := range xs {
			logical = append(logical, x)
			ranks = append(ranks, r)
		}
	}
	return logical, ranks, nil
}

// BalanceLayer places one layer's experts with EPLB, by the load of routes
// (the layer's route records, every iteration and rank, with logical
// expert ids in [0, experts)), and rewrites the routes in place to expert
// slots: each source rank spreads an expert's selections round-robin over
// its replicas (see spreadReplicas). It returns the layer's placement
// record, with LogicalExpert set.
func BalanceLayer(layer int, routes []*Route, experts, redundant, ep int) (*Placement, error) {
	load := make([]int64, experts)
	for _, r := range routes {
		for _, row := range r.TopK {
			for _, e := range row {
				if e >= int32(experts) {
					return nil, fmt.Errorf("traces: eplb: layer %d rank %d: expert %d out of range [0,%d)", layer, r.Rank, e, experts)
				}
				if e >= 0 {
					load[e]++
				}
			}
		}
	}
	logical, ranks, err := EPLB(load, redundant, ep)
	if err != nil {
		return nil, err
	}
	replicas := replicaMap(logical, experts)
	for _, r := range routes {
		spreadReplicas(r, replicas)
	}
	return &Placement{Layer: layer, ExpertToRank: ranks, LogicalExpert: logical}, nil
}

// replicaMap maps each logical expert to its slots, ascending.
func replicaMap(logical []int, experts int) [][]int32 {
	out := make([][]int32, experts)
	for s, x := range logical {
		out[x] = append(out[x], int32(s))
	}
	return out
}

// spreadReplicas rewrites r's logical expert ids as slots: the n-th
// selection of logical expert x by this source rank goes to replica
// (n + rank) mod replicas, so each source spreads an expert's tokens evenly
// over its copies and different sources start on different copies.
func spreadReplicas(r *Route, replicas [][]int32) {
	seen := make([]int, len(replicas))
	for _, row := range r.TopK {
		for j, x := range row {
			if x < 0 {
				continue
			}
			cp := replicas[x]
			row[j] = cp[(seen[x]+r.Rank)%len(cp)]
			seen[x]++
		}
	}
}

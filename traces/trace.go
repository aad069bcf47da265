package traces

import (
	"cmp"
	"fmt"
	"slices"
)

// Trace is a whole trace in memory: the header and its records, indexed by
// (iteration, layer, rank). Routes and counts are kept sorted by (iter,
// layer, rank), placements by layer, measures in insertion order. A Trace
// is not safe for concurrent mutation; concurrent reads are safe.
type Trace struct {
	hdr        Header
	chk        checker
	placements []*Placement
	routes     []*Route
	counts     []*Counts
	measures   []*Measure
	routeIdx   map[stepKey]*Route
	countIdx   map[stepKey]*Counts
}

func newTrace(h Header) *Trace {
	return &Trace{hdr: h, routeIdx: make(map[stepKey]*Route), countIdx: make(map[stepKey]*Counts)}
}

// NewTrace returns an empty trace with header h, after validating h.
func NewTrace(h Header) (*Trace, error) {
	t := newTrace(h)
	if fe := t.chk.setHeader(&t.hdr); fe != nil {
		return nil, &Error{File: "header", Field: fe.field, Msg: fe.msg}
	}
	return t, nil
}

// Add validates rec against the header and the records already added, and
// adds it. The trace keeps rec; do not modify it afterwards.
func (t *Trace) Add(rec Record) error {
	if fe := t.chk.check(rec); fe != nil {
		return &Error{File: rec.Kind(), Field: fe.field, Msg: fe.msg}
	}
	t.add(rec)
	return nil
}

func keyCmp(a, b stepKey) int {
	if c := cmp.Compare(a.iter, b.iter); c != 0 {
		return c
	}
	if c := cmp.Compare(a.layer, b.layer); c != 0 {
		return c
	}
	return cmp.Compare(a.rank, b.rank)
}

// insertSorted appends v when it sorts last (the common case) and inserts
// it in place otherwise.
func insertSorted[T any](s []T, v T, less func(a, b T) int) []T {
	if n := len(s); n == 0 || less(s[n-1], v) < 0 {
		return append(s, v)
	}
	i, _ := slices.BinarySearchFunc(s, v, less)
	return slices.Insert(s, i, v)
}

func (t *Trace) add(rec Record) {
	switch r := rec.(type) {
	case *Placement:
		t.placements = insertSorted(t.placements, r, func(a, b *Placement) int { return cmp.Compare(a.Layer, b.Layer) })
	case *Route:
		t.routes = insertSorted(t.routes, r, func(a, b *Route) int {
			return keyCmp(stepKey{a.Iter, a.Layer, a.Rank}, stepKey{b.Iter, b.Layer, b.Rank})
		})
		t.routeIdx[stepKey{r.Iter, r.Layer, r.Rank}] = r
	case *Counts:
		t.counts = insertSorted(t.counts, r, func(a, b *Counts) int {
			return keyCmp(stepKey{a.Iter, a.Layer, a.Rank}, stepKey{b.Iter, b.Layer, b.Rank})
		})
		t.countIdx[stepKey{r.Iter, r.Layer, r.Rank}] = r
	case *Measure:
		t.measures = append(t.measures, r)
	}
}

// Header returns the trace header.
func (t *Trace) Header() Header { return t.hdr }

// EP returns the number of expert-parallel ranks.
func (t *Trace) EP() int { return t.hdr.Parallel.EPRanks }

// Nodes returns the number of nodes.
func (t *Trace) Nodes() int { return t.hdr.Nodes() }

// NodeOf returns the node of an EP rank (rank / ranks_per_node).
func (t *Trace) NodeOf(rank int) int { return t.hdr.NodeOf(rank) }

// Slots returns the number of expert slots (experts + redundant experts).
func (t *Trace) Slots() int { return t.hdr.Slots() }

// Routes returns the route records sorted by (iter, layer, rank). The slice
// is shared; do not modify it.
func (t *Trace) Routes() []*Route { return t.routes }

// Counts returns the counts records sorted by (iter, layer, rank). The
// slice is shared; do not modify it.
func (t *Trace) Counts() []*Counts { return t.counts }

// Placements returns the placement records sorted by layer (shared).
func (t *Trace) Placements() []*Placement { return t.placements }

// Measures returns the measure records in insertion order (shared).
func (t *Trace) Measures() []*Measure { return t.measures }

// Route returns the route record of (iter, layer, rank), or nil.
func (t *Trace) Route(iter, layer, rank int) *Route { return t.routeIdx[stepKey{iter, layer, rank}] }

// StepRoutes returns the route records of (iter, layer) indexed by source
// rank; ranks without a route record are nil. Each route's TopK lists, per
// token, its selected expert slots (-1 masked).
func (t *Trace) StepRoutes(iter, layer int) []*Route {
	out := make([]*Route, t.EP())
	for rank := range out {
		out[rank] = t.routeIdx[stepKey{iter, layer, rank}]
	}
	return out
}

// CountsFor returns the counts record of (iter, layer, rank), or nil.
func (t *Trace) CountsFor(iter, layer, rank int) *Counts {
	return t.countIdx[stepKey{iter, layer, rank}]
}

// Layers returns the sorted distinct layers that have route or counts
// records.
func (t *Trace) Layers() []int {
	var out []int
	for _, r := range t.routes {
		out = append(out, r.Layer)
	}
	for _, c := range t.counts {
		out = append(out, c.Layer)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Iterations returns the sorted distinct iterations that have route or
// counts records.
func (t *Trace) Iterations() []int {
	var out []int
	for _, r := range t.routes {
		out = append(out, r.Iter)
	}
	for _, c := range t.counts {
		out = append(out, c.Iter)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Placement returns the expert-slot → rank map of a layer: the layer's
// placement record if there is one, else the contiguous default (slots/EP
// consecutive slots per rank). The result is a fresh slice.
func (t *Trace) Placement(layer int) []int {
	i, ok := slices.BinarySearchFunc(t.placements, layer, func(p *Placement, l int) int { return cmp.Compare(p.Layer, l) })
	if ok {
		return slices.Clone(t.placements[i].ExpertToRank)
	}
	return ContiguousPlacement(t.Slots(), t.EP())
}

// ContiguousPlacement returns the default placement of slots expert slots
// over ep ranks: slot e goes to rank e*ep/slots (slots/ep per rank when ep
// divides slots).
func ContiguousPlacement(slots, ep int) []int {
	out := make([]int, slots)
	for e := range out {
		out[e] = e * ep / slots
	}
	return out
}

// StepMatrix holds the traffic matrices of one (iteration, layer), indexed
// [source rank][destination rank or node]. Ranks without a record have
// zero tokens.
type StepMatrix struct {
	Iter, Layer int
	EP, Nodes   int
	// Exact is true when every rank with data had a route record; false
	// when some ranks were derived from counts records.
	Exact bool
	// Tokens is the token count per source rank.
	Tokens []int
	// Masked is the number of masked (-1) or missing selections per source
	// rank: tokens × top_k minus the valid selections.
	Masked []int
	// Selections counts valid (token, expert) selections from src to the
	// rank owning the expert: LL and all-to-all messages, local included.
	Selections [][]int
	// RankTokens counts distinct tokens from src with at least one expert on
	// dst rank (per-rank dedup, DeepEP V2 direct mode).
	RankTokens [][]int
	// NodeTokens counts distinct tokens from src with at least one expert on
	// a rank of dst node, local node included (DeepEP HT, hybrid).
	NodeTokens [][]int
}

func grid(n, m int) [][]int {
	flat := make([]int, n*m)
	out := make([][]int, n)
	for i := range out {
		out[i] = flat[i*m : (i+1)*m : (i+1)*m]
	}
	return out
}

// Step computes the traffic matrices of (iter, layer) from route records
// where present and from counts records otherwise. It fails if no rank has
// either record for that step.
func (t *Trace) Step(iter, layer int) (*StepMatrix, error) {
	ep, nodes, k := t.EP(), t.Nodes(), t.hdr.Model.TopK
	s := &StepMatrix{
		Iter: iter, Layer: layer, EP: ep, Nodes: nodes, Exact: true,
		Tokens: make([]int, ep), Masked: make([]int, ep),
		Selections: grid(ep, ep), RankTokens: grid(ep, ep), NodeTokens: grid(ep, nodes),
	}
	place := t.Placement(layer)
	rankStamp := make([]int, ep)
	nodeStamp := make([]int, nodes)
	stamp, found := 0, false
	for src := range ep {
		key := stepKey{iter, layer, src}
		if r := t.routeIdx[key]; r != nil {
			found = true
			s.Tokens[src] = r.Tokens
			sel, rt, nt := s.Selections[src], s.RankTokens[src], s.NodeTokens[src]
			valid := 0
			for _, row := range r.TopK {
				stamp++
				for _, e := range row {
					if e < 0 {
						continue
					}
					valid++
					dst := place[e]
					sel[dst]++
					if rankStamp[dst] != stamp {
						rankStamp[dst] = stamp
						rt[dst]++
					}
					if n := t.hdr.NodeOf(dst); nodeStamp[n] != stamp {
						nodeStamp[n] = stamp
						nt[n]++
					}
				}
			}
			s.Masked[src] = r.Tokens*k - valid
			continue
		}
		c := t.countIdx[key]
		if c == nil {
			continue
		}
		found, s.Exact = true, false
		s.Tokens[src] = c.Tokens
		valid := 0
		for e, n := range c.ExpertTokens {
			s.Selections[src][place[e]] += n
			valid += n
		}
		copy(s.RankTokens[src], c.RankTokens)
		copy(s.NodeTokens[src], c.NodeTokens)
		s.Masked[src] = c.Tokens*k - valid
	}
	if !found {
		return nil, fmt.Errorf("traces: no route or counts records for iter %d, layer %d", iter, layer)
	}
	return s, nil
}

// CountsOf derives the counts record of a route under the given placement
// (expert slot → rank), with nodes computed from ranksPerNode.
func CountsOf(r *Route, place []int, ep, ranksPerNode int) *Counts {
	nodes := (ep + ranksPerNode - 1) / ranksPerNode
	c := &Counts{
		Iter: r.Iter, Layer: r.Layer, Rank: r.Rank, Tokens: r.Tokens,
		ExpertTokens: make([]int, len(place)), RankTokens: make([]int, ep), NodeTokens: make([]int, nodes),
	}
	rankStamp := make([]int, ep)
	nodeStamp := make([]int, nodes)
	for t, row := range r.TopK {
		for _, e := range row {
			if e < 0 {
				continue
			}
			c.ExpertTokens[e]++
			dst := place[e]
			if rankStamp[dst] != t+1 {
				rankStamp[dst] = t + 1
				c.RankTokens[dst]++
			}
			if n := dst / ranksPerNode; nodeStamp[n] != t+1 {
				nodeStamp[n] = t + 1
				c.NodeTokens[n]++
			}
		}
	}
	return c
}

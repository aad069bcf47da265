package traces

import (
	"fmt"
	"math"
)

// fieldError is a validation failure before it is given a file position.
type fieldError struct {
	field string
	msg   string
}

func ferr(field, format string, args ...any) *fieldError {
	return &fieldError{field: field, msg: fmt.Sprintf(format, args...)}
}

type stepKey struct{ iter, layer, rank int }

// checker validates records against a header and remembers what it has seen
// to reject duplicates. The zero value has no header yet.
type checker struct {
	h          *Header
	slots      int
	nodes      int
	routes     map[stepKey]struct{}
	counts     map[stepKey]struct{}
	placements map[int]struct{}
}

var phases = []string{"", "decode", "prefill", "training"}

func checkHeader(h *Header) *fieldError {
	m, p := &h.Model, &h.Parallel
	switch {
	case h.Format != Format:
		return ferr("format", "format %q, want %q", h.Format, Format)
	case h.Version != Version:
		return ferr("version", "version %d unsupported (this reader supports %d)", h.Version, Version)
	case m.Hidden <= 0:
		return ferr("model.hidden", "hidden %d must be positive", m.Hidden)
	case m.NumExperts <= 0:
		return ferr("model.num_experts", "num_experts %d must be positive", m.NumExperts)
	case p.RedundantExperts < 0:
		return ferr("parallel.redundant_experts", "redundant_experts %d is negative", p.RedundantExperts)
	case m.TopK <= 0 || m.TopK > h.Slots():
		return ferr("model.top_k", "top_k %d out of range [1,%d]", m.TopK, h.Slots())
	case m.MoELayers[0] < 0 || m.MoELayers[1] < m.MoELayers[0]:
		return ferr("model.moe_layers", "moe_layers [%d,%d] is not a valid inclusive range", m.MoELayers[0], m.MoELayers[1])
	case m.SharedExperts < 0:
		return ferr("model.shared_experts", "shared_experts %d is negative", m.SharedExperts)
	case m.NGroup < 0 || (m.NGroup > 0 && m.NumExperts%m.NGroup != 0):
		return ferr("model.n_group", "n_group %d must be 0 or divide num_experts %d", m.NGroup, m.NumExperts)
	case m.TopKGroup < 0 || m.TopKGroup > max(m.NGroup, 1):
		return ferr("model.topk_group", "topk_group %d out of range [0,%d]", m.TopKGroup, max(m.NGroup, 1))
	case p.EPRanks <= 0:
		return ferr("parallel.ep_ranks", "ep_ranks %d must be positive", p.EPRanks)
	case p.RanksPerNode <= 0:
		return ferr("parallel.ranks_per_node", "ranks_per_node %d must be positive", p.RanksPerNode)
	case p.Placement != PlacementContiguous && p.Placement != PlacementExplicit:
		return ferr("parallel.placement", "placement %q, want %q or %q", p.Placement, PlacementContiguous, PlacementExplicit)
	case p.Placement == PlacementContiguous && h.Slots()%p.EPRanks != 0:
		return ferr("parallel.placement", "contiguous placement needs expert slots %d divisible by ep_ranks %d (use explicit placement)", h.Slots(), p.EPRanks)
	case h.MaxTokensPerRank < 0:
		return ferr("max_tokens_per_rank", "max_tokens_per_rank %d is negative", h.MaxTokensPerRank)
	}
	if _, err := ParsePrecision(h.Dtype.Dispatch); err != nil {
		return ferr("dtype.dispatch", "unknown dispatch dtype %q (want fp8_e4m3 or bf16)", h.Dtype.Dispatch)
	}
	if h.Dtype.Combine != "bf16" && h.Dtype.Combine != "logfmt" {
		return ferr("dtype.combine", "unknown combine dtype %q (want bf16 or logfmt)", h.Dtype.Combine)
	}
	ok := false
	for _, ph := range phases {
		ok = ok || h.Phase == ph
	}
	if !ok {
		return ferr("phase", "unknown phase %q (want decode, prefill or training)", h.Phase)
	}
	return nil
}

func (c *checker) setHeader(h *Header) *fieldError {
	if fe := checkHeader(h); fe != nil {
		return fe
	}
	c.h = h
	c.slots = h.Slots()
	c.nodes = h.Nodes()
	c.routes = make(map[stepKey]struct{})
	c.counts = make(map[stepKey]struct{})
	c.placements = make(map[int]struct{})
	return nil
}

func (c *checker) checkLayer(layer int) *fieldError {
	lo, hi := c.h.Model.MoELayers[0], c.h.Model.MoELayers[1]
	if layer < lo || layer > hi {
		return ferr("layer", "layer %d out of MoE layer range [%d,%d]", layer, lo, hi)
	}
	return nil
}

func (c *checker) checkStep(iter, layer, rank, tokens int) *fieldError {
	if iter < 0 {
		return ferr("iter", "iter %d is negative", iter)
	}
	if fe := c.checkLayer(layer); fe != nil {
		return fe
	}
	if rank < 0 || rank >= c.h.Parallel.EPRanks {
		return ferr("rank", "rank %d out of range [0,%d)", rank, c.h.Parallel.EPRanks)
	}
	if tokens < 0 {
		return ferr("tokens", "tokens %d is negative", tokens)
	}
	if m := c.h.MaxTokensPerRank; m > 0 && tokens > m {
		return ferr("tokens", "tokens %d exceeds max_tokens_per_rank %d", tokens, m)
	}
	return nil
}

func (c *checker) check(rec Record) *fieldError {
	switch r := rec.(type) {
	case *Placement:
		return c.placement(r)
	case *Route:
		return c.route(r)
	case *Counts:
		return c.countsRec(r)
	case *Measure:
		return c.measure(r)
	case *Header:
		return ferr("kind", "only one header record is allowed, and only as the first record")
	}
	return ferr("kind", "unsupported record type %T", rec)
}

func (c *checker) placement(p *Placement) *fieldError {
	if fe := c.checkLayer(p.Layer); fe != nil {
		return fe
	}
	if _, dup := c.placements[p.Layer]; dup {
		return ferr("layer", "duplicate placement for layer %d", p.Layer)
	}
	if len(p.ExpertToRank) != c.slots {
		return ferr("expert_to_rank", "has %d entries, want %d expert slots", len(p.ExpertToRank), c.slots)
	}
	for i, r := range p.ExpertToRank {
		if r < 0 || r >= c.h.Parallel.EPRanks {
			return ferr(fmt.Sprintf("expert_to_rank[%d]", i), "rank %d out of range [0,%d)", r, c.h.Parallel.EPRanks)
		}
	}
	if p.LogicalExpert != nil {
		if len(p.LogicalExpert) != c.slots {
			return ferr("logical_expert", "has %d entries, want %d expert slots", len(p.LogicalExpert), c.slots)
		}
		for i, x := range p.LogicalExpert {
			if x < 0 || x >= c.h.Model.NumExperts {
				return ferr(fmt.Sprintf("logical_expert[%d]", i), "expert %d out of range [0,%d)", x, c.h.Model.NumExperts)
			}
		}
	}
	c.placements[p.Layer] = struct{}{}
	return nil
}

func (c *checker) route(r *Route) *fieldError {
	if fe := c.checkStep(r.Iter, r.Layer, r.Rank, r.Tokens); fe != nil {
		return fe
	}
	k := stepKey{r.Iter, r.Layer, r.Rank}
	if _, dup := c.routes[k]; dup {
		return ferr("rank", "duplicate route record for (iter %d, layer %d, rank %d)", r.Iter, r.Layer, r.Rank)
	}
	if len(r.TopK) != r.Tokens {
		return ferr("topk", "has %d rows, but tokens is %d", len(r.TopK), r.Tokens)
	}
	topK, slots := c.h.Model.TopK, int32(c.slots)
	for t, row := range r.TopK {
		if len(row) != topK {
			return ferr(fmt.Sprintf("topk[%d]", t), "row has %d entries, want top_k %d", len(row), topK)
		}
		for j, e := range row {
			if e < -1 || e >= slots {
				return ferr(fmt.Sprintf("topk[%d][%d]", t, j), "expert %d out of range [0,%d)", e, slots)
			}
			if e < 0 {
				continue
			}
			for _, prev := range row[:j] {
				if prev == e {
					return ferr(fmt.Sprintf("topk[%d][%d]", t, j), "expert %d selected twice by one token", e)
				}
			}
		}
	}
	if r.Weights != nil {
		if len(r.Weights) != r.Tokens {
			return ferr("weights", "has %d rows, but tokens is %d", len(r.Weights), r.Tokens)
		}
		for t, row := range r.Weights {
			if len(row) != topK {
				return ferr(fmt.Sprintf("weights[%d]", t), "row has %d entries, want top_k %d", len(row), topK)
			}
			for j, w := range row {
				if math.IsNaN(w) || math.IsInf(w, 0) {
					return ferr(fmt.Sprintf("weights[%d][%d]", t, j), "weight %v is not finite", w)
				}
			}
		}
	}
	c.routes[k] = struct{}{}
	return nil
}

func checkCountsSlice(name string, v []int, want, limit int) *fieldError {
	if len(v) != want {
		return ferr(name, "has %d entries, want %d", len(v), want)
	}
	for i, n := range v {
		if n < 0 {
			return ferr(fmt.Sprintf("%s[%d]", name, i), "count %d is negative", n)
		}
		if n > limit {
			return ferr(fmt.Sprintf("%s[%d]", name, i), "count %d exceeds tokens %d", n, limit)
		}
	}
	return nil
}

func (c *checker) countsRec(r *Counts) *fieldError {
	if fe := c.checkStep(r.Iter, r.Layer, r.Rank, r.Tokens); fe != nil {
		return fe
	}
	k := stepKey{r.Iter, r.Layer, r.Rank}
	if _, dup := c.counts[k]; dup {
		return ferr("rank", "duplicate counts record for (iter %d, layer %d, rank %d)", r.Iter, r.Layer, r.Rank)
	}
	if fe := checkCountsSlice("expert_tokens", r.ExpertTokens, c.slots, r.Tokens); fe != nil {
		return fe
	}
	if fe := checkCountsSlice("rank_tokens", r.RankTokens, c.h.Parallel.EPRanks, r.Tokens); fe != nil {
		return fe
	}
	if fe := checkCountsSlice("node_tokens", r.NodeTokens, c.nodes, r.Tokens); fe != nil {
		return fe
	}
	sum := 0
	for _, n := range r.ExpertTokens {
		sum += n
	}
	if sum > r.Tokens*c.h.Model.TopK {
		return ferr("expert_tokens", "sum %d exceeds tokens × top_k = %d", sum, r.Tokens*c.h.Model.TopK)
	}
	c.counts[k] = struct{}{}
	return nil
}

func (c *checker) measure(m *Measure) *fieldError {
	switch {
	case m.Iter < -1:
		return ferr("iter", "iter %d out of range (-1 means all)", m.Iter)
	case m.Layer < -1:
		return ferr("layer", "layer %d out of range (-1 means all)", m.Layer)
	case m.Rank < -1 || m.Rank >= c.h.Parallel.EPRanks:
		return ferr("rank", "rank %d out of range [-1,%d)", m.Rank, c.h.Parallel.EPRanks)
	case m.Op == "":
		return ferr("op", "empty op")
	case m.US < 0 || math.IsNaN(m.US) || math.IsInf(m.US, 0):
		return ferr("us", "time %v must be a finite non-negative number", m.US)
	}
	if m.Layer >= 0 {
		return c.checkLayer(m.Layer)
	}
	return nil
}

// missingPlacements returns the first layer used by routes or counts that
// has no placement record, for explicit placement; ok is false if one is
// missing.
func (c *checker) missingPlacement(layers []int) (int, bool) {
	if c.h.Parallel.Placement != PlacementExplicit {
		return 0, true
	}
	for _, l := range layers {
		if _, ok := c.placements[l]; !ok {
			return l, false
		}
	}
	return 0, true
}

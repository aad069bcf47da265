package traces

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// GenConfig configures Generate. Zero values take the documented defaults.
type GenConfig struct {
	Model         Model  // preset (ModelByName) or custom model
	EP            int    // expert-parallel ranks
	RanksPerNode  int    // GPUs per node (default 8, capped at EP)
	TokensPerRank int    // tokens per source rank and step
	Experts       int    // override of the model's routed experts (0: model)
	Hidden        int    // override of the model's hidden size (0: model)
	TopK          int    // override of the model's top-k (0: model)
	Routing       string // ParseRouting syntax (default "uniform")
	Layers        int    // MoE layers, starting at the model's first (default 1)
	Iterations    int    // iterations (default 1)
	Seed          uint64
	// MaskFraction is the fraction of selections set to -1, chosen
	// uniformly per (iter, layer, rank): round(f × tokens × k) entries.
	MaskFraction float64
	Weights      bool      // emit top-k weights (normalized scores)
	Counts       bool      // emit counts records instead of route records
	Precision    Precision // dispatch dtype (default FP8)
	Phase        string    // header phase (default "decode")
	// RedundantExperts adds replica slots (needs Placement "eplb").
	RedundantExperts int
	// Placement is "" or PlacementContiguous (slot e on rank e/(slots/EP)),
	// or PlacementEPLB: per layer, EPLB (see EPLB) places the experts and
	// their replicas by this layer's load over all iterations, the trace
	// gets explicit placement records, and each source rank spreads an
	// expert's selections round-robin over its replicas.
	Placement string
}

// streamSeed derives an independent PCG stream for one generator unit.
func streamSeed(parts ...int) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, p := range parts {
		h ^= uint64(p) + 0x9e3779b97f4a7c15 + h<<6 + h>>2
		h ^= h >> 31
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 29
	}
	return h
}

// gen holds the resolved configuration of one Generate call.
type gen struct {
	cfg     GenConfig
	rt      Routing
	slots   int
	k       int
	nodes   int
	perRank int
	groups  int // grouped
	topG    int // grouped
}

func (g *gen) rng(parts ...int) *rand.Rand {
	return rand.New(rand.NewPCG(g.cfg.Seed, streamSeed(parts...)))
}

// Generate builds a synthetic trace. The same config (seed included) always
// yields an identical trace; different seeds give different routing.
//
// Routing semantics (spec 3.2):
//   - uniform: DeepEP's low-latency test draws iid scores |N(0,1)|+1 per
//     expert and takes the top-k; with iid continuous scores the top-k is
//     a uniformly random k-subset in uniformly random order, which is what
//     is sampled directly.
//   - grouped: scores |N(0,1)|+1, group score = max over the group's
//     experts, keep the top M groups, then top-k by score within them
//     (output sorted by descending score).
//   - hot:R: each selection goes to the hot rank with probability
//     R/(R+EP-1), else to a uniformly chosen other rank, then to a uniform
//     expert of that rank not yet chosen by the token; the hot rank's
//     expected load is R× any other rank's while a token can still pick
//     enough distinct experts there (k ≤ experts per rank).
//   - zipf:S: expert popularity p ∝ 1/i^S over a per-layer random
//     permutation of the experts; k distinct experts sampled sequentially
//     without replacement.
//   - hot-experts:N:R: N experts, the first N of a per-layer random
//     permutation, each have R× the popularity of every other expert;
//     sampled like zipf, so a hot expert's load is R× a cold one's while
//     k is small next to the experts (without replacement, a token takes
//     a hot expert at most once).
//   - balanced: tokens draw experts from a deck of concatenated random
//     permutations of all expert slots shared by all ranks, so every expert
//     gets exactly the same load whenever EP × tokens × k is a multiple of
//     the slot count and k divides it.
func Generate(cfg GenConfig) (*Trace, error) {
	g, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	cfg = g.cfg
	m := cfg.Model
	hm := HeaderModelFor(m)
	hm.NumExperts, hm.TopK = g.slots, g.k
	if cfg.Hidden > 0 {
		hm.Hidden = cfg.Hidden
	}
	if hm.NGroup > 1 && hm.NumExperts%hm.NGroup != 0 {
		hm.NGroup, hm.TopKGroup = 1, 1
	}
	par := Parallel{EPRanks: cfg.EP, RanksPerNode: cfg.RanksPerNode, Placement: PlacementContiguous}
	eplb := cfg.Placement == PlacementEPLB
	if eplb {
		par.Placement, par.RedundantExperts = PlacementExplicit, cfg.RedundantExperts
	}
	h := Header{
		Format: Format, Version: Version, Model: hm, Parallel: par,
		Dtype: DtypeFor(cfg.Precision), Phase: cfg.Phase, MaxTokensPerRank: cfg.TokensPerRank,
		Source: Source{Tool: "synthetic:" + g.rt.String(), Seed: cfg.Seed},
	}
	t, err := NewTrace(h)
	if err != nil {
		return nil, err
	}
	place := ContiguousPlacement(g.slots, cfg.EP)
	for l := range cfg.Layers {
		layer := m.FirstMoELayer + l
		steps := make([][]*Route, cfg.Iterations)
		for it := range steps {
			steps[it] = g.step(it, layer)
		}
		if eplb {
			var all []*Route
			for _, routes := range steps {
				all = append(all, routes...)
			}
			p, err := BalanceLayer(layer, all, g.slots, cfg.RedundantExperts, cfg.EP)
			if err != nil {
				return nil, err
			}
			place = p.ExpertToRank
			if err := t.Add(p); err != nil {
				return nil, fmt.Errorf("traces: generate: internal error: %w", err)
			}
		}
		for _, routes := range steps {
			for _, r := range routes {
				var rec Record = r
				if cfg.Counts {
					rec = CountsOf(r, place, cfg.EP, cfg.RanksPerNode)
				}
				if err := t.Add(rec); err != nil {
					return nil, fmt.Errorf("traces: generate: internal error: %w", err)
				}
			}
		}
	}
	return t, nil
}

func resolve(cfg GenConfig) (*gen, error) {
	m := cfg.Model
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if cfg.Routing == "" {
		cfg.Routing = RoutingUniform
	}
	rt, err := ParseRouting(cfg.Routing)
	if err != nil {
		return nil, err
	}
	if cfg.RanksPerNode == 0 {
		cfg.RanksPerNode = min(8, max(cfg.EP, 1))
	}
	if cfg.Layers == 0 {
		cfg.Layers = 1
	}
	if cfg.Iterations == 0 {
		cfg.Iterations = 1
	}
	if cfg.Phase == "" {
		cfg.Phase = "decode"
	}
	g := &gen{cfg: cfg, rt: rt, slots: m.NumExperts, k: m.TopK}
	if cfg.Experts != 0 {
		g.slots = cfg.Experts
	}
	if cfg.TopK != 0 {
		g.k = cfg.TopK
	}
	switch {
	case cfg.EP <= 0:
		return nil, fmt.Errorf("traces: generate: EP %d must be positive", cfg.EP)
	case cfg.RanksPerNode <= 0:
		return nil, fmt.Errorf("traces: generate: ranks per node %d must be positive", cfg.RanksPerNode)
	case cfg.Hidden < 0:
		return nil, fmt.Errorf("traces: generate: hidden %d is negative", cfg.Hidden)
	case cfg.TokensPerRank < 0:
		return nil, fmt.Errorf("traces: generate: tokens per rank %d is negative", cfg.TokensPerRank)
	case g.slots <= 0 || g.slots%cfg.EP != 0:
		return nil, fmt.Errorf("traces: generate: experts %d must be a positive multiple of EP %d", g.slots, cfg.EP)
	case g.k <= 0 || g.k > g.slots:
		return nil, fmt.Errorf("traces: generate: top-k %d out of range [1,%d]", g.k, g.slots)
	case cfg.Layers < 0 || cfg.Layers > m.MoELayers:
		return nil, fmt.Errorf("traces: generate: layers %d out of range [1,%d] for %s", cfg.Layers, m.MoELayers, m.Name)
	case cfg.Iterations < 0:
		return nil, fmt.Errorf("traces: generate: iterations %d is negative", cfg.Iterations)
	case !(cfg.MaskFraction >= 0 && cfg.MaskFraction <= 1):
		return nil, fmt.Errorf("traces: generate: mask fraction %v out of range [0,1]", cfg.MaskFraction)
	case cfg.Precision != FP8 && cfg.Precision != BF16:
		return nil, fmt.Errorf("traces: generate: unknown precision %v", cfg.Precision)
	case cfg.Placement != "" && cfg.Placement != PlacementContiguous && cfg.Placement != PlacementEPLB:
		return nil, fmt.Errorf("traces: generate: placement %q (want %s or %s)", cfg.Placement, PlacementContiguous, PlacementEPLB)
	case cfg.RedundantExperts < 0:
		return nil, fmt.Errorf("traces: generate: redundant experts %d is negative", cfg.RedundantExperts)
	case cfg.RedundantExperts > 0 && cfg.Placement != PlacementEPLB:
		return nil, fmt.Errorf("traces: generate: %d redundant experts need placement %s (which decides what to replicate)", cfg.RedundantExperts, PlacementEPLB)
	case cfg.Placement == PlacementEPLB && (g.slots+cfg.RedundantExperts)%cfg.EP != 0:
		return nil, fmt.Errorf("traces: generate: %d experts + %d redundant must divide evenly over EP %d", g.slots, cfg.RedundantExperts, cfg.EP)
	case cfg.RedundantExperts > g.slots*(cfg.EP-1):
		return nil, fmt.Errorf("traces: generate: %d redundant experts exceed one copy of each expert per rank", cfg.RedundantExperts)
	}
	g.nodes = (cfg.EP + cfg.RanksPerNode - 1) / cfg.RanksPerNode
	g.perRank = g.slots / cfg.EP
	switch rt.Kind {
	case RoutingGrouped:
		switch {
		case rt.FromModel:
			g.groups, g.topG = m.NGroup, m.TopKGroup
		case rt.Groups > 0:
			g.groups, g.topG = rt.Groups, rt.TopGroups
		default:
			g.groups, g.topG = g.nodes, min(g.nodes, 4)
		}
		if g.groups < 1 || g.slots%g.groups != 0 {
			return nil, fmt.Errorf("traces: generate: %d groups must divide %d experts", g.groups, g.slots)
		}
		if g.k > g.topG*(g.slots/g.groups) {
			return nil, fmt.Errorf("traces: generate: top-k %d exceeds the %d experts of %d groups", g.k, g.topG*(g.slots/g.groups), g.topG)
		}
	case RoutingHot:
		if rt.HotRank >= cfg.EP {
			return nil, fmt.Errorf("traces: generate: hot rank %d out of range [0,%d)", rt.HotRank, cfg.EP)
		}
	case RoutingHotExp:
		if rt.HotExperts > g.slots {
			return nil, fmt.Errorf("traces: generate: %d hot experts out of range [1,%d]", rt.HotExperts, g.slots)
		}
	}
	return g, nil
}

// newRoute allocates a route with a flat backing array.
func newRoute(it, layer, rank, tokens, k int, weights bool) *Route {
	r := &Route{Iter: it, Layer: layer, Rank: rank, Tokens: tokens, TopK: make([][]int32, tokens)}
	flat := make([]int32, tokens*k)
	for t := range r.TopK {
		r.TopK[t] = flat[t*k : (t+1)*k : (t+1)*k]
	}
	if weights {
		r.Weights = make([][]float64, tokens)
		wf := make([]float64, tokens*k)
		for t := range r.Weights {
			r.Weights[t] = wf[t*k : (t+1)*k : (t+1)*k]
		}
	}
	return r
}

// step generates the routes of all ranks of one (iter, layer).
func (g *gen) step(it, layer int) []*Route {
	cfg := g.cfg
	routes := make([]*Route, cfg.EP)
	for rank := range routes {
		routes[rank] = newRoute(it, layer, rank, cfg.TokensPerRank, g.k, cfg.Weights)
	}
	switch g.rt.Kind {
	case RoutingBalanced:
		g.balanced(routes, g.rng(it, layer, -1))
	case RoutingZipf, RoutingHotExp:
		var z *zipf
		if g.rt.Kind == RoutingZipf {
			z = newZipf(g.slots, g.rt.Exponent, g.rng(layer, -2))
		} else {
			z = newHotExperts(g.slots, g.rt.HotExperts, g.rt.Ratio, g.rng(layer, -4))
		}
		for _, r := range routes {
			z.fill(r, g.rng(it, layer, r.Rank))
		}
	default:
		for _, r := range routes {
			rng := g.rng(it, layer, r.Rank)
			switch g.rt.Kind {
			case RoutingUniform:
				g.uniform(r, rng)
			case RoutingGrouped:
				g.grouped(r, rng)
			case RoutingHot:
				g.hot(r, rng)
			}
		}
	}
	for _, r := range routes {
		rng := g.rng(it, layer, r.Rank, -3)
		if cfg.Weights && g.rt.Kind != RoutingGrouped {
			for _, row := range r.Weights {
				randomWeights(row, rng)
			}
		}
		g.mask(r, rng)
	}
	return routes
}

func contains(row []int32, e int32) bool { return slices.Contains(row, e) }

func (g *gen) uniform(r *Route, rng *rand.Rand) {
	n := int32(g.slots)
	for _, row := range r.TopK {
		for j := range row {
			for {
				e := rng.Int32N(n)
				if !contains(row[:j], e) {
					row[j] = e
					break
				}
			}
		}
	}
}

func (g *gen) grouped(r *Route, rng *rand.Rand) {
	per := g.slots / g.groups
	scores := make([]float64, g.slots)
	gmax := make([]float64, g.groups)
	chosen := make([]int, 0, g.topG)
	topE := make([]int32, 0, g.k)
	topS := make([]float64, 0, g.k)
	for t, row := range r.TopK {
		for gi := range gmax {
			mx := 0.0
			for e := gi * per; e < (gi+1)*per; e++ {
				s := math.Abs(rng.NormFloat64()) + 1
				scores[e] = s
				mx = max(mx, s)
			}
			gmax[gi] = mx
		}
		chosen = chosen[:0]
		for range g.topG {
			best := -1
			for gi, s := range gmax {
				if (best < 0 || s > gmax[best]) && !slices.Contains(chosen, gi) {
					best = gi
				}
			}
			chosen = append(chosen, best)
		}
		slices.Sort(chosen)
		topE, topS = topE[:0], topS[:0]
		for _, gi := range chosen {
			for e := gi * per; e < (gi+1)*per; e++ {
				s := scores[e]
				if len(topS) == g.k && s <= topS[g.k-1] {
					continue
				}
				i := len(topS)
				for i > 0 && topS[i-1] < s {
					i--
				}
				if len(topS) < g.k {
					topS, topE = append(topS, 0), append(topE, 0)
				}
				copy(topS[i+1:], topS[i:len(topS)-1])
				copy(topE[i+1:], topE[i:len(topE)-1])
				topS[i], topE[i] = s, int32(e)
			}
		}
		copy(row, topE)
		if r.Weights != nil {
			sum := 0.0
			for _, s := range topS {
				sum += s
			}
			for j, s := range topS {
				r.Weights[t][j] = s / sum
			}
		}
	}
}

func (g *gen) hot(r *Route, rng *rand.Rand) {
	ep, per := g.cfg.EP, g.perRank
	hot := g.rt.HotRank
	pHot := g.rt.Ratio / (g.rt.Ratio + float64(ep-1))
	if ep == 1 {
		pHot = 1
	}
	for _, row := range r.TopK {
		for j := range row {
			hotFull := freeOn(row[:j], hot, per) == 0
			for {
				dst := hot
				if hotFull || rng.Float64() >= pHot {
					dst = rng.IntN(ep - 1)
					if dst >= hot {
						dst++
					}
				}
				free := freeOn(row[:j], dst, per)
				if free == 0 {
					continue // another rank still has room: k <= slots
				}
				idx := rng.IntN(free)
				for e := int32(dst * per); ; e++ {
					if contains(row[:j], e) {
						continue
					}
					if idx == 0 {
						row[j] = e
						break
					}
					idx--
				}
				break
			}
		}
	}
}

// freeOn counts the experts of rank dst (contiguous, per experts per rank)
// not in chosen.
func freeOn(chosen []int32, dst, per int) int {
	free := per
	for _, e := range chosen {
		if int(e)/per == dst {
			free--
		}
	}
	return free
}

// zipf samples expert slots with power-law popularity.
type zipf struct {
	prob  []float64 // per slot
	alias []int32
	accpt []float64
}

func newZipf(n int, s float64, rng *rand.Rand) *zipf {
	perm := rng.Perm(n)
	z := &zipf{prob: make([]float64, n)}
	sum := 0.0
	for i := range n {
		sum += math.Pow(float64(i+1), -s)
	}
	for i, e := range perm {
		z.prob[e] = math.Pow(float64(i+1), -s) / sum
	}
	z.accpt, z.alias = aliasTable(z.prob)
	return z
}

// newHotExperts returns a sampler in which hot experts (the first hot of a
// random permutation) each have ratio times the probability of any other
// expert; the draws without replacement are those of zipf.
func newHotExperts(n, hot int, ratio float64, rng *rand.Rand) *zipf {
	perm := rng.Perm(n)
	z := &zipf{prob: make([]float64, n)}
	sum := float64(hot)*ratio + float64(n-hot)
	for i, e := range perm {
		z.prob[e] = 1 / sum
		if i < hot {
			z.prob[e] = ratio / sum
		}
	}
	z.accpt, z.alias = aliasTable(z.prob)
	return z
}

// aliasTable builds Vose's alias table for p (summing to 1).
func aliasTable(p []float64) ([]float64, []int32) {
	n := len(p)
	acc := make([]float64, n)
	alias := make([]int32, n)
	var small, large []int32
	for i, x := range p {
		acc[i] = x * float64(n)
		if acc[i] < 1 {
			small = append(small, int32(i))
		} else {
			large = append(large, int32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s, l := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		alias[s] = l
		acc[l] -= 1 - acc[s]
		if acc[l] < 1 {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	for _, i := range slices.Concat(small, large) {
		acc[i], alias[i] = 1, i
	}
	return acc, alias
}

func (z *zipf) fill(r *Route, rng *rand.Rand) {
	n := len(z.prob)
	for _, row := range r.TopK {
		for j := range row {
			e := int32(-1)
			for try := 0; try < 64; try++ {
				i := rng.IntN(n)
				c := int32(i)
				if rng.Float64() >= z.accpt[i] {
					c = z.alias[i]
				}
				if !contains(row[:j], c) {
					e = c
					break
				}
			}
			if e < 0 { // heavy head already taken: exact renormalized draw
				rest := 0.0
				for i, p := range z.prob {
					if !contains(row[:j], int32(i)) {
						rest += p
					}
				}
				u := rng.Float64() * rest
				for i, p := range z.prob {
					if contains(row[:j], int32(i)) {
						continue
					}
					e = int32(i)
					if u -= p; u < 0 {
						break
					}
				}
			}
			row[j] = e
		}
	}
}

func (g *gen) balanced(routes []*Route, rng *rand.Rand) {
	n := g.slots
	var deck []int32
	pos := 0
	refill := func(need int) {
		for len(deck)-pos < need {
			deck = slices.Delete(deck, 0, pos)
			pos = 0
			for _, e := range rng.Perm(n) {
				deck = append(deck, int32(e))
			}
		}
	}
	for _, r := range routes {
		for _, row := range r.TopK {
			refill(n + g.k)
			for j := range row {
				q := pos
				for contains(row[:j], deck[q]) {
					if q++; q == len(deck) {
						for _, e := range rng.Perm(n) {
							deck = append(deck, int32(e))
						}
					}
				}
				deck[pos], deck[q] = deck[q], deck[pos]
				row[j] = deck[pos]
				pos++
			}
		}
	}
}

// randomWeights fills row with |N(0,1)|+1 draws, sorted descending and
// normalized to sum 1.
func randomWeights(row []float64, rng *rand.Rand) {
	sum := 0.0
	for j := range row {
		row[j] = math.Abs(rng.NormFloat64()) + 1
		sum += row[j]
	}
	slices.SortFunc(row, func(a, b float64) int {
		switch {
		case a > b:
			return -1
		case a < b:
			return 1
		}
		return 0
	})
	for j := range row {
		row[j] /= sum
	}
}

// mask sets round(f × tokens × k) distinct selections to -1 (weight 0).
func (g *gen) mask(r *Route, rng *rand.Rand) {
	total := r.Tokens * g.k
	m := int(math.Round(g.cfg.MaskFraction * float64(total)))
	if m == 0 {
		return
	}
	// Partial Fisher-Yates over selection positions.
	idx := make([]int32, total)
	for i := range idx {
		idx[i] = int32(i)
	}
	for i := range m {
		j := i + rng.IntN(total-i)
		idx[i], idx[j] = idx[j], idx[i]
		p := int(idx[i])
		r.TopK[p/g.k][p%g.k] = -1
		if r.Weights != nil {
			r.Weights[p/g.k][p%g.k] = 0
		}
	}
}

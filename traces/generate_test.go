package traces

import (
	"bytes"
	"cmp"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExpectedGroupsSpecTable(t *testing.T) {
	// Spec 3.2 closed-form table (2 decimals).
	tests := []struct {
		e, k int
		g    []int
		want []float64
	}{
		{256, 8, []int{2, 4, 8, 16, 32, 64, 128, 256}, []float64{1.99, 3.61, 5.29, 6.52, 7.27, 7.68, 7.89, 8.00}},
		{384, 8, []int{2, 4, 8, 16, 32, 64, 128}, []float64{1.99, 3.61, 5.28, 6.50, 7.24, 7.64, 7.85}},
		{128, 8, []int{2, 4, 8, 16, 32, 64, 128}, []float64{1.99, 3.63, 5.34, 6.60, 7.36, 7.78, 8.00}},
		{128, 4, []int{2, 4, 8, 16, 32, 64, 128}, []float64{1.88, 2.75, 3.34, 3.68, 3.86, 3.95, 4.00}},
		{8, 2, []int{2, 4, 8}, []float64{1.57, 1.86, 2.00}},
	}
	for _, tc := range tests {
		for i, g := range tc.g {
			assert.InDelta(t, tc.want[i], ExpectedGroups(tc.e, tc.k, g), 0.005, "E=%d k=%d G=%d", tc.e, tc.k, g)
		}
	}
	assert.Zero(t, ExpectedGroups(256, 8, 3))
}

func genOK(t testing.TB, cfg GenConfig) *Trace {
	t.Helper()
	tr, err := Generate(cfg)
	require.NoError(t, err)
	return tr
}

func stats(t testing.TB, tr *Trace) StepStats {
	t.Helper()
	s := Inspect(tr)
	require.Len(t, s.Steps, 1)
	return s.Steps[0]
}

func TestUniformDistinctNodes(t *testing.T) {
	// E=256, k=8 over 8 nodes (EP64, 8 per node): closed form 5.29.
	dsv3 := mustModel(t, "deepseek-v3")
	tr := genOK(t, GenConfig{Model: dsv3, EP: 64, RanksPerNode: 8, TokensPerRank: 128, Seed: 3})
	st := stats(t, tr)
	want := ExpectedGroups(256, 8, 8)
	assert.InDelta(t, want, st.NodesPerToken, want*0.02)
	assert.InDelta(t, ExpectedGroups(256, 8, 64), st.RanksPerToken, ExpectedGroups(256, 8, 64)*0.02)
	assert.Equal(t, int64(64*128*8), st.Selections)
	assert.Zero(t, st.Masked)
	// Uniform load: imbalance stays modest at this sample size.
	assert.Less(t, st.RankLoad.Imbalance, 1.25)
	assert.InDelta(t, 7.0/8, st.InterNode, 0.02)
}

func TestMaskFraction(t *testing.T) {
	dsv3 := mustModel(t, "deepseek-v3")
	tr := genOK(t, GenConfig{Model: dsv3, EP: 8, TokensPerRank: 128, Seed: 1, MaskFraction: 0.01, Weights: true})
	st := stats(t, tr)
	assert.Equal(t, int64(8*10), st.Masked) // round(0.01 × 1024) = 10 per rank
	for _, r := range tr.Routes() {
		n := 0
		for i, row := range r.TopK {
			for j, e := range row {
				if e < 0 {
					n++
					assert.Zero(t, r.Weights[i][j])
				}
			}
		}
		assert.Equal(t, 10, n)
	}
}

func TestHotRankRatio(t *testing.T) {
	dsv3 := mustModel(t, "deepseek-v3")
	for _, tc := range []struct {
		spec  string
		hot   int
		ratio float64
	}{{"hot:2.5", 0, 2.5}, {"hot:4@5", 5, 4}, {"hot:1", 0, 1}} {
		tr := genOK(t, GenConfig{Model: dsv3, EP: 16, TokensPerRank: 1024, Routing: tc.spec, Seed: 9})
		m, err := tr.Step(0, dsv3.FirstMoELayer)
		require.NoError(t, err)
		load := make([]float64, 16)
		for src := range 16 {
			for dst, n := range m.Selections[src] {
				load[dst] += float64(n)
			}
		}
		others := 0.0
		for r, l := range load {
			if r != tc.hot {
				others += l
			}
		}
		others /= 15
		assert.InDelta(t, tc.ratio, load[tc.hot]/others, tc.ratio*0.03, tc.spec)
	}
	// A saturated hot rank (1 expert per rank) caps the ratio but terminates.
	tr := genOK(t, GenConfig{Model: dsv3, EP: 256, TokensPerRank: 4, Routing: "hot:1e300", Seed: 1})
	m, err := tr.Step(0, 3)
	require.NoError(t, err)
	hotLoad := 0
	for src := range 256 {
		hotLoad += m.Selections[src][0]
	}
	assert.Equal(t, 256*4, hotLoad, "every token picks the hot rank's only expert")
}

// zipfSlope fits log(frequency) against log(rank) over ranks [lo, hi)
// (1-based rank = index+1) by least squares.
func zipfSlope(freq []float64, lo, hi int) float64 {
	var sx, sy, sxx, sxy, n float64
	for i := lo; i < hi; i++ {
		x, y := math.Log(float64(i+1)), math.Log(freq[i])
		sx, sy, sxx, sxy, n = sx+x, sy+y, sxx+x*x, sxy+x*y, n+1
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

func TestZipfSlope(t *testing.T) {
	dsv3 := mustModel(t, "deepseek-v3")
	for _, s := range []float64{0.8, 1.2} {
		tr := genOK(t, GenConfig{Model: dsv3, EP: 16, TokensPerRank: 2048, Routing: "zipf:" + ftoa(s), Seed: 5})
		freq := make([]float64, 256)
		for _, r := range tr.Routes() {
			for _, row := range r.TopK {
				for _, e := range row {
					freq[e]++
				}
			}
		}
		slices.SortFunc(freq, func(a, b float64) int { return int(b - a) })
		// The head saturates (a token picks an expert at most once); the
		// tail keeps the power law.
		got := zipfSlope(freq, 16, 200)
		assert.InDelta(t, -s, got, 0.1, "S=%v slope %v", s, got)
	}
}

func ftoa(v float64) string { return Routing{Kind: RoutingZipf, Exponent: v}.String()[len("zipf:"):] }

func TestGroupedLimit(t *testing.T) {
	dsv3 := mustModel(t, "deepseek-v3")
	for _, tc := range []struct {
		spec     string
		ep       int
		groups   int
		topG     int
		wantSpan float64 // expected mean groups per token, 0: skip
	}{
		{"grouped:model", 16, 8, 4, 0},
		{"grouped:8:2", 16, 8, 2, 0},
		{"grouped", 32, 4, 4, ExpectedGroups(256, 8, 4)}, // 4 nodes → M = 4 = G: unrestricted
		{"grouped", 64, 8, 4, 0},                         // 8 nodes → M = 4
	} {
		tr := genOK(t, GenConfig{Model: dsv3, EP: tc.ep, TokensPerRank: 256, Routing: tc.spec, Seed: 2, Weights: true})
		per := 256 / tc.groups
		total, tokens := 0, 0
		seen := make([]bool, tc.groups)
		for _, r := range tr.Routes() {
			for i, row := range r.TopK {
				clear(seen)
				n := 0
				for _, e := range row {
					if g := int(e) / per; !seen[g] {
						seen[g] = true
						n++
					}
				}
				require.LessOrEqual(t, n, tc.topG, "%s token uses %d groups", tc.spec, n)
				total += n
				tokens++
				w := r.Weights[i]
				assert.True(t, slices.IsSortedFunc(w, func(a, b float64) int { return int(math.Copysign(1, b-a)) }))
			}
		}
		if tc.wantSpan > 0 {
			assert.InDelta(t, tc.wantSpan, float64(total)/float64(tokens), 0.05*tc.wantSpan, tc.spec)
		} else {
			// The limit binds: the mean is close to M, far above uniform's share.
			assert.Greater(t, float64(total)/float64(tokens), float64(tc.topG)*0.9, tc.spec)
		}
	}
}

func TestHotExpertsLoad(t *testing.T) {
	dsv3 := mustModel(t, "deepseek-v3")
	for _, tc := range []struct {
		hot   int
		ratio float64
	}{{1, 4}, {4, 10}, {16, 3}, {8, 1}} {
		spec := Routing{Kind: RoutingHotExp, HotExperts: tc.hot, Ratio: tc.ratio}.String()
		tr := genOK(t, GenConfig{Model: dsv3, EP: 16, TokensPerRank: 2048, Routing: spec, Seed: 3, Layers: 2})
		hotSets := map[int][]int{}
		for _, layer := range tr.Layers() {
			freq := make([]float64, 256)
			for _, r := range tr.Routes() {
				if r.Layer != layer {
					continue
				}
				for _, row := range r.TopK {
					for _, e := range row {
						freq[e]++
					}
				}
			}
			order := make([]int, 256)
			for i := range order {
				order[i] = i
			}
			slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(freq[b], freq[a]) })
			hot, cold := 0.0, 0.0
			for i, e := range order {
				if i < tc.hot {
					hot += freq[e]
				} else {
					cold += freq[e]
				}
			}
			got := (hot / float64(tc.hot)) / (cold / float64(256-tc.hot))
			// Without replacement a token takes a hot expert at most once,
			// so the ratio falls below R as N·R grows against the experts
			// (4 hot at 10×: about 9×); top-N by count is slightly above R
			// for R = 1. 12% covers both at this sample size.
			assert.InDelta(t, tc.ratio, got, 0.12*tc.ratio, "%s layer %d", spec, layer)
			assert.Greater(t, got, 0.85*tc.ratio, "%s layer %d", spec, layer)
			hs := slices.Clone(order[:tc.hot])
			slices.Sort(hs)
			hotSets[layer] = hs
		}
		if tc.ratio > 1 {
			assert.NotEqual(t, hotSets[3], hotSets[4], "%s: the same hot experts on both layers", spec)
		}
	}
	_, err := Generate(GenConfig{Model: dsv3, EP: 16, TokensPerRank: 8, Routing: "hot-experts:300:2"})
	assert.ErrorContains(t, err, "300 hot experts out of range [1,256]")
}

func TestBalancedExact(t *testing.T) {
	dsv3 := mustModel(t, "deepseek-v3")
	tr := genOK(t, GenConfig{Model: dsv3, EP: 16, TokensPerRank: 96, Routing: "balanced", Seed: 4})
	freq := make([]int, 256)
	for _, r := range tr.Routes() {
		for _, row := range r.TopK {
			for _, e := range row {
				freq[e]++
			}
		}
	}
	for e, n := range freq {
		require.Equal(t, 16*96*8/256, n, "expert %d", e)
	}
	st := stats(t, tr)
	assert.InDelta(t, 1.0, st.RankLoad.Imbalance, 1e-12)
	// k does not divide E: still within one of equal.
	tr = genOK(t, GenConfig{Model: dsv3, EP: 16, TokensPerRank: 96, TopK: 6, Routing: "balanced", Seed: 4})
	assert.InDelta(t, 1.0, stats(t, tr).RankLoad.Imbalance, 0.01)
}

func TestGenerateDeterminism(t *testing.T) {
	dsv3 := mustModel(t, "deepseek-v3")
	for _, routing := range []string{"uniform", "grouped", "grouped:model", "hot:3", "zipf:1.1", "balanced", "hot-experts:4:10"} {
		cfg := GenConfig{Model: dsv3, EP: 16, TokensPerRank: 64, Routing: routing, Seed: 11,
			Layers: 2, Iterations: 2, MaskFraction: 0.01, Weights: true}
		enc := func(c GenConfig) []byte {
			var b bytes.Buffer
			require.NoError(t, genOK(t, c).Write(&b, true))
			return b.Bytes()
		}
		a, b := enc(cfg), enc(cfg)
		assert.Equal(t, a, b, routing)
		cfg.Seed = 12
		assert.NotEqual(t, a, enc(cfg), routing)
	}
}

func TestCountsMatchRoutes(t *testing.T) {
	dsv3 := mustModel(t, "deepseek-v3")
	cfg := GenConfig{Model: dsv3, EP: 16, TokensPerRank: 128, Routing: "zipf:1", Seed: 8, MaskFraction: 0.02}
	exact := genOK(t, cfg)
	cfg.Counts = true
	compact := genOK(t, cfg)
	assert.Empty(t, compact.Routes())
	assert.Len(t, compact.Counts(), 16)
	a, err := exact.Step(0, 3)
	require.NoError(t, err)
	b, err := compact.Step(0, 3)
	require.NoError(t, err)
	assert.True(t, a.Exact)
	assert.False(t, b.Exact)
	b.Exact = true
	assert.Equal(t, a, b)
	// And through the codec.
	var buf bytes.Buffer
	require.NoError(t, compact.Write(&buf, false))
	back, err := Load(&buf, "counts.jsonl")
	require.NoError(t, err)
	c, err := back.Step(0, 3)
	require.NoError(t, err)
	c.Exact = true
	assert.Equal(t, a, c)
}

func TestGenerateHeader(t *testing.T) {
	dsv3 := mustModel(t, "deepseek-v3")
	tr := genOK(t, GenConfig{Model: dsv3, EP: 8, TokensPerRank: 128, Experts: 288, Seed: 1, Precision: BF16})
	h := tr.Header()
	assert.Equal(t, 288, h.Model.NumExperts)
	assert.Equal(t, 8, h.Model.NGroup) // 288 divisible by 8
	assert.Equal(t, [2]int{3, 60}, h.Model.MoELayers)
	assert.Equal(t, "bf16", h.Dtype.Dispatch)
	assert.Equal(t, "synthetic:uniform", h.Source.Tool)
	assert.Equal(t, uint64(1), h.Source.Seed)
	assert.Equal(t, 1, tr.Nodes())
	assert.Equal(t, 36, slices.Index(tr.Placement(3), 1))
}

func TestGenerateErrors(t *testing.T) {
	dsv3 := mustModel(t, "deepseek-v3")
	base := GenConfig{Model: dsv3, EP: 16, TokensPerRank: 8}
	for _, tc := range []struct {
		name string
		mod  func(*GenConfig)
		want string
	}{
		{"ep", func(c *GenConfig) { c.EP = 0 }, "EP 0"},
		{"experts", func(c *GenConfig) { c.Experts = 100 }, "multiple of EP"},
		{"topk", func(c *GenConfig) { c.TopK = 300 }, "top-k 300"},
		{"layers", func(c *GenConfig) { c.Layers = 59 }, "layers 59"},
		{"mask", func(c *GenConfig) { c.MaskFraction = 1.5 }, "mask fraction"},
		{"routing", func(c *GenConfig) { c.Routing = "hot" }, "want hot:R"},
		{"hot rank", func(c *GenConfig) { c.Routing = "hot:2@16" }, "hot rank 16"},
		{"groups", func(c *GenConfig) { c.Routing = "grouped:3:1" }, "3 groups must divide"},
		{"group capacity", func(c *GenConfig) { c.Routing = "grouped:64:1" }, "exceeds the 4 experts"},
		{"model", func(c *GenConfig) { c.Model = Model{} }, "empty name"},
		{"tokens", func(c *GenConfig) { c.TokensPerRank = -1 }, "negative"},
	} {
		cfg := base
		tc.mod(&cfg)
		_, err := Generate(cfg)
		assert.ErrorContains(t, err, tc.want, tc.name)
	}
}

func TestParseRouting(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Routing
		str  string
	}{
		{"uniform", Routing{Kind: "uniform"}, "uniform"},
		{" Balanced ", Routing{Kind: "balanced"}, "balanced"},
		{"grouped", Routing{Kind: "grouped"}, "grouped"},
		{"grouped:model", Routing{Kind: "grouped", FromModel: true}, "grouped:model"},
		{"grouped:8:4", Routing{Kind: "grouped", Groups: 8, TopGroups: 4}, "grouped:8:4"},
		{"hot:2.5", Routing{Kind: "hot", Ratio: 2.5}, "hot:2.5"},
		{"hot:3@7", Routing{Kind: "hot", Ratio: 3, HotRank: 7}, "hot:3@7"},
		{"zipf:1.2", Routing{Kind: "zipf", Exponent: 1.2}, "zipf:1.2"},
		{"hot-experts:4:10", Routing{Kind: "hot-experts", HotExperts: 4, Ratio: 10}, "hot-experts:4:10"},
		{"Hot-Experts:1:2.5", Routing{Kind: "hot-experts", HotExperts: 1, Ratio: 2.5}, "hot-experts:1:2.5"},
	} {
		got, err := ParseRouting(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
		assert.Equal(t, tc.str, got.String())
		again, err := ParseRouting(got.String())
		require.NoError(t, err)
		assert.Equal(t, got, again)
	}
	for _, tc := range []struct{ in, want string }{
		{"", `unknown kind ""`},
		{"normal", `unknown kind "normal"`},
		{"uniform:3", "takes no parameter"},
		{"hot", "want hot:R"},
		{"hot:x", `ratio "x" must be a positive number`},
		{"hot:-1", "must be a positive number"},
		{"hot:NaN", "must be a positive number"},
		{"hot:2@-1", "hot rank"},
		{"zipf", "want zipf:S"},
		{"zipf:-1", "non-negative"},
		{"hot-experts", "want hot-experts:N:R"},
		{"hot-experts:4", "want hot-experts:N:R"},
		{"hot-experts:x:2", "want hot-experts:N:R"},
		{"hot-experts:0:2", "want at least 1 hot expert"},
		{"hot-experts:4:0", `ratio "0" must be a positive number`},
		{"hot-experts:4:Inf", "must be a positive number"},
		{"grouped:4", "grouped:G:M"},
		{"grouped:4:5", "1 <= M <= G"},
	} {
		_, err := ParseRouting(tc.in)
		assert.ErrorContains(t, err, tc.want, tc.in)
		if err != nil {
			assert.Contains(t, err.Error(), `routing "`+tc.in+`"`)
		}
	}
}

func FuzzParseRouting(f *testing.F) {
	for _, s := range []string{"uniform", "hot:2.5@3", "zipf:1.2", "grouped:8:4", "grouped:model", "hot:1e400", "hot-experts:4:10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRouting(s)
		if err != nil {
			return
		}
		again, err := ParseRouting(r.String())
		if err != nil || again != r {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, r, r.String(), again, err)
		}
	})
}

package traces

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEPLBTable(t *testing.T) {
	for _, tc := range []struct {
		name         string
		load         []int64
		redundant    int
		ep           int
		wantLogical  []int
		wantRankLoad []float64
	}{
		// Equal load, no replicas: experts spread one per slot, balanced.
		{"equal", []int64{5, 5, 5, 5}, 0, 2, []int{0, 2, 1, 3}, []float64{10, 10}},
		// The hot expert gets both replicas (12 → 6 → 4 per copy), one copy
		// per rank; the light experts fill up the ranks (22 over 4: 6,6,6,4).
		{"hot replicated", []int64{12, 2, 2, 2, 2, 2}, 2, 4, []int{0, 3, 0, 4, 0, 5, 1, 2}, []float64{6, 6, 6, 4}},
		// Zero load still places every expert.
		{"idle", []int64{0, 0}, 0, 1, []int{0, 1}, []float64{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logical, ranks, err := EPLB(tc.load, tc.redundant, tc.ep)
			require.NoError(t, err)
			assert.Equal(t, tc.wantLogical, logical)
			per := len(logical) / tc.ep
			for s, r := range ranks {
				assert.Equal(t, s/per, r, "slot %d", s)
			}
			// Every expert has a copy; a rank holds an expert at most once.
			copies := make([]int, len(tc.load))
			for _, x := range logical {
				copies[x]++
			}
			got := make([]float64, tc.ep)
			for s, x := range logical {
				assert.Positive(t, copies[x])
				got[ranks[s]] += float64(tc.load[x]) / float64(copies[x])
			}
			assert.Equal(t, tc.wantRankLoad, got)
			for r := range tc.ep {
				held := logical[r*per : (r+1)*per]
				sorted := slices.Clone(held)
				slices.Sort(sorted)
				assert.Equal(t, len(sorted), len(slices.Compact(sorted)), "rank %d holds a copy twice: %v", r, held)
			}
		})
	}
	for _, tc := range []struct {
		load      []int64
		redundant int
		ep        int
		want      string
	}{
		{[]int64{1, 2, 3}, 0, 2, "must divide evenly"},
		{[]int64{1, 2}, 7, 3, "exceed one copy"},
		{nil, 0, 2, "0 experts"},
		{[]int64{1, -1}, 0, 2, "negative load"},
	} {
		_, _, err := EPLB(tc.load, tc.redundant, tc.ep)
		assert.ErrorContains(t, err, tc.want)
	}
}

// TestGenerateEPLB checks that EPLB placement keeps every token's logical
// experts (the routing is drawn before placement, from the same streams),
// records the placement, and evens out the hot experts' rank load.
func TestGenerateEPLB(t *testing.T) {
	dsv3 := mustModel(t, "deepseek-v3")
	base := GenConfig{Model: dsv3, EP: 16, TokensPerRank: 256, Routing: "hot-experts:4:10", Seed: 9, Layers: 2, Iterations: 2}
	plain := genOK(t, base)
	cfg := base
	cfg.RedundantExperts, cfg.Placement = 32, PlacementEPLB
	bal := genOK(t, cfg)

	h := bal.Header()
	assert.Equal(t, PlacementExplicit, h.Parallel.Placement)
	assert.Equal(t, 32, h.Parallel.RedundantExperts)
	assert.Equal(t, 288, bal.Slots())
	require.Len(t, bal.Placements(), 2)
	for _, p := range bal.Placements() {
		for _, it := range []int{0, 1} {
			for rank := range 16 {
				a, b := plain.Route(it, p.Layer, rank), bal.Route(it, p.Layer, rank)
				for i, row := range b.TopK {
					for j, s := range row {
						require.Equal(t, a.TopK[i][j], int32(p.LogicalExpert[s]), "iter %d layer %d rank %d token %d", it, p.Layer, rank, i)
					}
				}
			}
		}
	}
	before, after := Inspect(plain), Inspect(bal)
	require.Len(t, after.Steps, 4)
	for i := range before.Steps {
		assert.Greater(t, before.Steps[i].RankLoad.Imbalance, 1.5, "hot experts without EPLB")
		assert.Less(t, after.Steps[i].RankLoad.Imbalance, 1.1, "EPLB with 32 redundant")
	}

	// The placement survives the writer and reader.
	var buf bytes.Buffer
	require.NoError(t, bal.Write(&buf, false))
	back, err := Load(bytes.NewReader(buf.Bytes()), "eplb")
	require.NoError(t, err)
	assert.Equal(t, bal.Placements()[0].LogicalExpert, back.Placements()[0].LogicalExpert)
	assert.Equal(t, bal.Placement(3), back.Placement(3))

	for _, bad := range []GenConfig{
		{Model: dsv3, EP: 16, TokensPerRank: 8, RedundantExperts: 16},
		{Model: dsv3, EP: 16, TokensPerRank: 8, RedundantExperts: 8, Placement: PlacementEPLB},
		{Model: dsv3, EP: 16, TokensPerRank: 8, Placement: "random"},
	} {
		_, err := Generate(bad)
		assert.Error(t, err, "%+v", bad)
	}
}

func TestPlacementLogicalChecked(t *testing.T) {
	hdr := `{"kind":"header","format":"moe-trace","version":1,"model":{"name":"x","hidden":64,"num_experts":4,"top_k":2,"moe_layers":[0,0]},"parallel":{"ep_ranks":2,"ranks_per_node":2,"placement":"explicit","redundant_experts":2},"dtype":{"dispatch":"bf16","combine":"bf16"}}`
	for _, tc := range []struct{ rec, want string }{
		{`{"kind":"placement","layer":0,"expert_to_rank":[0,0,0,1,1,1],"logical_expert":[0,1,2,3,0]}`, `field "logical_expert": has 5 entries, want 6`},
		{`{"kind":"placement","layer":0,"expert_to_rank":[0,0,0,1,1,1],"logical_expert":[0,1,2,3,4,0]}`, `field "logical_expert[4]": expert 4 out of range [0,4)`},
		{`{"kind":"placement","layer":0,"expert_to_rank":[0,0,0,1,1,1],"logical_expert":[0,1,2,3,0,1]}`, ""},
		{`{"kind":"placement","layer":0,"expert_to_rank":[0,0,0,1,1,1]}`, ""},
	} {
		_, err := Load(strings.NewReader(hdr+"\n"+tc.rec+"\n"), "p.jsonl")
		if tc.want == "" {
			assert.NoError(t, err)
		} else {
			assert.ErrorContains(t, err, tc.want)
		}
	}
}

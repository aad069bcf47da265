package importer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/traces"
)

func opts(ep int) Options {
	return Options{
		Model:      traces.HeaderModel{Name: "test", Hidden: 2048, NumExperts: 16},
		FirstLayer: 3, EP: ep, RanksPerNode: 2, Precision: traces.FP8,
	}
}

func fixtures(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, filepath.Join("testdata", n))
	}
	return out
}

// rows returns the concatenated topk rows of (iter 0, layer) over ranks.
func rows(t *testing.T, tr *traces.Trace, layer int) [][]int32 {
	t.Helper()
	var out [][]int32
	for r, rt := range tr.StepRoutes(0, layer) {
		if rt == nil {
			t.Fatalf("layer %d: no route for rank %d", layer, r)
		}
		out = append(out, rt.TopK...)
	}
	return out
}

func flat(ts map[string]*Tensor, name string, layer int) [][]int32 {
	tn := ts[name]
	k := tn.Shape[len(tn.Shape)-1]
	n := tn.Shape[len(tn.Shape)-2]
	var out [][]int32
	for r := range n {
		row := make([]int32, k)
		for j := range k {
			row[j] = int32(tn.Ints[layer*n*k+r*k+j])
		}
		out = append(out, row)
	}
	return out
}

func equalRows(a, b [][]int32) bool { return slices.EqualFunc(a, b, slices.Equal[[]int32]) }

func TestLoadStackedSplitsOverRanks(t *testing.T) {
	tr, err := Load(fixtures("topk_idx.npy"), opts(4))
	if err != nil {
		t.Fatal(err)
	}
	h := tr.Header()
	if h.Model.TopK != 4 || h.Model.MoELayers != [2]int{3, 4} || h.MaxTokensPerRank != 3 {
		t.Fatalf("header %+v", h)
	}
	ts := readFixture(t, "topk_idx.npy")
	for l := range 2 {
		if got, want := rows(t, tr, 3+l), flat(ts, "topk_idx", l); !equalRows(got, want) {
			t.Errorf("layer %d: rows differ from the tensor", 3+l)
		}
	}
	// 12 tokens over 5 ranks: 3,3,2,2,2.
	tr, err = Load(fixtures("topk_idx.npy"), opts(5))
	if err == nil {
		t.Fatal("16 experts over EP 5 loaded with contiguous placement")
	}
	o := opts(8)
	o.Model.NumExperts = 16
	tr, err = Load(fixtures("topk_idx.npy"), o)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, rt := range tr.StepRoutes(0, 3) {
		sizes = append(sizes, rt.Tokens)
	}
	if !slices.Equal(sizes, []int{2, 2, 2, 2, 1, 1, 1, 1}) {
		t.Errorf("12 tokens over 8 ranks: %v", sizes)
	}
}

func TestLoadFormats(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   []string
		layers  []int
		weights bool
	}{
		{"npy pair with weights", fixtures("layers.3.topk_idx.npy", "layers.3.topk_weights.npy"), []int{3}, true},
		{"npy fortran uint8", fixtures("layer4_fortran_topk_ids.npy"), []int{4}, false},
		{"npz", fixtures("routing.npz"), []int{3, 4}, true},
		{"npz per rank", fixtures("ranks.npz"), []int{3}, false},
		{"safetensors", fixtures("routing.safetensors"), []int{3, 4}, true},
		{"csv", fixtures("routing.csv"), []int{3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := Load(tc.files, opts(2))
			if err != nil {
				t.Fatal(err)
			}
			if got := tr.Layers(); !slices.Equal(got, tc.layers) {
				t.Errorf("layers %v, want %v", got, tc.layers)
			}
			rt := tr.Route(0, tc.layers[0], 0)
			if (rt.Weights != nil) != tc.weights {
				t.Errorf("weights present %v, want %v", rt.Weights != nil, tc.weights)
			}
			// Round trip through the canonical writer and reader.
			var buf bytes.Buffer
			if err := tr.Write(&buf, false); err != nil {
				t.Fatal(err)
			}
			if _, err := traces.Load(&buf, "roundtrip"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLoadPerRankKeepsRankTokens(t *testing.T) {
	tr, err := Load(fixtures("ranks.npz"), opts(2))
	if err != nil {
		t.Fatal(err)
	}
	ts := readFixture(t, "ranks.npz")
	for r, name := range []string{"rank0.layers.3.topk_idx", "rank1.layers.3.topk_idx"} {
		if !equalRows(tr.Route(0, 3, r).TopK, flat(ts, name, 0)) {
			t.Errorf("rank %d differs from %s", r, name)
		}
	}
	if tr.Header().MaxTokensPerRank != 7 {
		t.Errorf("max tokens %d, want 7", tr.Header().MaxTokensPerRank)
	}
	if _, err := Load(fixtures("ranks.npz"), opts(4)); err == nil || !strings.Contains(err.Error(), "no tensor for rank 2") {
		t.Errorf("per-rank tensors for 2 of 4 ranks: %v", err)
	}
}

func TestLoadDeterministic(t *testing.T) {
	var out [2][]byte
	for i := range out {
		tr, err := Load(fixtures("routing.npz", "routing.csv", "ranks.npz"), opts(2))
		if err == nil {
			t.Fatal("layer 3 given by three files loaded")
		}
		tr, err = Load(fixtures("routing.safetensors"), opts(2))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := tr.Write(&buf, false); err != nil {
			t.Fatal(err)
		}
		out[i] = buf.Bytes()
	}
	if !bytes.Equal(out[0], out[1]) {
		t.Error("two loads of one file differ")
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		files []string
		ep    int
		want  string
	}{
		{"range", fixtures("bad_range_topk_idx.npy"), 2, `bad_range_topk_idx.npy: field "bad_range_topk_idx[7][3]": expert 300 out of range [0,16)`},
		{"duplicate", fixtures("bad_dup.npz"), 2, `bad_dup.npz: field "layers.3.topk_idx[2][1]": expert`},
		{"float indices", fixtures("bad_float_topk_idx.npy"), 2, `field "bad_float_topk_idx": dtype float32: expert indices must be integers`},
		{"1-D", fixtures("bad_shape_topk_idx.npy"), 2, `shape [48]: want [tokens, top_k] or [layers, tokens, top_k]`},
		{"no routing", fixtures("layers.3.topk_weights.npy"), 2, "no routing found"},
		{"top_k differs", append(fixtures("topk_idx.npy"), write("k2.csv", "layer,topk_idx_0,topk_idx_1\n5,1,2\n")), 2, "topk_idx.npy: field \"topk_idx\": top_k 4 differs from 2 in "},
		{"same layer twice", fixtures("routing.npz", "routing.safetensors"), 2, "iter 0 layer 3 is also given by"},
		{"unknown type", []string{write("x.pt", "")}, 2, `unknown file type ".pt"`},
		{"csv expert", []string{write("a.csv", "layer,topk_idx_0\n3,1\n3,16\n")}, 2, `a.csv:3: field "topk_idx_0": expert 16 out of range [0,16)`},
		{"csv not int", []string{write("b.csv", "layer,topk_idx_0\n3,x\n")}, 2, `b.csv:2: field "topk_idx_0": "x" is not an integer`},
		{"csv column", []string{write("c.csv", "layer,expert\n3,1\n")}, 2, `c.csv:1: field "expert": unknown column`},
		{"csv fields", []string{write("d.csv", "layer,topk_idx_0\n3,1,2\n")}, 2, `d.csv:2:`},
		{"csv dup", []string{write("e.csv", "topk_idx_0,topk_idx_1\n1,1\n")}, 2, `e.csv:2: field "topk_idx_1": expert 1 selected twice`},
		{"csv weight", []string{write("f.csv", "topk_idx_0,topk_weights_0\n1,NaN\n")}, 2, `f.csv:2: field "topk_weights_0": weight NaN is not finite`},
		{"csv rank", []string{write("g.csv", "rank,topk_idx_0\n2,1\n")}, 2, `rank 2 out of range [0,2)`},
		{"csv empty", []string{write("h.csv", "")}, 2, "empty CSV"},
		{"missing file", []string{filepath.Join(dir, "nope.npy")}, 2, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.files, opts(tc.ep))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			var te *traces.Error
			if tc.name != "missing file" && !errors.As(err, &te) {
				t.Errorf("error %T is not a *traces.Error", err)
			}
		})
	}
}

// TestLoadEPLB checks that an EPLB import keeps every token's logical
// experts and records the placement.
func TestLoadEPLB(t *testing.T) {
	plain, err := Load(fixtures("routing.safetensors"), opts(4))
	require := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	require(err)
	o := opts(4)
	o.EPLB, o.RedundantExperts = true, 4
	bal, err := Load(fixtures("routing.safetensors"), o)
	require(err)
	h := bal.Header()
	if h.Parallel.Placement != traces.PlacementExplicit || h.Parallel.RedundantExperts != 4 || bal.Slots() != 20 {
		t.Fatalf("parallel %+v, slots %d", h.Parallel, bal.Slots())
	}
	if len(bal.Placements()) != 2 {
		t.Fatalf("%d placement records, want 2", len(bal.Placements()))
	}
	for _, p := range bal.Placements() {
		for rank := range 4 {
			a, b := plain.Route(0, p.Layer, rank), bal.Route(0, p.Layer, rank)
			for i, row := range b.TopK {
				for j, s := range row {
					want := a.TopK[i][j]
					if (s < 0) != (want < 0) || (s >= 0 && int32(p.LogicalExpert[s]) != want) {
						t.Fatalf("layer %d rank %d token %d: slot %d holds %d, token chose %d", p.Layer, rank, i, s, p.LogicalExpert[max(s, 0)], want)
					}
				}
			}
		}
	}
	o.RedundantExperts = 3 // 19 slots over 4 ranks
	if _, err := Load(fixtures("routing.safetensors"), o); err == nil || !strings.Contains(err.Error(), "divide evenly") {
		t.Errorf("19 slots over 4 ranks: %v", err)
	}
}

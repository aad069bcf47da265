package traces

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hdrLine is a small valid header: 8 experts, top-2, EP4 over 2 nodes,
// MoE layers 0..1, at most 4 tokens per rank.
const hdrLine = `{"kind":"header","format":"moe-trace","version":1,` +
	`"model":{"name":"tiny","hidden":256,"num_experts":8,"top_k":2,"moe_layers":[0,1],"shared_experts":0,"n_group":1,"topk_group":1},` +
	`"parallel":{"ep_ranks":4,"ranks_per_node":2,"placement":"contiguous","redundant_experts":0},` +
	`"dtype":{"dispatch":"fp8_e4m3","scale_block":128,"scale_dtype":"f32","combine":"bf16"},` +
	`"phase":"decode","max_tokens_per_rank":4,"source":{"tool":"test","seed":7}}`

const tinyTrace = hdrLine + "\n" +
	`{"kind":"placement","layer":1,"expert_to_rank":[3,3,2,2,1,1,0,0]}` + "\n" +
	`{"kind":"route","iter":0,"layer":0,"rank":0,"tokens":3,"topk":[[0,1],[2,7],[-1,5]],"weights":[[0.5,0.5],[0.75,0.25],[0,1]]}` + "\n" +
	"\n" +
	`{"kind":"route","iter":0,"layer":0,"rank":3,"tokens":1,"topk":[[6,4]]}` + "\n" +
	`{"kind":"counts","iter":0,"layer":1,"rank":1,"tokens":2,"expert_tokens":[1,0,0,0,0,0,2,1],"rank_tokens":[2,0,0,1],"node_tokens":[2,1]}` + "\n" +
	`{"kind":"measure","iter":0,"layer":0,"rank":-1,"op":"dispatch","lib":"deepep-ll","backend":"gin-gdaki","us":160.8}` + "\n"

func TestReadTiny(t *testing.T) {
	tr, err := Load(strings.NewReader(tinyTrace), "tiny.jsonl")
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, tr.Layers())
	assert.Equal(t, []int{0}, tr.Iterations())
	assert.Equal(t, 2, tr.Nodes())
	assert.Equal(t, []int{0, 0, 1, 1, 2, 2, 3, 3}, tr.Placement(0))
	assert.Equal(t, []int{3, 3, 2, 2, 1, 1, 0, 0}, tr.Placement(1))
	require.NotNil(t, tr.Route(0, 0, 3))
	assert.Nil(t, tr.Route(0, 0, 1))
	sr := tr.StepRoutes(0, 0)
	require.Len(t, sr, 4)
	assert.Same(t, tr.Route(0, 0, 3), sr[3])
	assert.Nil(t, sr[1])
	assert.Equal(t, []int32{-1, 5}, sr[0].TopK[2])
	assert.NotNil(t, tr.CountsFor(0, 1, 1))
	require.Len(t, tr.Measures(), 1)
	assert.InDelta(t, 160.8, tr.Measures()[0].US, 0)

	// Layer 0 from routes: rank 0 tokens {0,1}->r0, {2,7}->r1,r3, {-1,5}->r2.
	m, err := tr.Step(0, 0)
	require.NoError(t, err)
	assert.True(t, m.Exact)
	assert.Equal(t, []int{3, 0, 0, 1}, m.Tokens)
	assert.Equal(t, []int{1, 0, 0, 0}, m.Masked)
	assert.Equal(t, []int{2, 1, 1, 1}, m.Selections[0])
	assert.Equal(t, []int{1, 1, 1, 1}, m.RankTokens[0])
	assert.Equal(t, []int{2, 2}, m.NodeTokens[0]) // token 1 hits both nodes
	assert.Equal(t, []int{0, 0, 1, 1}, m.Selections[3])
	assert.Equal(t, []int{0, 1}, m.NodeTokens[3])

	// Layer 1 from counts with the explicit placement.
	m, err = tr.Step(0, 1)
	require.NoError(t, err)
	assert.False(t, m.Exact)
	assert.Equal(t, []int{3, 0, 0, 1}, m.Selections[1]) // experts 6,7 -> rank 0; 0 -> rank 3
	assert.Equal(t, []int{2, 0, 0, 1}, m.RankTokens[1])
	assert.Equal(t, 0, m.Masked[1]) // 2 tokens × 2 - 4 valid
	_, err = tr.Step(1, 0)
	assert.Error(t, err)
}

func TestRoundTrip(t *testing.T) {
	tr, err := Load(strings.NewReader(tinyTrace), "tiny.jsonl")
	require.NoError(t, err)
	for _, gz := range []bool{false, true} {
		var a bytes.Buffer
		require.NoError(t, tr.Write(&a, gz))
		tr2, err := Load(bytes.NewReader(a.Bytes()), "a")
		require.NoError(t, err)
		var b bytes.Buffer
		require.NoError(t, tr2.Write(&b, gz))
		assert.Equal(t, a.Bytes(), b.Bytes(), "gzip=%v", gz)
		if gz {
			assert.Equal(t, []byte{0x1f, 0x8b}, a.Bytes()[:2])
		} else {
			// Canonical output of canonical input is the input minus blank lines.
			assert.Equal(t, strings.Replace(tinyTrace, "\n\n", "\n", 1), a.String())
		}
		assert.Equal(t, tr.Routes()[0], tr2.Routes()[0])
		assert.Equal(t, tr.Counts(), tr2.Counts())
	}
}

func TestReaderStreaming(t *testing.T) {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write([]byte(tinyTrace))
	require.NoError(t, zw.Close())
	rd := NewReader(&z, "tiny.jsonl.gz")
	var kinds []string
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		kinds = append(kinds, rec.Kind())
	}
	assert.Equal(t, []string{"header", "placement", "route", "route", "counts", "measure"}, kinds)
	assert.Equal(t, 7, rd.Line())
	assert.Equal(t, 4, rd.Header().Parallel.EPRanks)
	_, err := rd.Next()
	assert.Equal(t, io.EOF, err)
}

func TestReaderErrors(t *testing.T) {
	route := func(s string) string { return hdrLine + "\n" + s + "\n" }
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "t.jsonl: missing header: trace is empty"},
		{"no header", `{"kind":"route","iter":0}`, `t.jsonl:1: field "kind": missing header: first record has kind "route"`},
		{"unknown kind", route(`{"kind":"bogus"}`), `t.jsonl:2: field "kind": unknown record kind "bogus"`},
		{"missing kind", route(`{"iter":0}`), `t.jsonl:2: field "kind": missing record kind`},
		{"two headers", hdrLine + "\n" + hdrLine, `t.jsonl:2: field "kind": header must be the first`},
		{"version", strings.Replace(hdrLine, `"version":1`, `"version":2`, 1), `t.jsonl:1: field "version": version 2 unsupported`},
		{"format", strings.Replace(hdrLine, `"moe-trace"`, `"x"`, 1), `t.jsonl:1: field "format"`},
		{"unknown field", route(`{"kind":"route","iter":0,"layer":0,"rank":0,"tokens":0,"topk":[],"extra":1}`), `t.jsonl:2: field "extra": unknown field`},
		{"header unknown field", strings.Replace(hdrLine, `"phase"`, `"phaze"`, 1), `t.jsonl:1: field "phaze": unknown field`},
		{"malformed", route(`{"kind":"route","iter":0,,}`), `t.jsonl:2:26: malformed JSON`},
		{"malformed sniff", route(`{"iter":0,`), `t.jsonl:2:`},
		{"trailing", route(`{"kind":"route","iter":0,"layer":0,"rank":0,"tokens":0,"topk":[]} x`), `t.jsonl:2:67: malformed JSON: data after`},
		{"type", route(`{"kind":"route","iter":"a","layer":0,"rank":0,"tokens":0,"topk":[]}`), `t.jsonl:2:26: field "iter": cannot use JSON string`},
		{"expert range", route(`{"kind":"route","iter":0,"layer":0,"rank":0,"tokens":2,"topk":[[0,1],[3,8]]}`), `t.jsonl:2: field "topk[1][1]": expert 8 out of range [0,8)`},
		{"expert -2", route(`{"kind":"route","iter":0,"layer":0,"rank":0,"tokens":1,"topk":[[-2,1]]}`), `field "topk[0][0]": expert -2 out of range`},
		{"duplicate expert", route(`{"kind":"route","iter":0,"layer":0,"rank":0,"tokens":1,"topk":[[1,1]]}`), `field "topk[0][1]": expert 1 selected twice`},
		{"row length", route(`{"kind":"route","iter":0,"layer":0,"rank":0,"tokens":1,"topk":[[1,2,3]]}`), `field "topk[0]": row has 3 entries, want top_k 2`},
		{"tokens mismatch", route(`{"kind":"route","iter":0,"layer":0,"rank":0,"tokens":2,"topk":[[1,2]]}`), `field "topk": has 1 rows, but tokens is 2`},
		{"too many tokens", route(`{"kind":"route","iter":0,"layer":0,"rank":0,"tokens":5,"topk":[]}`), `field "tokens": tokens 5 exceeds max_tokens_per_rank 4`},
		{"rank range", route(`{"kind":"route","iter":0,"layer":0,"rank":4,"tokens":0,"topk":[]}`), `t.jsonl:2: field "rank": rank 4 out of range [0,4)`},
		{"layer range", route(`{"kind":"route","iter":0,"layer":2,"rank":0,"tokens":0,"topk":[]}`), `field "layer": layer 2 out of MoE layer range [0,1]`},
		{"negative iter", route(`{"kind":"route","iter":-1,"layer":0,"rank":0,"tokens":0,"topk":[]}`), `field "iter": iter -1 is negative`},
		{"weights rows", route(`{"kind":"route","iter":0,"layer":0,"rank":0,"tokens":1,"topk":[[1,2]],"weights":[]}`), `field "weights": has 0 rows`},
		{"weights row", route(`{"kind":"route","iter":0,"layer":0,"rank":0,"tokens":1,"topk":[[1,2]],"weights":[[1]]}`), `field "weights[0]": row has 1 entries`},
		{"duplicate route", route(`{"kind":"route","iter":0,"layer":0,"rank":1,"tokens":0,"topk":[]}` + "\n" + `{"kind":"route","iter":0,"layer":0,"rank":1,"tokens":0,"topk":[]}`), `t.jsonl:3: field "rank": duplicate route record for (iter 0, layer 0, rank 1)`},
		{"duplicate counts", route(`{"kind":"counts","iter":0,"layer":0,"rank":1,"tokens":0,"expert_tokens":[0,0,0,0,0,0,0,0],"rank_tokens":[0,0,0,0],"node_tokens":[0,0]}` + "\n" + `{"kind":"counts","iter":0,"layer":0,"rank":1,"tokens":0,"expert_tokens":[0,0,0,0,0,0,0,0],"rank_tokens":[0,0,0,0],"node_tokens":[0,0]}`), `t.jsonl:3: field "rank": duplicate counts record`},
		{"negative count", route(`{"kind":"counts","iter":0,"layer":0,"rank":1,"tokens":1,"expert_tokens":[0,0,-1,0,0,0,0,0],"rank_tokens":[0,0,0,0],"node_tokens":[0,0]}`), `field "expert_tokens[2]": count -1 is negative`},
		{"counts length", route(`{"kind":"counts","iter":0,"layer":0,"rank":1,"tokens":1,"expert_tokens":[0,0,0,0,0,0,0,0],"rank_tokens":[0,0,0],"node_tokens":[0,0]}`), `field "rank_tokens": has 3 entries, want 4`},
		{"node length", route(`{"kind":"counts","iter":0,"layer":0,"rank":1,"tokens":1,"expert_tokens":[0,0,0,0,0,0,0,0],"rank_tokens":[0,0,0,0],"node_tokens":[0]}`), `field "node_tokens": has 1 entries, want 2`},
		{"count over tokens", route(`{"kind":"counts","iter":0,"layer":0,"rank":1,"tokens":1,"expert_tokens":[0,0,2,0,0,0,0,0],"rank_tokens":[0,0,0,0],"node_tokens":[0,0]}`), `field "expert_tokens[2]": count 2 exceeds tokens 1`},
		{"count sum", route(`{"kind":"counts","iter":0,"layer":0,"rank":1,"tokens":1,"expert_tokens":[1,1,1,0,0,0,0,0],"rank_tokens":[0,0,0,0],"node_tokens":[0,0]}`), `field "expert_tokens": sum 3 exceeds tokens × top_k = 2`},
		{"placement length", route(`{"kind":"placement","layer":0,"expert_to_rank":[0,1]}`), `field "expert_to_rank": has 2 entries, want 8`},
		{"placement rank", route(`{"kind":"placement","layer":0,"expert_to_rank":[0,1,2,3,4,0,0,0]}`), `field "expert_to_rank[4]": rank 4 out of range [0,4)`},
		{"placement dup", route(`{"kind":"placement","layer":0,"expert_to_rank":[0,0,0,0,0,0,0,0]}` + "\n" + `{"kind":"placement","layer":0,"expert_to_rank":[0,0,0,0,0,0,0,0]}`), `t.jsonl:3: field "layer": duplicate placement`},
		{"explicit missing", strings.Replace(hdrLine, `"contiguous"`, `"explicit"`, 1) + "\n" + `{"kind":"route","iter":0,"layer":1,"rank":0,"tokens":0,"topk":[]}`, `t.jsonl: field "parallel.placement": explicit placement, but layer 1 has no placement record`},
		{"contiguous indivisible", strings.Replace(hdrLine, `"ep_ranks":4`, `"ep_ranks":3`, 1), `field "parallel.placement": contiguous placement needs`},
		{"measure rank", route(`{"kind":"measure","iter":0,"layer":0,"rank":9,"op":"x","lib":"","backend":"","us":1}`), `field "rank": rank 9 out of range [-1,4)`},
		{"measure us", route(`{"kind":"measure","iter":0,"layer":0,"rank":0,"op":"x","lib":"","backend":"","us":-1}`), `field "us"`},
		{"dtype", strings.Replace(hdrLine, `"dispatch":"fp8_e4m3"`, `"dispatch":"int4"`, 1), `field "dtype.dispatch"`},
		{"phase", strings.Replace(hdrLine, `"phase":"decode"`, `"phase":"x"`, 1), `field "phase"`},
		{"top_k", strings.Replace(hdrLine, `"top_k":2`, `"top_k":9`, 1), `field "model.top_k": top_k 9 out of range [1,8]`},
		{"bad gzip", "\x1f\x8bxx", `t.jsonl: bad gzip stream`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(strings.NewReader(tc.in), "t.jsonl")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, errors.Is(err, ErrInvalid), "want ErrInvalid, got %v", err)
			var e *Error
			assert.True(t, errors.As(err, &e))
		})
	}
}

func TestWriterValidates(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, false)
	err := w.Write(&Route{})
	assert.ErrorContains(t, err, "missing header")

	tr, err := Load(strings.NewReader(tinyTrace), "tiny")
	require.NoError(t, err)
	h := tr.Header()
	w = NewWriter(&buf, false)
	require.NoError(t, w.Write(&h))
	err = w.Write(&Route{Iter: 0, Layer: 0, Rank: 0, Tokens: 1, TopK: [][]int32{{0, 99}}})
	assert.ErrorContains(t, err, `field "topk[0][1]": expert 99 out of range [0,8)`)
	require.NoError(t, w.Close())

	// Add rejects the same way.
	err = tr.Add(&Route{Iter: 0, Layer: 0, Rank: 0, Tokens: 0})
	assert.ErrorContains(t, err, "duplicate route record")
	require.NoError(t, tr.Add(&Route{Iter: 0, Layer: 0, Rank: 1, Tokens: 1, TopK: [][]int32{{3, 4}}}))
	assert.Equal(t, 1, tr.Routes()[1].Rank, "Add keeps routes sorted")
	_, err = NewTrace(Header{})
	assert.ErrorContains(t, err, `field "format"`)
}

func FuzzReader(f *testing.F) {
	f.Add([]byte(tinyTrace))
	f.Add([]byte(hdrLine + "\n" + `{"kind":"route","iter":0,"layer":0,"rank":0,"tokens":1,"topk":[[1,1e99]]}`))
	f.Add([]byte(hdrLine + "\n" + `{"kind":"counts","iter":0,"layer":1,"rank":0,"tokens":1}`))
	f.Add([]byte("\x1f\x8b\x08\x00"))
	f.Add([]byte(`{"kind":"header"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := Load(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		// Anything accepted must round-trip and support every helper.
		var a bytes.Buffer
		if err := tr.Write(&a, false); err != nil {
			t.Fatalf("write accepted trace: %v", err)
		}
		tr2, err := Load(bytes.NewReader(a.Bytes()), "rt")
		if err != nil {
			t.Fatalf("re-read canonical output: %v\n%s", err, a.Bytes())
		}
		var b bytes.Buffer
		if err := tr2.Write(&b, false); err != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("canonical output not stable: %v", err)
		}
		s := Inspect(tr)
		for _, st := range s.Steps {
			if st.Selections+st.Masked != st.Tokens*int64(tr.Header().Model.TopK) {
				t.Fatalf("step %d/%d: selections %d + masked %d != tokens × k", st.Iter, st.Layer, st.Selections, st.Masked)
			}
		}
		for _, l := range tr.Layers() {
			if len(tr.Placement(l)) != tr.Slots() {
				t.Fatalf("placement of layer %d has wrong length", l)
			}
		}
	})
}

// TestReaderHeaderDefaults checks the defaults of a minimal hand-written
// header: contiguous placement, fp8 dispatch, bf16 combine; a set value is
// kept, and a wrong one is still an error.
func TestReaderHeaderDefaults(t *testing.T) {
	minimal := `{"kind":"header","format":"moe-trace","version":1,"model":{"name":"m","hidden":4096,"num_experts":8,"top_k":2},"parallel":{"ep_ranks":2,"ranks_per_node":2}}` + "\n" +
		`{"kind":"route","iter":0,"layer":0,"rank":0,"tokens":1,"topk":[[0,5]]}` + "\n"
	tr, err := Load(strings.NewReader(minimal), "min.jsonl")
	require.NoError(t, err)
	h := tr.Header()
	assert.Equal(t, PlacementContiguous, h.Parallel.Placement)
	assert.Equal(t, DtypeFor(FP8), h.Dtype)
	set := strings.Replace(minimal, `"ranks_per_node":2}`, `"ranks_per_node":2,"placement":"explicit"},"dtype":{"dispatch":"bf16","combine":"bf16"}`, 1)
	_, err = Load(strings.NewReader(set), "set.jsonl")
	assert.ErrorContains(t, err, "explicit placement, but layer 0 has no placement record")
	bad := strings.Replace(minimal, `"ranks_per_node":2}`, `"ranks_per_node":2,"placement":"block"}`, 1)
	_, err = Load(strings.NewReader(bad), "bad.jsonl")
	assert.ErrorContains(t, err, `field "parallel.placement": placement "block"`)
}

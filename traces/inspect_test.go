package traces

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInspectTiny(t *testing.T) {
	tr, err := Load(strings.NewReader(tinyTrace), "tiny.jsonl")
	require.NoError(t, err)
	s := Inspect(tr)
	require.Len(t, s.Steps, 2)
	assert.Equal(t, 2048, s.DeepEPHidden) // hidden 256 pads to the smallest DeepEP size
	assert.Equal(t, LLDispatchBytes(2048, FP8), s.LLDispatchMsg)

	st := s.Steps[0] // layer 0: rank 0 (3 tokens, 5 valid) and rank 3 (1 token, 2 valid)
	assert.Equal(t, int64(4), st.Tokens)
	assert.Equal(t, int64(7), st.Selections)
	assert.Equal(t, int64(1), st.Masked)
	// Received per rank: r0 2, r1 1, r2 1+1, r3 1+1.
	assert.Equal(t, Spread{Min: 1, Mean: 1.75, Max: 2, Imbalance: 2 / 1.75}, st.RankLoad)
	// Node pairs: rank 0 → 2+2, rank 3 → 1; rank pairs: 4 + 2.
	assert.InDelta(t, 5.0/4, st.NodesPerToken, 1e-12)
	assert.InDelta(t, 6.0/4, st.RanksPerToken, 1e-12)
	// Inter-node: rank 0 (node 0) sends 1 to r2, 1 to r3; rank 3 (node 1) sends 0 remote.
	assert.InDelta(t, 2.0/7, st.InterNode, 1e-12)
	msg := int64(LLDispatchBytes(2048, FP8))
	assert.Equal(t, RankBytes{Mean: float64(5*msg+2*msg) / 4, Max: 5 * msg}, st.LLDispatch)
	assert.Equal(t, RankBytes{Mean: float64(5*2*2048) / 4, Max: 4 * 2 * 2048}, st.HTCombine)
	assert.True(t, st.Exact)
	assert.False(t, s.Steps[1].Exact)
	// Receive side: selections 2,1,2,2; distinct tokens 1,1,2,2 (rank 0's
	// token [0,1] counts once on rank 0).
	assert.Equal(t, Tail{P50: 2, P90: 2, P99: 2, Max: 2}, st.RankLoadTail)
	assert.Equal(t, Tail{P50: 1, P90: 2, P99: 2, Max: 2}, st.RecvTokensTail)
	require.Len(t, st.Recv, 4)
	assert.Equal(t, RankRecv{Rank: 2, Selections: 2, Tokens: 2, LLDispatchBytes: 2 * msg, LLCombineBytes: 2 * 2 * 2048}, st.Recv[2])
	assert.Equal(t, int64(1), st.Recv[0].Tokens)
	require.Len(t, st.Experts, 8)
	assert.Equal(t, ExpertLoad{Slot: 3, Rank: 1, Logical: 3, Selections: 0}, st.Experts[3])
	assert.Equal(t, ExpertLoad{Slot: 7, Rank: 3, Logical: 7, Selections: 1}, st.Experts[7])
	// Layer 1 comes from a counts record under its placement record.
	assert.Equal(t, ExpertLoad{Slot: 6, Rank: 0, Logical: 6, Selections: 2}, s.Steps[1].Experts[6])

	var buf bytes.Buffer
	require.NoError(t, s.WriteTable(&buf))
	out := buf.String()
	assert.Contains(t, out, "model tiny")
	assert.Contains(t, out, "imbalance")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 5)
	// Aligned: every table row has the same width.
	assert.Equal(t, len(lines[2]), len(lines[3]))
	assert.Equal(t, len(lines[3]), len(lines[4]))

	j, err := json.Marshal(s)
	require.NoError(t, err)
	assert.Contains(t, string(j), `"nodes_per_token":1.25`)
	var back Stats
	require.NoError(t, json.Unmarshal(j, &back))
	assert.Equal(t, s, back)
}

func TestInspectExamples(t *testing.T) {
	// The LL calibration example: 8 ranks × 128 tokens × 8 = 1,024 selections
	// per rank of 7,408 B = 7.59 MB (spec 1.9).
	tr, err := OpenExample("deepseek-v3-ll-ep8-288e.jsonl.gz")
	require.NoError(t, err)
	st := stats(t, tr)
	assert.Equal(t, 7585792.0, st.LLDispatch.Mean)
	assert.Equal(t, int64(7585792), st.LLDispatch.Max)
	assert.Equal(t, 288, tr.Slots())

	tr, err = OpenExample("deepseek-v3-ht-ep16.jsonl.gz")
	require.NoError(t, err)
	st = stats(t, tr)
	assert.Equal(t, int64(16*4096), st.Tokens)
	want := ExpectedGroups(256, 8, 2)
	assert.InDelta(t, want, st.NodesPerToken, 0.01)
}

func TestTailOf(t *testing.T) {
	seq := func(n int) []int64 {
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(n - i) // descending: tailOf must sort
		}
		return v
	}
	for _, tc := range []struct {
		in   []int64
		want Tail
	}{
		{nil, Tail{}},
		{[]int64{7}, Tail{7, 7, 7, 7}},
		{seq(10), Tail{P50: 5, P90: 9, P99: 10, Max: 10}},
		{seq(100), Tail{P50: 50, P90: 90, P99: 99, Max: 100}},
		{seq(256), Tail{P50: 128, P90: 231, P99: 254, Max: 256}},
		{[]int64{1, 1, 1, 100}, Tail{P50: 1, P90: 100, P99: 100, Max: 100}},
	} {
		assert.Equal(t, tc.want, tailOf(tc.in), "%v", tc.in)
	}
}

func TestInspectWriters(t *testing.T) {
	tr, err := OpenExample("deepseek-v3-ll-ep16.jsonl.gz")
	require.NoError(t, err)
	s := Inspect(tr)
	var buf bytes.Buffer
	require.NoError(t, s.WriteRanks(&buf))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 1+16)
	sum := int64(0)
	for _, r := range s.Steps[0].Recv {
		sum += r.Selections
	}
	assert.Equal(t, s.Steps[0].Selections, sum)
	buf.Reset()
	require.NoError(t, s.WriteTopExperts(&buf, 3))
	lines = strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 1+3)
	top := s.Steps[0].Experts
	mx := int64(0)
	for _, e := range top {
		mx = max(mx, e.Selections)
	}
	assert.Contains(t, lines[1], fmt.Sprintf(" %d ", mx))
}

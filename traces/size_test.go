package traces

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSizesSpecTable reproduces every cell of spec 1.2's table from the
// formulas. The table gives one value per row although rows list models
// with different top-k; the HT and V2 columns (which depend on k) match
// the model whose k is used below:
//   - 6144 row: k = 2 (Mixtral-8x22B). Qwen3-Coder-480B (k = 8) would give
//     HT FP8 6,416, HT BF16 12,368, HT combine 12,336, V2 6,464 / 12,416.
//   - 5120 row: k = 8 (GLM-4.5). DeepSeek-V2 (k = 6) would give HT FP8
//     5,344, HT BF16 10,304, HT combine 10,272, V2 5,376 / 10,336.
//   - 4096 row: k = 8 (Qwen3-235B, as annotated). Mixtral-8x7B (k = 2)
//     would give HT FP8 4,256, HT BF16 8,224, HT combine 8,208, V2 4,256 / 8,224.
//
// No cell disagrees with its formula once k is chosen this way.
func TestSizesSpecTable(t *testing.T) {
	tests := []struct {
		name                  string
		hidden, k             int
		llFP8, llBF16, llComb int
		logfmt                int
		htFP8, htBF16, htComb int
		v2FP8, v2BF16         int
	}{
		{"DeepSeek-V3", 7168, 8, 7408, 14352, 14336, 9184, 7472, 14416, 14384, 7520, 14464},
		{"Mixtral-8x22B", 6144, 2, 6352, 12304, 12288, 7872, 6368, 12320, 12304, 6368, 12320},
		{"GLM-4.5", 5120, 8, 5296, 10256, 10240, 6560, 5360, 10320, 10288, 5408, 10368},
		{"Qwen3-235B", 4096, 8, 4240, 8208, 8192, 5248, 4304, 8272, 8240, 4352, 8320},
		{"gpt-oss-120b", 3072, 4, 3184, 6160, 6144, 3936, 3216, 6192, 6176, 3232, 6208},
		{"Qwen3-30B-A3B", 2048, 8, 2128, 4112, 4096, 2624, 2192, 4176, 4144, 2240, 4224},
		// Rows the table does not print (see comment above).
		{"Qwen3-Coder-480B", 6144, 8, 6352, 12304, 12288, 7872, 6416, 12368, 12336, 6464, 12416},
		{"DeepSeek-V2", 5120, 6, 5296, 10256, 10240, 6560, 5344, 10304, 10272, 5376, 10336},
		{"Mixtral-8x7B", 4096, 2, 4240, 8208, 8192, 5248, 4256, 8224, 8208, 4256, 8224},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, k := tc.hidden, tc.k
			assert.Equal(t, tc.llFP8, LLDispatchBytes(h, FP8), "LL dispatch FP8")
			assert.Equal(t, tc.llBF16, LLDispatchBytes(h, BF16), "LL dispatch BF16")
			assert.Equal(t, tc.llComb, LLCombineBytes(h), "LL combine")
			assert.Equal(t, tc.logfmt, LLCombineLogFMTBytes(h), "LL combine LogFMT")
			assert.Equal(t, tc.htFP8, HTDispatchBytes(h, k, FP8), "HT dispatch FP8")
			assert.Equal(t, tc.htBF16, HTDispatchBytes(h, k, BF16), "HT dispatch BF16")
			assert.Equal(t, tc.htComb, HTCombineBytes(h, k), "HT combine")
			assert.Equal(t, tc.v2FP8, V2TokenBytes(h, k, FP8), "V2 FP8")
			assert.Equal(t, tc.v2BF16, V2TokenBytes(h, k, BF16), "V2 BF16")
		})
	}
}

func TestBandwidthAccounting(t *testing.T) {
	// Spec 1.9 sanity check: 1,024 selections × 7,408 B = 7.59 MB dispatch,
	// × 14,336 B = 14.68 MB combine; 7.59 MB / 163 µs ≈ 46.5 GB/s.
	d := LLBandwidthBytes(1024, 7168, FP8)
	assert.Equal(t, int64(7585792), d)
	assert.Equal(t, int64(14680064), LLCombineBandwidthBytes(1024, 7168))
	assert.InDelta(t, 46.5, float64(d)/163e-6/1e9, 0.1)
	// HT: 2H × (1 + 4/128)/2 per (token, node) for FP8, 2H for BF16.
	assert.Equal(t, int64(10*7392), HTBandwidthBytes(10, 7168, FP8))
	assert.Equal(t, int64(10*2*7168), HTBandwidthBytes(10, 7168, BF16))
	assert.InDelta(t, 2*7168*(1+4.0/128)/2, float64(HTBandwidthBytes(1, 7168, FP8)), 1e-9)
}

func TestPrecision(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Precision
	}{{"fp8_e4m3", FP8}, {"fp8", FP8}, {"bf16", BF16}} {
		p, err := ParsePrecision(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, p)
	}
	_, err := ParsePrecision("fp16")
	assert.Error(t, err)
	assert.Equal(t, "fp8_e4m3", FP8.String())
	assert.Equal(t, "Precision(7)", Precision(7).String())
}

func TestModels(t *testing.T) {
	ms := Models()
	require.Len(t, ms, 11)
	for i := 1; i < len(ms); i++ {
		assert.Less(t, normName(ms[i-1].Name), normName(ms[i].Name), "Models() must be sorted")
	}
	for _, m := range ms {
		require.NoError(t, m.Validate(), m.Name)
		got, err := ModelByName(m.Name)
		require.NoError(t, err)
		assert.Equal(t, m.Name, got.Name)
	}
	for _, tc := range []struct {
		alias, name          string
		hidden, deepep, e, k int
		first, last          int
	}{
		{"deepseek-v3", "DeepSeek-V3", 7168, 7168, 256, 8, 3, 60},
		{"DeepSeek_R1", "DeepSeek-V3", 7168, 7168, 256, 8, 3, 60},
		{"kimi-k2", "Kimi-K2", 7168, 7168, 384, 8, 1, 60},
		{"QWEN3-235B-A22B", "Qwen3-235B-A22B", 4096, 4096, 128, 8, 0, 93},
		{"mixtral-8x22b", "Mixtral-8x22B", 6144, 6144, 8, 2, 0, 55},
		{"gpt-oss-120b", "gpt-oss-120b", 2880, 3072, 128, 4, 0, 35},
		{"glm-4.5", "GLM-4.5", 5120, 5120, 160, 8, 3, 91},
	} {
		m, err := ModelByName(tc.alias)
		require.NoError(t, err, tc.alias)
		assert.Equal(t, tc.name, m.Name)
		assert.Equal(t, tc.hidden, m.Hidden)
		assert.Equal(t, tc.deepep, m.DeepEPHidden())
		assert.Equal(t, tc.e, m.NumExperts)
		assert.Equal(t, tc.k, m.TopK)
		assert.Equal(t, tc.first, m.FirstMoELayer)
		assert.Equal(t, tc.last, m.LastMoELayer())
	}
	_, err := ModelByName("llama")
	assert.ErrorContains(t, err, "unknown model")
	// Mutating a returned model must not affect the table.
	ms[0].Aliases[0] = "zzz"
	_, err = ModelByName(Models()[0].Aliases[0])
	assert.NoError(t, err)
	assert.True(t, mustModel(t, "deepseek-v3").GroupLimited())
	assert.False(t, mustModel(t, "kimi-k2").GroupLimited())
	assert.Equal(t, 9088, Model{Hidden: 9000}.DeepEPHidden())
}

func mustModel(t testing.TB, name string) Model {
	t.Helper()
	m, err := ModelByName(name)
	require.NoError(t, err)
	return m
}

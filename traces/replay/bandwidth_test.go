package replay

import (
	"testing"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/workload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefinitionBytes(t *testing.T) {
	// EP 4 on two nodes of two: rank 0 sends 5 (token, node) pairs and
	// 5 (token, rank) pairs; rank 3 one token to its own node and rank.
	two := &workload.Step{EP: 4, TopK: 2,
		NodeTokens: [][]int{{3, 2}, {0, 0}, {0, 0}, {0, 1}},
		RankTokens: [][]int{{1, 2, 1, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 1}}}
	one := &workload.Step{EP: 2, TopK: 2, NodeTokens: [][]int{{2}, {1}}, RankTokens: [][]int{{1, 2}, {0, 1}}}
	// H 128: FP8 payload 128 + 4 scale bytes; BF16 256; V2 adds 12 bytes
	// per top-k slot in dispatch, 4 in combine.
	const H = 128
	for _, c := range []struct {
		name       string
		mode       string
		st         *workload.Step
		prec       traces.Precision
		disp, comb map[string][]int64
	}{
		{"ht fp8", ModeHT, two, traces.FP8,
			map[string][]int64{BWRDMA: {660, 0, 0, 132}, BWNVLink: {132, 264, 132, 264}},
			map[string][]int64{BWRDMA: {1280, 0, 0, 256}, BWNVLink: {256, 512, 256, 512}}},
		{"ht bf16", ModeHT, two, traces.BF16,
			map[string][]int64{BWRDMA: {1280, 0, 0, 256}, BWNVLink: {256, 512, 256, 512}},
			map[string][]int64{BWRDMA: {1280, 0, 0, 256}, BWNVLink: {256, 512, 256, 512}}},
		{"v2 two nodes", ModeV2Hybrid, two, traces.FP8,
			map[string][]int64{BWScaleout: {780, 0, 0, 156}, BWScaleup: {156, 312, 156, 312}},
			map[string][]int64{BWScaleout: {1320, 0, 0, 264}, BWScaleup: {264, 528, 264, 528}}},
		{"v2 one node: no scale-out", ModeV2Direct, one, traces.BF16,
			map[string][]int64{BWScaleout: {0, 0}, BWScaleup: {280, 840}},
			map[string][]int64{BWScaleout: {0, 0}, BWScaleup: {264, 792}}},
		{"ll prints one", ModeLL, two, traces.FP8, nil, nil},
		{"ncclep prints one", ModeNCCLEP, two, traces.BF16, nil, nil},
	} {
		d, cb := definitionBytes(c.mode, c.st, H, c.prec)
		assert.Equal(t, c.disp, d, c.name)
		assert.Equal(t, c.comb, cb, c.name)
	}
}

func TestPerRankGBps(t *testing.T) {
	for _, c := range []struct {
		bytes []int64
		t     sim.Duration
		want  float64
	}{
		{[]int64{1000, 3000}, sim.Microsecond, 2},
		{[]int64{1000}, 2 * sim.Microsecond, 0.5},
		{[]int64{1}, 3 * sim.Microsecond, 0}, // 0.00033 GB/s rounds to 0
		{[]int64{7000, 0, 0, 0}, sim.Microsecond, 1.75},
		{[]int64{1000}, 0, 0},
		{nil, sim.Microsecond, 0},
	} {
		assert.Equal(t, c.want, perRankGBps(c.bytes, c.t), "%v over %v", c.bytes, c.t)
	}
}

// dispatch_GBps is the definition the library's README tables use: HT's
// RDMA, V2's scale-out on several nodes and scale-up on one.
func TestBandwidthsMatchTheHeadline(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	for _, c := range []struct {
		mode string
		ep   int
		key  string
	}{
		{ModeHT, 16, BWRDMA},
		{ModeV2Hybrid, 16, BWScaleout},
		{ModeV2Direct, 16, BWScaleout},
		{ModeV2Direct, 8, BWScaleup},
	} {
		rep, err := Run(tinyTrace(t, c.ep, 16), spec, Options{Mode: c.mode, Backend: BackendGDAKI, Seed: 1, Backends: backends})
		require.NoError(t, err)
		require.NotNil(t, rep.Bandwidths, c.mode)
		assert.Equal(t, rep.DispatchGBps, rep.Bandwidths.Dispatch[c.key], "%s EP%d", c.mode, c.ep)
		assert.Equal(t, rep.CombineGBps, rep.Bandwidths.Combine[c.key], "%s EP%d", c.mode, c.ep)
		assert.Len(t, rep.Bandwidths.Dispatch, 2)
	}
	rep, err := Run(tinyTrace(t, 8, 4), spec, Options{Mode: ModeLL, Backend: BackendGDAKI, Seed: 1, Backends: backends})
	require.NoError(t, err)
	assert.Nil(t, rep.Bandwidths, "DeepEP LL prints one bandwidth")
}

package replay

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/replay/replaytest"
	"github.com/ginsim/ginsim/traces/timeline"
)

// workersRun replays one step of tr on a World of one partition per node
// with workers goroutines and returns its JSON report and its timeline
// (with per-warp and per-QP detail).
func workersRun(t *testing.T, tr *traces.Trace, opt Options, workers int) (js, tl []byte) {
	t.Helper()
	spec, ok := machine.Preset("h100-ib")
	require.True(t, ok)
	var jb, tb bytes.Buffer
	tw := timeline.NewWriter(&tb)
	opt.Seed, opt.Layers, opt.TraceName, opt.Workers = 1, 1, "workers", workers
	opt.Timeline, opt.TimelineDetail = tw, true
	opt.Backends = replaytest.Backends
	rep, err := Run(tr, spec, opt)
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	require.NoError(t, rep.WriteJSON(&jb))
	return jb.Bytes(), tb.Bytes()
}

// smallTrace is DeepSeek-V3's shape with experts experts at EP ep on 8-GPU
// nodes, tokens per rank, seed 1: few contexts per rank, so that the test
// runs in seconds under -race.
func smallTrace(t *testing.T, ep, tokens, experts int) *traces.Trace {
	m, err := traces.ModelByName("deepseek-v3")
	require.NoError(t, err)
	tr, err := traces.Generate(traces.GenConfig{Model: m, EP: ep, RanksPerNode: 8, TokensPerRank: tokens, Experts: experts, Seed: 1})
	require.NoError(t, err)
	return tr
}

// TestWorkersDoNotChangeTheRun replays every library on a World of four
// nodes (one partition each) on the sequential kernel and with 1 and 3
// workers: the report and the timeline (with its per-warp and per-QP
// detail, and with utilisation tracks for the proxy) must be
// byte-identical. Under -race it also checks that no partition touches
// another's state.
func TestWorkersDoNotChangeTheRun(t *testing.T) {
	defer func(n uint64) { serialBelow = n }(serialBelow)
	serialBelow = 0 // every window on the pool
	ll := smallTrace(t, 32, 8, 32)
	cases := []struct {
		name string
		tr   *traces.Trace
		opt  Options
	}{
		{"ll", ll, Options{Mode: ModeLL, Backend: BackendGDAKI}},
		{"ll-proxy-util", ll, Options{Mode: ModeLL, Backend: BackendProxy, UtilEvery: sim.Microsecond}},
		{"ll-check", ll, Options{Mode: ModeLL, Backend: BackendGDAKI, Check: true}},
		{"ncclep", ll, Options{Mode: ModeNCCLEP, Backend: BackendGDAKI}},
		{"v2-hybrid", ll, Options{Mode: ModeV2, Backend: BackendGDAKI, SMs: 4}},
		{"v2-direct", ll, Options{Mode: ModeV2Direct, Backend: BackendGDAKI, SMs: 4}},
		{"nccl", ll, Options{Mode: ModeLL, Backend: BackendNCCL}},
		{"ht", replaytest.HTTrace(t, 32, 32), Options{Mode: ModeHT, Backend: BackendGDAKI}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seq := c.opt
			seq.Sequential = true
			js, tl := workersRun(t, c.tr, seq, 1)
			for _, workers := range []int{1, 3} {
				js2, tl2 := workersRun(t, c.tr, c.opt, workers)
				assert.Equal(t, string(js), string(js2), "report, %d workers", workers)
				assert.True(t, bytes.Equal(tl, tl2), "timeline, %d workers", workers)
			}
		})
	}
}

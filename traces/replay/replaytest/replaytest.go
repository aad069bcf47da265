package replaytest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/gdaki"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/traces"
)

// Backends builds a GDAKI and a Proxy backend with their default
// configurations (replay.Options.Backends).
func Backends() map[gin.Type]gin.Backend {
	g, err := gdaki.New(gdaki.DefaultConfig())
	if err != nil {
		panic(err)
	}
	p, err := proxy.New(proxy.DefaultConfig())
	if err != nil {
		panic(err)
	}
	return map[gin.Type]gin.Backend{gin.TypeGDAKI: g, gin.TypeProxy: p}
}

// TinyTrace is DeepSeek-V3 with tokens tokens per rank at EP ep on 8-GPU
// nodes, seed 1.
func TinyTrace(t testing.TB, ep, tokens int) *traces.Trace {
	m, err := traces.ModelByName("deepseek-v3")
	require.NoError(t, err)
	tr, err := traces.Generate(traces.GenConfig{Model: m, EP: ep, RanksPerNode: 8, TokensPerRank: tokens, Seed: 1})
	require.NoError(t, err)
	return tr
}

// HTTrace is the DeepEP internode test's routing: 256 experts, groups =
// nodes, top groups = min(nodes, 4).
func HTTrace(t testing.TB, ep, tokens int) *traces.Trace {
	m, err := traces.ModelByName("deepseek-v3")
	require.NoError(t, err)
	tr, err := traces.Generate(traces.GenConfig{Model: m, EP: ep, RanksPerNode: 8, TokensPerRank: tokens,
		Experts: 256, Routing: "grouped", Seed: 1, Phase: "prefill"})
	require.NoError(t, err)
	return tr
}

// A2AMatrix is the Megatron all-to-all-v matrix of the first step of tr,
// from the routing alone: sel[s][d] = selections of rank s to experts homed
// on rank d.
func A2AMatrix(t testing.TB, tr *traces.Trace) [][]int64 {
	layer := tr.Layers()[0]
	home := tr.Placement(layer)
	ep := tr.EP()
	sel := make([][]int64, ep)
	routes := tr.StepRoutes(tr.Iterations()[0], layer)
	require.Len(t, routes, ep)
	for s, rt := range routes {
		sel[s] = make([]int64, ep)
		for _, tk := range rt.TopK {
			for _, x := range tk {
				if x >= 0 {
					sel[s][home[x]]++
				}
			}
		}
	}
	return sel
}

// A2ASizes returns the NCCL baseline's bytes per dispatched token (the LL
// message without its header), per combined token, and of one rank's
// counts block (8 B per expert).
func A2ASizes(t testing.TB, tr *traces.Trace) (tok, comb, blk int64) {
	h := tr.Header()
	prec, err := h.DispatchPrecision()
	require.NoError(t, err)
	return int64(traces.LLDispatchBytes(7168, prec) - traces.LLHeaderBytes), int64(traces.LLCombineBytes(7168)),
		int64(tr.Slots() * 8)
}

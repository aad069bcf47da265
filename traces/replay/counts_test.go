package replay

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/traces"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// NCCL's all-to-all-v (backend nccl) replays a trace of counts records
// exactly as the routes they count: same report, same events. The GIN
// kernels refuse counts before running anything.
func TestNCCLReadsCounts(t *testing.T) {
	m, err := traces.ModelByName("deepseek-v3")
	require.NoError(t, err)
	spec, _ := machine.Preset("h100-ib")
	gen := func(counts bool) *traces.Trace {
		tr, err := traces.Generate(traces.GenConfig{Model: m, EP: 16, RanksPerNode: 8, TokensPerRank: 16, Layers: 2,
			Routing: "grouped", Seed: 5, Counts: counts})
		require.NoError(t, err)
		return tr
	}
	routes, counts := gen(false), gen(true)
	require.Empty(t, counts.Routes())
	require.NotEmpty(t, counts.Counts())
	replayJSON := func(tr *traces.Trace) string {
		rep, err := Run(tr, spec, Options{Mode: ModeLL, Backend: BackendNCCL, Seed: 1, Backends: backends, TraceName: "t"})
		require.NoError(t, err)
		require.Len(t, rep.Layers, 2)
		js, err := json.Marshal(rep)
		require.NoError(t, err)
		return string(js)
	}
	assert.Equal(t, replayJSON(routes), replayJSON(counts))

	for _, mode := range Modes {
		_, err := Run(counts, spec, Options{Mode: mode, Backend: BackendGDAKI, Seed: 1, Backends: backends, TraceName: "t"})
		require.Error(t, err, mode)
		assert.True(t, errors.Is(err, ErrNeedsRoutes), "%s: %v", mode, err)
		assert.Contains(t, err.Error(), "--mode "+mode, mode)
	}
	assert.True(t, ReadsCounts(ModeLL, BackendNCCL))
	assert.False(t, ReadsCounts(ModeLL, BackendGDAKI))
}

package replay

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// num_qps_per_rank: ll and ncclep report their one context per local
// expert and accept that value; another is refused with ErrQPsPerRank;
// the modes and backend that size their own QPs refuse the option and
// leave it out of the JSON.
func TestQPsPerRank(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := tinyTrace(t, 8, 4)
	local := tr.Slots() / tr.EP()
	require.Positive(t, local)
	for _, mode := range []string{ModeLL, ModeNCCLEP} {
		for _, q := range []int{0, local} {
			rep, err := Run(tr, spec, Options{Mode: mode, Backend: BackendGDAKI, QPsPerRank: q, Seed: 1, Backends: backends})
			require.NoError(t, err, "%s %d", mode, q)
			assert.Equal(t, local, rep.QPsPerRank)
			js, err := json.Marshal(rep)
			require.NoError(t, err)
			assert.Contains(t, string(js), `"qps_per_rank":`)
		}
		_, err := Run(tr, spec, Options{Mode: mode, Backend: BackendGDAKI, QPsPerRank: local + 1, Seed: 1, Backends: backends})
		require.Error(t, err)
		assert.True(t, errors.Is(err, ErrQPsPerRank), "%v", err)
	}
	rep, err := Run(tr, spec, Options{Mode: ModeLL, Backend: BackendNCCL, Seed: 1, Backends: backends})
	require.NoError(t, err)
	assert.Zero(t, rep.QPsPerRank)
	js, err := json.Marshal(rep)
	require.NoError(t, err)
	assert.NotContains(t, string(js), `"qps_per_rank"`)
	for _, o := range []Options{
		{Mode: ModeHT, Backend: BackendGDAKI, QPsPerRank: 2},
		{Mode: ModeV2, Backend: BackendGDAKI, QPsPerRank: 2},
		{Mode: ModeLL, Backend: BackendNCCL, QPsPerRank: 2},
		{Mode: ModeLL, Backend: BackendGDAKI, QPsPerRank: -1},
	} {
		assert.ErrorContains(t, o.Validate(), "qps-per-rank", "%+v", o)
	}
}

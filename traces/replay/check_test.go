package replay

import (
	"bytes"
	"testing"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/replay/replaytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckClean replays LL and HT on GDAKI and Proxy with the semantic
// checker: no violation, every op seen, and the report otherwise
// identical to the run without it (the checker only reads the run). HT
// builds several communicators, each with its own signal tables on every
// GPU (named apart by gin.DevComm.RegionTag), and returns credits as its
// kernels exit: the checker must neither merge the tables nor call those
// credits lost.
func TestCheckClean(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	for _, c := range []struct {
		mode, backend string
		tr            *traces.Trace
	}{
		{ModeLL, BackendGDAKI, tinyTrace(t, 16, 16)},
		{ModeLL, BackendProxy, tinyTrace(t, 16, 16)},
		{ModeHT, BackendGDAKI, replaytest.HTTrace(t, 16, 256)},
		{ModeHT, BackendProxy, replaytest.HTTrace(t, 16, 256)},
	} {
		t.Run(c.mode+"-"+c.backend, func(t *testing.T) {
			opt := Options{Mode: c.mode, Backend: c.backend, Seed: 1, Backends: backends}
			plain, err := Run(c.tr, spec, opt)
			require.NoError(t, err)
			opt.Check = true
			checked, err := Run(c.tr, spec, opt)
			require.NoError(t, err)
			chk := checked.Check
			require.NotNil(t, chk)
			assert.Zero(t, chk.Violations, "first: %s", chk.First)
			assert.Empty(t, chk.First)
			l := plain.Layers[0]
			assert.GreaterOrEqual(t, chk.Ops, uint64(l.Dispatch.Messages+l.Combine.Messages), "every put seen")
			assert.NotZero(t, chk.Landings)
			assert.NotZero(t, chk.Updates)

			checked.Check = nil
			var a, b bytes.Buffer
			require.NoError(t, plain.WriteJSON(&a))
			require.NoError(t, checked.WriteJSON(&b))
			assert.Equal(t, a.String(), b.String())
		})
	}
}

// TestCheckNeedsBackends: without the backends the checker cannot observe
// them.
func TestCheckNeedsBackends(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	_, err := Run(tinyTrace(t, 8, 4), spec, Options{Mode: ModeLL, Backend: BackendGDAKI, Check: true})
	assert.ErrorContains(t, err, "needs Options.Backends")
}

package replay

import (
	"bytes"
	"testing"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckClean replays LL on GDAKI and Proxy with the semantic checker:
// no violation, every op seen, and the report otherwise identical to the
// run without it (the checker only reads the run).
func TestCheckClean(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := tinyTrace(t, 16, 16)
	for _, backend := range []string{BackendGDAKI, BackendProxy} {
		t.Run(backend, func(t *testing.T) {
			opt := Options{Mode: ModeLL, Backend: backend, Seed: 1, Backends: backends}
			plain, err := Run(tr, spec, opt)
			require.NoError(t, err)
			opt.Check = true
			checked, err := Run(tr, spec, opt)
			require.NoError(t, err)
			c := checked.Check
			require.NotNil(t, c)
			assert.Zero(t, c.Violations, "first: %s", c.First)
			assert.Empty(t, c.First)
			l := plain.Layers[0]
			assert.GreaterOrEqual(t, c.Ops, uint64(l.Dispatch.Messages+l.Combine.Messages), "every put seen")
			assert.NotZero(t, c.Landings)
			assert.NotZero(t, c.Updates)

			checked.Check = nil
			var a, b bytes.Buffer
			require.NoError(t, plain.WriteJSON(&a))
			require.NoError(t, checked.WriteJSON(&b))
			assert.Equal(t, a.String(), b.String())
		})
	}
}

// TestCheckNeedsBackends: without the backends the checker cannot observe
// them; HT is refused until its signal regions can be told apart.
func TestCheckNeedsBackends(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	_, err := Run(tinyTrace(t, 8, 4), spec, Options{Mode: ModeLL, Backend: BackendGDAKI, Check: true})
	assert.ErrorContains(t, err, "needs Options.Backends")
	_, err = Run(tinyTrace(t, 8, 4), spec, Options{Mode: ModeHT, Backend: BackendGDAKI, Check: true, Backends: backends})
	assert.ErrorIs(t, err, ErrCheckHT)
}

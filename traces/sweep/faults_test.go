package sweep

import (
	"testing"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/replay"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func tinyTrace(t *testing.T, ep, tokens int) *traces.Trace {
	t.Helper()
	m, err := traces.ModelByName("deepseek-v3")
	require.NoError(t, err)
	tr, err := traces.Generate(traces.GenConfig{Model: m, EP: ep, RanksPerNode: 8, TokensPerRank: tokens, Seed: 1})
	require.NoError(t, err)
	return tr
}

// A replay with 0.1% loss on every link (and 0.05% corruption on the
// host links) completes, every request packet
// is taken by its responder exactly once (as many as without loss), and
// the report counts what RC did about it: the lost packets, the
// go-back-N retransmissions after sequence NAKs or ACK timeouts, and a
// longer tail. The IB preset is lossless: without injected loss nothing is
// retransmitted.
func TestReplayLossDeliversOnce(t *testing.T) {
	tr := tinyTrace(t, 16, 8)
	clean, _ := machine.Preset("h100-ib")
	lossy, err := SetFields(clean, Field{"loss", ScalarNode("0.1%")}, Field{"faults.corrupt.host", ScalarNode("0.05%")})
	require.NoError(t, err)
	for _, backend := range []string{replay.BackendGDAKI, replay.BackendProxy} {
		t.Run(backend, func(t *testing.T) {
			run := func(spec machine.Spec) *replay.Report {
				r, err := replay.Run(tr, spec, replay.Options{Mode: replay.ModeLL, Backend: backend, Seed: 1,
					Backends: mustBackends(t, spec, 8)})
				require.NoError(t, err)
				return r
			}
			a, b := run(clean), run(lossy)
			assert.Zero(t, a.Transport.Lost+a.Transport.Retransmits, "lossless IB: %+v", a.Transport)
			tb := b.Transport
			t.Logf("%s: lossless %.1f / %.1f us; 0.1%% loss %.1f / %.1f us, %+v", backend, a.DispatchUS, a.CombineUS,
				b.DispatchUS, b.CombineUS, tb)
			require.Positive(t, tb.Lost)
			require.Positive(t, tb.Corrupted, "corrupted packets dropped by the ICRC check")
			require.Positive(t, tb.Retransmits)
			require.Positive(t, tb.SeqNAKs+tb.Timeouts)
			assert.Equal(t, a.Transport.InOrder, tb.InOrder, "request packets executed")
			assert.Equal(t, a.Layers[0].Dispatch.Messages, b.Layers[0].Dispatch.Messages)
			assert.Greater(t, b.RecvTail.Dispatch.Max+b.RecvTail.Combine.Max, a.RecvTail.Dispatch.Max+a.RecvTail.Combine.Max)
		})
	}
}

func mustBackends(t *testing.T, spec machine.Spec, ibTimeout uint8) func() map[gin.Type]gin.Backend {
	t.Helper()
	b, err := Backends(spec, ibTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

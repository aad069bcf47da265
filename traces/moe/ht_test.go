package moe

import (
	"testing"
	"time"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/traces"
	"github.com/stretchr/testify/require"
)

func TestHTQuick(t *testing.T) {
	spec, _ := machine.Preset("h100-ib")
	tr := tinyTrace(t, 16, 64)
	rep, err := Replay(tr, spec, Options{Mode: ModeHT, Backend: BackendGDAKI, Seed: 1, Backends: backends})
	require.NoError(t, err)
	t.Logf("%+v", rep.Layers[0].Dispatch)
	t.Logf("%+v", rep.Layers[0].Combine)
}

func htTrace(t testing.TB, ep, tokens int) *traces.Trace {
	m, err := traces.ModelByName("deepseek-v3")
	require.NoError(t, err)
	tr, err := traces.Generate(traces.GenConfig{Model: m, EP: ep, RanksPerNode: 8, TokensPerRank: tokens,
		Experts: 256, Routing: "grouped", Seed: 1, Phase: "prefill"})
	require.NoError(t, err)
	return tr
}

func TestReplayCalibrationHT(t *testing.T) {
	if testing.Short() {
		t.Skip("calibration run")
	}
	spec, _ := machine.Preset("h100-ib")
	tr := htTrace(t, 16, 4096)
	start := time.Now()
	rep, err := Replay(tr, spec, Options{Mode: ModeHT, Backend: BackendGDAKI, Seed: 1, Backends: backends})
	require.NoError(t, err)
	t.Logf("EP16 HT GDAKI: dispatch %.1f us %.1f GB/s (paper 76.9), combine %.1f us %.1f GB/s (paper 66.2); %d events in %v",
		rep.DispatchUS, rep.DispatchGBps, rep.CombineUS, rep.CombineGBps, rep.Events, time.Since(start))
	t.Logf("breakdown %+v", rep.Breakdown)
}

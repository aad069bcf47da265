package moe

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/traces"
)

// BenchmarkReplayLLEP256 replays DeepSeek-V3 LL dispatch+combine at EP256
// (32 nodes × 8, 128 tokens per rank) and reports events/s and peak heap.
func BenchmarkReplayLLEP256(b *testing.B) {
	m, _ := traces.ModelByName("deepseek-v3")
	tr, err := traces.Generate(traces.GenConfig{Model: m, EP: 256, RanksPerNode: 8, TokensPerRank: 128, Seed: 1})
	require.NoError(b, err)
	spec, _ := machine.Preset("h100-ib")
	var peak uint64
	stop := make(chan struct{})
	go func() { // sample the heap: a benchmark harness goroutine, not model code
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse+ms.StackInuse)
			}
		}
	}()
	var events uint64
	start := time.Now()
	for b.Loop() {
		rep, err := Replay(tr, spec, Options{Mode: ModeLL, Backend: BackendGDAKI, Seed: 1, Backends: backends})
		require.NoError(b, err)
		events += rep.Events
		b.ReportMetric(rep.DispatchUS, "dispatch_us")
		b.ReportMetric(rep.CombineUS, "combine_us")
	}
	close(stop)
	wall := time.Since(start)
	b.ReportMetric(float64(events)/wall.Seconds(), "events/s")
	b.ReportMetric(float64(peak)/(1<<20), "peakMiB")
}

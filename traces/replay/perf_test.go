package replay

import (
	"flag"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/internal/memsample"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/replay/replaytest"
)

// BenchmarkReplayLLEP256 replays DeepSeek-V3 LL dispatch+combine at EP256
// (32 nodes × 8, 128 tokens per rank) and reports events/s and peak heap
// plus goroutine stacks (sampled every 50 ms).
//
// Profiling: build once and run the binary, so that compile time and the
// heap of the go command stay out of the figures:
//
//	go test -c -o /tmp/replay.test ./traces/replay
//	cd traces/replay && /tmp/replay.test -test.run '^$' -test.bench 'ReplayLLEP256$/seq' \
//	    -test.benchtime 1x -test.benchmem -test.cpuprofile /tmp/cpu.out -test.memprofile /tmp/mem.out
//	go tool pprof -top /tmp/replay.test /tmp/cpu.out
//	go tool pprof -sample_index=alloc_space -top /tmp/replay.test /tmp/mem.out
//
// The memory profile records allocations (alloc_space, alloc_objects);
// coroutine stacks do not appear in it, only in peakMiB.
func BenchmarkReplayLLEP256(b *testing.B) { benchReplayLL(b, 256) }

// BenchmarkReplayLLEP64 is the same replay at EP64 (8 nodes), for quick
// before/after comparisons.
func BenchmarkReplayLLEP64(b *testing.B) { benchReplayLL(b, 64) }

// BenchmarkReplayLLEP256Proxy is BenchmarkReplayLLEP256 over the Proxy
// backend: 130 k (rank, context, peer) GFD rings and CPU threads.
func BenchmarkReplayLLEP256Proxy(b *testing.B) {
	benchReplayOn(b, llTrace(b, 256), ModeLL, BackendProxy)
}

// BenchmarkReplayV2EP256 is DeepEP V2 (hybrid, as it picks on 32 nodes)
// on the EP256 LL trace: 129 GIN contexts per rank and rail peer.
func BenchmarkReplayV2EP256(b *testing.B) { benchReplay(b, llTrace(b, 256), ModeV2) }

func benchReplayLL(b *testing.B, ep int) { benchReplay(b, llTrace(b, ep), ModeLL) }

// llTrace is DeepSeek-V3 with 128 tokens per rank at EP ep, seed 1.
func llTrace(b *testing.B, ep int) *traces.Trace {
	m, _ := traces.ModelByName("deepseek-v3")
	tr, err := traces.Generate(traces.GenConfig{Model: m, EP: ep, RanksPerNode: 8, TokensPerRank: 128, Seed: 1})
	require.NoError(b, err)
	return tr
}

// benchReplay is benchReplayOn over GDAKI.
func benchReplay(b *testing.B, tr *traces.Trace, mode string) {
	benchReplayOn(b, tr, mode, BackendGDAKI)
}

// benchWorkers lists the worker counts the replay benchmarks run the
// World with, beside the sequential kernel ("seq"): -workers 1,2,16
// (default: 1, 2, 4, ... up to GOMAXPROCS, and GOMAXPROCS).
var benchWorkers = flag.String("workers", "", "comma-separated worker counts of the replay benchmarks (default: powers of two up to GOMAXPROCS)")

// workerCounts returns the worker counts of -workers.
func workerCounts(b *testing.B) []int {
	var ws []int
	if *benchWorkers == "" {
		n := runtime.GOMAXPROCS(0)
		for w := 1; w < n; w *= 2 {
			ws = append(ws, w)
		}
		return append(ws, n)
	}
	for _, f := range strings.Split(*benchWorkers, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(b, err, "-workers")
		require.Positive(b, w, "-workers")
		ws = append(ws, w)
	}
	return ws
}

// benchReplayOn runs benchReplayWith on the sequential kernel (sub-
// benchmark seq) and on the World with each of -workers (w=N), side by
// side in one run.
func benchReplayOn(b *testing.B, tr *traces.Trace, mode, backend string) {
	b.Run("seq", func(b *testing.B) { benchReplayWith(b, tr, Options{Mode: mode, Backend: backend, Sequential: true}) })
	for _, w := range workerCounts(b) {
		b.Run("w="+strconv.Itoa(w), func(b *testing.B) {
			benchReplayWith(b, tr, Options{Mode: mode, Backend: backend, Workers: w})
		})
	}
}

// benchReplayWith replays tr on h100-ib with opt b.N times and reports
// the phase figures, events per wall second and the peak of heap in use
// plus goroutine stacks (sampled every 50 ms).
func benchReplayWith(b *testing.B, tr *traces.Trace, opt Options) {
	spec, _ := machine.Preset("h100-ib")
	stop := memsample.Start(50 * time.Millisecond)
	var events uint64
	start := time.Now()
	opt.Seed, opt.Backends = 1, backends
	for b.Loop() {
		rep, err := Run(tr, spec, opt)
		require.NoError(b, err)
		events += rep.Events
		b.ReportMetric(rep.DispatchUS, "dispatch_us")
		b.ReportMetric(rep.CombineUS, "combine_us")
		b.ReportMetric(rep.DispatchGBps, "dispatch_GBps")
		b.ReportMetric(rep.CombineGBps, "combine_GBps")
	}
	peak := stop()
	wall := time.Since(start)
	b.ReportMetric(float64(events)/wall.Seconds(), "events/s")
	b.ReportMetric(float64(peak.Total)/(1<<20), "peakMiB")
	b.ReportMetric(float64(peak.Heap)/(1<<20), "heapMiB")
	b.ReportMetric(float64(peak.Stack)/(1<<20), "stackMiB")
}

// BenchmarkReplayHTEP64 replays DeepSeek-V3 HT dispatch+combine at EP64
// (8 nodes × 8, 4096 tokens per rank) and reports events/s and peak heap.
func BenchmarkReplayHTEP64(b *testing.B) { benchReplay(b, replaytest.HTTrace(b, 64, 4096), ModeHT) }

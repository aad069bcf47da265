package gdaki_test

import (
	"flag"
	"testing"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gin/internal/backendtest"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden timelines in testdata")

const backend = "gdaki"

func TestGoldenTimelines(t *testing.T) { backendtest.GoldenTimelines(t, backend, *rewrite) }

func TestSignalImpliesEarlierPutsSameContext(t *testing.T) {
	backendtest.SignalImpliesEarlierPutsSameContext(t, backend)
}

func TestNoOrderingAcrossContexts(t *testing.T) { backendtest.NoOrderingAcrossContexts(t, backend) }

func TestCounterAndFlushImplyLocalCompletion(t *testing.T) {
	backendtest.CounterAndFlushImplyLocalCompletion(t, backend)
}

func run(t *testing.T, cfg bench.EnvConfig, body func(e *bench.Env, t *gpu.Group, g0 *gin.Gin)) (*bench.Env, *backendtest.Landings) {
	return backendtest.Run(t, backend, cfg, body)
}

// Spec 6.4 item 3: with depth 4, the 5th put waits for CQE #0; with
// MaySkipCreditCheck it does not wait.
func TestCreditBackpressure(t *testing.T) {
	issue := func(skip bool) (first, fifth sim.Duration) {
		_, _ = run(t, bench.EnvConfig{QueueDepth: 4}, func(e *bench.Env, tg *gpu.Group, g *gin.Gin) {
			var opts []gin.OptFlags
			if skip {
				opts = append(opts, gin.OptMaySkipCreditCheck)
			}
			for i := range 5 {
				t0 := tg.Now()
				g.Put(e.Dev.World(0), 1, e.Win, uint64(i)*64, e.Win, 0, 8, nil, nil, opts...)
				d := tg.Now().Sub(t0)
				if i == 0 {
					first = d
				}
				if i == 4 {
					fifth = d
				}
				if skip && i == 3 {
					return // a 5th unchecked put would overrun the queue: unsafe
				}
			}
			g.Flush()
		})
		return first, fifth
	}
	first, fifth := issue(false)
	if fifth < first+sim.Microsecond {
		t.Errorf("5th put on a depth-4 queue took %v, first %v: want it blocked on the credit (a CQE ~us away)", fifth, first)
	}
	sfirst, _ := issue(true)
	if sfirst > first {
		t.Errorf("skip-credit put took %v, checked put %v", sfirst, first)
	}
}

// Same seed, same timeline.
func TestDeterminism(t *testing.T) {
	logOf := func() string {
		e, err := bench.NewEnv(bench.EnvConfig{Backend: backend, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		l := e.Record()
		e.Ranks[0].GPU.Launch("k", 1, func(tg *gpu.Group) {
			g := e.Dev.Gin(tg, 0, 0)
			for i := range 20 {
				g.Put(e.Dev.World(0), 1, e.Win, uint64(i)*4096, e.Win, 0, 4096, gin.SignalInc{Signal: 0}, nil)
			}
			g.Flush()
		})
		if err := e.Sim.Run(); err != nil {
			t.Fatal(err)
		}
		return l.String()
	}
	if a, b := logOf(), logOf(); a != b {
		t.Error("two runs with the same seed produced different timelines")
	}
}

// Groups sharing a (context, peer) build their WRs apart: one blocked in
// post (reservation, credit, WQE stores) keeps its list while another
// builds the next.
func TestConcurrentIssuersShareChannel(t *testing.T) {
	backendtest.ConcurrentIssuersShareChannel(t, bench.EnvConfig{Backend: backend, Seed: 3, Signals: 4})
}

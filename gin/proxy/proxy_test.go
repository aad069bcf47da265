package proxy_test

import (
	"flag"
	"testing"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gin/internal/backendtest"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden timelines in testdata")

const backend = "proxy"

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

// Spec 6.4 item 3: with a ring of 4 GFDs the 5th put waits until the CPU
// has seen CQE #0 and advanced ci. The proxy has no MaySkipCreditCheck: the
// flag changes nothing.
func TestCreditBackpressure(t *testing.T) {
	issue := func(skip bool) (first, fifth sim.Duration) {
		pc := proxy.DefaultConfig()
		pc.QueueSize = 4
		_, _ = run(t, bench.EnvConfig{Proxy: &pc}, func(e *bench.Env, tg *gpu.Group, g *gin.Gin) {
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
			}
			g.Flush()
		})
		return first, fifth
	}
	for _, skip := range []bool{false, true} {
		first, fifth := issue(skip)
		if fifth < first+500*sim.Nanosecond {
			t.Errorf("skip=%v: 5th put on a 4-slot ring took %v, first %v: want it blocked on ci", skip, fifth, first)
		}
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

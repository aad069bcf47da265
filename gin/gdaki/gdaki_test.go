package gdaki_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden timelines in testdata")

const backend = "gdaki"

// golden runs body on rank 0 and compares the merged timeline with
// testdata/name.txt.
func golden(t *testing.T, name string, body func(e *bench.Env, t *gpu.Group, g *gin.Gin)) {
	e, err := bench.NewEnv(bench.EnvConfig{Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	l := e.Record()
	e.Ranks[0].GPU.Launch("k", 1, func(tg *gpu.Group) { body(e, tg, e.Dev.Gin(tg, 0, 0)) })
	e.Ranks[1].GPU.Launch("w", 1, func(tg *gpu.Group) {
		if strings.Contains(name, "signal") || strings.Contains(name, "barrier") {
			e.Dev.Gin(tg, 1, 0).WaitSignal(0, 1, 64)
		}
	})
	if err := e.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	got := l.String()
	path := filepath.Join("testdata", name+".txt")
	if *rewrite {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite)", err)
	}
	if got != string(want) {
		t.Errorf("timeline %s differs from %s (rerun with -rewrite and review the diff):\n%s", name, path, got)
	}
}

func TestGoldenTimelines(t *testing.T) {
	for _, tc := range []struct {
		name string
		body func(e *bench.Env, t *gpu.Group, g *gin.Gin)
	}{
		{"put", func(e *bench.Env, t *gpu.Group, g *gin.Gin) {
			g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 8, nil, nil)
		}},
		{"put_signal", func(e *bench.Env, t *gpu.Group, g *gin.Gin) {
			g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 8, gin.SignalInc{Signal: 0}, nil)
		}},
		{"flush", func(e *bench.Env, t *gpu.Group, g *gin.Gin) {
			g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 8, nil, nil)
			g.Flush()
		}},
		{"counter", func(e *bench.Env, t *gpu.Group, g *gin.Gin) {
			g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 8, nil, gin.CounterInc{Counter: 0})
			g.WaitCounter(0, 1, 56)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { golden(t, tc.name, tc.body) })
	}
}

// landings records when NIC writes and atomics land on rank 1's window and
// signal words.
type landings struct {
	lastWin map[uint64]sim.Time // by offset of the write
	sig     []sim.Time
}

func (l *landings) Observe(e *mem.Effect) {
	n := e.Region.Name()
	switch {
	case strings.HasPrefix(n, "buf") && e.Op == mem.OpWrite && strings.Contains(e.Agent, "qp"):
		l.lastWin[e.Off] = e.At
	case strings.HasSuffix(n, "signals") && e.Op == mem.OpFetchAdd:
		l.sig = append(l.sig, e.At)
	}
}

func run(t *testing.T, cfg bench.EnvConfig, body func(e *bench.Env, t *gpu.Group, g0 *gin.Gin)) (*bench.Env, *landings) {
	cfg.Backend = backend
	e, err := bench.NewEnv(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := &landings{lastWin: map[uint64]sim.Time{}}
	e.Machine.Mem.SetObserver(l)
	e.Ranks[0].GPU.Launch("k", 1, func(tg *gpu.Group) { body(e, tg, e.Dev.Gin(tg, 0, 0)) })
	if err := e.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	return e, l
}

func maxTime(m map[uint64]sim.Time, lo, hi uint64) sim.Time {
	var t sim.Time
	for off, at := range m {
		if off >= lo && off < hi && at > t {
			t = at
		}
	}
	return t
}

// Spec 2.4 item 1: a signal on (context, peer) lands after every earlier
// put on the same (context, peer) has settled at the peer.
func TestSignalImpliesEarlierPutsSameContext(t *testing.T) {
	_, l := run(t, bench.EnvConfig{}, func(e *bench.Env, tg *gpu.Group, g *gin.Gin) {
		g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 1<<20, nil, nil)
		g.Put(e.Dev.World(0), 1, e.Win, 2<<20, e.Win, 2<<20, 8, gin.SignalInc{Signal: 0}, nil)
	})
	if len(l.sig) != 1 {
		t.Fatalf("signal applied %d times", len(l.sig))
	}
	if last := maxTime(l.lastWin, 0, 1<<20); last == 0 || last > l.sig[0] {
		t.Errorf("1 MiB put's last write landed at %v, signal at %v: want the put first", last, l.sig[0])
	}
}

// Spec 2.4 item 2: nothing orders two contexts: a ctx-1 signal issued after
// a ctx-0 1 MiB put overtakes it (the NIC serves QPs round-robin per packet).
func TestNoOrderingAcrossContexts(t *testing.T) {
	_, l := run(t, bench.EnvConfig{Contexts: 2}, func(e *bench.Env, tg *gpu.Group, g *gin.Gin) {
		g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 1<<20, nil, nil)
		e.Dev.Gin(tg, 0, 1).Signal(e.Dev.World(0), 1, gin.SignalInc{Signal: 0})
	})
	if len(l.sig) != 1 {
		t.Fatalf("signal applied %d times", len(l.sig))
	}
	if last := maxTime(l.lastWin, 0, 1<<20); l.sig[0] >= last {
		t.Errorf("ctx-1 signal at %v did not overtake the ctx-0 put (last write %v)", l.sig[0], last)
	}
}

// Spec 2.4 items 3-4: a counter and a flush both imply the remote writes
// have been acknowledged, hence landed (IB: the CQE follows the ACK, and the
// responder ACKs after its DMA write is issued in order).
func TestCounterAndFlushImplyLocalCompletion(t *testing.T) {
	var ctrAt, flushAt sim.Time
	_, l := run(t, bench.EnvConfig{}, func(e *bench.Env, tg *gpu.Group, g *gin.Gin) {
		g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 256<<10, nil, gin.CounterInc{Counter: 0})
		g.WaitCounter(0, 1, 56)
		ctrAt = tg.Now()
		g.Put(e.Dev.World(0), 1, e.Win, 1<<20, e.Win, 1<<20, 256<<10, nil, nil)
		g.Flush()
		flushAt = tg.Now()
	})
	if last := maxTime(l.lastWin, 0, 256<<10); last == 0 || last > ctrAt {
		t.Errorf("counter seen at %v before the put's last remote write %v", ctrAt, last)
	}
	if last := maxTime(l.lastWin, 1<<20, 1<<20+256<<10); last == 0 || last > flushAt {
		t.Errorf("flush returned at %v before the put's last remote write %v", flushAt, last)
	}
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

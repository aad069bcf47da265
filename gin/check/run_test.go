package check_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gin/check"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// dupCounter counts request packets a NIC received more than once (the
// fabric's duplicates and the requester's retransmissions) and packets the
// fabric dropped: the witness that a faulty run really was faulty.
type dupCounter struct {
	seen    map[[3]uint64]bool
	dups    int
	dropped int
}

func (d *dupCounter) Observe(e obs.Event) {
	switch e.Kind {
	case obs.Received:
		k := [3]uint64{uint64(e.Op), uint64(e.QP)<<32 | uint64(e.PSN), uint64(e.Code)}
		if d.seen[k] {
			d.dups++
		}
		d.seen[k] = true
	case obs.Dropped:
		d.dropped++
	}
}

// scenario is a small GIN program covering every op the checker follows,
// written the way the spec says a correct program must be: every read of
// landed bytes follows an observation that covers them.
//
// Rank 0, context 0: four strong put+signals of growing size (one several
// MTUs), a put_value with a signal, a put with a counter and its wait, a
// signal add, a get with flush then a read of it, a put then a world GIN
// barrier with the Get fence (the Put fence signals self, which panics
// today: issue 14). Rank 0, context 1: a put with a weak signal. Rank 1
// waits for each signal, reads what it covers and joins the barrier.
func scenario(e *bench.Env) {
	w := e.Win
	sizes := []uint64{8, 4096, 20000, 65536}
	e.Ranks[0].GPU.Launch("k", 1, func(tg *gpu.Group) {
		g := e.Dev.Gin(tg, 0, 0)
		team := e.Dev.World(0)
		for i, n := range sizes {
			g.Put(team, 1, w, uint64(i)<<16, w, 0, n, gin.SignalInc{Signal: 0}, nil)
		}
		g.PutValue(team, 1, w, 512<<10, 0xfeed, 8, gin.SignalInc{Signal: 1})
		g.Put(team, 1, w, 600<<10, w, 0, 8192, nil, gin.CounterInc{Counter: 0})
		g.WaitCounter(0, 1, 56)
		g.Signal(team, 1, gin.SignalAdd{Signal: 2, Value: 5})
		g.Get(team, 1, w, 700<<10, w, 700<<10, 4096)
		g.Flush()
		g.ReadWindow(w, 700<<10, make([]byte, 4096))
		g.Put(team, 1, w, 800<<10, w, 0, 4096, nil, nil)
		g.GinBarrier(gin.BarrierWorldGin, 0, false).Sync(gin.OrderAcqRel, gin.FenceGet)
	})
	e.Ranks[0].GPU.Launch("k1", 1, func(tg *gpu.Group) {
		g := e.Dev.Gin(tg, 0, 1)
		g.Put(e.Dev.World(0), 1, w, 900<<10, w, 0, 4096, gin.SignalInc{Signal: 3, Weak: true}, nil)
		g.Flush()
	})
	e.Ranks[1].GPU.Launch("w", 1, func(tg *gpu.Group) {
		g := e.Dev.Gin(tg, 1, 0)
		g.WaitSignal(0, uint64(len(sizes)), 64)
		for i, n := range sizes {
			g.ReadWindow(w, uint64(i)<<16, make([]byte, n))
		}
		g.WaitSignal(1, 1, 64)
		g.ReadWindow(w, 512<<10, make([]byte, 8))
		g.WaitSignal(2, 5, 64)
		g.GinBarrier(gin.BarrierWorldGin, 0, false).Sync(gin.OrderAcqRel, gin.FenceGet)
	})
	e.Ranks[1].GPU.Launch("w1", 1, func(tg *gpu.Group) {
		g := e.Dev.Gin(tg, 1, 1)
		g.WaitSignal(3, 1, 64)
		g.ReadWindow(w, 900<<10, make([]byte, 4096))
	})
}

func newEnv(t *testing.T, backend string, seed uint64) *bench.Env {
	t.Helper()
	return newEnvOn(t, backend, seed, nil)
}

// newEnvOn is newEnv on a World of one partition per node run by exec
// (nil: a lone Sim).
func newEnvOn(t *testing.T, backend string, seed uint64, exec sim.Exec) *bench.Env {
	t.Helper()
	e, err := bench.NewEnv(bench.EnvConfig{Backend: backend, Seed: seed, Contexts: 2, Backed: true, WorldGinBarriers: 1, Exec: exec})
	if err != nil {
		t.Fatal(err)
	}
	// Give the source bytes a pattern so that a comparison of windows
	// means something.
	for r := range e.Ranks {
		b := e.Win.Region(r).Bytes()
		for i := range b {
			b[i] = byte(i*7 + r)
		}
	}
	return e
}

var faulty = fabric.Faults{Loss: 0.02, Duplicate: 0.05, Jitter: 20 * sim.Nanosecond}

// TestCleanRuns: a correct program on GDAKI and Proxy, on a clean fabric
// and on one that loses, duplicates and reorders packets, draws no
// violation; the faulty runs really did retransmit or duplicate.
func TestCleanRuns(t *testing.T) {
	for _, backend := range []string{"gdaki", "proxy"} {
		dups, drops := 0, 0
		for _, f := range []bool{false, true} {
			for seed := uint64(1); seed <= 4; seed++ {
				t.Run(fmt.Sprintf("%s/faults=%v/seed=%d", backend, f, seed), func(t *testing.T) {
					e := newEnv(t, backend, seed)
					if f {
						if err := e.Machine.Net.SetGlobalFaults(faulty); err != nil {
							t.Fatal(err)
						}
					}
					d := &dupCounter{seen: map[[3]uint64]bool{}}
					c := check.New()
					e.Observe(c, d)
					scenario(e)
					err := e.Sim.Run()
					if err != nil {
						t.Fatal(err)
					}
					c.End(err != nil)
					r := c.Report()
					for _, v := range r.Kept {
						t.Error(v.String())
					}
					if r.Ops < 10 || r.Reads != 7 || r.Observed < 5 || r.Landings < 10 || r.Updates < 7 {
						t.Errorf("checked too little: %+v", r)
					}
					if f {
						dups += d.dups
						drops += d.dropped
					}
				})
			}
		}
		if dups == 0 || drops == 0 {
			t.Errorf("%s: the faulty fabric duplicated %d and dropped %d packets; the test needs both", backend, dups, drops)
		}
	}
}

// TestNoPerturbation: the checker only reads the stream, so a run with it
// ends at the same time with the same window bytes as a run without any
// observer.
func TestNoPerturbation(t *testing.T) {
	for _, backend := range []string{"gdaki", "proxy"} {
		var end [2]sim.Time
		var mem [2][]byte
		for i, on := range []bool{false, true} {
			e := newEnv(t, backend, 3)
			if err := e.Machine.Net.SetGlobalFaults(faulty); err != nil {
				t.Fatal(err)
			}
			var c *check.Checker
			if on {
				c = check.New()
				e.Observe(c)
			}
			scenario(e)
			if err := e.Sim.Run(); err != nil {
				t.Fatal(err)
			}
			end[i] = e.Sim.Now()
			for r := range e.Ranks {
				mem[i] = append(mem[i], e.Win.Region(r).Bytes()...)
			}
			if on {
				c.End(false)
				if err := c.Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if end[0] != end[1] || !bytes.Equal(mem[0], mem[1]) {
			t.Errorf("%s: with the checker the run ends at %v (without: %v); windows equal: %v", backend, end[1], end[0], bytes.Equal(mem[0], mem[1]))
		}
	}
}

// TestWireAndAdd: Wire hands one bus to every component, so a driver that
// builds its own machine gets the same report as bench.Env.Observe; Add
// sums two steps.
func TestWireAndAdd(t *testing.T) {
	var reps [2]check.Report
	for i := range reps {
		e := newEnv(t, "gdaki", 1)
		var c *check.Checker
		if i == 0 {
			c = check.New()
			e.Observe(c)
		} else {
			c, _ = check.Wire(e.Machine, e.Comm, e.GDAKI)
		}
		scenario(e)
		if err := e.Sim.Run(); err != nil {
			t.Fatal(err)
		}
		c.End(false)
		reps[i] = c.Report()
	}
	if reps[0].Ops == 0 || reps[0].Events != reps[1].Events || reps[0].Ops != reps[1].Ops || reps[1].Violations != 0 {
		t.Fatalf("observe: %+v; wire: %+v", reps[0], reps[1])
	}
	var sum check.Report
	sum.Add(reps[0])
	sum.Add(reps[1])
	if sum.Ops != 2*reps[0].Ops || sum.Landings != 2*reps[0].Landings {
		t.Fatalf("sum %+v of %+v", sum, reps[0])
	}
}

package bench

import (
	"fmt"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/lsa"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
)

// LSACoopThreads is the coop of the LSA latency kernels: one CTA of 512
// threads issues the NVLink stores (16 B per thread per cycle up to the
// SM's store rate), as a device-API copy kernel does; bw uses -t threads.
const LSACoopThreads = 512

// runLSA runs o's operation over LSA on two GPUs of one node: the payload
// is NVLink stores into the peer's window (lsa.Copy), the signal a release
// store (system fence, then st.release.sys) of a sequence number into the
// peer's flag word, and completion a system-scope fence (every posted
// store has landed). The receiver spins on its flag word with an acquire.
func runLSA(o Options, n uint64) (Row, error) {
	e, err := NewEnv(o.Env)
	if err != nil {
		return Row{}, err
	}
	total := o.Warmup + o.Iters
	var t0, t1 sim.Time
	mark := func(t *gpu.Group, i int) {
		if i == o.Warmup {
			t0 = t.Now()
		}
	}
	// send issues one operation to the other LSA rank; slot picks the
	// window offset and flag word, seq is the flag's new value.
	send := func(l *lsa.LSA, slot, seq uint64) {
		peer := 1 - l.Team().Rank
		if o.Op != "signal" {
			l.Copy(peer, e.Win, slot*n, nil, sim.Bytes(n))
		}
		if o.Op != "put" {
			l.StoreRelease(peer, e.Flag, 8*slot, seq)
		}
	}
	g0, g1 := e.Ranks[0].GPU, e.Ranks[1].GPU
	switch o.Pattern {
	case "ping":
		g0.Launch("lsa/ping", LSACoopThreads, func(t *gpu.Group) {
			l := lsa.New(e.Dev, t, 0)
			for i := range total {
				mark(t, i)
				send(l, 0, uint64(i+1))
				t.Fence(gpu.ScopeSystem)
			}
			t1 = t.Now()
		})
	case "pingpong":
		for rank, gp := range []*gpu.GPU{g0, g1} {
			gp.Launch(fmt.Sprintf("lsa/pingpong%d", rank), LSACoopThreads, func(t *gpu.Group) {
				l := lsa.New(e.Dev, t, rank)
				for i := range total {
					if rank == 0 {
						mark(t, i)
						if i > 0 {
							l.WaitAcquire(e.Flag, 0, uint64(i), 64)
						}
					} else {
						l.WaitAcquire(e.Flag, 0, uint64(i+1), 64)
					}
					send(l, 0, uint64(i+1))
				}
				if rank == 0 {
					l.WaitAcquire(e.Flag, 0, uint64(total), 64)
					t1 = t.Now()
				}
			})
		}
	case "bw":
		slots := max(o.Env.WindowBytes/max(n, 1), 1)
		for c := range o.CTAs {
			slot := uint64(c) % min(slots, 512)
			g0.Launch(fmt.Sprintf("lsa/bw/cta%d", c), o.Threads, func(t *gpu.Group) {
				l := lsa.New(e.Dev, t, 0)
				for i := range total {
					if c == 0 {
						mark(t, i)
					}
					send(l, slot, uint64(i+1))
				}
				t.Fence(gpu.ScopeSystem)
				if t.Now() > t1 {
					t1 = t.Now()
				}
			})
		}
	}
	if err := e.Sim.Run(); err != nil {
		return Row{}, err
	}
	if t1 == 0 {
		return Row{}, fmt.Errorf("the benchmark kernel did not finish (deadlock: %v)", blocked(e))
	}
	return row(o, n, t1.Sub(t0), gin.BackendStats{}), nil
}

// row turns a measured span into a Row.
func row(o Options, n uint64, el sim.Duration, st gin.BackendStats) Row {
	msgs := float64(o.Iters)
	if o.Pattern == "bw" {
		msgs *= float64(o.CTAs)
	}
	r := Row{Bytes: n, Stats: st, LatencyUs: el.Us() / msgs}
	if o.Pattern == "pingpong" {
		r.LatencyUs /= 2
	}
	if el > 0 {
		r.BandwidthGBps = float64(n) * msgs / el.Seconds() / 1e9
		r.MsgRateM = msgs / el.Us()
	}
	return r
}

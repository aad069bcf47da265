package gpu

import (
	"testing"

	"github.com/ginsim/ginsim/fabric/nvlink"
	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/stretchr/testify/require"
)

type node struct {
	s    *sim.Sim
	ms   *mem.System
	bus  *pcie.Tree
	nvl  *nvlink.Domain
	gpus []*GPU
}

func newNode(t *testing.T, n int) *node {
	t.Helper()
	s := sim.New(sim.Config{Seed: 1})
	ms := mem.NewSystem(s)
	bus := pcie.NewTree(s, pcie.DefaultConfig())
	sw := bus.AddSwitch("sw0")
	nvl := nvlink.NewDomain(s, nvlink.DefaultConfig(), n)
	nd := &node{s: s, ms: ms, bus: bus, nvl: nvl}
	for i := 0; i < n; i++ {
		dev := bus.AddDevice("gpu", sw)
		nd.gpus = append(nd.gpus, New(s, DefaultConfig(), "gpu"+string(rune('0'+i)), 0, i, ms, bus, dev, nvl))
	}
	return nd
}

func TestCycles(t *testing.T) {
	g := New(sim.New(sim.Config{}), DefaultConfig(), "g", 0, 0, nil, nil, 0, nil)
	for _, c := range []struct {
		n    int64
		want sim.Duration
	}{{0, 0}, {1, 506}, {198, 100 * sim.Nanosecond}, {1_980_000_000, sim.Second}, {1 << 40, 555_308_902_917_172}} {
		require.Equal(t, c.want, g.Cycles(c.n), "cycles %d", c.n)
	}
}

// A store lands StoreLatency after issue; a poller sees it at the first
// poll instant at or after the landing, and returns one L2 latency later.
func TestWaitWordSeesLandedStore(t *testing.T) {
	nd := newNode(t, 1)
	g := nd.gpus[0]
	cfg := g.Config()
	r := g.Alloc("flag", 64, false)
	var seenAt sim.Time
	var v uint64
	g.Launch("waiter", 1, func(tg *Group) {
		v = tg.WaitWord(r, 8, "flag", func(v uint64) bool { return v == 7 })
		seenAt = tg.Now()
	})
	var landed sim.Time
	g.Launch("writer", 32, func(tg *Group) {
		tg.Sleep(1000 * sim.Nanosecond)
		landed = tg.Store64(r, 8, 7)
	})
	require.NoError(t, nd.s.Run())
	require.Equal(t, uint64(7), v)
	require.Equal(t, sim.Time(1000*sim.Nanosecond).Add(cfg.StoreLatency), landed)
	// The store is read by a poll a phase of the period after it lands
	// (uniform in [0, PollInterval)), and the group returns the second
	// half of an L2 latency after that read.
	per, half := cfg.PollInterval, cfg.L2Latency/2
	read := seenAt.Add(-(cfg.L2Latency - half))
	require.GreaterOrEqual(t, read, landed)
	require.Less(t, read.Sub(landed), per)
	st := g.Stats()
	require.Equal(t, 2, st.Groups)
	require.Equal(t, read.Sub(0), st.Poll)
}

// A write to host memory crosses the GPU's hub, then lands when PCIe says;
// the word is unchanged before.
func TestHostStoreOverPCIe(t *testing.T) {
	nd := newNode(t, 1)
	g := nd.gpus[0]
	h := g.AllocHost("ring", 4096, true)
	var landed sim.Time
	g.Launch("w", 1, func(tg *Group) { landed = tg.Store64(h, 0, 5) })
	require.NoError(t, nd.s.RunUntil(sim.Time(10*sim.Nanosecond)))
	ref := newNode(t, 1) // the same idle path, computed by the PCIe model
	hub := g.Config().HubLatency
	require.Equal(t, ref.bus.Write(sim.Time(0).Add(hub), ref.gpus[0].Dev(), ref.bus.Host(), 8), landed)
	require.NoError(t, nd.s.RunUntil(landed-1))
	require.Equal(t, uint64(0), h.Load64(0))
	require.NoError(t, nd.s.Run())
	require.Equal(t, uint64(5), h.Load64(0))
	require.Greater(t, int64(landed), int64(250*sim.Nanosecond), "a PCIe write crosses two links, a switch and the root complex")
}

// WriteWT lands 16-B pieces one by one, so a CPU sees a partial descriptor.
func TestWriteWTPieces(t *testing.T) {
	nd := newNode(t, 1)
	g := nd.gpus[0]
	h := g.AllocHost("gfd", 128, true)
	src := make([]byte, 128)
	for i := range src {
		src[i] = byte(i + 1)
	}
	var last sim.Time
	g.Launch("w", 1, func(tg *Group) { last = tg.WriteWT(h, 0, src, 128) })
	var partial bool
	for nd.s.Step() {
		b := h.Bytes()
		if b[0] != 0 && b[127] == 0 {
			partial = true
		}
	}
	require.True(t, partial, "the first store landed before the last")
	require.Equal(t, src, h.Bytes())
	require.Greater(t, int64(last), int64(0))
}

// A system fence waits for the group's posted PCIe writes to land.
func TestFenceSysWaitsPostedWrites(t *testing.T) {
	nd := newNode(t, 1)
	g := nd.gpus[0]
	h := g.AllocHost("h", 64, false)
	var landed, after sim.Time
	g.Launch("w", 1, func(tg *Group) {
		landed = tg.Store64(h, 0, 1)
		tg.Fence(ScopeSystem)
		after = tg.Now()
	})
	require.NoError(t, nd.s.Run())
	require.Equal(t, max(landed, sim.Time(g.Config().StoreIssue+g.Config().FenceSys)), after)
}

// NVLink stores land at the peer after the NVLink latency; data first,
// then the flag stored after it (FIFO on the port).
func TestNVLinkOrder(t *testing.T) {
	nd := newNode(t, 2)
	a, b := nd.gpus[0], nd.gpus[1]
	buf := b.Alloc("buf", 1<<20, true)
	flag := b.Alloc("flag", 8, false)
	var seenData byte
	b.Launch("recv", 1, func(tg *Group) {
		tg.WaitWord(flag, 0, "flag", func(v uint64) bool { return v == 1 })
		seenData = buf.Bytes()[1<<20-1]
	})
	a.Launch("send", 128, func(tg *Group) {
		src := make([]byte, 1<<20)
		src[len(src)-1] = 9
		tg.NVLinkWrite(1, buf, 0, src, 1<<20)
		tg.Store64(flag, 0, 1)
	})
	require.NoError(t, nd.s.Run())
	require.Equal(t, byte(9), seenData)
}

// Parallel spreads items over threads as NCCL's strided loops and joins.
func TestParallel(t *testing.T) {
	nd := newNode(t, 1)
	g := nd.gpus[0]
	got := map[int]string{}
	var end sim.Time
	g.Launch("cta", 4, func(tg *Group) {
		tg.Parallel(10, func(th *Group, i int) {
			got[i] = th.Name()
			th.Compute(sim.Duration(i+1) * sim.Nanosecond)
		})
		end = tg.Now()
	})
	require.NoError(t, nd.s.Run())
	require.Len(t, got, 10)
	require.Equal(t, "cta/t1", got[5])
	require.Equal(t, "cta/t3", got[7])
	// thread 1 runs items 1, 5, 9: 2+6+10 ns, the longest.
	require.Equal(t, sim.Time(18*sim.Nanosecond), end)
	require.Equal(t, 18*sim.Nanosecond, g.Stats().Busy)
}

// Atomics on host memory are PCIe round trips applied at the host.
func TestSystemAtomic(t *testing.T) {
	nd := newNode(t, 1)
	g := nd.gpus[0]
	h := g.AllocHost("pi", 8, false)
	l := g.Alloc("pi", 8, false)
	var d1, d2 sim.Duration
	g.Launch("a", 1, func(tg *Group) {
		t0 := tg.Now()
		require.Equal(t, uint64(0), tg.AtomicAdd64(h, 0, 3, ScopeSystem))
		d1 = tg.Now().Sub(t0)
		t0 = tg.Now()
		require.Equal(t, uint64(0), tg.AtomicAdd64(l, 0, 3, ScopeDevice))
		d2 = tg.Now().Sub(t0)
	})
	require.NoError(t, nd.s.Run())
	require.Equal(t, uint64(3), h.Load64(0))
	require.Equal(t, g.Config().AtomicGPU, d2)
	require.Greater(t, d1, 4*d2)
}

// A red (Red64) on a peer's word is applied when it arrives, like an
// atomic, but the group goes on: four reds issue at once, the fifth waits
// for the first to complete, and a system fence waits for all of them.
func TestRedOnPeer(t *testing.T) {
	nd := newNode(t, 2)
	g := nd.gpus[0]
	w := nd.gpus[1].Alloc("w", 8, true)
	var issued [5]sim.Time
	var applied sim.Time
	var fenced sim.Time
	var seenAt sim.Time
	g.Launch("r", 1, func(tg *Group) {
		for i := range issued {
			at := tg.Red64(w, 0, 2, ScopeSystem)
			if i == 0 {
				applied = at
			}
			issued[i] = tg.Now()
		}
		tg.Fence(ScopeSystem)
		fenced = tg.Now()
	})
	nd.gpus[1].Launch("watch", 1, func(tg *Group) {
		tg.WaitWord(w, 0, "first red", func(v uint64) bool { return v >= 2 })
		seenAt = tg.Now()
	})
	require.NoError(t, nd.s.Run())
	require.Equal(t, uint64(10), w.Load64(0))
	issue := g.Config().StoreIssue
	for i := 1; i < 4; i++ {
		require.Equal(t, issued[i-1].Add(issue), issued[i], "red %d waited", i)
	}
	// The fifth waited for the first's round trip (applied, then the
	// response over NVLink).
	require.Greater(t, issued[4].Sub(issued[3]), 500*sim.Nanosecond)
	require.Greater(t, applied, sim.Time(0).Add(issue))
	require.GreaterOrEqual(t, seenAt, applied)
	require.Greater(t, fenced, issued[4].Add(500*sim.Nanosecond))
}

// A LaunchWaiting group starts its body at the poll that sees the word, in
// the same event, so it finishes exactly when a launched group spinning
// in WaitWord does — for several increments before the predicate holds,
// and for a predicate true at launch — and accounts the same poll time;
// both say the wait began at the launch (WaitSince).
func TestLaunchWaitingMatchesWaitWord(t *testing.T) {
	for _, c := range []struct {
		name   string
		adds   []sim.Duration // when the writer adds 1
		target uint64
	}{
		{"one add", []sim.Duration{1000 * sim.Nanosecond}, 1},
		{"three adds", []sim.Duration{300 * sim.Nanosecond, 700 * sim.Nanosecond, 2100 * sim.Nanosecond}, 3},
		{"on a poll instant", []sim.Duration{1400*sim.Nanosecond - 70*sim.Nanosecond}, 1},
		{"already true", nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ends, since [2]sim.Time
			var polls [2]sim.Duration
			var order [2][]string
			for k := range 2 {
				nd := newNode(t, 1)
				g := nd.gpus[0]
				r := g.Alloc("ctr", 64, false)
				pred := func(v uint64) bool { return v >= c.target }
				body := func(tg *Group) {
					since[k] = tg.WaitSince(r, 0)
					tg.WaitWord(r, 0, "ctr", pred)
					order[k] = append(order[k], "waiter")
					tg.Compute(50 * sim.Nanosecond)
					ends[k] = tg.Now()
				}
				var w *Group
				if k == 0 {
					w = g.Launch("w", 32, body)
				} else {
					w = g.LaunchWaiting("w", 32, r, 0, "ctr", pred, body)
					if c.target > 0 {
						require.Nil(t, w.Proc())
					}
				}
				g.Launch("adder", 32, func(tg *Group) {
					for _, at := range c.adds {
						tg.Sleep(sim.Time(at).Sub(tg.Now()))
						tg.AtomicAdd64(r, 0, 1, ScopeDevice)
						order[k] = append(order[k], "add")
					}
				})
				require.NoError(t, nd.s.Run())
				require.True(t, w.Done())
				polls[k] = w.Polling()
			}
			require.Equal(t, ends[0], ends[1])
			require.Equal(t, polls[0], polls[1])
			require.Equal(t, since[0], since[1])
			require.Zero(t, since[1], "the wait began at the launch")
			require.Equal(t, order[0], order[1])
			require.NotZero(t, ends[0])
		})
	}
}

// A device fence waits until the group's local stores are acknowledged
// (StoreLatency to the L2 and StoreLatency back); with nothing
// outstanding it costs FenceGPU (measured on an H200: 147 ns idle, 210 ns
// after a store).
func TestFenceWaitsForLocalStores(t *testing.T) {
	for _, c := range []struct {
		name  string
		store bool
	}{{"idle", false}, {"after a store", true}} {
		t.Run(c.name, func(t *testing.T) {
			nd := newNode(t, 1)
			g := nd.gpus[0]
			cfg := g.Config()
			r := g.Alloc("w", 64, false)
			var end sim.Time
			g.Launch("f", 1, func(tg *Group) {
				if c.store {
					tg.Store64(r, 0, 1)
				}
				tg.Fence(ScopeDevice)
				end = tg.Now()
			})
			require.NoError(t, nd.s.Run())
			want := sim.Time(0).Add(cfg.FenceGPU)
			if c.store {
				want = max(sim.Time(0).Add(cfg.StoreIssue+cfg.FenceGPU), sim.Time(0).Add(2*cfg.StoreLatency))
			}
			require.Equal(t, want, end)
		})
	}
}

// Write-through stores to pinned host memory issue at WTStoreIssue each;
// to local memory at StoreIssue.
func TestWriteWTIssue(t *testing.T) {
	nd := newNode(t, 1)
	g := nd.gpus[0]
	cfg := g.Config()
	h := g.AllocHost("ring", 4096, false)
	l := g.Alloc("ring", 4096, false)
	var dh, dl sim.Duration
	g.Launch("w", 1, func(tg *Group) {
		t0 := tg.Now()
		tg.WriteWT(h, 0, nil, 64)
		dh = tg.Now().Sub(t0)
		t0 = tg.Now()
		tg.WriteWT(l, 0, nil, 64)
		dl = tg.Now().Sub(t0)
	})
	require.NoError(t, nd.s.Run())
	n := sim.Duration(64 / cfg.WTStoreBytes)
	require.Equal(t, n*cfg.WTStoreIssue, dh)
	require.Equal(t, n*cfg.StoreIssue, dl)
}

// Two groups bouncing a flag see each other's stores a phase of the poll
// period after they land, spread over the period (no phase lock), and the
// same seed gives the same rounds.
func TestPollPhaseSpreads(t *testing.T) {
	run := func() []sim.Duration {
		nd := newNode(t, 1)
		g := nd.gpus[0]
		cfg := g.Config()
		a, b := g.Alloc("a", 64, false), g.Alloc("b", 64, false)
		const rounds = 400
		var lag []sim.Duration
		var landed sim.Time
		g.Launch("ping", 1, func(tg *Group) {
			for i := uint64(1); i <= rounds; i++ {
				landed = tg.Store64(a, 0, i)
				tg.WaitWord(b, 0, "b", func(v uint64) bool { return v == i })
			}
		})
		g.Launch("pong", 1, func(tg *Group) {
			for i := uint64(1); i <= rounds; i++ {
				tg.WaitWord(a, 0, "a", func(v uint64) bool { return v == i })
				// seen = read + the load's second half; read - landed is the phase
				lag = append(lag, tg.Now().Add(-(cfg.L2Latency - cfg.L2Latency/2)).Sub(landed))
				tg.Store64(b, 0, i)
			}
		})
		require.NoError(t, nd.s.Run())
		return lag
	}
	lag := run()
	require.Equal(t, lag, run())
	per := newNode(t, 1).gpus[0].Config().PollInterval
	lo, hi, sum := lag[0], lag[0], sim.Duration(0)
	for _, d := range lag {
		require.GreaterOrEqual(t, d, sim.Duration(0))
		require.Less(t, d, per)
		lo, hi, sum = min(lo, d), max(hi, d), sum+d
	}
	mean := sum / sim.Duration(len(lag))
	require.Less(t, lo, per/10)
	require.Greater(t, hi, per*9/10)
	require.InDelta(t, float64(per)/2, float64(mean), float64(per)/10)
}

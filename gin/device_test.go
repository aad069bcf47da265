package gin

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/stretchr/testify/require"
)

func TestRollingLessEq(t *testing.T) {
	const max64 = ^uint64(0)
	for _, c := range []struct {
		a, b uint64
		bits int
		want bool
	}{
		{0, 0, 64, true},
		{1, 0, 64, false},
		{0, 1, 64, true},
		{5, 4, 64, false},
		{max64, 0, 64, true},      // wraparound: 0 follows 2^64-1
		{0, max64, 64, false},     // 2^64-1 is "before" 0
		{0, 1 << 63, 64, false},   // exactly half the range away: not <=
		{0, 1<<63 - 1, 64, true},  // just under half
		{0xffffffff, 0, 32, true}, // 32-bit barrier epochs wrap
		{0xffffffff, 1 << 40, 32, true},
		{1 << 40, 0xffffffff, 32, false}, // only the low 32 bits count: 0 vs 2^32-1
		{(1 << 56) - 1, 0, 56, true},     // 56-bit counters
		{(1 << 56) - 1, 1 << 56, 56, true},
		{3, 2, 56, false},
		{3, 3 + 1<<55 - 1, 56, true},
		{3, 3 + 1<<55, 56, false},
	} {
		require.Equal(t, c.want, RollingLessEq(c.a, c.b, c.bits), "rollingLessEq(%#x, %#x, %d)", c.a, c.b, c.bits)
	}
}

func TestContextsAndLayout(t *testing.T) {
	for _, c := range []struct {
		v                  Version
		hint, nctx, nconns int
	}{
		{V2_28, 0, 4, 4},
		{V2_28, 16, 4, 4}, // hint ignored
		{V2_30, 0, 4, 1},  // no NICs: one connection, 4 contexts
		{V2_30, 6, 6, 1},
		{V2_30, 1, 1, 1},
	} {
		cl := newCluster(t, 2, 2, c.v)
		dc, err := cl.comm.DevCommCreate(Requirements{GinContextCount: c.hint, GinSignalCount: 3, GinCounterCount: 2,
			BarrierCount: 2, RailGinBarrierCount: 1, ConnectionType: ConnFull})
		require.NoError(t, err)
		require.Equal(t, c.nctx, dc.ContextCount(), "%v hint %d", c.v, c.hint)
		require.Equal(t, c.nconns, dc.Connections())
		base, width, n := dc.RailGinBarrierSignals()
		require.Equal(t, 3, base, "user signals first")
		wbase, wwidth, wn := dc.WorldGinBarrierSignals()
		require.Equal(t, base+n*width, wbase)
		if c.v == V2_30 {
			// Hybrid sets (barrierCount) then the user's.
			require.Equal(t, []int{3, 2, 2, 4, 2}, []int{n, wn, width, wwidth, dc.LSABarrierCount()})
		} else {
			// One shared set of max(barrierCount, x); no world GIN barriers.
			require.Equal(t, []int{2, 0, 1, 2}, []int{n, wn, width, dc.LSABarrierCount()})
		}
		require.Equal(t, wbase+wn*wwidth, dc.SignalCount())
	}
	cl := newCluster(t, 2, 2, V2_30)
	_, err := cl.comm.DevCommCreate(Requirements{GinSignalCount: 1})
	require.ErrorContains(t, err, "NONE")
	_, err = cl.comm.DevCommCreate(Requirements{WorldGinBarrierCount: 1, ConnectionType: ConnRail})
	require.ErrorContains(t, err, "RAIL")
	_, err = cl.comm.DevCommCreate(Requirements{GinSignalCount: 1, ConnectionType: ConnFull, Type: TypeGDAKI})
	require.ErrorContains(t, err, "not available")
}

func TestTeams(t *testing.T) {
	cl := newCluster(t, 3, 4, V2_30)
	dc, err := cl.comm.DevCommCreate(Requirements{ConnectionType: ConnRail, GinSignalCount: 1})
	require.NoError(t, err)
	require.Equal(t, Team{12, 6, 1}, dc.World(6))
	require.Equal(t, Team{4, 2, 1}, dc.LSA(6))
	require.Equal(t, Team{3, 1, 4}, dc.Rail(6))
	rail := dc.Rail(6)
	require.Equal(t, 2, TeamRankToWorld(6, rail, 0))
	require.Equal(t, 10, TeamRankToWorld(6, rail, 2))
	require.True(t, TeamRankIsMember(6, rail, 10))
	require.False(t, TeamRankIsMember(6, rail, 7))
	require.Equal(t, 2, TeamRankToTeam(6, rail, 10))
	require.Equal(t, []int{2, 6, 10}, dc.Peers(6))
	require.Equal(t, 3, dc.TeamRankToLsa(6, dc.World(6), 7))
}

// A put+signal lands data before the signal; the waiter sees the signal at
// a poll read less than a poll period after the landing.
func TestPutSignalWait(t *testing.T) {
	cl := newCluster(t, 2, 1, V2_30)
	dc, err := cl.comm.DevCommCreate(Requirements{GinSignalCount: 4, GinCounterCount: 1, ConnectionType: ConnFull})
	require.NoError(t, err)
	w, err := cl.comm.WindowRegister("buf", 8192, WinDefault, true)
	require.NoError(t, err)
	for i := range 4096 {
		w.Region(0).Bytes()[i] = byte(i)
	}
	var seen sim.Time
	var got []byte
	var cnt uint64
	var vals []uint64
	cl.launch("k", 32, func(t *gpu.Group, rank int) {
		g := dc.Gin(t, rank, 1)
		if rank == 0 {
			g.Put(dc.World(0), 1, w, 4096, w, 0, 4096, SignalInc{Signal: 2}, CounterInc{Counter: 0})
			cnt = g.WaitCounter(0, 1, 56)
			return
		}
		vals = append(vals, g.WaitSignal(2, 1, 64))
		seen = t.Now()
		got = append([]byte(nil), w.Region(1).Bytes()[4096:8192]...)
		vals = append(vals, g.ReadSignal(2, 64))
		g.ResetSignal(2)
		t.Sleep(sim.Microsecond)
		vals = append(vals, g.ReadSignal(2, 64))
	})
	require.NoError(t, cl.s.Run())
	require.NoError(t, cl.comm.CheckDeadlock())
	require.Equal(t, w.Region(0).Bytes()[:4096], got)
	require.Equal(t, uint64(1), cnt)
	require.Equal(t, []uint64{1, 1, 0}, vals)
	// The signal is read by a poll less than a period after it lands; the
	// waiter returns the load's second half and a coop sync later.
	cfg := gpu.DefaultConfig()
	landed := sim.Time(0).Add(cfg.CoopSyncWarp + cl.fb.issueCost + cl.fb.lat)
	read := seen.Add(-(cfg.L2Latency - cfg.L2Latency/2 + cfg.CoopSyncWarp))
	require.GreaterOrEqual(t, read, landed)
	require.Less(t, read.Sub(landed), cfg.PollInterval)
}

// Coop semantics: one backend issue per call whatever the coop size, on
// the coop's own process, between two coop syncs.
func TestCoopIssueOnce(t *testing.T) {
	for _, threads := range []int{1, 32, 512} {
		cl := newCluster(t, 1, 2, V2_30)
		dc, err := cl.comm.DevCommCreate(Requirements{GinSignalCount: 1, ConnectionType: ConnFull})
		require.NoError(t, err)
		var took sim.Duration
		cl.ranks[0].GPU.Launch("cta", threads, func(t *gpu.Group) {
			g := dc.Gin(t, 0, 0)
			t0 := t.Now()
			g.Signal(dc.World(0), 1, SignalAdd{Signal: 0, Value: 3})
			took = t.Now().Sub(t0)
		})
		require.NoError(t, cl.s.Run())
		require.Equal(t, []string{"cta r0 ctx0 signal->1"}, cl.fb.calls)
		cfg := gpu.DefaultConfig()
		sync := map[int]sim.Duration{1: 0, 32: cfg.CoopSyncWarp, 512: cfg.CoopSyncCTA}[threads]
		require.Equal(t, 2*sync+cl.fb.issueCost, took, "threads %d", threads)
		require.Equal(t, uint64(3), cl.fb.sig[1].Load64(0))
	}
}

// Flush spreads peers over the coop's threads (peer i on thread i % size)
// and returns after every peer's work completed.
func TestFlushSpread(t *testing.T) {
	cl := newCluster(t, 2, 2, V2_30)
	dc, err := cl.comm.DevCommCreate(Requirements{GinSignalCount: 1, ConnectionType: ConnFull})
	require.NoError(t, err)
	w, err := cl.comm.WindowRegister("w", 4096, 0, false)
	require.NoError(t, err)
	var end sim.Time
	cl.ranks[0].GPU.Launch("cta", 3, func(t *gpu.Group) {
		g := dc.Gin(t, 0, 0)
		for p := 0; p < 4; p++ {
			g.Put(dc.World(0), p, w, 0, w, 0, 64, nil, nil)
		}
		g.Flush()
		end = t.Now()
	})
	require.NoError(t, cl.s.Run())
	var flushes []string
	for _, c := range cl.fb.calls {
		if strings.Contains(c, "flush_async") {
			flushes = append(flushes, c)
		}
	}
	sort.Strings(flushes)
	require.Equal(t, []string{
		"cta/t0 flush_async r0 ctx0 ->0", "cta/t0 flush_async r0 ctx0 ->3",
		"cta/t1 flush_async r0 ctx0 ->1", "cta/t2 flush_async r0 ctx0 ->2",
	}, flushes)
	lastIssue := sim.Time(0).Add(4 * (2*gpu.DefaultConfig().CoopSyncWarp + cl.fb.issueCost))
	require.GreaterOrEqual(t, int64(end), int64(lastIssue.Add(cl.fb.lat+cl.fb.compl)))
}

// Proxy-v2 style reset by offset: the raw word keeps counting, reads
// subtract the offset.
func TestResetByOffset(t *testing.T) {
	cl := newCluster(t, 1, 2, V2_30)
	cl.fb.offsetReset = true
	dc, err := cl.comm.DevCommCreate(Requirements{GinSignalCount: 1, ConnectionType: ConnFull})
	require.NoError(t, err)
	var vals []uint64
	cl.launch("k", 1, func(t *gpu.Group, rank int) {
		g := dc.Gin(t, rank, 0)
		if rank == 0 {
			g.Signal(dc.World(0), 1, SignalAdd{Signal: 0, Value: 5})
			t.Sleep(10 * sim.Microsecond)
			g.Signal(dc.World(0), 1, SignalAdd{Signal: 0, Value: 2})
			return
		}
		g.WaitSignal(0, 5, 64)
		g.IncreaseSignalShadow(0, 9)
		g.ResetSignal(0)
		vals = append(vals, g.ReadSignal(0, 64), g.SignalShadow(0))
		vals = append(vals, g.WaitSignal(0, 2, 64))
	})
	require.NoError(t, cl.s.Run())
	require.Equal(t, []uint64{0, 0, 2}, vals)
	require.Equal(t, uint64(7), cl.fb.sig[1].Load64(0))
}

// Each user error is reported with its kind, rank, context and operation.
func TestUserErrors(t *testing.T) {
	type prog func(t *gpu.Group, g *Gin, dc *DevComm, w, va *Window)
	for _, c := range []struct {
		name   string
		v      Version
		conn   ConnType
		rank   int
		body   prog
		kind   error
		substr string
	}{
		{"out of window", V2_30, ConnFull, 0, func(_ *gpu.Group, g *Gin, dc *DevComm, w, _ *Window) {
			g.Put(dc.World(0), 1, w, 4000, w, 0, 200, nil, nil)
		}, ErrWindowBounds, `rank 0 ctx 0 coop "k" put: access outside the window: destination window "w" [4000,+200) of 4096 bytes`},
		{"unregistered", V2_30, ConnFull, 0, func(_ *gpu.Group, g *Gin, dc *DevComm, w, _ *Window) {
			_ = dc.Comm().WindowDeregister(w)
			g.Put(dc.World(0), 1, w, 0, w, 0, 8, nil, nil)
		}, ErrUnregistered, "destination window"},
		{"peer outside team", V2_30, ConnFull, 1, func(_ *gpu.Group, g *Gin, dc *DevComm, _, _ *Window) {
			g.Signal(dc.LSA(1), 2, SignalInc{Signal: 0})
		}, ErrPeer, "rank 1 ctx 0 coop \"k\" signal: peer outside the team: peer 2 of a team of 2 ranks"},
		{"rail connection", V2_30, ConnRail, 0, func(_ *gpu.Group, g *Gin, dc *DevComm, _, _ *Window) {
			g.Signal(dc.World(0), 1, SignalInc{Signal: 0})
		}, ErrNotConnected, "world rank 1 from rank 0"},
		{"signal range", V2_30, ConnFull, 0, func(_ *gpu.Group, g *Gin, dc *DevComm, _, _ *Window) {
			g.WaitSignal(4, 1, 64)
		}, ErrSignalRange, "wait_signal: signal index out of range: signal 4 of 4"},
		{"counter range", V2_30, ConnFull, 0, func(_ *gpu.Group, g *Gin, dc *DevComm, w, _ *Window) {
			g.Put(dc.World(0), 1, w, 0, w, 0, 8, nil, CounterInc{Counter: 2})
		}, ErrCounterRange, "counter 2 of 2"},
		{"mixed inc add", V2_30, ConnFull, 0, func(_ *gpu.Group, g *Gin, dc *DevComm, _, _ *Window) {
			g.Signal(dc.World(0), 1, SignalInc{Signal: 3})
			g.Signal(dc.World(0), 1, SignalAdd{Signal: 3, Value: 2})
		}, ErrMixedSignalOps, "SignalAdd on signal 3 of rank 1 ctx 0, which had SignalInc since its last reset"},
		{"reset with update in flight", V2_30, ConnFull, 0, func(t *gpu.Group, g *Gin, dc *DevComm, _, _ *Window) {
			g.Signal(dc.World(0), 0, SignalInc{Signal: 1}) // loopback, lands 2us later
			g.ResetSignal(1)
		}, ErrResetRace, "reset of signal 1 of rank 0 ctx 0 while updates adding 1, issued before it, had not landed"},
		{"get on 2.28", V2_28, ConnFull, 0, func(_ *gpu.Group, g *Gin, dc *DevComm, w, _ *Window) {
			g.Get(dc.World(0), 1, w, 0, w, 0, 8)
		}, ErrUnsupported, "get (2.30.3+)"},
		{"flushAsync on 2.28", V2_28, ConnFull, 0, func(_ *gpu.Group, g *Gin, dc *DevComm, _, _ *Window) {
			g.FlushAsync(dc.World(0), 1)
		}, ErrUnsupported, "flushAsync"},
		{"weak on 2.28", V2_28, ConnFull, 0, func(_ *gpu.Group, g *Gin, dc *DevComm, _, _ *Window) {
			g.Signal(dc.World(0), 1, SignalInc{Signal: 0, Weak: true})
		}, ErrUnsupported, "weak signals"},
		{"flags on 2.28", V2_28, ConnFull, 0, func(_ *gpu.Group, g *Gin, dc *DevComm, _, _ *Window) {
			g.Signal(dc.World(0), 1, SignalInc{Signal: 0}, OptAggregateRequests)
		}, ErrUnsupported, "optFlags"},
		{"VA signal without strict ordering", V2_30, ConnFull, 0, func(_ *gpu.Group, g *Gin, dc *DevComm, w, _ *Window) {
			g.Signal(dc.World(0), 1, VASignalInc{Win: w, Off: 8})
		}, ErrInvalid, "NCCL_WIN_STRICT_ORDERING"},
		{"putValue size", V2_30, ConnFull, 0, func(_ *gpu.Group, g *Gin, dc *DevComm, w, _ *Window) {
			g.PutValue(dc.World(0), 1, w, 0, 1, 3, nil)
		}, ErrInvalid, "value size 3"},
		{"context range", V2_30, ConnFull, 0, func(t *gpu.Group, _ *Gin, dc *DevComm, _, _ *Window) {
			dc.Gin(t, 0, 9)
		}, ErrContext, "context 9 of 4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := newCluster(t, 2, 2, c.v)
			dc, err := cl.comm.DevCommCreate(Requirements{GinSignalCount: 4, GinCounterCount: 2, ConnectionType: c.conn})
			require.NoError(t, err)
			w, err := cl.comm.WindowRegister("w", 4096, 0, false)
			require.NoError(t, err)
			va, err := cl.comm.WindowRegister("va", 4096, WinStrictOrdering, false)
			require.NoError(t, err)
			cl.ranks[c.rank].GPU.Launch("k", 32, func(tg *gpu.Group) {
				tg.Sleep(sim.Microsecond)
				c.body(tg, dc.Gin(tg, c.rank, 0), dc, w, va)
			})
			err = cl.s.Run()
			require.Error(t, err)
			require.True(t, errors.Is(err, c.kind), "got %v", err)
			var ge *Error
			require.True(t, errors.As(err, &ge))
			require.Equal(t, c.rank, ge.Rank)
			require.GreaterOrEqual(t, int64(ge.At), int64(sim.Microsecond))
			require.Contains(t, err.Error(), c.substr)
			cl.s.Shutdown()
		})
	}
}

// An update issued after a reset but landing before the reset's store of 0
// landed races with it.
func TestResetRaceLanding(t *testing.T) {
	cl := newCluster(t, 1, 2, V2_30)
	cl.fb.lat = 10 * sim.Nanosecond // lands before the 100 ns store
	dc, err := cl.comm.DevCommCreate(Requirements{GinSignalCount: 1, ConnectionType: ConnFull})
	require.NoError(t, err)
	cl.launch("k", 1, func(t *gpu.Group, rank int) {
		g := dc.Gin(t, rank, 0)
		if rank == 0 {
			g.Signal(dc.World(0), 1, SignalInc{Signal: 0})
			t.Sleep(sim.Microsecond)
			g.Signal(dc.World(0), 1, SignalInc{Signal: 0})
			return
		}
		g.WaitSignal(0, 1, 64)
		t.Sleep(sim.Microsecond - 250*sim.Nanosecond)
		g.ResetSignal(0)
	})
	err = cl.s.Run()
	require.ErrorIs(t, err, ErrResetRace)
	require.Contains(t, err.Error(), "an update of signal 0 of rank 1 ctx 0 landed at t=")
	cl.s.Shutdown()
}

func TestDeadlockReport(t *testing.T) {
	cl := newCluster(t, 1, 2, V2_30)
	dc, err := cl.comm.DevCommCreate(Requirements{GinSignalCount: 20, GinCounterCount: 1, ConnectionType: ConnFull})
	require.NoError(t, err)
	cl.launch("dispatch/w2", 32, func(t *gpu.Group, rank int) {
		g := dc.Gin(t, rank, 0)
		if rank == 0 {
			for range 4 {
				g.Signal(dc.World(0), 1, SignalInc{Signal: 17})
			}
			g.WaitCounter(0, 1, 56)
			return
		}
		g.WaitSignal(17, 5, 64)
	})
	require.NoError(t, cl.s.Run())
	err = cl.comm.CheckDeadlock()
	require.ErrorIs(t, err, ErrDeadlock)
	require.Equal(t, `gin: deadlock at t=3.235us: rank 0 ctx 0 coop "dispatch/w2" waits counter 0 >= 1 (value 0); `+
		`rank 1 ctx 0 coop "dispatch/w2" waits signal 17 >= 5 (value 4)`, err.Error())
	cl.s.Shutdown()
}

// GIN barriers on the fake backend: nobody leaves before the last member
// arrived plus one signal latency; a second barrier works (epochs/shadows).
func TestGinBarrier(t *testing.T) {
	for _, v := range []Version{V2_28, V2_30} {
		for _, kind := range []BarrierKind{BarrierWorldGin, BarrierRailGin} {
			if v == V2_28 && kind == BarrierWorldGin {
				continue // 2.28 has rail GIN barriers only
			}
			t.Run(fmt.Sprintf("%v/%v", v, kind), func(t *testing.T) {
				cl := newCluster(t, 2, 2, v)
				req := Requirements{BarrierCount: 1, RailGinBarrierCount: 1, ConnectionType: ConnFull}
				fence := FenceNone // 2.28: Relaxed only
				if v == V2_30 {
					req.WorldGinBarrierCount = 1
					fence = FencePut | FenceGet
				}
				dc, err := cl.comm.DevCommCreate(req)
				require.NoError(t, err)
				idx := 0
				arrive := make([]sim.Time, 4)
				leave := make([][2]sim.Time, 4)
				cl.launch("bar", 32, func(t *gpu.Group, rank int) {
					g := dc.Gin(t, rank, 0)
					for round := 0; round < 2; round++ {
						t.Sleep(sim.Duration(rank+1) * sim.Microsecond)
						if round == 0 {
							arrive[rank] = t.Now()
						}
						g.GinBarrier(kind, idx, false).Sync(OrderAcqRel, fence)
						leave[rank][round] = t.Now()
					}
				})
				require.NoError(t, cl.s.Run())
				require.NoError(t, cl.comm.CheckDeadlock())
				for r := 0; r < 4; r++ {
					// Everyone waits for the other members' arrival
					// signals; with the Put fence (2.30) also for its own
					// loopback one.
					var last sim.Time
					for m := 0; m < 4; m++ {
						if kind == BarrierRailGin && m%2 != r%2 || m == r && v == V2_28 {
							continue
						}
						last = max(last, arrive[m])
					}
					require.GreaterOrEqual(t, int64(leave[r][0]), int64(last.Add(cl.fb.lat)), "rank %d", r)
					require.Greater(t, leave[r][1], leave[r][0])
				}
			})
		}
	}
}

// Same seed, same calls and times.
func TestDeterminism(t *testing.T) {
	run := func() string {
		cl := newCluster(t, 2, 2, V2_30)
		dc, err := cl.comm.DevCommCreate(Requirements{GinSignalCount: 4, WorldGinBarrierCount: 1, ConnectionType: ConnFull})
		require.NoError(t, err)
		var b strings.Builder
		cl.launch("k", 32, func(t *gpu.Group, rank int) {
			g := dc.Gin(t, rank, rank%dc.ContextCount())
			for p := 0; p < 4; p++ {
				g.Signal(dc.World(rank), p, SignalInc{Signal: rank})
			}
			g.GinBarrier(BarrierWorldGin, 0, true).Sync(OrderAcqRel, FencePut)
			fmt.Fprintf(&b, "%d@%v ", rank, t.Now())
		})
		require.NoError(t, cl.s.Run())
		return b.String() + strings.Join(cl.fb.calls, ",")
	}
	require.Equal(t, run(), run())
}

// 2.30 GIN barrier message counts: nPeerSigs × nContexts signals per rank,
// nPeerSigs = n with the Put fence (self last), n-1 without; the Get fence
// flushes every context.
func TestGinBarrierMessages(t *testing.T) {
	for _, c := range []struct {
		fence   FenceLevel
		all     bool
		signals int
		flushes int
	}{
		{FencePut, false, 4, 0},
		{FenceNone, false, 3, 0},
		{FencePut, true, 16, 0},
		{FenceGet, true, 12, 16},
	} {
		cl := newCluster(t, 2, 2, V2_30)
		dc, err := cl.comm.DevCommCreate(Requirements{WorldGinBarrierCount: 1, ConnectionType: ConnFull})
		require.NoError(t, err)
		cl.launch("bar", 32, func(t *gpu.Group, rank int) {
			dc.Gin(t, rank, 0).GinBarrier(BarrierWorldGin, 0, c.all).Sync(OrderAcqRel, c.fence)
		})
		require.NoError(t, cl.s.Run())
		require.NoError(t, cl.comm.CheckDeadlock())
		sig, fl := 0, 0
		var selfLast bool
		for _, call := range cl.fb.calls {
			if strings.Contains(call, " r1 ") && strings.Contains(call, "signal") {
				sig++
				selfLast = strings.HasSuffix(call, "->1")
			}
			if strings.Contains(call, "flush_async r1 ") {
				fl++
			}
		}
		require.Equal(t, c.signals, sig, "%+v", c)
		require.Equal(t, c.flushes, fl, "%+v", c)
		if c.fence&FencePut != 0 && !c.all {
			require.True(t, selfLast, "self is visited last")
		}
	}
}

// A group that waits for a signal once and resets it, as a receiving warp
// does, is not kept by the device communicator's bookkeeping once it is
// done: its wait is dropped when it ends, and its reset once the reset
// has landed (by a sweep whenever the resets remembered have doubled).
func TestFinishedWaitersAreNotKept(t *testing.T) {
	const n = 200
	cl := newCluster(t, 2, 1, V2_30)
	dc, err := cl.comm.DevCommCreate(Requirements{GinSignalCount: n, ConnectionType: ConnFull})
	require.NoError(t, err)
	cl.ranks[0].GPU.Launch("send", 32, func(t *gpu.Group) {
		g := dc.Gin(t, 0, 0)
		for i := range n {
			g.Signal(dc.World(0), 1, SignalInc{Signal: i})
			t.Sleep(sim.Microsecond)
		}
	})
	for i := range n {
		cl.ranks[1].GPU.Launch(fmt.Sprintf("recv%d", i), 32, func(t *gpu.Group) {
			g := dc.Gin(t, 1, 0)
			g.WaitSignal(i, 1, 64)
			g.ResetSignal(i)
		})
	}
	require.NoError(t, cl.s.Run())
	require.NoError(t, cl.comm.CheckDeadlock())
	p := dc.part(1)
	require.Zero(t, len(p.waits), "the waits ended")
	require.Less(t, len(p.own), 64, "the landed resets are swept")
}

package machine_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/check"
	"github.com/ginsim/ginsim/gin/gdaki"
	"github.com/ginsim/ginsim/gin/lsa"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/internal/par"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// worldRun is what a World run of ring gives: a digest of the merged obs
// stream, its length, the end time, the events fired and the backend's
// counters.
type worldRun struct {
	samples [32]byte // the Sampler's snapshots
	nsample int
	stream  [32]byte
	events  int
	end     sim.Time
	fired   uint64
	stats   gin.BackendStats
	signals []uint64
}

// digest hashes every event the bus delivers, in order.
type digest struct {
	h [32]byte
	n int
}

func (d *digest) Observe(e obs.Event) {
	d.h = sha256.Sum256(fmt.Appendf(d.h[:], "%+v", e))
	d.n++
}

// worldEnv is a GIN communicator over every GPU of a machine, on a lone
// Sim or a World.
type worldEnv struct {
	w   *sim.World // nil: a lone Sim
	m   *machine.Machine
	c   *gin.Comm
	dc  *gin.DevComm
	win *gin.Window
	b   interface {
		gin.Backend
		SetObserver(*obs.Bus)
	}
}

// newWorldEnv builds nodes nodes of gpus GPUs on a lone Sim (workers 0)
// or on a World of one partition per node run by workers goroutines, and
// a communicator over them through backend with two contexts, two
// signals, a counter and a world GIN barrier, and a 1 MiB window.
func newWorldEnv(tb testing.TB, backend string, nodes, gpus, workers int) *worldEnv {
	spec, err := machine.Resolve("h100-ib")
	require.NoError(tb, err)
	spec.GPUsPerNode = gpus
	e := &worldEnv{}
	if workers == 0 {
		e.m, err = machine.Build(sim.New(sim.Config{Seed: 1}), spec, nodes)
		require.NoError(tb, err)
	} else {
		e.w = sim.NewWorld(sim.Config{Seed: 1}, nodes, machine.Lookahead(spec, nodes))
		pool := par.NewPool(workers)
		tb.Cleanup(pool.Close)
		e.w.SetExec(pool.Exec)
		e.m, err = machine.BuildWorld(e.w, spec, nodes, nil)
		require.NoError(tb, err)
		require.Same(tb, e.w, e.m.World)
		for r, rk := range e.m.Ranks {
			require.Same(tb, e.w.Part(rk.Node%nodes), rk.Sim(), "rank %d", r)
		}
	}
	cfg := gin.CommConfig{Version: gin.V2_30, Backends: map[gin.Type]gin.Backend{}}
	switch backend {
	case "gdaki":
		g, err := gdaki.New(gdaki.DefaultConfig())
		require.NoError(tb, err)
		cfg.Backends[gin.TypeGDAKI], e.b = g, g
	case "proxy":
		p, err := proxy.New(proxy.DefaultConfig())
		require.NoError(tb, err)
		cfg.Backends[gin.TypeProxy], e.b = p, p
	}
	e.c, err = gin.NewComm(e.m.Ranks, cfg)
	require.NoError(tb, err)
	require.Same(tb, e.w, e.c.World())
	e.dc, err = e.c.DevCommCreate(gin.Requirements{GinContextCount: 2, GinSignalCount: 2, GinCounterCount: 1,
		WorldGinBarrierCount: 1, ConnectionType: gin.ConnFull})
	require.NoError(tb, err)
	e.win, err = e.c.WindowRegister("buf", 1<<20, gin.WinDefault, true)
	require.NoError(tb, err)
	return e
}

// run runs the machine until nothing is pending.
func (e *worldEnv) run() error {
	if e.w != nil {
		return e.w.Run()
	}
	return e.m.Sim.Run()
}

// ring runs, on a machine of nodes nodes (two GPUs each) built on a World
// of one partition per node with workers workers, a GIN ring over every
// rank through backend: three rounds of an 8 KiB put with a signal to the
// next rank, each waiting for the previous rank's, then a put to itself,
// a get with a flush, an LSA store to the node's other GPU, a put with a
// counter and a world GIN barrier; every event is observed and checked
// (gin/check), and utilisation sampled until rank 0 leaves the barrier.
func ring(t *testing.T, backend string, nodes, workers int) worldRun {
	t.Helper()
	e := newWorldEnv(t, backend, nodes, 2, workers)
	w, m, c, dc, win, b := e.w, e.m, e.c, e.dc, e.win, e.b

	d := &digest{}
	bus := obs.NewBus(d)
	if w != nil {
		lone := obs.NewBus()
		require.Panics(t, func() { m.SetObserver(lone) }, "a lone bus on a World")
		require.Panics(t, func() { c.SetObserver(lone) }, "a lone bus on a World")
		require.Panics(t, func() { b.SetObserver(lone) }, "a lone bus on a World")
		bus = obs.Split(w, d)
	}
	chk := check.Attach(bus)
	m.SetObserver(bus)
	c.SetObserver(bus)
	b.SetObserver(bus)

	var sp *machine.Sampler // started once the kernels are launched
	const rounds = 3
	n := len(m.Ranks)
	for r := range n {
		m.Ranks[r].GPU.Launch("ring", 32, func(tg *gpu.Group) {
			gs := []*gin.Gin{dc.Gin(tg, r, 0), dc.Gin(tg, r, 1)}
			team := dc.World(r)
			next := (r + 1) % n
			for k := range rounds {
				g := gs[k%2]
				off := uint64(k) << 16
				g.Put(team, next, win, off, win, off, 8192, gin.SignalInc{Signal: 0}, nil)
				g.WaitSignal(0, uint64(k/2+1), 64)
				g.ReadWindow(win, off, make([]byte, 8192))
			}
			g := gs[0]
			g.Put(team, r, win, 1<<18, win, 0, 256, gin.SignalInc{Signal: 1}, nil) // through the self-loop
			g.WaitSignal(1, 1, 64)
			g.Get(team, next, win, 0, win, 3<<18, 4096)
			g.Flush()
			lsa.New(dc, tg, r).Copy(1-r%2, win, 5<<17, make([]byte, 64), 64) // NVLink, within the node
			g.Put(team, next, win, 1<<19, win, 0, 64, nil, gin.CounterInc{Counter: 0})
			g.WaitCounter(0, 1, 56)
			g.Flush()
			g.GinBarrier(gin.BarrierWorldGin, 0, false).Sync(gin.OrderAcqRel, gin.FenceNone)
			if r == 0 {
				sp.StopIn(tg.GPU().Sim())
			}
		})
	}
	sp = m.Sample(2*sim.Microsecond, nil)
	require.NoError(t, e.run())
	require.NoError(t, c.CheckDeadlock())
	chk.End(false)
	require.NoError(t, chk.Err())
	var sh [32]byte
	for _, snap := range sp.Snapshots() {
		sh = sha256.Sum256(fmt.Appendf(sh[:], "%+v", snap))
	}
	out := worldRun{samples: sh, nsample: len(sp.Snapshots()), stream: d.h, events: d.n, end: m.Sim.Now(), fired: m.Sim.Fired(), stats: b.Stats()}
	if w != nil {
		out.end, out.fired = w.Now(), w.Fired()
	}
	for r := range n {
		for ctx := range 2 {
			reg, off := b.SignalWord(dc, r, ctx, 0)
			out.signals = append(out.signals, reg.Load64(off))
		}
	}
	return out
}

// A GIN program across nodes on a World gives the same run, observation
// stream included, for every worker count.
func TestWorldWorkersDoNotChangeTheRun(t *testing.T) {
	nodes := 4
	if testing.Short() {
		nodes = 2
	}
	for _, backend := range []string{"gdaki", "proxy"} {
		t.Run(backend, func(t *testing.T) {
			lone := ring(t, backend, nodes, 0)
			want := ring(t, backend, nodes, 1)
			require.Equal(t, lone.signals, want.signals)
			t.Logf("%d nodes: lone Sim %d events observed, end %v, %d samples; World %d events, end %v, %d fired, %d samples",
				nodes, lone.events, lone.end, lone.nsample, want.events, want.end, want.fired, want.nsample)
			require.Greater(t, want.nsample, 5)
			require.Positive(t, want.events)
			n := 2 * nodes
			require.Equal(t, uint64(n*(6+n-1)), want.stats.Ops, "per rank 3 puts, a self put, a get, a counter put and a signal to every peer")
			for i, v := range want.signals { // rounds 0 and 2 on context 0, round 1 on context 1
				require.Equal(t, uint64(2-i%2), v, "rank %d context %d", i/2, i%2)
			}
			for _, workers := range []int{2, 4} {
				got := ring(t, backend, nodes, workers)
				require.Equal(t, want, got, "%d workers", workers)
			}
		})
	}
}

// BenchmarkWorldAllToAll runs a GIN all-to-all over 8 nodes of 8 GPUs
// (GDAKI, 64 KiB with a signal from every rank to every other, each
// waiting for all of its) on a lone Sim (workers=0) and on a World of
// one partition per node run by 1, 2, 4 and 8 goroutines.
func BenchmarkWorldAllToAll(b *testing.B) {
	const nodes, gpus, size = 8, 8, 64 << 10
	for _, workers := range []int{0, 1, 2, 4, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var fired uint64
			for range b.N {
				b.StopTimer()
				e := newWorldEnv(b, "gdaki", nodes, gpus, workers)
				if e.w != nil {
					e.w.SetSerialBelow(sim.DefaultSerialBelow)
				}
				n := len(e.m.Ranks)
				for r := range n {
					e.m.Ranks[r].GPU.Launch("a2a", 32, func(tg *gpu.Group) {
						g := e.dc.Gin(tg, r, 0)
						team := e.dc.World(r)
						for i := 1; i < n; i++ {
							p := (r + i) % n
							g.Put(team, p, e.win, uint64(r)*size%(1<<20), e.win, 0, size, gin.SignalInc{Signal: 0}, nil)
						}
						g.WaitSignal(0, uint64(n-1), 64)
					})
				}
				b.StartTimer()
				if err := e.run(); err != nil {
					b.Fatal(err)
				}
				if e.w != nil {
					fired += e.w.Fired()
				} else {
					fired += e.m.Sim.Fired()
				}
			}
			b.ReportMetric(float64(fired)/b.Elapsed().Seconds()/1e6, "Mevents/s")
			b.ReportMetric(float64(fired)/float64(b.N), "events/op")
		})
	}
}

// The signal rules (an Inc/Add mix, a reset racing with updates in
// flight) give a World the verdicts of a lone Sim when the update comes
// from another node: its partition learns of it a lookahead after the
// issue (gin's remote notes).
func TestWorldSignalRulesAcrossNodes(t *testing.T) {
	verdict := func(workers int, body func(rank int, tg *gpu.Group, g *gin.Gin, team gin.Team)) error {
		e := newWorldEnv(t, "gdaki", 2, 1, workers)
		for r := range 2 {
			e.m.Ranks[r].GPU.Launch("k", 1, func(tg *gpu.Group) { body(r, tg, e.dc.Gin(tg, r, 0), e.dc.World(r)) })
		}
		return e.run()
	}
	same := func(name string, body func(rank int, tg *gpu.Group, g *gin.Gin, team gin.Team)) error {
		t.Helper()
		lone, world := verdict(0, body), verdict(2, body)
		for _, kind := range []error{nil, gin.ErrMixedSignalOps, gin.ErrResetRace} {
			if kind == nil {
				require.Equal(t, lone == nil, world == nil, "%s: lone Sim %v, World %v", name, lone, world)
				continue
			}
			require.Equal(t, errors.Is(lone, kind), errors.Is(world, kind), "%s: lone Sim %v, World %v", name, lone, world)
		}
		t.Logf("%s: lone Sim %v; World %v", name, lone, world)
		return world
	}
	err := same("inc then add", func(rank int, _ *gpu.Group, g *gin.Gin, team gin.Team) {
		if rank == 0 {
			g.Signal(team, 1, gin.SignalInc{Signal: 0})
			g.Signal(team, 1, gin.SignalAdd{Signal: 0, Value: 2})
		}
	})
	require.ErrorIs(t, err, gin.ErrMixedSignalOps)
	races := 0
	for _, d := range []sim.Duration{100 * sim.Nanosecond, 400 * sim.Nanosecond, sim.Microsecond, 2 * sim.Microsecond,
		3 * sim.Microsecond, 5 * sim.Microsecond, 20 * sim.Microsecond} {
		err := same(fmt.Sprintf("reset after %v", d), func(rank int, tg *gpu.Group, g *gin.Gin, team gin.Team) {
			if rank == 0 {
				g.Signal(team, 1, gin.SignalInc{Signal: 0})
				return
			}
			tg.Sleep(d)
			g.ResetSignal(0)
		})
		if errors.Is(err, gin.ErrResetRace) {
			races++
		}
	}
	require.Positive(t, races, "no reset raced")
	require.NoError(t, same("wait then reset", func(rank int, _ *gpu.Group, g *gin.Gin, team gin.Team) {
		if rank == 0 {
			g.Signal(team, 1, gin.SignalInc{Signal: 0})
			return
		}
		g.WaitSignal(0, 1, 64)
		g.ResetSignal(0)
	}))
}

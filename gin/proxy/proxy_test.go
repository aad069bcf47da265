package proxy_test

import (
	"encoding/binary"
	"flag"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gin/internal/backendtest"
	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden timelines in testdata")

const backend = "proxy"

func TestGoldenTimelines(t *testing.T) { backendtest.GoldenTimelines(t, backend, *rewrite) }

func TestSignalImpliesEarlierPutsSameContext(t *testing.T) {
	backendtest.SignalImpliesEarlierPutsSameContext(t, backend)
}

func TestNoOrderingAcrossContexts(t *testing.T) { backendtest.NoOrderingAcrossContexts(t, backend) }

// With two NICs per GPU the contexts alternate between them.
func TestContextsSpreadOverNICs(t *testing.T) { backendtest.ContextsSpreadOverNICs(t, backend) }

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
		// With GDRCopy the credit check reads ci from L2, so the GPU posts
		// faster than the thread retires and the ring fills; without it
		// every check is a PCIe read that lets the thread keep up.
		pc.GDRCopy = true
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

// posts returns, in order, the events of kind k from the proxy thread.
func posts(rec *obs.Recorder, k obs.Kind) []obs.Event {
	var out []obs.Event
	for _, e := range rec.Events {
		if e.Kind == k && strings.HasSuffix(e.Who, "/proxy") {
			out = append(out, e)
		}
	}
	return out
}

// The CPU thread takes every GFD once, in ring order, with the fields the
// GPU encoded, after the GPU issued it, and posts it after it took it; its
// Pickup and Doorbell events carry the GFD's op id, whose Issued names
// the ranks.
func TestPickupAndPostEvents(t *testing.T) {
	e, err := bench.NewEnv(bench.EnvConfig{Backend: backend, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var rec obs.Recorder
	e.Observe(&rec)
	var issued []sim.Time
	e.Ranks[0].GPU.Launch("k", 1, func(tg *gpu.Group) {
		g := e.Dev.Gin(tg, 0, 0)
		for i := range 3 {
			g.Put(e.Dev.World(0), 1, e.Win, uint64(i)*64, e.Win, 0, 64, nil, nil)
			issued = append(issued, tg.Now())
		}
		g.Signal(e.Dev.World(0), 1, gin.SignalAdd{Signal: 2, Value: 5})
		issued = append(issued, tg.Now())
		g.Flush()
	})
	if err := e.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	picks, dbs := posts(&rec, obs.Pickup), posts(&rec, obs.Doorbell)
	if len(picks) != 4 || len(dbs) != 4 {
		t.Fatalf("%d pickups and %d posts, want 4 each", len(picks), len(dbs))
	}
	ranks := map[obs.OpID][2]uint64{}
	for _, ev := range rec.Events {
		if ev.Kind == obs.Issued {
			ranks[ev.Op] = [2]uint64{ev.Index, ev.Value}
		}
	}
	for i, p := range picks {
		db := dbs[i]
		if rp := ranks[p.Op]; p.Op == 0 || db.Op != p.Op || rp != [2]uint64{0, 1} || p.Index != uint64(i) || db.Index != uint64(i) {
			t.Errorf("post %d: op %d/%d ranks %v index %d/%d", i, p.Op, db.Op, rp, p.Index, db.Index)
		}
		// Pickup's Then is when the thread found the GFD flagged.
		if p.Then <= issued[i] || db.At <= p.Then {
			t.Errorf("post %d: issued %v taken %v posted %v: want issued < taken < posted", i, issued[i], p.Then, db.At)
		}
		if i > 0 && p.Then < dbs[i-1].At {
			t.Errorf("post %d taken at %v before post %d was posted at %v (one CPU thread)", i, p.Then, i-1, dbs[i-1].At)
		}
	}
	if picks[0].Bytes != 64 || picks[3].Code&uint32(proxy.GFDWithSignalAdd) == 0 || picks[3].Bytes != 0 {
		t.Errorf("GFDs: first size %d, last op %#x size %d", picks[0].Bytes, picks[3].Code, picks[3].Bytes)
	}
	reg, off := e.Proxy.SignalWord(e.Dev, 1, 0, 2)
	if v := reg.Load64(off); v != 5 {
		t.Errorf("signal 2 at rank 1 = %d, want 5", v)
	}
}

// Many warps of one GPU share a (context, peer) ring: the CPU thread, which
// sleeps between the qwords it copies (slowed here to widen the window),
// keeps its own copy of the GFD while GPU writers encode theirs.
func TestConcurrentWritersShareRing(t *testing.T) {
	pc := proxy.DefaultConfig()
	pc.QwordFlagCost = 200 * sim.Nanosecond
	backendtest.ConcurrentIssuersShareChannel(t, bench.EnvConfig{Backend: backend, Seed: 3, Signals: 4, Proxy: &pc})
}

// The same with the system-scope fence the Proxy issues before a GFD when
// the thread gave less than a system release.
func TestConcurrentWritersFenced(t *testing.T) {
	pc := proxy.DefaultConfig()
	pc.QwordFlagCost = 200 * sim.Nanosecond
	backendtest.ConcurrentIssuersFenced(t, bench.EnvConfig{Backend: backend, Seed: 3, Signals: 4, Proxy: &pc})
}

// A signal alone to a window address (VASignalAdd, DeepEP V2's red_add to
// a remote tail) is one VA-signal GFD and one atomic: no empty put GFD
// before it.
func TestVASignalAloneIsOneGFD(t *testing.T) {
	e, err := bench.NewEnv(bench.EnvConfig{Backend: backend, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tail, err := e.Comm.WindowRegister("tail", 4096, gin.WinStrictOrdering, true)
	if err != nil {
		t.Fatal(err)
	}
	var rec obs.Recorder
	e.Observe(&rec)
	e.Ranks[0].GPU.Launch("k", 1, func(tg *gpu.Group) {
		g := e.Dev.Gin(tg, 0, 0)
		g.Signal(e.Dev.World(0), 1, gin.VASignalAdd{Win: tail, Off: 16, Value: 3})
		g.Signal(e.Dev.World(0), 1, gin.VASignalAdd{Win: tail, Off: 16, Value: 4})
		g.Flush()
	})
	if err := e.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	if got := tail.Region(1).Load64(16); got != 7 {
		t.Errorf("window word at rank 1 = %d, want 7", got)
	}
	picks := posts(&rec, obs.Pickup)
	if len(picks) != 2 {
		t.Fatalf("%d GFDs taken, want 2 (one per signal)", len(picks))
	}
	for i, p := range picks {
		if p.Code&uint32(proxy.GFDVASignal) == 0 {
			t.Errorf("GFD %d: op %#x is not a VA signal", i, p.Code)
		}
	}
}

// smallRing is the two-rank env with a ring of 4 GFDs per (context, peer),
// so that twelve operations of two warps wait for credits.
func smallRing(t *testing.T, v gin.Version) bench.EnvConfig {
	pc := proxy.DefaultConfig()
	pc.QueueSize = 4
	return bench.EnvConfig{Backend: backend, Version: v, Seed: 5, Proxy: &pc}
}

// A group without a process issuing through PutThen and SignalThen
// produces exactly the timeline of the same operations by a group with a
// process (Put, Signal): the same slot claims, credit waits, GFD stores,
// CPU posts and packets at the same instants, with two such groups
// sharing one ring; in both GFD layouts (2.28's 64 B, 2.30's 128 B, where
// AggregateRequests also applies).
func TestIssueThenMatchesIssue(t *testing.T) {
	for _, v := range []gin.Version{gin.V2_28, gin.V2_30} {
		for _, c := range []struct{ agg, sig bool }{{false, false}, {true, false}, {false, true}} {
			if c.agg && v == gin.V2_28 {
				continue // optFlags are 2.29.7+
			}
			cfg := smallRing(t, v)
			want := backendtest.TwoSenders(t, cfg, false, c.agg, c.sig)
			require.Contains(t, want, "credit wait", "a ring of 4 with 12 operations must wait for credits")
			require.Equal(t, want, backendtest.TwoSenders(t, cfg, true, c.agg, c.sig), "%v agg=%v sig=%v", v, c.agg, c.sig)
		}
	}
}

// A group without a process flushing through FlushThen produces exactly
// the timeline of a group with one (Flush), and returns from the flush at
// the same instant, with and without another group's get on the context.
func TestFlushThenMatchesFlush(t *testing.T) {
	for _, get := range []bool{false, true} {
		cfg := smallRing(t, gin.V2_30)
		want, wantEnd := backendtest.Flush(t, cfg, get, false)
		got, gotEnd := backendtest.Flush(t, cfg, get, true)
		require.Contains(t, want, "ci=5", "the flush waits for the CPU to retire the five puts")
		require.Equal(t, want, got, "get=%v", get)
		require.Equal(t, wantEnd, gotEnd, "get=%v", get)
	}
}

// putValue's inline qword travels through the rank's inline buffer (a
// region that keeps words): values of every size land with exactly their
// bytes, in both GFD layouts.
func TestPutValueBytes(t *testing.T) {
	for _, v := range []gin.Version{gin.V2_28, gin.V2_30} {
		e, err := bench.NewEnv(bench.EnvConfig{Backend: backend, Version: v, Seed: 1, Backed: true})
		require.NoError(t, err)
		vals := []struct {
			off  uint64
			val  uint64
			size int
		}{{0, 0xa1, 1}, {8, 0xb2c3, 2}, {16, 0xdeadbeef, 4}, {24, 0x0102030405060708, 8}}
		e.Ranks[0].GPU.Launch("k", 1, func(tg *gpu.Group) {
			g := e.Dev.Gin(tg, 0, 0)
			for _, x := range vals {
				g.PutValue(e.Dev.World(0), 1, e.Win, x.off, x.val, x.size, nil)
			}
			g.Flush()
		})
		require.NoError(t, e.Sim.Run())
		got := e.Win.Region(1).Bytes()
		for _, x := range vals {
			want := make([]byte, 8)
			binary.LittleEndian.PutUint64(want, x.val)
			require.Equal(t, want[:x.size], got[x.off:x.off+uint64(x.size)], "%v size %d", v, x.size)
			require.Equal(t, make([]byte, 8-x.size), got[x.off+uint64(x.size):x.off+8], "%v size %d: no bytes beyond", v, x.size)
		}
	}
}

// A slowed CPU thread (Config.CPUPermille) takes proportionally longer to
// post the same puts: rank 0's thread at 3000 per mille spends three times
// the busy CPU time, and the last put lands later, while rank 1's thread
// is as fast as before.
func TestSlowCPU(t *testing.T) {
	run := func(permille int64) (busy0, busy1 sim.Duration, end sim.Time) {
		pc := proxy.DefaultConfig()
		if permille > 0 {
			pc.CPUPermille = func(world int) int64 {
				if world == 0 {
					return permille
				}
				return 0
			}
		}
		e, err := bench.NewEnv(bench.EnvConfig{Backend: backend, Seed: 3, Proxy: &pc})
		require.NoError(t, err)
		e.Ranks[0].GPU.Launch("k", 1, func(tg *gpu.Group) {
			g := e.Dev.Gin(tg, 0, 0)
			for i := range 16 {
				g.Put(e.Dev.World(0), 1, e.Win, uint64(i)*4096, e.Win, 0, 4096, nil, nil)
			}
			g.Flush()
			end = tg.Now()
		})
		require.NoError(t, e.Sim.Run())
		srv := e.Proxy.Servers()
		require.Len(t, srv, 2)
		return srv[0].Stats().Busy, srv[1].Stats().Busy, end
	}
	b0, b1, end := run(0)
	s0, s1, slowEnd := run(3000)
	require.Positive(t, b0)
	require.Equal(t, 3*b0, s0, "rank 0's busy CPU time")
	require.Equal(t, b1, s1, "rank 1's busy CPU time")
	require.Greater(t, slowEnd, end)
}

func TestLoopback(t *testing.T) { backendtest.Loopback(t, backend) }

func TestResetThenWait(t *testing.T) {
	for _, v := range []gin.Version{gin.V2_28, gin.V2_30} {
		t.Run(v.String(), func(t *testing.T) { backendtest.ResetThenWait(t, backend, v) })
	}
}

// gin-semantics-review M7: with a get outstanding, NCCL 2.30's flush (and
// wait) writes one more GFD, a Flush to the rank's own queue whose READ on
// the loop-back connection orders the get's data (gin_proxy.h@230 L328,
// gin_host_proxy.cc@230 L266-277); a flush with no get writes none.
func TestGetFlushPostsSelfFlushGFD(t *testing.T) {
	for _, c := range []struct {
		name string
		get  bool
		gfds uint64
	}{{"get+flush", true, 2}, {"put+flush", false, 1}} {
		e, _ := backendtest.Run(t, backend, bench.EnvConfig{}, func(e *bench.Env, tg *gpu.Group, g *gin.Gin) {
			if c.get {
				g.Get(e.Dev.World(0), 1, e.Win, 0, e.Win, 4096, 8)
			} else {
				g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 4096, 8, nil, nil)
			}
			g.Flush()
			g.Flush() // the get is visible now: no second Flush GFD
		})
		if got := e.Backend.Stats().GFDs; got != c.gfds {
			t.Errorf("%s: %d GFDs, want %d", c.name, got, c.gfds)
		}
	}
}

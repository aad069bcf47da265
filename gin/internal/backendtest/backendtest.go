package backendtest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
)

// Golden runs body on rank 0 of a two-rank env over backend and compares the merged timeline with
// testdata/name.txt.
func Golden(t *testing.T, backend, name string, rewrite bool, body func(e *bench.Env, t *gpu.Group, g *gin.Gin)) {
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
	compare(t, name, l.String(), rewrite)
}

// compare checks a recorded timeline against testdata/name.txt, or rewrites
// that file.
func compare(t *testing.T, name, got string, rewrite bool) {
	t.Helper()
	path := filepath.Join("testdata", name+".txt")
	if rewrite {
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

// GoldenBarrier records a world GIN barrier (ncclGinBarrierSession on the
// world team of 2 ranks, 2.30, acq_rel, no fence) run by both ranks, each
// signalling its slot at the peer and waiting for the peer's, and compares
// it with testdata/barrier.txt. It also fails on a deadlock.
func GoldenBarrier(t *testing.T, backend string, rewrite bool) {
	e, err := bench.NewEnv(bench.EnvConfig{Backend: backend, WorldGinBarriers: 1})
	if err != nil {
		t.Fatal(err)
	}
	l := e.Record()
	for r := range e.Ranks {
		e.Ranks[r].GPU.Launch("bar", 1, func(tg *gpu.Group) {
			e.Dev.Gin(tg, r, 0).GinBarrier(gin.BarrierWorldGin, 0, false).Sync(gin.OrderAcqRel, gin.FenceNone)
		})
	}
	if err := e.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	if err := e.Comm.CheckDeadlock(); err != nil {
		t.Fatal(err)
	}
	compare(t, "barrier", l.String(), rewrite)
}

// GoldenTimelines checks the put, put_signal, flush and counter golden
// timelines of backend.
func GoldenTimelines(t *testing.T, backend string, rewrite bool) {
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
		t.Run(tc.name, func(t *testing.T) { Golden(t, backend, tc.name, rewrite, tc.body) })
	}
}

// Landings records when NIC writes and atomics land on rank 1's window and
// signal words.
type Landings struct {
	// LastWin is the time of the last write, by offset of the write.
	LastWin map[uint64]sim.Time
	// Sig holds the times of the signal fetch-adds.
	Sig []sim.Time
}

// Observe implements mem.Observer.
func (l *Landings) Observe(e *mem.Effect) {
	n := e.Region.Name()
	switch {
	case strings.HasPrefix(n, "buf") && e.Op == mem.OpWrite && strings.Contains(e.Agent, "qp"):
		l.LastWin[e.Off] = e.At
	case strings.HasSuffix(n, "signals") && e.Op == mem.OpFetchAdd:
		l.Sig = append(l.Sig, e.At)
	}
}

// Run runs body on rank 0 of an env over backend built from cfg and
// returns the env and what landed on the peer.
func Run(t *testing.T, backend string, cfg bench.EnvConfig, body func(e *bench.Env, t *gpu.Group, g0 *gin.Gin)) (*bench.Env, *Landings) {
	cfg.Backend = backend
	e, err := bench.NewEnv(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := &Landings{LastWin: map[uint64]sim.Time{}}
	e.Machine.Mem.SetObserver(l)
	e.Ranks[0].GPU.Launch("k", 1, func(tg *gpu.Group) { body(e, tg, e.Dev.Gin(tg, 0, 0)) })
	if err := e.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	return e, l
}

// MaxTime is the latest time in m among offsets in [lo, hi).
func MaxTime(m map[uint64]sim.Time, lo, hi uint64) sim.Time {
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
//
// SignalImpliesEarlierPutsSameContext is run by each IB backend's tests.
func SignalImpliesEarlierPutsSameContext(t *testing.T, backend string) {
	_, l := Run(t, backend, bench.EnvConfig{}, func(e *bench.Env, tg *gpu.Group, g *gin.Gin) {
		g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 1<<20, nil, nil)
		g.Put(e.Dev.World(0), 1, e.Win, 2<<20, e.Win, 2<<20, 8, gin.SignalInc{Signal: 0}, nil)
	})
	if len(l.Sig) != 1 {
		t.Fatalf("signal applied %d times", len(l.Sig))
	}
	if last := MaxTime(l.LastWin, 0, 1<<20); last == 0 || last > l.Sig[0] {
		t.Errorf("1 MiB put's last write landed at %v, signal at %v: want the put first", last, l.Sig[0])
	}
}

// Spec 2.4 item 2: nothing orders two contexts: a ctx-1 signal issued after
// a ctx-0 1 MiB put overtakes it (the NIC serves QPs round-robin per packet).
//
// NoOrderingAcrossContexts is run by each IB backend's tests.
func NoOrderingAcrossContexts(t *testing.T, backend string) {
	_, l := Run(t, backend, bench.EnvConfig{Contexts: 2}, func(e *bench.Env, tg *gpu.Group, g *gin.Gin) {
		g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 1<<20, nil, nil)
		e.Dev.Gin(tg, 0, 1).Signal(e.Dev.World(0), 1, gin.SignalInc{Signal: 0})
	})
	if len(l.Sig) != 1 {
		t.Fatalf("signal applied %d times", len(l.Sig))
	}
	if last := MaxTime(l.LastWin, 0, 1<<20); l.Sig[0] >= last {
		t.Errorf("ctx-1 signal at %v did not overtake the ctx-0 put (last write %v)", l.Sig[0], last)
	}
}

// Spec 2.4 items 3-4: a counter and a flush both imply the remote writes
// have been acknowledged, hence landed (IB: the CQE follows the ACK, and the
// responder ACKs after its DMA write is issued in order).
//
// CounterAndFlushImplyLocalCompletion is run by each IB backend's tests.
func CounterAndFlushImplyLocalCompletion(t *testing.T, backend string) {
	var ctrAt, flushAt sim.Time
	_, l := Run(t, backend, bench.EnvConfig{}, func(e *bench.Env, tg *gpu.Group, g *gin.Gin) {
		g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 256<<10, nil, gin.CounterInc{Counter: 0})
		g.WaitCounter(0, 1, 56)
		ctrAt = tg.Now()
		g.Put(e.Dev.World(0), 1, e.Win, 1<<20, e.Win, 1<<20, 256<<10, nil, nil)
		g.Flush()
		flushAt = tg.Now()
	})
	if last := MaxTime(l.LastWin, 0, 256<<10); last == 0 || last > ctrAt {
		t.Errorf("counter seen at %v before the put's last remote write %v", ctrAt, last)
	}
	if last := MaxTime(l.LastWin, 1<<20, 1<<20+256<<10); last == 0 || last > flushAt {
		t.Errorf("flush returned at %v before the put's last remote write %v", flushAt, last)
	}
}

// ConcurrentIssuersShareChannel has 16 warps of one GPU issue put+SignalAdd
// on the same (context, peer) at staggered times, so one builds its work
// while another is blocked mid-issue: every signal add and every put
// arrives exactly once (the signal sums to the sum of the values).
func ConcurrentIssuersShareChannel(t *testing.T, cfg bench.EnvConfig) {
	t.Helper()
	concurrentIssuers(t, cfg, false)
}

// ConcurrentIssuersFenced is ConcurrentIssuersShareChannel with every put
// requiring a system-scope release the thread has not given, so GDAKI
// fences between building an op's WRs and posting them: a group blocked in
// that fence must keep its WRs while another builds into the channel.
func ConcurrentIssuersFenced(t *testing.T, cfg bench.EnvConfig) {
	t.Helper()
	concurrentIssuers(t, cfg, true)
}

func concurrentIssuers(t *testing.T, cfg bench.EnvConfig, fenced bool) {
	t.Helper()
	const warps, per = 16, 12
	e, err := bench.NewEnv(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var want uint64
	for w := range warps {
		e.Ranks[0].GPU.Launch("w"+string(rune('a'+w)), 32, func(tg *gpu.Group) {
			g := e.Dev.Gin(tg, 0, 0)
			if fenced {
				g.SetRelease(gpu.ScopeThread, gpu.ScopeSystem)
			}
			tg.Sleep(sim.Duration(w) * 97 * sim.Nanosecond)
			for i := range per {
				v := uint64(w*per + i + 1)
				g.Put(e.Dev.World(0), 1, e.Win, uint64(w*per+i)*64, e.Win, 0, 64, gin.SignalAdd{Signal: 1, Value: v}, nil)
			}
		})
		for i := range per {
			want += uint64(w*per + i + 1)
		}
	}
	var got uint64
	e.Ranks[1].GPU.Launch("recv", 1, func(tg *gpu.Group) {
		g := e.Dev.Gin(tg, 1, 0)
		got = g.WaitSignal(1, want, 64)
	})
	if err := e.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("signal 1 = %d, want %d", got, want)
	}
	if st := e.Backend.Stats(); st.Ops != warps*per {
		t.Errorf("%d operations issued, want %d", st.Ops, warps*per)
	}
}

// With two NICs per GPU, NCCL makes one GIN connection per local NIC and
// context c uses connection c mod 2 (NCCL 2.30): puts on contexts 0 and 1
// leave through different NICs, on the port of each, while context 2 is
// context 0's NIC again.
func ContextsSpreadOverNICs(t *testing.T, backend string) {
	spec, ok := machine.Preset("h100-ib")
	require.True(t, ok)
	spec.Name, spec.NICsPerGPU = "h100-2nic", 2
	y, err := machine.MarshalSpec(spec)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "two-nics.yaml")
	require.NoError(t, os.WriteFile(file, y, 0o644))
	e, err := bench.NewEnv(bench.EnvConfig{Backend: backend, Profile: file, Seed: 1, Contexts: 4, Counters: -1})
	require.NoError(t, err)
	require.Len(t, e.Ranks[0].NICs, 2)
	sent := make([]int, 2) // request packets per NIC of rank 0
	for i, n := range e.Ranks[0].NICs {
		n.SetTap(func(p *fabric.Packet) {
			if p.Hdr.Opcode.IsRequest() {
				sent[i]++
			}
		})
	}
	var perCtx [][]int
	e.Ranks[0].GPU.Launch("k", 1, func(tg *gpu.Group) {
		for ctx := range 3 {
			before := slices.Clone(sent)
			g := e.Dev.Gin(tg, 0, ctx)
			g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 64, nil, nil)
			g.Flush()
			perCtx = append(perCtx, []int{sent[0] - before[0], sent[1] - before[1]})
		}
	})
	if err := e.Sim.Run(); err != nil {
		t.Fatal(err)
	}
	assert.Equal(t, [][]int{{1, 0}, {0, 1}, {1, 0}}, perCtx, "request packets per NIC for contexts 0, 1, 2")
}

// Loopback (spec 2.4, gin-semantics-review M1/M2): a put with a signal to
// one's own rank goes through the NIC (NCCL connects a self-loop QP per
// context on GDAKI and an RC connection to itself on the Proxy): the bytes
// land in the rank's own window and the signal counts once; a flush covers
// it; and the 2.30 GIN barrier with the Put fence (which signals self) and
// with NCCL's default Put|Get fence completes on both ranks.
func Loopback(t *testing.T, backend string) {
	t.Helper()
	e, err := bench.NewEnv(bench.EnvConfig{Backend: backend, Backed: true, WorldGinBarriers: 1})
	require.NoError(t, err)
	const n = 4096
	pattern := make([]byte, n)
	for i := range pattern {
		pattern[i] = byte(i*7 + 3)
	}
	e.Win.Region(0).Write(0, pattern, n, "test")
	var sig uint64
	got := make([]byte, n)
	left := make([]bool, 2)
	for r := range e.Ranks {
		e.Ranks[r].GPU.Launch("k", 1, func(tg *gpu.Group) {
			g := e.Dev.Gin(tg, r, 0)
			if r == 0 {
				g.Put(e.Dev.World(0), 0, e.Win, 1<<20, e.Win, 0, n, gin.SignalInc{Signal: 0}, nil)
				sig = g.WaitSignal(0, 1, 64)
				e.Win.Region(0).Read(1<<20, got)
				g.Put(e.Dev.World(0), 0, e.Win, 2<<20, e.Win, 0, n, nil, gin.CounterInc{Counter: 0})
				g.Flush()
			}
			g.GinBarrier(gin.BarrierWorldGin, 0, false).Sync(gin.OrderAcqRel, gin.FencePut)
			g.GinBarrier(gin.BarrierWorldGin, 0, false).Sync(gin.OrderAcqRel, gin.FencePut|gin.FenceGet)
			left[r] = true
		})
	}
	require.NoError(t, e.Sim.Run())
	require.NoError(t, e.Comm.CheckDeadlock())
	assert.Equal(t, uint64(1), sig, "self signal after one self put")
	assert.Equal(t, pattern, got, "self put's bytes once its signal is seen")
	assert.Equal(t, []bool{true, true}, left, "both ranks left the Put and Put|Get fenced barriers")
}

// ResetThenWait (spec 2.2 resetSignal): rank 1 signals rank 0 five times;
// rank 0 waits for 5, resets, and at once waits for 1. A group sees its own
// reset store even while it is in flight, so the wait returns 1 only after
// rank 1's sixth signal, sent 50 us later, and that update (legal: issued
// after the reset) is not reported as racing with the reset (which the
// Proxy's 2.30 reset-by-offset did).
func ResetThenWait(t *testing.T, backend string, v gin.Version) {
	t.Helper()
	e, err := bench.NewEnv(bench.EnvConfig{Backend: backend, Version: v})
	require.NoError(t, err)
	const late = 50 * sim.Microsecond
	var got, read uint64
	var at sim.Time
	e.Ranks[0].GPU.Launch("recv", 1, func(tg *gpu.Group) {
		g := e.Dev.Gin(tg, 0, 0)
		g.WaitSignal(0, 5, 64)
		g.ResetSignal(0)
		got = g.WaitSignal(0, 1, 64)
		at = tg.Now()
		g.ResetSignal(0)
		read = g.ReadSignal(0, 64)
	})
	e.Ranks[1].GPU.Launch("send", 1, func(tg *gpu.Group) {
		g := e.Dev.Gin(tg, 1, 0)
		for range 5 {
			g.Signal(e.Dev.World(1), 0, gin.SignalInc{Signal: 0})
		}
		tg.Sleep(late)
		g.Signal(e.Dev.World(1), 0, gin.SignalInc{Signal: 0})
	})
	require.NoError(t, e.Sim.Run())
	assert.Equal(t, uint64(0), read, "readSignal right after the second resetSignal")
	assert.Equal(t, uint64(1), got, "waitSignal(1) after the reset")
	assert.GreaterOrEqual(t, at, sim.Time(0).Add(late), "waitSignal(1) returned before the post-reset signal was sent")
}

package gdaki_test

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gin/bench"
	"github.com/ginsim/ginsim/gin/internal/backendtest"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/nic"
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

// The same with a system-scope fence between building and posting each
// op: a group in the fence keeps the WRs it built.
func TestConcurrentIssuersFenced(t *testing.T) {
	backendtest.ConcurrentIssuersFenced(t, bench.EnvConfig{Backend: backend, Seed: 3, Signals: 4})
}

// Without counters, contexts past the first are built on first use. A put
// on context 2 then reaches the same QP number as when every context is
// built at DevCommCreate (with counters), so UDP source ports and ECMP
// paths do not depend on when a context was built.
func TestLaterContextKeepsQPNumbers(t *testing.T) {
	destQP := func(counters int) uint32 {
		e, err := bench.NewEnv(bench.EnvConfig{Backend: backend, Seed: 1, Contexts: 4, Counters: counters})
		require.NoError(t, err)
		// Another QP on rank 1's NIC after DevCommCreate (a later
		// communicator): a context built after it must not take its
		// number, or take the number after it.
		g1, n1 := e.Ranks[1].GPU, e.Ranks[1].NICs[0]
		cq, err := n1.CreateCQ(16, g1.Alloc("other/cq", 16*64, false), g1.Dev())
		require.NoError(t, err)
		_, err = n1.CreateQP(nic.QPConfig{SendCQ: cq, RecvCQ: cq, SQDepth: 16, SQRing: g1.Alloc("other/sq", 16*64, false), SQWhere: g1.Dev()})
		require.NoError(t, err)
		var qpn uint32
		e.Ranks[0].NICs[0].SetTap(func(p *fabric.Packet) {
			if p.Hdr.Opcode.IsRequest() {
				qpn = p.Hdr.DestQP
			}
		})
		e.Ranks[0].GPU.Launch("k", 1, func(tg *gpu.Group) {
			g := e.Dev.Gin(tg, 0, 2)
			g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 64, nil, nil)
			g.Flush()
		})
		require.NoError(t, e.Sim.Run())
		require.NotZero(t, qpn, "no request packet left rank 0")
		return qpn
	}
	lazy, eager := destQP(-1), destQP(4)
	require.Equal(t, eager, lazy, "context 2's QP number when built on first use")
}

// twoSenders is backendtest.TwoSenders on a depth-4 queue.
func twoSenders(t *testing.T, then, agg, sig bool) string {
	return backendtest.TwoSenders(t, bench.EnvConfig{Backend: backend, Seed: 5, QueueDepth: 4}, then, agg, sig)
}

// A group without a process issuing through PutThen produces exactly the
// timeline of the same puts by a group with one (Put): the same GPU-side
// steps, packets and memory effects at the same instants. Two such groups
// share a channel, so reservations, in-order publication and sq_lock
// interleave.
func TestPutThenMatchesPut(t *testing.T) {
	for _, agg := range []bool{false, true} {
		want, got := twoSenders(t, false, agg, false), twoSenders(t, true, agg, false)
		require.NotEmpty(t, want)
		require.Contains(t, want, "poll CQE", "depth 4 with 12 puts must wait for credits")
		require.Equal(t, want, got, "aggregate=%v", agg)
	}
}

// Signals interleaved with puts issue the same way from a group without
// a process (SignalThen) as from one with a process (Signal).
func TestSignalThenMatchesSignal(t *testing.T) {
	want, got := twoSenders(t, false, false, true), twoSenders(t, true, false, true)
	require.Contains(t, want, "poll CQE", "depth 4 with 12 operations must wait for credits")
	require.NotEqual(t, twoSenders(t, false, false, false), want, "the odd operations are signals, not puts")
	require.Equal(t, want, got)
}

// NCCL traps on an error CQE and on a WQE written past the queue: the run
// fails with the reason, whether the issuing group has a process (Put) or
// not (PutThen). Six puts on a depth-4 queue: the fifth polls CQE #0,
// which completes in error when every packet is lost; with
// MaySkipCreditCheck the fifth WQE overruns the queue instead.
func TestIssueFailures(t *testing.T) {
	for _, c := range []struct {
		name string
		skip bool
		want string
	}{{"error CQE", false, "NCCL traps on error CQEs"}, {"overrun", true, "overran the send queue"}} {
		for _, then := range []bool{false, true} {
			e, err := bench.NewEnv(bench.EnvConfig{Backend: backend, Seed: 2, QueueDepth: 4})
			require.NoError(t, err)
			if !c.skip {
				require.NoError(t, e.Machine.Net.SetGlobalFaults(fabric.Faults{Loss: 1}))
			}
			var opts []gin.OptFlags
			if c.skip {
				opts = append(opts, gin.OptMaySkipCreditCheck)
			}
			if then {
				p := &backendtest.Putter{E: e, N: 6, Opts: opts}
				p.T = e.Ranks[0].GPU.LaunchHandler("k", 32, p, 0)
			} else {
				e.Ranks[0].GPU.Launch("k", 32, func(tg *gpu.Group) {
					g := e.Dev.Gin(tg, 0, 0)
					for i := range 6 {
						g.Put(e.Dev.World(0), 1, e.Win, uint64(i)*4096, e.Win, 0, 4096, gin.SignalInc{Signal: 0}, nil, opts...)
					}
				})
			}
			err = e.Sim.Run()
			require.Error(t, err, "%s then=%v", c.name, then)
			require.Contains(t, err.Error(), c.want, "%s then=%v", c.name, then)
		}
	}
}

// With two NICs per GPU the contexts alternate between them.
func TestContextsSpreadOverNICs(t *testing.T) { backendtest.ContextsSpreadOverNICs(t, backend) }

// A group without a process flushing through FlushThen produces exactly
// the timeline of a group with one (Flush): the same per-peer snapshots,
// NOP (with another group's get outstanding on the channel) and CQE polls
// at the same instants.
func TestFlushThenMatchesFlush(t *testing.T) {
	for _, get := range []bool{false, true} {
		cfg := bench.EnvConfig{Backend: backend, Seed: 5, QueueDepth: 4}
		want, wantEnd := backendtest.Flush(t, cfg, get, false)
		got, gotEnd := backendtest.Flush(t, cfg, get, true)
		require.NotEmpty(t, want)
		require.Contains(t, want, "flush", "the flush polls a CQE")
		if get {
			require.Contains(t, want, "reserve [6,6]", "with a get outstanding the flush posts a NOP")
		}
		require.Equal(t, want, got, "get=%v", get)
		require.Equal(t, wantEnd, gotEnd, "get=%v", get)
	}
}

func TestLoopback(t *testing.T) { backendtest.Loopback(t, backend) }

func TestResetThenWait(t *testing.T) {
	for _, v := range []gin.Version{gin.V2_28, gin.V2_30} {
		t.Run(v.String(), func(t *testing.T) { backendtest.ResetThenWait(t, backend, v) })
	}
}

// gin-semantics-review M8: DOCA's put_signal with 0 bytes posts a NOP WQE
// and the ATOMIC (doca_gpunetio_dev_verbs_onesided.cuh); signal() alone is
// the ATOMIC only.
func TestZeroBytePutSignalIsNopAndAtomic(t *testing.T) {
	for _, c := range []struct {
		name string
		body func(e *bench.Env, g *gin.Gin)
		wqes uint64
	}{
		{"put0+signal", func(e *bench.Env, g *gin.Gin) {
			g.Put(e.Dev.World(0), 1, e.Win, 0, e.Win, 0, 0, gin.SignalInc{Signal: 0}, nil)
		}, 2},
		{"signal", func(e *bench.Env, g *gin.Gin) { g.Signal(e.Dev.World(0), 1, gin.SignalInc{Signal: 0}) }, 1},
	} {
		e, _ := backendtest.Run(t, backend, bench.EnvConfig{}, func(e *bench.Env, tg *gpu.Group, g *gin.Gin) { c.body(e, g) })
		if got := e.Backend.Stats().WQEs; got != c.wqes {
			t.Errorf("%s: %d WQEs, want %d", c.name, got, c.wqes)
		}
	}
}

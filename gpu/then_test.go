package gpu

import (
	"fmt"
	"testing"

	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/stretchr/testify/require"
)

// parMachine is the test's group as a state machine: Cycles, the
// section, Cycles.
type parMachine struct {
	t         *Group
	n         int
	loc, peer *mem.Region
	finish    func()
	pc        int
}

func (m *parMachine) Handle(*sim.Sim, uint64) {
	switch m.pc {
	case 0:
		m.pc = 1
		m.t.CyclesThen(7, m, 0)
	case 1:
		m.pc = 2
		m.t.ParallelThen(m.n, m.item, m, 0)
	case 2:
		m.pc = 3
		m.t.CyclesThen(3, m, 0)
	default:
		m.finish()
		m.t.End()
	}
}

// item starts item i: Cycles, an atomic, a store into the peer GPU.
func (m *parMachine) item(th *Group, i int, h sim.Handler, arg uint64) {
	it := &parItem{m: m, th: th, i: i, h: h, arg: arg}
	it.Handle(nil, 0)
}

type parItem struct {
	m    *parMachine
	th   *Group
	i    int
	h    sim.Handler
	arg  uint64
	step int
}

func (it *parItem) Handle(s *sim.Sim, _ uint64) {
	m, th, i := it.m, it.th, it.i
	it.step++
	switch it.step {
	case 1:
		th.CyclesThen(int64(50*i), it, 0)
	case 2:
		th.AtomicAdd64Then(m.loc, 8*uint64(i%4), uint64(i+1), ScopeDevice, it, 0)
	case 3:
		th.Store64Then(m.peer, 8*uint64(i), uint64(i), it, 0)
	default:
		it.h.Handle(th.GPU().Sim(), it.arg)
	}
}

// parResult is what a Parallel section left.
type parResult struct {
	end            sim.Time
	busy           sim.Duration
	posted, acked  sim.Time
	fired          uint64
	words          [16]uint64
	groups, childs int
}

// ParallelThen runs the same items at the same instants with the same
// events as Parallel, inline (one thread or one item) or on children.
func TestParallelThenMatchesParallel(t *testing.T) {
	for _, size := range []int{1, 4, 32} {
		for _, n := range []int{0, 1, 3, 10} {
			t.Run(fmt.Sprintf("size%d-n%d", size, n), func(t *testing.T) {
				// mode 0: Parallel; 1: ParallelThen on a machine;
				// 2: ParallelWait on a process.
				run := func(mode int) parResult {
					nd := newNode(t, 2)
					g := nd.gpus[0]
					loc := g.Alloc("ctr", 128, true)
					peer := nd.gpus[1].Alloc("peer", 128, true)
					var res parResult
					var grp *Group
					finish := func() {
						res.end, res.busy, res.posted, res.acked = grp.Now(), grp.Busy(), grp.posted, grp.acked
					}
					switch mode {
					case 1:
						m := &parMachine{n: n, loc: loc, peer: peer, finish: finish}
						grp = g.LaunchHandler("p", size, m, 0)
						m.t = grp
					case 2:
						m := &parMachine{n: n, loc: loc, peer: peer}
						grp = g.Launch("p", size, func(tg *Group) {
							tg.Cycles(7)
							tg.ParallelWait(n, m.item)
							tg.Cycles(3)
							finish()
						})
					default:
						grp = g.Launch("p", size, func(tg *Group) {
							tg.Cycles(7)
							tg.Parallel(n, func(th *Group, i int) {
								th.Cycles(int64(50 * i))
								th.AtomicAdd64(loc, 8*uint64(i%4), uint64(i+1), ScopeDevice)
								th.Store64(peer, 8*uint64(i), uint64(i))
							})
							tg.Cycles(3)
							finish()
						})
					}
					require.NoError(t, nd.s.Run())
					res.fired = nd.s.Fired()
					for i := range res.words {
						if i < 4 {
							res.words[i] = loc.Load64(8 * uint64(i))
						} else {
							res.words[i] = peer.Load64(8 * uint64(i-4))
						}
					}
					res.groups, res.childs = len(g.groups), g.made-len(g.groups)
					return res
				}
				want := run(0)
				require.Equal(t, want, run(1), "ParallelThen")
				require.Equal(t, want, run(2), "ParallelWait")
			})
		}
	}
}

// wtMachine writes a 128-B descriptor write-through to host memory, then
// 64 B to local memory, then fences at system scope (WriteWTThen,
// FenceThen).
type wtMachine struct {
	t      *Group
	h, l   *mem.Region
	src    []byte
	last   *[]sim.Time
	finish func()
	pc     int
}

func (m *wtMachine) Handle(*sim.Sim, uint64) {
	m.pc++
	switch m.pc {
	case 1:
		*m.last = append(*m.last, m.t.WriteWTThen(m.h, 0, m.src, 128, m, 0))
	case 2:
		*m.last = append(*m.last, m.t.WriteWTThen(m.l, 0, nil, 64, m, 0))
	case 3:
		m.t.FenceThen(ScopeSystem, m, 0)
	default:
		m.finish()
		m.t.End()
	}
}

// WriteWTThen issues, lands and charges the group as WriteWT does: the
// same landing instants, content, busy time and end, with the system
// fence after it waiting for the same posted writes.
func TestWriteWTThenMatchesWriteWT(t *testing.T) {
	type result struct {
		last      []sim.Time
		end       sim.Time
		busy      sim.Duration
		content   []byte
		fired     uint64
		landTimes []sim.Time
	}
	run := func(then bool) result {
		nd := newNode(t, 1)
		g := nd.gpus[0]
		h := g.AllocHost("gfd", 128, true)
		l := g.Alloc("ring", 64, false)
		src := make([]byte, 128)
		for i := range src {
			src[i] = byte(i + 1)
		}
		var res result
		var grp *Group
		finish := func() { res.end, res.busy = grp.Now(), grp.Busy() }
		if then {
			m := &wtMachine{h: h, l: l, src: src, last: &res.last, finish: finish}
			grp = g.LaunchHandler("w", 1, m, 0)
			m.t = grp
		} else {
			grp = g.Launch("w", 1, func(tg *Group) {
				res.last = append(res.last, tg.WriteWT(h, 0, src, 128))
				res.last = append(res.last, tg.WriteWT(l, 0, nil, 64))
				tg.Fence(ScopeSystem)
				finish()
			})
		}
		prev := append([]byte(nil), h.Bytes()...)
		for nd.s.Step() {
			if b := h.Bytes(); string(b) != string(prev) {
				res.landTimes = append(res.landTimes, nd.s.Now())
				prev = append(prev[:0], b...)
			}
		}
		res.content = append([]byte(nil), h.Bytes()...)
		res.fired = nd.s.Fired()
		return res
	}
	want := run(false)
	require.Len(t, want.landTimes, 8, "eight 16-B stores land one by one")
	require.Greater(t, want.end, want.landTimes[7], "the system fence waits for the last store")
	require.Equal(t, want, run(true))
}

// The children of Parallel sections are counted (and placed on SMs) but
// not kept once their section joins, nor are finished groups: a group
// that runs a thousand sections of four leaves nothing in Groups once it
// is done, while Stats still counts every group and keeps its time.
func TestFinishedGroupsAreNotKept(t *testing.T) {
	nd := newNode(t, 1)
	g := nd.gpus[0]
	loc := g.Alloc("ctr", 64, true)
	var during int
	p := g.Launch("p", 32, func(tg *Group) {
		for range 1000 {
			tg.Parallel(4, func(th *Group, i int) { th.AtomicAdd64(loc, 8*uint64(i), 1, ScopeDevice) })
		}
		during = len(g.Groups())
	})
	require.NoError(t, nd.s.Run())
	require.Equal(t, 1, during, "while it runs, only the group itself is kept")
	busy := p.Busy()
	require.Empty(t, g.Groups())
	st := g.Stats()
	require.Equal(t, 1+4000, st.Groups)
	require.Equal(t, busy, st.Busy, "the dropped group's time stays in Stats")
	require.Greater(t, busy, sim.Duration(0))
	require.Equal(t, uint64(1000), loc.Load64(8))
	next := g.Launch("q", 1, func(*Group) {})
	require.Equal(t, 4001%g.Config().SMs, next.SM(), "SMs are assigned over every group made")
}

// CopyThen paces a warp's stores by its copy rate: the group is busy for
// the copy, and the bytes land no earlier than its end plus the NVLink
// path; at a rate above the stores' it is WriteThen.
func TestCopyThenPacesByRate(t *testing.T) {
	const n = sim.Bytes(7408)
	run := func(copyRate sim.BitRate) (busy sim.Duration, landed sim.Time) {
		nd := newNode(t, 2)
		g := nd.gpus[0]
		peer := nd.gpus[1].Alloc("peer", n, true)
		var grp *Group
		var h sim.HandlerFunc
		step := 0
		h = func(*sim.Sim, uint64) {
			if step++; step == 1 {
				if copyRate == 0 {
					landed = grp.WriteThen(peer, 0, nil, n, h, 0)
				} else {
					landed = grp.CopyThen(peer, 0, nil, n, copyRate, h, 0)
				}
				return
			}
			busy = grp.Busy()
			grp.End()
		}
		grp = g.LaunchHandler("c", 32, h, 0)
		for nd.s.Step() {
		}
		return busy, landed
	}
	wBusy, wLanded := run(0)
	rate := DefaultConfig().WarpCopyRate
	cBusy, cLanded := run(rate)
	require.Equal(t, rate.TxTime(n), cBusy, "busy for the copy")
	require.Greater(t, cBusy, wBusy, "the copy is slower than the stores")
	require.GreaterOrEqual(t, cLanded, sim.Time(0).Add(rate.TxTime(n)), "lands after the copy")
	require.Greater(t, cLanded, wLanded)
	fBusy, fLanded := run(sim.GBps(10_000))
	require.Equal(t, wBusy, fBusy, "a fast copy is the stores' issue")
	require.Equal(t, wLanded, fLanded)
}

// A kernel's finished groups are dropped when the next kernel launches,
// not kept while it runs: launching a thousand warps that end, and then
// a thousand more, leaves only the new ones in the GPU's list (each
// kernel's warps, their handlers and what those hold would otherwise
// stay in memory until the list doubles).
func TestEndedGroupsAreDroppedAtTheNextLaunch(t *testing.T) {
	nd := newNode(t, 1)
	g := nd.gpus[0]
	for _, kind := range []string{"handler", "process", "waiting"} {
		word := g.Alloc("flag-"+kind, 8, true)
		for i := range 1000 {
			switch kind {
			case "handler":
				var tg *Group
				tg = g.LaunchHandler(fmt.Sprintf("h%d", i), 32, sim.HandlerFunc(func(*sim.Sim, uint64) { tg.End() }), 0)
			case "process":
				g.Launch(fmt.Sprintf("p%d", i), 32, func(*Group) {})
			case "waiting":
				g.LaunchWaiting(fmt.Sprintf("w%d", i), 32, word, 0, "flag", func(v uint64) bool { return v == 0 }, func(*Group) {})
			}
		}
		require.NoError(t, nd.s.Run())
		g.Launch("next-"+kind, 32, func(*Group) {})
		require.Equal(t, 1, len(g.groups), "%s: the ended groups are dropped at the next launch", kind)
		require.NoError(t, nd.s.Run())
	}
}

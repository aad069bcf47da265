package ll

import (
	"fmt"
	"strconv"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/workload"
)

// Workload is DeepEP V1 low-latency dispatch and combine as ported to
// NCCL GIN by DeepEP PR #521 (spec moe-traffic 1.3, 1.4, 1.8), or, with
// aggregate set, the NCCL EP / V2 flavour whose puts carry
// OptAggregateRequests except the last one to each (context, peer).
type Workload struct {
	e   *workload.Env
	agg bool
	// MaxSMs is NCCL EP's max_num_sms, the SM count the grid is sized
	// from in place of the device's (0: the device's, NCCL EP's LL
	// default, NVIDIA/nccl contrib/nccl_ep/nccl_ep.cc:1290-1295). DeepEP
	// V1 LL has no such knob: its grid follows the experts.
	MaxSMs int

	msg, comb uint64 // dispatch and combine message bytes
	sms       int    // sending SMs: ceil(E / warp groups)
	groups    int    // warp groups per SM
	comms     []*gin.DevComm
	// Per communicator: dispatch receive [4 experts][src][slot] × msg,
	// dispatch staging [token] × msg, combine receive [home][4][token] ×
	// 2H, combine staging [4][src][slot] × 2H.
	dRecv, dSend, cRecv, cSend []*gin.Window
	slotCtr, finish            []*memWord // per rank: per-expert slot and finish counters
	flagsSeen                  []*memWord // per rank: combine flags seen (grid sync)
}

// memWord is a per-rank HBM array of 8-byte counters.
type memWord = workload.GPUArray

func New(e *workload.Env, agg bool) *Workload {
	return &Workload{e: e, agg: agg}
}

// KernelSMs returns the SMs the dispatch kernel runs on (after Setup).
func (w *Workload) KernelSMs() int { return w.sms }

func (w *Workload) Setup() error {
	e, st := w.e, w.e.Step
	h := e.Hdr
	prec, err := h.DispatchPrecision()
	if err != nil {
		return err
	}
	hidden := e.Hidden
	w.msg = uint64(traces.LLDispatchBytes(hidden, prec))
	w.comb = uint64(traces.LLCombineBytes(hidden))
	// warp groups = ceil(E / SMs), SMs = ceil(E / groups): DeepEP's
	// internode_ll.cu launcher, and NCCL EP's (low_latency.cu:1023-1029)
	// with SMs = max_num_sms.
	dev := e.M.Profile.GPU.SMs
	if w.MaxSMs > 0 {
		if w.MaxSMs > dev {
			return fmt.Errorf("ll: max_num_sms %d exceeds the device's %d SMs", w.MaxSMs, dev)
		}
		// nccl_ep.cc:1301-1310: LL takes at most 14 warp groups.
		if g := (st.Slots + w.MaxSMs - 1) / w.MaxSMs; g > 14 {
			return fmt.Errorf("ll: max_num_sms %d: %d experts need at least %d SMs (NCCL EP LL takes at most 14 warp groups)",
				w.MaxSMs, st.Slots, (st.Slots+13)/14)
		}
		dev = w.MaxSMs
	}
	w.groups = (st.Slots + dev - 1) / dev
	w.sms = (st.Slots + w.groups - 1) / w.groups
	if st.TopK > 32/w.groups {
		return fmt.Errorf("ll: top-%d needs more warps than the %d a warp group has", st.TopK, 32/w.groups)
	}
	ep, T := uint64(st.EP), uint64(st.MaxTokens)
	nComm := (st.Local + workload.CtxsPerComm - 1) / workload.CtxsPerComm
	for c := range nComm {
		ctxs := min(workload.CtxsPerComm, st.Local-c*workload.CtxsPerComm)
		comm, err := e.NewComm()
		if err != nil {
			return err
		}
		dc, err := comm.DevCommCreate(gin.Requirements{GinContextCount: ctxs, GinSignalCount: 2 * st.EP,
			ConnectionType: gin.ConnFull, Type: e.GinType()})
		if err != nil {
			return fmt.Errorf("ll: communicator %d: %w", c, err)
		}
		w.comms = append(w.comms, dc)
		for _, x := range []struct {
			dst  *[]*gin.Window
			name string
			size uint64
		}{
			{&w.dRecv, "ll/dispatch-recv", workload.CtxsPerComm * ep * T * w.msg},
			{&w.dSend, "ll/dispatch-send", T * w.msg},
			{&w.cRecv, "ll/combine-recv", ep * workload.CtxsPerComm * T * w.comb},
			{&w.cSend, "ll/combine-send", workload.CtxsPerComm * ep * T * w.comb},
		} {
			win, err := comm.WindowRegister(x.name+strconv.Itoa(c), sim.Bytes(x.size), 0, false)
			if err != nil {
				return fmt.Errorf("ll: %s: %w", x.name, err)
			}
			*x.dst = append(*x.dst, win)
		}
	}
	for r := range st.EP {
		g := e.M.GPUs[r]
		w.slotCtr = append(w.slotCtr, workload.NewGPUArray(g, "ll/slot", st.Slots))
		w.finish = append(w.finish, workload.NewGPUArray(g, "ll/finish", st.Slots))
		w.flagsSeen = append(w.flagsSeen, workload.NewGPUArray(g, "ll/flags", 1))
	}
	return nil
}

// gin returns the handle of local expert le's context for group t of rank.
func (w *Workload) gin(t *gpu.Group, rank, le int) (*gin.Gin, *gin.DevComm) {
	dc := w.comms[le/workload.CtxsPerComm]
	return dc.Gin(t, rank, le%workload.CtxsPerComm), dc
}

// ginCache keeps a group's last GIN handle: device code builds its ncclGin
// once per context, not per put (and a handle per put allocated).
type ginCache struct {
	le int
	gn *gin.Gin
	dc *gin.DevComm
}

// get returns the handle of local expert le's context for group t of rank.
func (c *ginCache) get(w *Workload, t *gpu.Group, rank, le int) (*gin.Gin, *gin.DevComm) {
	if c.gn == nil || c.le != le || c.gn.Group() != t {
		c.gn, c.dc = w.gin(t, rank, le)
		c.le = le
	}
	return c.gn, c.dc
}

// nvl reports whether traffic from rank a to rank b goes over NVLink.
func (w *Workload) nvl(a, b int) bool {
	return w.e.Cfg.NVLink && w.e.M.Ranks[a].Node == w.e.M.Ranks[b].Node
}

// dispatch launches the dispatch kernel on every rank.
func (w *Workload) Dispatch() {
	e, st := w.e, w.e.Step
	recv := make([]int, st.EP)
	for r := range st.EP {
		recv[r] = len(st.Experts[r]) * st.EP
	}
	e.Begin(&e.Disp, "dispatch", recv)
	for r := range st.EP {
		w.launchDispatch(r)
	}
}

func (w *Workload) launchDispatch(r int) {
	e, st := w.e, w.e.Step
	g := e.M.GPUs[r]
	ph := &e.Disp
	// Senders: SM s, warp i owns top-k slot i of tokens s, s+sms, ...
	// Over a backend that can issue without a process (GDAKI, Proxy) they are
	// state machines (llSender): 262k of them run at once at EP256.
	_, then := w.comms[0].Backend().(gin.ThenBackend)
	then = then && !w.e.Cfg.NoThen
	for s := 0; s < w.sms && s < st.Tokens[r]; s++ {
		for i := range st.TopK {
			name := "dispatch/sm" + strconv.Itoa(s) + "/w" + strconv.Itoa(i)
			if then {
				m := &llSender{w: w, r: r, i: i, tok: s}
				m.t = g.LaunchHandler(name, 32, m, 0)
				continue
			}
			g.Launch(name, 32, func(t *gpu.Group) {
				var gc ginCache
				for tok := s; tok < st.Tokens[r]; tok += w.sms {
					t.Cycles(e.P.CastCycles)
					x := int(st.TopKIdx[r][tok][i])
					if x < 0 {
						continue
					}
					slot := t.AtomicAdd64(w.slotCtr[r].R, w.slotCtr[r].Off(x), 1, gpu.ScopeDevice)
					switch dst, le, off := w.dispatchTo(r, x, slot); {
					case dst == r:
						// NVSHMEM and GIN ports copy to the local rank
						// with SM loads/stores (no loopback QP).
						t.Compute(e.P.CopyRate.TxTime(sim.Bytes(w.msg)))
					case w.nvl(r, dst):
						t.NVLinkWrite(e.M.Ranks[dst].Local, w.dRecv[le/workload.CtxsPerComm].Region(dst), off, nil, sim.Bytes(w.msg))
					default:
						gn, dc := gc.get(w, t, r, le)
						gn.Put(dc.World(r), dst, w.dRecv[le/workload.CtxsPerComm], off, w.dSend[le/workload.CtxsPerComm],
							uint64(tok)*w.msg, w.msg, nil, nil, w.opts()...)
						ph.RDMABytes += int64(w.msg)
					}
					t.AtomicAdd64(w.finish[r].R, w.finish[r].Off(x), 1, gpu.ScopeDevice)
				}
			})
		}
	}
	// Count senders: the warp group responsible for expert x waits until
	// every put to x was issued, then sends the count (n+1) on x's
	// context, behind the data (PR #521: a 0-byte put with SignalAdd).
	// A count sender needs no process while it waits (LaunchWaiting): it
	// starts at the poll that sees the counter complete, as a spinning
	// warp would.
	for x := range st.Slots {
		n := uint64(st.Count[r][x])
		dst, le := st.Home[x], st.LocalIdx[x]
		name := "dispatch/count" + strconv.Itoa(x)
		if n == 0 {
			g.Launch(name, 32, func(t *gpu.Group) {
				ph.Sigs++
				w.signal(t, nil, r, dst, le, r, n+1, &ph.Last)
			})
			continue
		}
		done := func(v uint64) bool { return v >= n }
		g.LaunchWaiting(name, 32, w.finish[r].R, w.finish[r].Off(x), "ll finish counter", done, func(t *gpu.Group) {
			t.WaitWord(w.finish[r].R, w.finish[r].Off(x), "ll finish counter", done)
			ph.Sigs++
			w.signal(t, nil, r, dst, le, r, n+1, &ph.Last)
		})
	}
	// Receivers: one warp group per (local expert, source rank).
	for le, x := range st.Experts[r] {
		for src := range st.EP {
			n := st.Count[src][x]
			w.launchSignalWaiter(g, "dispatch/recv"+strconv.Itoa(le)+"."+strconv.Itoa(src), r, le, src, src,
				func(t *gpu.Group, seen workload.Seen) {
					t.Compute(e.P.CopyRate.TxTime(sim.Bytes(uint64(n) * w.msg)))
					e.ReceiverDone(r, seen)
				})
		}
	}
}

// dispatchTo returns where rank r's token for expert x goes: the expert's
// rank, its local index there, and the offset of receive slot slot; and
// counts the message.
func (w *Workload) dispatchTo(r, x int, slot uint64) (dst, le int, off uint64) {
	st, ph := w.e.Step, &w.e.Disp
	dst, le = st.Home[x], st.LocalIdx[x]
	off = ((uint64(le%workload.CtxsPerComm)*uint64(st.EP)+uint64(r))*uint64(st.MaxTokens) + slot) * w.msg
	ph.Msgs++
	if w.agg {
		// NCCL EP's ep_bench counts the 2H BF16 payload per valid
		// selection, no header (contrib/nccl_ep/ep_bench.cu:1917-1938;
		// NCCL EP is BF16 only): the payload without the header here,
		// so that an FP8 trace counts what it sends.
		ph.BWBytes[r] += int64(w.msg) - traces.LLHeaderBytes
	} else {
		ph.BWBytes[r] += int64(w.msg)
	}
	return dst, le, off
}

// opts returns the option flags of a data put.
func (w *Workload) opts() []gin.OptFlags {
	if w.agg {
		return aggregate
	}
	return nil
}

var aggregate = []gin.OptFlags{gin.OptAggregateRequests}

// sendThen moves one message of n bytes from rank r's local expert le
// context to rank dst (offset off of recv, from offset src of send) for a
// process-free sender, then continues at h: an SM copy to the rank
// itself, an NVLink store to a GPU of its node with --nvlink, else a put.
func (w *Workload) sendThen(t *gpu.Group, gc *ginCache, h sim.Handler, r, le, dst int, recv, send *gin.Window,
	off, src, n uint64, ph *workload.Phase) {
	e := w.e
	switch {
	case dst == r:
		t.ComputeThen(e.P.CopyRate.TxTime(sim.Bytes(n)), h, 0)
	case w.nvl(r, dst):
		t.NVLinkWriteThen(e.M.Ranks[dst].Local, recv.Region(dst), off, nil, sim.Bytes(n), h, 0)
	default:
		gn, dc := gc.get(w, t, r, le)
		ph.RDMABytes += int64(n)
		gn.PutThen(h, 0, dc.World(r), dst, recv, off, send, src, n, nil, nil, w.opts()...)
	}
}

// llSender is a dispatch sender warp (SM s, warp i: top-k slot i of
// tokens s, s+sms, ...) without a process: the body of launchDispatch's
// closure as a state machine over the group's Then operations, with the
// same steps at the same instants.
type llSender struct {
	w      *Workload
	t      *gpu.Group
	r, i   int
	tok, x int
	gc     ginCache
	pc     uint8
}

const (
	llCast = iota
	llSlot
	llSend
	llFinish
	llNext
)

// Handle implements sim.Handler: the step the group's last operation
// completed.
func (m *llSender) Handle(*sim.Sim, uint64) {
	w, t, r := m.w, m.t, m.r
	e, st := w.e, w.e.Step
	for {
		switch m.pc {
		case llCast:
			if m.tok >= st.Tokens[r] {
				t.End()
				return
			}
			m.pc = llSlot
			t.CyclesThen(e.P.CastCycles, m, 0)
			return
		case llSlot:
			m.x = int(st.TopKIdx[r][m.tok][m.i])
			if m.x < 0 {
				m.pc = llNext
				continue
			}
			m.pc = llSend
			t.AtomicAdd64Then(w.slotCtr[r].R, w.slotCtr[r].Off(m.x), 1, gpu.ScopeDevice, m, 0)
			return
		case llSend:
			m.pc = llFinish
			dst, le, off := w.dispatchTo(r, m.x, t.Result())
			w.sendThen(t, &m.gc, m, r, le, dst, w.dRecv[le/workload.CtxsPerComm], w.dSend[le/workload.CtxsPerComm], off,
				uint64(m.tok)*w.msg, w.msg, &e.Disp)
			return
		case llFinish:
			m.pc = llNext
			t.AtomicAdd64Then(w.finish[r].R, w.finish[r].Off(m.x), 1, gpu.ScopeDevice, m, 0)
			return
		case llNext:
			m.tok += w.sms
			m.pc = llCast
		}
	}
}

// launchSignalWaiter launches a warp group on g (rank r) that waits for
// signal id of local expert le's context (waitSignal) and then runs rest.
// While the signal is zero the group has no process: it is launched with
// gpu.LaunchWaiting on the signal word, with GIN's wait predicate, and its
// body repeats the wait through gin (which then succeeds at once), so the
// timing is that of a warp spinning in ncclGin::waitSignal from launch.
func (w *Workload) launchSignalWaiter(g *gpu.GPU, name string, r, le, id, from int, rest func(t *gpu.Group, seen workload.Seen)) {
	dc := w.comms[le/workload.CtxsPerComm]
	ctx := le % workload.CtxsPerComm
	reg, off := dc.Backend().SignalWord(dc, r, ctx, id)
	least := 1 + dc.Backend().SignalOffset(dc, r, ctx, id)
	g.LaunchWaiting(name, 32, reg, off, "gin signal", func(v uint64) bool { return gin.RollingLessEq(least, v, 64) },
		func(t *gpu.Group) { rest(t, w.waitSignal(t, r, le, id, from)) })
}

// signal adds v to signal id of local expert le's context at rank dst,
// from rank r: a 0-byte put with SignalAdd (or an NVLink store). gc (may
// be nil) is the group's handle cache.
func (w *Workload) signal(t *gpu.Group, gc *ginCache, r, dst, le, id int, v uint64, _ *[]workload.Seen) {
	e := w.e
	if gc == nil {
		gc = &ginCache{}
	}
	gn, dc := gc.get(w, t, r, le)
	if dst == r {
		reg, off := dc.Backend().SignalWord(dc, dst, le%workload.CtxsPerComm, id)
		t.AtomicAdd64(reg, off, v, gpu.ScopeDevice)
		return
	}
	if w.nvl(r, dst) {
		reg, off := dc.Backend().SignalWord(dc, dst, le%workload.CtxsPerComm, id)
		var b [8]byte
		workload.PutLE64(b[:], v)
		t.NVLinkWrite(e.M.Ranks[dst].Local, reg, off, b[:], 8)
		return
	}
	gn.Put(dc.World(r), dst, w.dRecv[le/workload.CtxsPerComm], 0, w.dSend[le/workload.CtxsPerComm], 0, 0, gin.SignalAdd{Signal: id, Value: v}, nil)
}

// waitSignal waits until signal id of local expert le's context at rank r is
// non-zero, resets it and returns what it saw; from is the sending rank.
func (w *Workload) waitSignal(t *gpu.Group, r, le, id, from int) workload.Seen {
	e := w.e
	gn, dc := w.gin(t, r, le)
	reg, off := dc.Backend().SignalWord(dc, r, le%workload.CtxsPerComm, id)
	gn.WaitSignal(id, 1, 64)
	seen := e.Saw(from, r, reg, off)
	gn.ResetSignal(id)
	return seen
}

// combine launches the combine kernel on every rank.
func (w *Workload) Combine() {
	e, st := w.e, w.e.Step
	e.BeginOne(&e.Comb, "combine") // the reducer, after every flag
	for r := range st.EP {
		w.launchCombine(r)
	}
}

func (w *Workload) launchCombine(r int) {
	e, st := w.e, w.e.Step
	g := e.M.GPUs[r]
	ph := &e.Comb
	// Senders: one warp group per (local expert, destination rank) sends
	// every token it got from that rank back, then one flag.
	_, then := w.comms[0].Backend().(gin.ThenBackend)
	then = then && !w.e.Cfg.NoThen
	for le, x := range st.Experts[r] {
		for dst := range st.EP {
			toks := st.RecvTokens[dst][x]
			name := "combine/send" + strconv.Itoa(le) + "." + strconv.Itoa(dst)
			if then {
				m := &combSender{w: w, r: r, le: le, dst: dst, toks: toks}
				m.t = g.LaunchHandler(name, 32, m, 0)
				continue
			}
			g.Launch(name, 32, func(t *gpu.Group) {
				var gc ginCache
				for j, tok := range toks {
					t.Compute(e.P.CopyRate.TxTime(sim.Bytes(w.comb))) // expert output to staging
					off, src := w.combineAt(r, le, dst, j, int(tok))
					if dst == r {
						t.Compute(e.P.CopyRate.TxTime(sim.Bytes(w.comb)))
						continue
					}
					if w.nvl(r, dst) {
						t.NVLinkWrite(e.M.Ranks[dst].Local, w.cRecv[le/workload.CtxsPerComm].Region(dst), off, nil, sim.Bytes(w.comb))
						continue
					}
					gn, dc := gc.get(w, t, r, le)
					gn.Put(dc.World(r), dst, w.cRecv[le/workload.CtxsPerComm], off, w.cSend[le/workload.CtxsPerComm], src, w.comb,
						nil, nil, w.opts()...)
					ph.RDMABytes += int64(w.comb)
				}
				ph.Sigs++
				w.signal(t, &gc, r, dst, le, st.EP+r, 1, nil)
			})
		}
	}
	// Flag waiters: one warp group per global expert; then a grid sync and
	// the weighted reduction of k contributions per token.
	for x := range st.Slots {
		home, le := st.Home[x], st.LocalIdx[x]
		w.launchSignalWaiter(g, "combine/flag"+strconv.Itoa(x), r, le, st.EP+home, home, func(t *gpu.Group, seen workload.Seen) {
			e.NoteLast(r, seen)
			t.AtomicAdd64(w.flagsSeen[r].R, 0, 1, gpu.ScopeDevice)
		})
	}
	nflags := uint64(st.Slots)
	reduce := sim.Bytes(st.Selections[r] * int64(w.comb))
	all := func(v uint64) bool { return v >= nflags }
	g.LaunchWaiting("combine/reduce", 1024, w.flagsSeen[r].R, 0, "ll combine grid sync", all, func(t *gpu.Group) {
		t.WaitWord(w.flagsSeen[r].R, 0, "ll combine grid sync", all)
		t.Compute(e.P.ReduceRate.TxTime(reduce))
		e.ReceiverDone(r, e.LastOf(r))
	})
}

// combineAt returns the offsets of the j-th token (token tok of rank dst)
// that rank r's local expert le returns: in dst's receive buffer and in
// r's send buffer; and counts the message.
func (w *Workload) combineAt(r, le, dst, j, tok int) (off, src uint64) {
	st, ph := w.e.Step, &w.e.Comb
	T := uint64(st.MaxTokens)
	off = ((uint64(r)*workload.CtxsPerComm+uint64(le%workload.CtxsPerComm))*T + uint64(tok)) * w.comb
	src = ((uint64(le%workload.CtxsPerComm)*uint64(st.EP)+uint64(dst))*T + uint64(j)) * w.comb
	ph.Msgs++
	ph.BWBytes[dst] += int64(w.comb)
	return off, src
}

// combSender is a combine sender warp (local expert le to rank dst)
// without a process: launchCombine's closure, then signal, as a state
// machine over Then operations with the same steps at the same instants.
type combSender struct {
	w          *Workload
	t          *gpu.Group
	r, le, dst int
	toks       []int32
	j          int
	gc         ginCache
	pc         uint8
}

const (
	cbStage = iota
	cbSend
	cbNext
	cbFlag
	cbFlagged
)

// Handle implements sim.Handler.
func (m *combSender) Handle(*sim.Sim, uint64) {
	w, t, r, le, dst := m.w, m.t, m.r, m.le, m.dst
	e, st := w.e, w.e.Step
	for {
		switch m.pc {
		case cbStage:
			if m.j == len(m.toks) {
				m.pc = cbFlag
				continue
			}
			m.pc = cbSend
			t.ComputeThen(e.P.CopyRate.TxTime(sim.Bytes(w.comb)), m, 0) // expert output to staging
			return
		case cbSend:
			off, src := w.combineAt(r, le, dst, m.j, int(m.toks[m.j]))
			m.pc = cbNext
			w.sendThen(t, &m.gc, m, r, le, dst, w.cRecv[le/workload.CtxsPerComm], w.cSend[le/workload.CtxsPerComm], off, src, w.comb, &e.Comb)
			return
		case cbNext:
			m.j++
			m.pc = cbStage
		case cbFlag: // signal, as a state
			e.Comb.Sigs++
			id := st.EP + r
			gn, dc := m.gc.get(w, t, r, le)
			m.pc = cbFlagged
			switch {
			case dst == r:
				reg, off := dc.Backend().SignalWord(dc, dst, le%workload.CtxsPerComm, id)
				t.AtomicAdd64Then(reg, off, 1, gpu.ScopeDevice, m, 0)
			case w.nvl(r, dst):
				reg, off := dc.Backend().SignalWord(dc, dst, le%workload.CtxsPerComm, id)
				b := make([]byte, 8)
				workload.PutLE64(b, 1)
				t.NVLinkWriteThen(e.M.Ranks[dst].Local, reg, off, b, 8, m, 0)
			default:
				gn.PutThen(m, 0, dc.World(r), dst, w.dRecv[le/workload.CtxsPerComm], 0, w.dSend[le/workload.CtxsPerComm], 0, 0,
					gin.SignalAdd{Signal: id, Value: 1}, nil)
			}
			return
		case cbFlagged:
			t.End()
			return
		}
	}
}

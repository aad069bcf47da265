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
		if _, ok := dc.Backend().(gin.ThenBackend); !ok {
			return fmt.Errorf("ll: communicator %d: the GIN backend cannot issue for a warp without a process (gin.ThenBackend)", c)
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
	// Senders: SM s, warp i owns top-k slot i of tokens s, s+sms, ...
	// They are state machines (llSender): 262k of them run at once at
	// EP256.
	for s := 0; s < w.sms && s < st.Tokens[r]; s++ {
		for i := range st.TopK {
			m := &llSender{w: w, r: r, i: i, tok: s}
			m.t = g.LaunchHandler("dispatch/sm"+strconv.Itoa(s)+"/w"+strconv.Itoa(i), 32, m, 0)
		}
	}
	// Count senders: the warp group responsible for expert x waits until
	// every put to x was issued, then sends the count (n+1) on x's
	// context, behind the data (PR #521: a 0-byte put with SignalAdd).
	for x := range st.Slots {
		m := &countSender{w: w, r: r, x: x, n: uint64(st.Count[r][x])}
		m.t = g.LaunchHandler("dispatch/count"+strconv.Itoa(x), 32, m, 0)
	}
	// Receivers: one warp group per (local expert, source rank).
	for le, x := range st.Experts[r] {
		for src := range st.EP {
			n := st.Count[src][x]
			w.launchSignalWaiter(g, "dispatch/recv"+strconv.Itoa(le)+"."+strconv.Itoa(src), r, le, src, src,
				func(t *gpu.Group, seen workload.Seen) {
					t.Compute(w.recvCopyRate().TxTime(sim.Bytes(uint64(n) * w.msg)))
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
	ph.Count(r).Msgs++
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
	switch {
	case dst == r: // NVSHMEM and GIN ports copy with SM loads/stores (no loopback QP)
		t.ComputeThen(w.copyRate(ph).TxTime(sim.Bytes(n)), h, 0)
	case w.nvl(r, dst): // dispatch: UNROLLED_WARP_COPY; combine: the TMA pipeline, straight to the peer
		t.CopyThen(recv.Region(dst), off, nil, sim.Bytes(n), w.copyRate(ph), h, 0)
	default:
		gn, dc := gc.get(w, t, r, le)
		ph.Count(r).RDMABytes += int64(n)
		gn.PutThen(h, 0, dc.World(r), dst, recv, off, send, src, n, nil, nil, w.opts()...)
	}
}

// copyRate is the rate of a sender's copy of a message into its own GPU
// or an NVLink peer, or into the staging buffer of a put. A dispatch warp
// copies its message with UNROLLED_WARP_COPY (DeepEP; NCCL EP's
// cast-and-write loop is taken as the same). A combine sender stands for
// a warp group whose sub-warps run TMA pipelines (DeepEP and NCCL EP,
// processAndSendToken): 32/groups sub-warps of one pipeline each, and the
// groups on one SM share its TMA throughput.
func (w *Workload) copyRate(ph *workload.Phase) sim.BitRate {
	gc := w.e.M.Profile.GPU
	if ph == &w.e.Disp {
		return gc.WarpCopyRate
	}
	g := sim.BitRate(w.groups)
	return min(gc.WarpTMARate*(32/g), gc.TMARatePerSM/g)
}

// recvCopyRate is a dispatch receiver warp group's copy out of the
// receive buffer: its 32/groups sub-warps' UNROLLED_WARP_COPY, the SM's
// throughput shared by the groups on it.
func (w *Workload) recvCopyRate() sim.BitRate {
	gc := w.e.M.Profile.GPU
	g := sim.BitRate(w.groups)
	return min(gc.WarpCopyRate*(32/g), gc.CopyRatePerSM/g)
}

// llSender is dispatch sender warp i of SM s, a state machine over the
// group's Then operations (no process). Its program, with the step that
// starts each operation:
//
//	for tok := s; tok < Tokens[r]; tok += sms {    // llNext
//		cast(tok)                                  // llCast: CastCycles
//		x := TopKIdx[r][tok][i]; if x < 0 { continue }
//		slot := atomicAdd(slotCtr[x], 1)           // llSlot
//		send(tok, x's receive slot slot)           // llSend: sendThen
//		atomicAdd(finish[x], 1)                    // llFinish
//	}
//
// A step starts its operation and returns; the group resumes at the next
// step when the operation completes.
type llSender struct {
	w      *Workload
	t      *gpu.Group
	r, i   int
	tok, x int
	gc     ginCache
	pc     llStep
}

// llStep is a step of llSender's program.
type llStep uint8

const (
	llCast llStep = iota
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

// countSender is the count sender warp group of rank r for expert x, a
// state machine over the group's Then operations (no process). Its
// program, with the step that starts each operation:
//
//	if n > 0 { wait until finish[x] >= n }  // csWait: every put to x issued
//	signal(Home[x], r, n+1)                 // csCount: the count
//
// While it waits it spins as a warp would, costing no process.
type countSender struct {
	w    *Workload
	t    *gpu.Group
	r, x int
	n    uint64 // messages of rank r to expert x
	gc   ginCache
	pc   countStep
}

// countStep is a step of countSender's program.
type countStep uint8

const (
	csWait countStep = iota
	csCount
	csSent
)

// Handle implements sim.Handler.
func (m *countSender) Handle(*sim.Sim, uint64) {
	w, t, r := m.w, m.t, m.r
	st := w.e.Step
	switch m.pc {
	case csWait:
		m.pc = csCount
		if m.n > 0 {
			t.WaitWordThen(w.finish[r].R, w.finish[r].Off(m.x), "ll finish counter", m.issued, m, 0)
			return
		}
		fallthrough
	case csCount:
		m.pc = csSent
		sendSignal(w, t, &m.gc, m, r, st.Home[m.x], st.LocalIdx[m.x], r, m.n+1, &w.e.Disp)
	case csSent:
		t.End()
	}
}

// issued reports whether the finish counter value v counts every message
// of the count sender's.
func (m *countSender) issued(v uint64) bool { return v >= m.n }

// sendSignal is the last step of a sender warp: add v to signal id of
// local expert le's context at rank dst, from rank r, with an atomic on
// the rank itself, an NVLink store to a GPU of its node with --nvlink,
// else a 0-byte put with SignalAdd; it counts the signal in ph and
// continues the machine h of group t (handle cache gc) when it is issued.
func sendSignal(w *Workload, t *gpu.Group, gc *ginCache, h sim.Handler, r, dst, le, id int, v uint64, ph *workload.Phase) {
	e := w.e
	ph.Count(r).Sigs++
	gn, dc := gc.get(w, t, r, le)
	switch {
	case dst == r:
		reg, off := dc.Backend().SignalWord(dc, dst, le%workload.CtxsPerComm, id)
		t.AtomicAdd64Then(reg, off, v, gpu.ScopeDevice, h, 0)
	case w.nvl(r, dst):
		reg, off := dc.Backend().SignalWord(dc, dst, le%workload.CtxsPerComm, id)
		b := make([]byte, 8)
		workload.PutLE64(b, v)
		t.NVLinkWriteThen(e.M.Ranks[dst].Local, reg, off, b, 8, h, 0)
	default:
		gn.PutThen(h, 0, dc.World(r), dst, w.dRecv[le/workload.CtxsPerComm], 0, w.dSend[le/workload.CtxsPerComm], 0, 0,
			gin.SignalAdd{Signal: id, Value: v}, nil)
	}
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
		// Every selection of r comes back to it as one message
		// (combineAt): counted here, where r's numerator is r's own.
		e.Comb.BWBytes[r] = st.Selections[r] * int64(w.comb)
		w.launchCombine(r)
	}
}

func (w *Workload) launchCombine(r int) {
	e, st := w.e, w.e.Step
	g := e.M.GPUs[r]
	// Senders: one warp group per (local expert, destination rank) sends
	// every token it got from that rank back, then one flag: state
	// machines (combSender).
	for le, x := range st.Experts[r] {
		for dst := range st.EP {
			m := &combSender{w: w, r: r, le: le, dst: dst, toks: st.RecvTokens[dst][x]}
			m.t = g.LaunchHandler("combine/send"+strconv.Itoa(le)+"."+strconv.Itoa(dst), 32, m, 0)
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
// r's send buffer; and counts the message (its bandwidth bytes are the
// receiver's, set by Combine).
func (w *Workload) combineAt(r, le, dst, j, tok int) (off, src uint64) {
	st, ph := w.e.Step, &w.e.Comb
	T := uint64(st.MaxTokens)
	off = ((uint64(r)*workload.CtxsPerComm+uint64(le%workload.CtxsPerComm))*T + uint64(tok)) * w.comb
	src = ((uint64(le%workload.CtxsPerComm)*uint64(st.EP)+uint64(dst))*T + uint64(j)) * w.comb
	ph.Count(r).Msgs++
	return off, src
}

// combSender is the combine sender warp of rank r's local expert le for
// rank dst, a state machine over the group's Then operations (no
// process). Its program, with the step that starts each operation:
//
//	for j, tok := range toks {                    // cbNext
//		copy(expert output of tok -> staging)      // cbStage: copyRate × 2H (RDMA peers only)
//		send(staging j -> dst's slot of tok)       // cbSend: sendThen
//	}
//	signal(dst, EP+r, 1)                          // cbFlag: the flag, then end
type combSender struct {
	w          *Workload
	t          *gpu.Group
	r, le, dst int
	toks       []int32
	j          int
	gc         ginCache
	pc         combStep
}

// combStep is a step of combSender's program.
type combStep uint8

const (
	cbStage combStep = iota
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
			if dst == r || w.nvl(r, dst) { // the TMA pipeline copies straight there (sendThen)
				continue
			}
			t.ComputeThen(w.copyRate(&e.Comb).TxTime(sim.Bytes(w.comb)), m, 0) // expert output to staging
			return
		case cbSend:
			off, src := w.combineAt(r, le, dst, m.j, int(m.toks[m.j]))
			m.pc = cbNext
			w.sendThen(t, &m.gc, m, r, le, dst, w.cRecv[le/workload.CtxsPerComm], w.cSend[le/workload.CtxsPerComm], off, src, w.comb, &e.Comb)
			return
		case cbNext:
			m.j++
			m.pc = cbStage
		case cbFlag:
			m.pc = cbFlagged
			sendSignal(w, t, &m.gc, m, r, dst, le, st.EP+r, 1, &e.Comb)
			return
		case cbFlagged:
			t.End()
			return
		}
	}
}

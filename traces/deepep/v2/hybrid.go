package v2

import (
	"fmt"
	"math/bits"
	"strconv"

	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
	"github.com/ginsim/ginsim/traces/workload"
)

// DeepEP V2 (ElasticBuffer) hybrid mode (deep_ep/include/deep_ep/impls/
// hybrid_dispatch.cuh, hybrid_combine.cuh; spec moe-traffic 1.7), what
// ElasticBuffer runs on more than one NVLink domain when allow_hybrid_mode
// is set (its default). The EP ranks split into S scale-out ranks (nodes)
// of U scale-up ranks (NVLink peers); GIN connects only the rail team
// (ginConnectionType RAIL) and every RDMA op goes to the rail peer, the
// GPU with the same local index on another node. The kernels run on
// num_sms SMs of C channels; channel c = sm·C + warp.
//
// Dispatch, one kernel: a rail GIN barrier (SM 1) and an NVLink barrier
// (SM 0), no flush, then a grid sync. Notify warps count the SM's tokens
// per rank and expert and reduce over the grid; SM 0 puts each node's
// counts to its rail peer (rank counts with AggregateRequests, then the
// expert counts), sums what its rail peers sent for this node and stores
// (rank counts) or red_adds (expert counts) the sums into the scale-up
// peers over NVLink, and waits for its own. The scale-out warp of channel
// c sends the rank's tokens c, c+C·num_sms, ...: per token it TMA-loads
// the token (preloaded while the previous one is put), TMA-stores the
// record into the send buffer (if a remote node needs it) and into its
// own node's receive buffer (the local bypass), waits for the stores, and
// puts one record per remote node (Rail team, AggregateRequests) into slot
// n of that node's per-(source node, channel) receive buffer, where n
// counts the channel's records for the node so far. Whenever a node's
// count has grown by 6 (kScaleoutUpdateInterval) since its last update,
// the lane of that node publishes the count: red_add_rel of (count −
// last) << 32 into the node's tail word for (channel, source node), a
// VASignalAdd over GIN for a remote node (no AggregateRequests: it rings
// the doorbell) and a device atomic for its own; at the end every node
// gets the remainder plus the finish flag. No credits: the receive
// buffers hold every token of the channel. The forward warp of channel c
// on the receiving rank visits the source nodes round-robin (starting
// after c % S), waits until the chosen node's tail moved or its finish
// flag is set, takes at most 6 of its records, and for each: waits for
// its previous TMA stores, TMA-loads the record, dedups the token's GPUs
// on this node, takes a slot per GPU (a device atomic) and TMA-stores the
// record into each GPU's scale-up buffer over NVLink. At the end it stores
// its per-peer counts (the combine's linked-list ends) into every scale-up
// peer, and the kernel ends with a grid sync and an NVLink barrier.
//
// Combine mirrors it: a grid sync, the same two barriers, a grid sync.
// Scale-up warps on the expert's GPU walk, round-robin over the forwarders
// of their node, the records each forwarder moved to them in dispatch,
// TMA-load the expert output and TMA-store it into the forwarder's
// scale-up buffer over NVLink, and every 3 rounds publish per-forwarder
// counts with st.release.sys. Forward warps replay their dispatch order:
// wait for the tails of every GPU the token went to, reduce those
// contributions, TMA-store the sum into the send buffer (or the own node's
// receive buffer) and put it to the source's rail peer during the next
// token, AggregateRequests except on the last record of a dispatch
// chunk. At the end a forward warp flushes its context, red_adds the
// finish flag into every rail peer's tail word and waits for every rail
// peer's flag. No barrier at the end; the source then reduces the
// (token, node) records (combine_reduce_epilogue, a separate kernel,
// counted in the combine as for V2 direct).

// hFwd is one record a forward warp moved in dispatch: token tok of
// source rank src, and whether it closed a forward chunk (the combine's
// put without AggregateRequests).
type hFwd struct {
	src, tok int32
	last     bool
}

// HybridStats counts what the hybrid kernels sent; tests compare it with the
// routing.
type HybridStats struct {
	DPuts, DTails, DLocalTails int64 // dispatch: record puts, remote tail signals (finish included), own-node tail atomics
	CPuts, CFinish             int64 // combine: record puts, remote finish signals
	CLast                      int64 // combine puts without AggregateRequests (chunk ends)
	// fwd[r*U+d]: records forwarder r stored into GPU d of its node in
	// dispatch; back[r*U+f]: records rank r sent back to forwarder f of
	// its node in combine.
	Fwd, Back []int64
	// NIC view: per rank the RDMA WRITE payload bytes and atomic packets
	// its NICs sent; packets between GPUs of one node or of different
	// local indices.
	WriteBytes, Atomics []int64
	SameNode, CrossRail int64
	// counts[r]: what notify left rank r: per scale-up peer the tokens it
	// forwards to r, then per local expert the tokens r receives.
	Counts [][]uint64
}

// Hybrid is DeepEP V2 hybrid dispatch and combine.
type Hybrid struct {
	*Direct
	S, U, L int // scale-out ranks (nodes), scale-up ranks (GPUs per node), experts per rank
	C, nch  int // channels per SM, channels
	tpc     int // kNumMaxTokensPerChannel

	ws  *gin.Window // backed workspace: tails, counts, the NVLink barrier word
	cw  *gin.Window // combine data buffers
	dsz uint64      // S·T: slots of one scale-up rank buffer

	// Routing, per rank: nodes[r][t] is token t's node set; gpus[r][t*S+n]
	// its GPUs on node n.
	nodes [][]uint64
	gpus  [][]uint64
	// fwd[r*nch+c]: the records forward warp c of rank r moved, in order.
	fwd    [][]hFwd
	cnt    []*workload.GPUArray // per rank: scale-up slot counters, one per peer
	host   []*mem.Region        // per rank: mapped host workspace (counts for the CPU)
	nvlEp  []uint64             // per rank: NVLink barriers passed
	live   []int                // per rank: combine groups still running
	reduce []sim.Duration       // per rank: the source's reduction of the combine records
	st     HybridStats          // per rank arrays, and the NIC view the obs stream feeds
	rst    []HybridStats        // per rank: the scalar counts of its warps
}

// Stats returns what the hybrid kernels sent so far.
func (w *Hybrid) Stats() HybridStats {
	s := w.st
	for _, x := range w.rst {
		s.DPuts += x.DPuts
		s.DTails += x.DTails
		s.DLocalTails += x.DLocalTails
		s.CPuts += x.CPuts
		s.CFinish += x.CFinish
		s.CLast += x.CLast
	}
	return s
}

// NewHybrid returns DeepEP V2's hybrid kernels on e.
func NewHybrid(e *workload.Env) *Hybrid { return &Hybrid{Direct: NewDirect(e)} }

// Workspace words of one rank (the backed window ws).
func (w *Hybrid) tailOff(c, node int) uint64 { return uint64(c*w.S+node) * 8 }
func (w *Hybrid) suTailOff(c, u int) uint64  { return uint64(w.nch*w.S+c*w.U+u) * 8 }
func (w *Hybrid) countOff(i int) uint64      { return uint64(w.nch*(w.S+w.U)+i) * 8 }
func (w *Hybrid) barOff() uint64             { return w.countOff(w.U + w.L) }
func (w *Hybrid) sendOff() uint64            { return w.barOff() + 8 }

// recvRankOff and recvExpOff are where the rank and expert counts of rail
// peer on node j land (4-byte counts, count+1).
func (w *Hybrid) recvRankOff(j int) uint64 {
	return w.sendOff() + uint64((w.e.Step.EP*(1+w.L)*4+7)/8*8) + uint64(j*w.U*4)
}
func (w *Hybrid) recvExpOff(j int) uint64 {
	return w.recvRankOff(0) + uint64((w.S*w.U*4+7)/8*8) + uint64(j*w.U*w.L*4)
}

// Dispatch buffer (the data window): [U scale-up ranks][S·T] records, the
// send buffer [T], the receive buffers [S source nodes][C·num_sms][tpc].
func (w *Hybrid) suOff(u int, slot uint64) uint64 {
	return (uint64(u)*w.dsz + slot) * uint64(w.rec)
}
func (w *Hybrid) sendRec(tok int) uint64 {
	return (uint64(w.U)*w.dsz + uint64(tok)) * uint64(w.rec)
}
func (w *Hybrid) recvRec(node, c, slot int) uint64 {
	T := uint64(w.e.Step.MaxTokens)
	return (uint64(w.U)*w.dsz + T + uint64((node*w.nch+c)*w.tpc+slot)) * uint64(w.rec)
}

// Combine buffer: [U experts' GPUs][channel][S·tpc] records, the receive
// buffer [S forwarder nodes][T], the send buffer [channel][S·tpc].
func (w *Hybrid) cSuOff(e, c, i int) uint64 {
	per := w.S * w.tpc
	return uint64((e*w.nch+c)*per+i) * uint64(w.crec)
}
func (w *Hybrid) cRecvOff(node, tok int) uint64 {
	return uint64(w.U*w.nch*w.S*w.tpc+node*w.e.Step.MaxTokens+tok) * uint64(w.crec)
}
func (w *Hybrid) cSendOff(c, i int) uint64 {
	return uint64(w.U*w.nch*w.S*w.tpc+w.S*w.e.Step.MaxTokens+c*w.S*w.tpc+i) * uint64(w.crec)
}

func (w *Hybrid) Setup() error {
	e, st := w.e, w.e.Step
	if err := w.sizes(); err != nil {
		return err
	}
	R, k := st.EP, st.TopK
	U := e.M.Spec.GPUsPerNode
	if R%U != 0 || R/U < 2 {
		return fmt.Errorf("v2: hybrid: EP %d is not two or more whole %d-GPU nodes "+
			"(DeepEP runs its direct kernels inside one NVLink domain)", R, U)
	}
	w.S, w.U, w.L = R/U, U, st.Slots/R
	if w.S > 32 || w.U > 64 {
		return fmt.Errorf("v2: hybrid: %d nodes of %d GPUs (DeepEP's hybrid kernels take at most 32 nodes of 64)", w.S, w.U)
	}
	if w.U+w.L > 32*w.vp.NotifyWarps {
		return fmt.Errorf("v2: hybrid: %d GPUs per node + %d experts per rank exceed the %d notify threads",
			w.U, w.L, 32*w.vp.NotifyWarps)
	}
	rdma := sim.BitRate(e.M.Spec.LinkRate).GBps()
	nvlGBps := sim.BitRate(e.M.Spec.NVLink.Bandwidth).GBps() * float64(w.vp.NVLinkEfficiencyPct) / 100
	w.sms = HybridNumSMs(st.Slots, k, R, w.S, rdma, nvlGBps, w.vp, e.M.Profile.GPU.SMs)
	if err := w.fixSMs(); err != nil {
		return err
	}
	w.qps = HybridNumQPs(w.sms, w.vp)
	w.C = hybridChannels(w.rec, w.crec, R, st.Slots, w.vp)
	if w.C < 1 {
		return fmt.Errorf("v2: hybrid: a %d-byte record does not fit two warps' shared memory (%d bytes)", w.rec, w.vp.SmemBytes)
	}
	w.nch = w.sms * w.C
	T := st.MaxTokens
	w.tpc = (T + w.nch - 1) / w.nch
	w.dsz = uint64(w.S * T)

	comm, err := e.NewComm()
	if err != nil {
		return err
	}
	w.dc, err = comm.DevCommCreate(gin.Requirements{GinContextCount: w.qps, GinSignalCount: R + 4,
		GinQueueDepth: w.vp.GinQPDepth, ConnectionType: gin.ConnRail, Type: e.GinType()})
	if err != nil {
		return fmt.Errorf("v2: hybrid: %w", err)
	}
	if err := needThen(w.dc); err != nil {
		return err
	}
	// DeepEP registers its whole buffer with NCCL_WIN_STRICT_ORDERING (VA
	// signals need it).
	strict := gin.WinStrictOrdering
	dsize := (uint64(w.U)*w.dsz + uint64(T) + uint64(w.S*w.nch*w.tpc)) * uint64(w.rec)
	if w.dWin, err = comm.WindowRegister("v2h/dispatch", sim.Bytes(dsize), strict, false); err != nil {
		return fmt.Errorf("v2: hybrid: %w", err)
	}
	if w.cw, err = comm.WindowRegister("v2h/combine", sim.Bytes(w.cSendOff(w.nch, 0)), strict, false); err != nil {
		return fmt.Errorf("v2: hybrid: %w", err)
	}
	w.ws, err = comm.WindowRegister("v2h/workspace", sim.Bytes(w.recvExpOff(w.S)), strict, true)
	if err != nil {
		return fmt.Errorf("v2: hybrid: %w", err)
	}
	w.ports = make([][]gpu.SMPorts, R)
	w.sync = make([]*workload.GPUArray, R)
	w.recvTokens = make([]int64, R)
	w.nvlEp = make([]uint64, R)
	w.live = make([]int, R)
	w.reduce = make([]sim.Duration, R)
	w.rst = make([]HybridStats, R)
	w.st.Fwd, w.st.Back = make([]int64, R*U), make([]int64, R*U)
	w.st.WriteBytes, w.st.Atomics = make([]int64, R), make([]int64, R)
	w.st.Counts = make([][]uint64, R)
	for r := range R {
		g := e.M.GPUs[r]
		w.ports[r] = make([]gpu.SMPorts, w.sms)
		for sm := range w.ports[r] {
			w.ports[r][sm] = gpu.NewSMPorts(w.vp.SMReadRate, w.vp.SMWriteRate)
		}
		w.topk = append(w.topk, workload.NewGPUArray(g, "v2h/topk", 1))
		w.arrive = append(w.arrive, workload.NewGPUArray(g, "v2h/notify-arrive", 1))
		w.cnt = append(w.cnt, workload.NewGPUArray(g, "v2h/scaleup-counter", U))
		w.host = append(w.host, g.AllocHost("v2h/host-workspace", sim.Bytes(8*(U+w.L)), false))
		w.st.Counts[r] = make([]uint64, U+w.L)
		for src := range R {
			w.recvTokens[r] += int64(st.RankTokens[src][r])
		}
	}
	w.route()
	w.tapNICs()
	return nil
}

// route resolves node and GPU sets and sizes the forward records.
func (w *Hybrid) route() {
	e, st := w.e, w.e.Step
	S, U := w.S, w.U
	w.nodes = make([][]uint64, st.EP)
	w.gpus = make([][]uint64, st.EP)
	fcap := make([]int, st.EP*w.nch)
	for r := range st.EP {
		ns, gs := e.RouteSets(r, S)
		for t, m := range ns {
			for ; m != 0; m &= m - 1 {
				fcap[(bits.TrailingZeros64(m)*U+r%U)*w.nch+t%w.nch]++
			}
		}
		w.nodes[r], w.gpus[r] = ns, gs
	}
	w.fwd = make([][]hFwd, st.EP*w.nch)
	for i, n := range fcap {
		w.fwd[i] = make([]hFwd, 0, n)
	}
}

// tapNICs counts, per rank, what its NICs put on the wire (their obs.Sent
// events; nothing when the step is not observed).
func (w *Hybrid) tapNICs() {
	e := w.e
	if e.Obs == nil {
		return
	}
	e.Obs.Subscribe(obs.Func(func(ev obs.Event) {
		if ev.Kind != obs.Sent {
			return
		}
		a, b := e.EPRank[ev.Addr], e.EPRank[ev.Value]
		if e.M.Ranks[a].Node == e.M.Ranks[b].Node {
			w.st.SameNode++
		}
		if e.M.Ranks[a].Local != e.M.Ranks[b].Local {
			w.st.CrossRail++
		}
		switch op := roce.Opcode(ev.Code); {
		case op.IsWrite():
			w.st.WriteBytes[a] += int64(ev.Bytes)
		case op.IsAtomic():
			w.st.Atomics[a]++
		}
	}))
}

// rail returns world rank r's rail peer on node n.
func (w *Hybrid) rail(r, n int) int { return n*w.U + r%w.U }

// nvlBarrier is nvlink_barrier_wo_local_sync over rank r's node: a
// system-scope red.add into every scale-up peer's barrier word (its own a
// device atomic), then a wait for all of them.
func (w *Hybrid) nvlBarrier(t *gpu.Group, r int) {
	n0 := r / w.U * w.U
	w.nvlEp[r]++
	t.Parallel(w.U, func(th *gpu.Group, i int) {
		if n0+i == r {
			th.Red64(w.ws.Region(r), w.barOff(), 1, gpu.ScopeDevice)
			return
		}
		th.Red64(w.ws.Region(n0+i), w.barOff(), 1, gpu.ScopeSystem)
	})
	target := w.nvlEp[r] * uint64(w.U)
	t.WaitWord(w.ws.Region(r), w.barOff(), "v2 hybrid nvlink barrier", func(v uint64) bool { return v >= target })
}

// railBarrier is gin_barrier_wo_local_sync on the rail team, run by SM 1
// without a flush: QP 0 with CTA sharing, SignalInc{node} to every rail
// rank (its own a device atomic on the local signal word: the model's
// backends have no loopback QP), then a wait of every signal past its
// shadow.
func (w *Hybrid) railBarrier(t *gpu.Group, r int) {
	me := r / w.U
	ph := w.e.Ph.Count(r)
	t.ParallelWait(w.S, func(th *gpu.Group, i int, h sim.Handler, arg uint64) {
		ph.Sigs++
		if i == me {
			reg, off := w.dc.Backend().SignalWord(w.dc, r, 0, me)
			th.AtomicAdd64Then(reg, off, 1, gpu.ScopeDevice, h, arg)
			return
		}
		w.dc.GinShared(th, r, 0, gin.SharingCTA).SignalThen(h, arg, w.dc.Rail(r), i, gin.SignalInc{Signal: me})
	})
	t.Parallel(w.S, func(th *gpu.Group, i int) {
		gn := w.dc.GinShared(th, r, 0, gin.SharingCTA)
		gn.IncreaseSignalShadow(i, 1)
		gn.WaitSignalMeetShadow(i, 64)
	})
}

// seenTail notes, for the critical path, that rank r's forward warp of
// channel c saw the tail word of source node m change (qp and land are
// not used).
func (w *Hybrid) seenTail(r, c, m int) {
	w.e.NoteLast(r, w.e.Saw(w.rail(r, m), r, w.ws.Region(r), w.tailOff(c, m)))
}

// Dispatch launches hybrid dispatch on every rank.
func (w *Hybrid) Dispatch() {
	for i := range w.fwd {
		w.fwd[i] = w.fwd[i][:0]
	}
	w.phase(&w.e.Disp, "dispatch", w.tokBytes, w.launchDispatch)
}

func (w *Hybrid) launchDispatch(r int) {
	e := w.e
	g := e.M.GPUs[r]
	w.sync[r] = workload.NewGPUArray(g, "v2h/dispatch-sync", 2)
	n := uint64(2 + w.sms + 2*w.nch)
	warps := w.vp.NotifyWarps + 2*w.C
	g.Launch("hdispatch/sm0/barrier", 32*warps, func(t *gpu.Group) {
		w.nvlBarrier(t, r)
		w.gridSync(t, r, 0, n)
		w.gridSync(t, r, 1, n)
		w.nvlBarrier(t, r)
		e.ReceiverDone(r, e.LastOf(r))
	})
	g.Launch("hdispatch/sm1/barrier", 32*warps, func(t *gpu.Group) {
		w.railBarrier(t, r)
		w.gridSync(t, r, 0, n)
		w.gridSync(t, r, 1, n)
	})
	k := newKernel(g, "hdispatch", w.sync[r], n, 1)
	for sm := range w.sms {
		g.Launch("hdispatch/sm"+strconv.Itoa(sm)+"/notify", 32*w.vp.NotifyWarps, func(t *gpu.Group) {
			w.gridSync(t, r, 0, n)
			w.notify(t, r, sm)
			w.gridSync(t, r, 1, n)
		})
		for s := range w.C {
			k.launch(newHScaleout(w, r, sm, s), "scaleout", s)
			k.launch(newHForward(w, r, sm, s), "forward", s)
		}
	}
}

// notify is one SM's notify warps (hybrid_dispatch.cuh's first role).
func (w *Hybrid) notify(t *gpu.Group, r, sm int) {
	e, st := w.e, w.e.Step
	cfg := t.GPU().Config()
	ph := e.Ph.Count(r)
	R, S, U, L, me, u := st.EP, w.S, w.U, w.L, r/w.U, r%w.U
	nw := w.vp.NotifyWarps
	// Warp sm·nw of the grid counts tokens sm·nw, + nw·num_sms, ...
	rounds := 0
	if first := sm * nw; first < st.Tokens[r] {
		rounds = (st.Tokens[r] - first + nw*w.sms - 1) / (nw * w.sms)
	}
	for range rounds {
		t.Load64(w.topk[r].R, 0)
		t.Cycles(w.vp.RouteCycles)
	}
	t.Sync()
	t.Compute(sim.Duration((R+st.Slots+t.Size()-1)/t.Size()) * cfg.StoreIssue) // red.add into the grid workspace
	t.AtomicAdd64(w.arrive[r].R, 0, 1, gpu.ScopeDevice)
	if sm != 0 {
		return
	}
	t.WaitWord(w.arrive[r].R, 0, "v2 hybrid notify grid reduction", func(v uint64) bool { return v >= uint64(w.sms) })
	// Encoded counts (count+1) into the send area: per rank, then per
	// (rank, local expert).
	ws := w.ws.Region(r)
	words := make([]byte, R*(1+L)*4)
	for d := range R {
		putLE32(words[4*d:], uint32(st.RankTokens[r][d])+1)
		for le := range L {
			v := uint32(1)
			if le < len(st.Experts[d]) {
				v += uint32(st.Count[r][st.Experts[d][le]])
			}
			putLE32(words[4*(R+d*L+le):], v)
		}
	}
	t.Write(ws, w.sendOff(), words, sim.Bytes(len(words)))
	t.Sync()
	rb, eb := U*4, U*L*4
	t.Parallel(S, func(th *gpu.Group, j int) {
		rs, es := w.sendOff()+uint64(j*rb), w.sendOff()+uint64(4*R+j*eb)
		if j == me { // DeepEP puts to itself through the NIC; the model's backends have no loopback QP
			th.Write(ws, w.recvRankOff(me), words[j*rb:(j+1)*rb], sim.Bytes(rb))
			th.Write(ws, w.recvExpOff(me), words[4*R+j*eb:4*R+(j+1)*eb], sim.Bytes(eb))
			return
		}
		gn := w.dc.GinShared(th, r, 0, gin.SharingCTA)
		gn.Put(w.dc.Rail(r), j, w.ws, w.recvRankOff(me), w.ws, rs, uint64(rb), nil, nil, gin.OptAggregateRequests)
		gn.Put(w.dc.Rail(r), j, w.ws, w.recvExpOff(me), w.ws, es, uint64(eb), nil, nil)
		ph.RDMABytes += int64(rb + eb)
	})
	// recv_and_reduce: wait for every rail peer's count, sum, clear.
	sum := func(th *gpu.Group, base func(j int) uint64, i int) uint64 {
		var n uint64
		for j := range S {
			at := base(j) + uint64(4*i)
			word, sh := at&^7, 32*(at&7/4)
			v := th.WaitWord(ws, word, "v2 hybrid notify scale-out count", func(v uint64) bool { return v>>sh&(1<<32-1) != 0 })
			n += v>>sh&(1<<32-1) - 1
		}
		return n
	}
	// Rank counts: put_value (a store over NVLink) into every scale-up
	// peer's slot for this rank.
	t.Parallel(U, func(th *gpu.Group, i int) {
		v := uint64(U)<<32 | sum(th, w.recvRankOff, i)
		th.Store64(w.ws.Region(me*U+i), w.countOff(u), v)
	})
	// Expert counts: red_add_rel into the expert's GPU.
	t.Parallel(U*L, func(th *gpu.Group, i int) {
		v := 1<<32 | sum(th, w.recvExpOff, i)
		d := me*U + i/L
		scope := gpu.ScopeSystem
		if d == r {
			scope = gpu.ScopeDevice
		}
		th.Red64(w.ws.Region(d), w.countOff(U+i%L), v, scope)
	})
	// Clear the receive areas for the next use (posted stores).
	t.Write(ws, w.recvRankOff(0), make([]byte, w.recvExpOff(S)-w.recvRankOff(0)), sim.Bytes(w.recvExpOff(S)-w.recvRankOff(0)))
	// Wait for the own counters (every scale-up peer wrote or added once),
	// clean them and hand them to the CPU.
	t.Parallel(U+L, func(th *gpu.Group, i int) {
		v := th.WaitWord(ws, w.countOff(i), "v2 hybrid notify scale-up count", func(v uint64) bool { return v>>32 == uint64(U) })
		w.st.Counts[r][i] = v & (1<<32 - 1)
		th.Store64(ws, w.countOff(i), 0)
		th.Store64(w.host[r], uint64(8*i), v&(1<<32-1)+1)
	})
	t.Cycles(2 * w.vp.RouteCycles) // the two warp prefix sums
}

func putLE32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

// Combine launches hybrid combine on every rank; the last combine warp of
// each rank runs its reduction.
func (w *Hybrid) Combine() {
	e, st := w.e, w.e.Step
	e.BeginOne(&e.Comb, "combine")
	for r := range st.EP {
		// The copy epilogue read and cleared the channel scale-up tails
		// (dispatch's linked-list ends) between the kernels.
		for c := range w.nch {
			for f := range w.U {
				w.ws.Region(r).Store64(w.suTailOff(c, f), 0, "v2h/copy-epilogue")
			}
		}
		e.Comb.BWBytes[r] = w.bwTokens(r) * w.combBytes
	}
	for r := range st.EP {
		w.launchCombine(r)
	}
}

func (w *Hybrid) launchCombine(r int) {
	e, st := w.e, w.e.Step
	g := e.M.GPUs[r]
	w.sync[r] = workload.NewGPUArray(g, "v2h/combine-sync", 2)
	n := uint64(2 + 2*w.nch)
	w.live[r] = int(n)
	// combine_reduce_epilogue: the source sums its (token, node) records.
	var back int64
	for _, v := range st.NodeTokens[r] {
		back += int64(v)
	}
	w.reduce[r] = e.P.ReduceRate.TxTime(sim.Bytes(back * int64(w.crec)))
	done := func(t *gpu.Group) {
		if w.live[r]--; w.live[r] == 0 {
			t.Compute(w.reduce[r])
			e.ReceiverDone(r, e.LastOf(r))
		}
	}
	warps := 2 * w.C
	g.Launch("hcombine/sm0/barrier", 32*warps, func(t *gpu.Group) {
		w.gridSync(t, r, 0, n)
		w.nvlBarrier(t, r)
		w.gridSync(t, r, 1, n)
		done(t)
	})
	g.Launch("hcombine/sm1/barrier", 32*warps, func(t *gpu.Group) {
		w.gridSync(t, r, 0, n)
		w.railBarrier(t, r)
		w.gridSync(t, r, 1, n)
		done(t)
	})
	k := newKernel(g, "hcombine", w.sync[r], n, 2)
	for sm := range w.sms {
		for s := range w.C {
			k.launch(newHScaleup(w, r, sm, s), "scaleup", s)
			k.launch(newHCombFwd(w, r, sm, s), "forward", s)
		}
	}
}

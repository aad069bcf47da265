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

// hIssue is when a lane issued the latest tail or finish signal of one
// (destination rank, channel, source node) word.
type hIssue struct{ start, end sim.Time }

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
	fwd   [][]hFwd
	cnt   []*workload.GPUArray // per rank: scale-up slot counters, one per peer
	host  []*mem.Region        // per rank: mapped host workspace (counts for the CPU)
	nvlEp []uint64             // per rank: NVLink barriers passed
	live  []int                // per rank: combine groups still running
	issue []hIssue             // [(dst*nch+c)*S + source node]
	st    HybridStats
}

// Stats returns what the hybrid kernels sent so far.
func (w *Hybrid) Stats() HybridStats { return w.st }

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
	w.issue = make([]hIssue, R*w.nch*w.S)
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

// nvlStore is a TMA store of n bytes from SM sm of rank r into region reg
// of GPU peer (local index) of its node: through the SM's store bandwidth
// and over NVLink, or into local HBM when peer is r itself. It returns
// when the bytes have landed.
func (w *Hybrid) nvlStore(t *gpu.Group, r, sm, peer int, reg *mem.Region, off uint64, n int) sim.Time {
	cfg := t.GPU().Config()
	if peer == w.e.M.Ranks[r].Local {
		return w.write(t, r, sm, n, cfg.StoreLatency)
	}
	out := w.write(t, r, sm, n, t.GPU().NVLink().Config().Latency)
	return max(out, t.NVLinkWrite(peer, reg, off, nil, sim.Bytes(n)))
}

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
	ph := w.e.Ph
	t.Parallel(w.S, func(th *gpu.Group, i int) {
		ph.Sigs++
		if i == me {
			reg, off := w.dc.Backend().SignalWord(w.dc, r, 0, me)
			th.AtomicAdd64(reg, off, 1, gpu.ScopeDevice)
			return
		}
		w.dc.GinShared(th, r, 0, gin.SharingCTA).Signal(w.dc.Rail(r), i, gin.SignalInc{Signal: me})
	})
	t.Parallel(w.S, func(th *gpu.Group, i int) {
		gn := w.dc.GinShared(th, r, 0, gin.SharingCTA)
		gn.IncreaseSignalShadow(i, 1)
		gn.WaitSignalMeetShadow(i, 64)
	})
}

// newLanes launches n lanes for warp (a lane per node: puts and tail
// updates; gpu.Lanes), each taking its own GIN handle on qp where it
// starts; a job run on the warp itself uses the warp's handle wgn. With
// jobThen set and a backend that issues for process-free groups, the
// lanes have no process.
func (w *Hybrid) newLanes(warp *gpu.Group, wgn *gin.Gin, r, qp int, sh gin.Sharing, n int,
	job func(th *gpu.Group, gn *gin.Gin, i int),
	jobThen func(th *gpu.Group, gn *gin.Gin, i int, h sim.Handler, arg uint64),
	jobDone func(th *gpu.Group, i int, start sim.Time)) *gpu.Lanes {
	gns := make([]*gin.Gin, n)
	start := func(th *gpu.Group, i int) { gns[i] = w.dc.GinShared(th, r, qp, sh) }
	run := func(th *gpu.Group, i int) {
		gn := wgn
		if th != warp {
			gn = gns[i]
		}
		job(th, gn, i)
	}
	if jobThen == nil || !wgn.CanThen() || w.e.Cfg.NoThen {
		return gpu.NewLanes(warp, n, start, run, nil, nil)
	}
	return gpu.NewLanes(warp, n, start, run, func(th *gpu.Group, i int, h sim.Handler, arg uint64) {
		jobThen(th, gns[i], i, h, arg)
	}, jobDone)
}

// seenTail notes, for the critical path, that rank r's forward warp of
// channel c saw the tail word of source node m change (qp and land are
// not used).
func (w *Hybrid) seenTail(t *gpu.Group, r, c, m, _ int, _ sim.Time) {
	w.e.NoteLast(r, w.e.Saw(w.rail(r, m), r, w.ws.Region(r), w.tailOff(c, m)))
}

func (w *Hybrid) Dispatch() {
	e, st := w.e, w.e.Step
	e.BeginOne(&e.Disp, "dispatch")
	clear(w.issue)
	for i := range w.fwd {
		w.fwd[i] = w.fwd[i][:0]
	}
	for r := range st.EP {
		e.Disp.BWBytes[r] = w.bwTokens(r) * w.tokBytes
		w.launchDispatch(r)
	}
}

func (w *Hybrid) launchDispatch(r int) {
	e := w.e
	g := e.M.GPUs[r]
	w.sync[r] = workload.NewGPUArray(g, "v2h/dispatch-sync", 2)
	n := uint64(2 + w.sms + 2*w.nch)
	warps := w.vp.NotifyWarps + 2*w.C
	_, then := w.dc.Backend().(gin.ThenBackend) // scale-out warps issue GIN ops
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
	for sm := range w.sms {
		g.Launch("hdispatch/sm"+strconv.Itoa(sm)+"/notify", 32*w.vp.NotifyWarps, func(t *gpu.Group) {
			w.gridSync(t, r, 0, n)
			w.notify(t, r, sm)
			w.gridSync(t, r, 1, n)
		})
		for s := range w.C {
			c := sm*w.C + s
			if name := "hdispatch/sm" + strconv.Itoa(sm) + "/scaleout" + strconv.Itoa(s); w.useThen() && then {
				m := newHScaleout(w, r, sm, s, c, n)
				m.t = g.LaunchHandler(name, 32, m, 0)
			} else {
				g.Launch(name, 32, func(t *gpu.Group) {
					w.gridSync(t, r, 0, n)
					w.scaleout(t, r, sm, s, c)
					w.gridSync(t, r, 1, n)
				})
			}
			name := "hdispatch/sm" + strconv.Itoa(sm) + "/forward" + strconv.Itoa(s)
			if w.useThen() {
				m := newHForward(w, r, sm, s, c, n)
				m.t = g.LaunchHandler(name, 32, m, 0)
				continue
			}
			g.Launch(name, 32, func(t *gpu.Group) {
				w.gridSync(t, r, 0, n)
				w.forward(t, r, sm, s, c)
				w.gridSync(t, r, 1, n)
			})
		}
	}
}

// Lane jobs of a scale-out warp.
const (
	hPut = iota
	v2hTail
	v2hFinish
)

// hScaleout is the state of a scale-out warp (channel c, warp s of SM
// sm, of rank r) and its lane jobs: put a record to a node, publish a
// node's tail (or the finish flag). scaleout runs it on a process; as a
// sim.Handler (then.go) it is the whole launch closure, grid syncs
// included, without one.
type hScaleout struct {
	drive
	w               *Hybrid
	t               *gpu.Group
	r, sm, s, c     int
	qp              int
	sh              gin.Sharing
	gn              *gin.Gin
	team            gin.Team
	lanes           *gpu.Lanes
	tail, old, slot []int
	jobs            []int
	kind, tok       int

	// The state machine's.
	loaded  sim.Time
	mask    uint64
	start   sim.Time
	ret, pc uint8
}

func newHScaleout(w *Hybrid, r, sm, s, c int, n uint64) *hScaleout {
	S := w.S
	m := &hScaleout{w: w, r: r, sm: sm, s: s, c: c,
		tail: make([]int, S), old: make([]int, S), slot: make([]int, S), jobs: make([]int, 0, S)}
	m.qp, m.sh = qpFor(w.sms, w.qps, w.C, sm, s, true)
	m.team = w.dc.Rail(r)
	m.setGrid(n)
	return m
}

// begin takes the warp's GIN handle and launches its lanes.
func (m *hScaleout) begin() {
	m.gn = m.w.dc.GinShared(m.t, m.r, m.qp, m.sh)
	m.lanes = m.w.newLanes(m.t, m.gn, m.r, m.qp, m.sh, m.w.S, m.job, m.jobThen, m.jobDone)
}

// putJobs takes a slot of every node of token m.tok's mask and returns the
// put jobs (its remote nodes).
func (m *hScaleout) putJobs(mask uint64) int {
	me := m.r / m.w.U
	m.jobs = m.jobs[:0]
	for k := mask; k != 0; k &= k - 1 {
		n := bits.TrailingZeros64(k)
		m.slot[n] = m.tail[n]
		m.tail[n]++
		if n != me {
			m.jobs = append(m.jobs, n)
		}
	}
	m.kind = hPut
	return len(m.jobs)
}

// tailJobs returns the tail jobs: the nodes whose count has grown by
// HybridUpdateInterval since their last update.
func (m *hScaleout) tailJobs() int {
	m.jobs = m.jobs[:0]
	for n := range m.w.S {
		if m.tail[n] >= m.old[n]+m.w.vp.HybridUpdateInterval {
			m.jobs = append(m.jobs, n)
		}
	}
	m.kind = v2hTail
	return len(m.jobs)
}

// finishJobs returns the finish jobs: every node.
func (m *hScaleout) finishJobs() int {
	m.jobs = m.jobs[:0]
	for n := range m.w.S {
		m.jobs = append(m.jobs, n)
	}
	m.kind = v2hFinish
	return len(m.jobs)
}

// job runs job i on th (a lane, or the warp) with its handle gn.
func (m *hScaleout) job(th *gpu.Group, gn *gin.Gin, i int) {
	w, r, c := m.w, m.r, m.c
	S, me, rec := w.S, r/w.U, w.rec
	ph := &w.e.Disp
	n := m.jobs[i]
	if m.kind == hPut {
		gn.Put(m.team, n, w.dWin, w.recvRec(me, c, m.slot[n]), w.dWin, w.sendRec(m.tok), uint64(rec), nil, nil,
			gin.OptAggregateRequests)
		ph.RDMABytes += int64(rec)
		w.st.DPuts++
		return
	}
	// red_add_rel of pack2(finish, tail) − pack2(0, last).
	v := uint64(m.tail[n]-m.old[n]) << 32
	if m.kind == v2hFinish {
		v |= 1
	}
	m.old[n] = m.tail[n]
	if n == me {
		th.AtomicAdd64(w.ws.Region(r), w.tailOff(c, me), v, gpu.ScopeDevice)
		w.st.DLocalTails++
		return
	}
	start := th.Now()
	gn.Signal(m.team, n, gin.VASignalAdd{Win: w.ws, Off: w.tailOff(c, me), Value: v})
	w.issue[(w.rail(r, n)*w.nch+c)*S+me] = hIssue{start, th.Now()}
	ph.Sigs++
	w.st.DTails++
}

// jobThen is job for a group without a process: it starts job i and
// continues at h; the counters move when the operation starts, the issue
// instants are noted by jobDone when it has.
func (m *hScaleout) jobThen(th *gpu.Group, gn *gin.Gin, i int, h sim.Handler, arg uint64) {
	w, r, c := m.w, m.r, m.c
	me, rec := r/w.U, w.rec
	ph := &w.e.Disp
	n := m.jobs[i]
	if m.kind == hPut {
		ph.RDMABytes += int64(rec)
		w.st.DPuts++
		gn.PutThen(h, arg, m.team, n, w.dWin, w.recvRec(me, c, m.slot[n]), w.dWin, w.sendRec(m.tok), uint64(rec), nil, nil,
			gin.OptAggregateRequests)
		return
	}
	v := uint64(m.tail[n]-m.old[n]) << 32
	if m.kind == v2hFinish {
		v |= 1
	}
	m.old[n] = m.tail[n]
	if n == me {
		w.st.DLocalTails++
		th.AtomicAdd64Then(w.ws.Region(r), w.tailOff(c, me), v, gpu.ScopeDevice, h, arg)
		return
	}
	ph.Sigs++
	w.st.DTails++
	gn.SignalThen(h, arg, m.team, n, gin.VASignalAdd{Win: w.ws, Off: w.tailOff(c, me), Value: v})
}

// jobDone notes a signal's issue instants once jobThen's operation is done.
func (m *hScaleout) jobDone(th *gpu.Group, i int, start sim.Time) {
	w := m.w
	if n := m.jobs[i]; m.kind != hPut && n != m.r/w.U {
		w.issue[(w.rail(m.r, n)*w.nch+m.c)*w.S+m.r/w.U] = hIssue{start, th.Now()}
	}
}

// scaleout is the scale-out warp of channel c (warp s of SM sm) of rank r.
func (w *Hybrid) scaleout(t *gpu.Group, r, sm, s, c int) {
	st := w.e.Step
	cfg := t.GPU().Config()
	ph := &w.e.Disp
	me, rec := r/w.U, w.rec
	m := newHScaleout(w, r, sm, s, c, 0)
	m.t = t
	m.begin()
	lanes := m.lanes
	T, stride := st.Tokens[r], w.nch
	var loaded sim.Time
	if c < T {
		loaded = w.read(t, r, sm, w.payload, cfg.HBMLatency)
	}
	for m.tok = c; m.tok < T; m.tok += stride {
		tok := m.tok
		// Top-k load and copy, node dedup, slot exchange; then the
		// token's TMA load must have arrived.
		t.Load64(w.topk[r].R, 0)
		t.Cycles(w.vp.RouteCycles)
		t.Compute(cfg.StoreIssue)
		mask := w.nodes[r][tok]
		sleepUntil(t, loaded)
		done := t.Now()
		if mask&^(1<<me) != 0 { // send buffer, only if RDMA follows
			done = max(done, w.write(t, r, sm, rec, cfg.StoreLatency))
		}
		if mask&(1<<me) != 0 { // local bypass into the own node's receive buffer
			done = max(done, w.write(t, r, sm, rec, cfg.StoreLatency))
		}
		sleepUntil(t, done) // tma_store_wait
		if next := tok + stride; next < T {
			loaded = w.read(t, r, sm, w.payload, cfg.HBMLatency)
		}
		ph.Msgs += int64(bits.OnesCount64(mask))
		lanes.Run(m.putJobs(mask))
		lanes.Run(m.tailJobs())
	}
	lanes.Run(m.finishJobs())
	lanes.Close()
}

// forward is the forward warp of channel c (warp s of SM sm) of rank r.
func (w *Hybrid) forward(t *gpu.Group, r, sm, s, c int) {
	e := w.e
	cfg := t.GPU().Config()
	S, U, me, u, rec := w.S, w.U, r/w.U, r%w.U, w.rec
	qp, _ := qpFor(w.sms, w.qps, w.C, sm, s, true)
	ws := w.ws.Region(r)
	const low = 1<<32 - 1
	old, tail := make([]int, S), make([]int, S)
	fin := make([]bool, S)
	cursor := make([]int, S) // per source node: next token of its channel to look at
	for m := range S {
		cursor[m] = c
	}
	slots := make([]uint64, U)
	recs := w.fwd[r*w.nch+c]
	lw := &workload.LandWatch{Sim: e.Sim}
	cur := c % S
	var stored sim.Time
	for {
		var wip uint32
		for m := range S {
			if tail[m] > old[m] || !fin[m] {
				wip |= 1 << m
			}
		}
		if wip == 0 {
			break
		}
		off := (cur + 1) % S
		if hi := wip >> off << off; hi != 0 {
			cur = bits.TrailingZeros32(hi)
		} else {
			cur = bits.TrailingZeros32(wip)
		}
		if tail[cur] <= old[cur] && !fin[cur] {
			// Poll every source's tail until this one moved or finished.
			word := w.tailOff(c, cur)
			lw.At = 0
			ws.Watch(word, lw)
			o := uint64(old[cur])
			t.WaitWord(ws, word, "v2 hybrid forward tail", func(v uint64) bool { return v>>32 > o || v&low != 0 })
			ws.Unwatch(word, lw)
			for m := range S {
				v := ws.Load64(w.tailOff(c, m))
				tail[m], fin[m] = int(v>>32), v&low != 0
			}
			if cur != me {
				w.seenTail(t, r, c, cur, qp, lw.At)
			}
		}
		start := old[cur]
		end := min(tail[cur], start+w.vp.HybridUpdateInterval)
		old[cur] = end
		src := w.rail(r, cur)
		for slot := start; slot < end; slot++ {
			tok := cursor[cur]
			for w.nodes[src][tok]&(1<<me) == 0 {
				tok += w.nch
			}
			cursor[cur] = tok + w.nch
			sleepUntil(t, stored) // tma_store_wait: the TMA buffer is free
			sleepUntil(t, w.read(t, r, sm, rec, cfg.HBMLatency))
			// Top-k to scale-up ranks, linked-list index exchange, dedup.
			t.Cycles(w.vp.RouteCycles)
			gm := w.gpus[src][tok*S+me]
			// One slot atomic per GPU, issued by the lanes together: the
			// warp waits for one device atomic.
			first := true
			for m := gm; m != 0; m &= m - 1 {
				d := bits.TrailingZeros64(m)
				if first {
					slots[d] = t.AtomicAdd64(w.cnt[r].R, w.cnt[r].Off(d), 1, gpu.ScopeDevice)
					first = false
				} else {
					slots[d] = w.cnt[r].R.FetchAdd64(w.cnt[r].Off(d), 1, t.Agent())
				}
			}
			for m := gm; m != 0; m &= m - 1 {
				d := bits.TrailingZeros64(m)
				stored = max(stored, w.nvlStore(t, r, sm, d, w.dWin.Region(me*U+d), w.suOff(u, slots[d]), rec))
				w.st.Fwd[r*U+d]++
			}
			t.Compute(cfg.StoreIssue) // forward metadata and slot indices
			recs = append(recs, hFwd{src: int32(src), tok: int32(tok), last: slot == end-1})
		}
	}
	w.fwd[r*w.nch+c] = recs
	// Linked-list ends into every scale-up peer, then clean the tails.
	for d := range U {
		t.Store64(w.ws.Region(me*U+d), w.suTailOff(c, u), uint64(len(recs)))
	}
	for m := range S {
		t.Store64(ws, w.tailOff(c, m), 0)
	}
	sleepUntil(t, stored) // the end barrier's tma_store_wait
}

// notify is one SM's notify warps (hybrid_dispatch.cuh's first role).
func (w *Hybrid) notify(t *gpu.Group, r, sm int) {
	e, st := w.e, w.e.Step
	cfg := t.GPU().Config()
	ph := e.Ph
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

func (w *Hybrid) Combine() {
	e, st := w.e, w.e.Step
	e.BeginOne(&e.Comb, "combine")
	clear(w.issue)
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
	reduce := e.P.ReduceRate.TxTime(sim.Bytes(back * int64(w.crec)))
	done := func(t *gpu.Group) {
		if w.live[r]--; w.live[r] == 0 {
			t.Compute(reduce)
			e.ReceiverDone(r, e.LastOf(r))
		}
	}
	warps := 2 * w.C
	_, then := w.dc.Backend().(gin.ThenBackend) // forward warps issue GIN ops
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
	for sm := range w.sms {
		for s := range w.C {
			c := sm*w.C + s
			name := "hcombine/sm" + strconv.Itoa(sm) + "/scaleup" + strconv.Itoa(s)
			if w.useThen() {
				m := newHScaleup(w, r, sm, c, n, reduce)
				m.t = g.LaunchHandler(name, 32, m, 0)
			} else {
				g.Launch(name, 32, func(t *gpu.Group) {
					w.gridSync(t, r, 0, n)
					w.gridSync(t, r, 1, n)
					w.scaleup(t, r, sm, c)
					done(t)
				})
			}
			if name := "hcombine/sm" + strconv.Itoa(sm) + "/forward" + strconv.Itoa(s); w.useThen() && then {
				m := newHCombFwd(w, r, sm, s, c, n, reduce)
				m.t = g.LaunchHandler(name, 32, m, 0)
			} else {
				g.Launch(name, 32, func(t *gpu.Group) {
					w.gridSync(t, r, 0, n)
					w.gridSync(t, r, 1, n)
					w.combineForward(t, r, sm, s, c)
					done(t)
				})
			}
		}
	}
}

// scaleup is a combine scale-up warp of channel c of rank r: it returns
// the expert outputs of the records forwarder f (of its node) moved to r
// in dispatch, one per forwarder per round.
func (w *Hybrid) scaleup(t *gpu.Group, r, sm, c int) {
	e := w.e
	cfg := t.GPU().Config()
	U, S, me, own := w.U, w.S, r/w.U, r%w.U
	cursor := make([]int, U) // per forwarder: next record of its channel list
	sent, old := make([]int, U), make([]int, U)
	var stored sim.Time
	dst := c
	round := 0
	next := func(f int) bool {
		recs := w.fwd[(me*U+f)*w.nch+c]
		for cursor[f] < len(recs) {
			rc := recs[cursor[f]]
			if w.gpus[rc.src][int(rc.tok)*S+me]&(1<<own) != 0 {
				return true
			}
			cursor[f]++
		}
		return false
	}
	update := func(final bool) {
		round++
		if !final && round < w.vp.HybridScaleupInterval {
			return
		}
		round = 0
		sleepUntil(t, stored)
		t.Fence(gpu.ScopeSystem) // st.release.sys
		for f := range U {
			if sent[f] != old[f] {
				t.Store64(w.ws.Region(me*U+f), w.suTailOff(c, own), uint64(sent[f]))
				old[f] = sent[f]
			}
		}
	}
	for {
		t.Load64(w.topk[r].R, 0) // the next linked-list entry of every forwarder
		var wip uint64
		for f := range U {
			if next(f) {
				wip |= 1 << f
			}
		}
		if wip == 0 {
			break
		}
		for wip != 0 {
			st := (dst + 1) % U
			if hi := wip >> st << st; hi != 0 {
				dst = bits.TrailingZeros64(hi)
			} else {
				dst = bits.TrailingZeros64(wip)
			}
			wip &^= 1 << dst
			i := cursor[dst]
			sleepUntil(t, stored) // tma_store_wait before reusing the TMA buffer
			sleepUntil(t, w.read(t, r, sm, 2*e.Hidden, cfg.HBMLatency))
			t.Cycles(w.vp.RouteCycles) // source metadata, top-k weights
			stored = w.nvlStore(t, r, sm, dst, w.cw.Region(me*U+dst), w.cSuOff(own, c, i), w.crec)
			w.st.Back[r*U+dst]++
			sent[dst]++
			cursor[dst]++
		}
		update(false)
	}
	update(true)
}

// combineForward is a combine forward warp of channel c (warp s of SM sm)
// of rank r: it reduces and returns the records it forwarded in dispatch.
func (w *Hybrid) combineForward(t *gpu.Group, r, sm, s, c int) {
	e := w.e
	cfg := t.GPU().Config()
	ph := &e.Comb
	U, S, me, crec := w.U, w.S, r/w.U, w.crec
	qp, sh := qpFor(w.sms, w.qps, w.C, sm, s, false)
	gn := w.dc.GinShared(t, r, qp, sh)
	team := w.dc.Rail(r)
	ws := w.ws.Region(r)
	recs := w.fwd[r*w.nch+c]
	recv, cached := make([]int, U), make([]int, U)
	var stored sim.Time
	pending := -1
	// flush_last_tma_and_issue_rdma: wait for the previous record's store,
	// put it to its source's rail peer unless it is on this node.
	flush := func() {
		if pending < 0 {
			return
		}
		sleepUntil(t, stored)
		rc := recs[pending]
		if src := int(rc.src) / U; src != me {
			if rc.last {
				gn.Put(team, src, w.cw, w.cRecvOff(me, int(rc.tok)), w.cw, w.cSendOff(c, pending), uint64(crec), nil, nil)
				w.st.CLast++
			} else {
				gn.Put(team, src, w.cw, w.cRecvOff(me, int(rc.tok)), w.cw, w.cSendOff(c, pending), uint64(crec), nil, nil,
					gin.OptAggregateRequests)
			}
			ph.RDMABytes += int64(crec)
			w.st.CPuts++
		}
		pending = -1
	}
	for i, rc := range recs {
		gm := w.gpus[rc.src][int(rc.tok)*S+me]
		ready := func() (int, bool) {
			for m := gm; m != 0; m &= m - 1 {
				if j := bits.TrailingZeros64(m); recv[j] >= cached[j] {
					return j, false
				}
			}
			return 0, true
		}
		if _, ok := ready(); !ok {
			t.Load64(ws, w.suTailOff(c, 0)) // reload every tail (one load per lane)
			for j := range U {
				cached[j] = int(ws.Load64(w.suTailOff(c, j)))
			}
			for {
				j, ok := ready()
				if ok {
					break
				}
				o := uint64(recv[j])
				t.WaitWord(ws, w.suTailOff(c, j), "v2 hybrid combine scale-up tail", func(v uint64) bool { return v > o })
				for j := range U {
					cached[j] = int(ws.Load64(w.suTailOff(c, j)))
				}
			}
		}
		for m := gm; m != 0; m &= m - 1 {
			recv[bits.TrailingZeros64(m)]++
		}
		// combine_reduce: load every GPU's contribution; before writing
		// the TMA buffer, release it (the previous record's put).
		loaded := w.read(t, r, sm, bits.OnesCount64(gm)*crec, cfg.HBMLatency)
		flush()
		sleepUntil(t, loaded)
		t.Cycles(w.vp.RouteCycles) // top-k weight merge
		stored = w.write(t, r, sm, crec, cfg.StoreLatency)
		pending = i
		ph.Msgs++
	}
	flush()
	for j := range U {
		t.Store64(ws, w.suTailOff(c, j), 0)
	}
	gn.Flush()
	// Finish flags: red_add_rel pack2(1, 0) into every rail peer's tail
	// word of this channel, then wait for every peer's.
	t.Parallel(S, func(th *gpu.Group, m int) {
		if m == me {
			th.AtomicAdd64(ws, w.tailOff(c, me), 1, gpu.ScopeDevice)
			return
		}
		start := th.Now()
		w.dc.GinShared(th, r, qp, sh).Signal(team, m, gin.VASignalAdd{Win: w.ws, Off: w.tailOff(c, me), Value: 1})
		w.issue[(w.rail(r, m)*w.nch+c)*S+me] = hIssue{start, th.Now()}
		ph.Sigs++
		w.st.CFinish++
	})
	lw := &workload.LandWatch{Sim: e.Sim}
	for m := range S {
		word := w.tailOff(c, m)
		lw.At = 0
		ws.Watch(word, lw)
		t.WaitWord(ws, word, "v2 hybrid combine finish", func(v uint64) bool { return v == 1 })
		ws.Unwatch(word, lw)
		if m != me {
			w.seenTail(t, r, c, m, qp, lw.At)
		}
		t.Store64(ws, word, 0)
	}
}

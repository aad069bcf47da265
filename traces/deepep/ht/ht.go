package ht

import (
	"fmt"
	"math/bits"
	"strconv"

	"github.com/ginsim/ginsim/gin"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/workload"
)

// DeepEP V1 normal (high-throughput) internode kernels as ported to GIN by
// DeepEP PR #521 (spec moe-traffic 1.6, 1.8). Each rank runs HTSMs/2
// channels; channel c owns a contiguous range of the rank's tokens and two
// SMs. Dispatch, per channel:
//
//   - 7 RDMA sender warps write one record per (token, distinct destination
//     node) into the send ring of that node (the local node's straight into
//     the local receive ring), after waiting for head credits;
//   - the sender coordinator puts chunks of released records to the rail
//     peer (same local index) on context = channel, each followed by a
//     SignalAdd(chunk) tail on the same context;
//   - 8 forwarder warps (one per NVLink peer) read every record of every
//     source node's receive ring and copy those their peer needs into the
//     peer's NVLink ring, publishing its tail;
//   - the forwarder coordinator returns head credits (SignalAdd(min head -
//     last head)) on the credit context once a chunk was consumed by all;
//   - 8 NVLink receiver warps drain their ring into the output.
//
// Combine is the reverse: NVLink senders push expert outputs to the
// forwarder of the token's rail, forwarder warps (24 per channel, split
// over destination nodes) sum up to 8 local contributions into the send
// ring, put chunks plus tails to the source node, and RDMA receiver warps at
// the source sum across nodes. Credits flow back the same way. The NVLink
// ring of each (channel, sender → forwarder) is split into one sub-ring of
// NVLRecv/nodes slots per source node, each with its own tail and head
// (DeepEP: "separate NVL buffers for different RDMA sources", against
// deadlock): a sender warp keeps one lane per source node, and each round
// visits the nodes round-robin from channel%nodes+1, moving one chunk of at
// most NVLSend records into every sub-ring that has a chunk of room, then
// publishes those sub-rings' tails. The forwarder for node s reads only
// sub-ring s of every peer, its sub-warps free the slots token by token
// as they finish reducing, and its coordinator returns heads per (node,
// peer), so the forwarders for every destination node start at once.

// senderWarps is kNumDispatchRDMASenderWarps (7): one SM holds the 7
// sender warps, their coordinator and the 8 NVLink receivers.
const senderWarps = 7

// combineForwarderWarps is kNumCombineForwarderWarps: the forwarder SM's
// warps, split evenly over destination nodes (at least one per node).
const combineForwarderWarps = 24

// DefaultChunks returns DeepEP's default chunking for ep ranks
// (deep_ep/buffers/legacy.py).
func DefaultChunks(ep int) (disp, comb workload.HTChunks) {
	switch {
	case ep <= 16:
		return chunks(36, 288, 20, 128), chunks(4, 288, 12, 128)
	case ep <= 64:
		return chunks(32, 288, 8, 128), chunks(1, 288, 8, 128)
	case ep <= 96:
		return chunks(20, 480, 12, 128), chunks(1, 480, 8, 128)
	case ep <= 128:
		return chunks(20, 560, 12, 128), chunks(1, 560, 8, 128)
	case ep <= 144:
		return chunks(32, 720, 12, 128), chunks(2, 720, 8, 128)
	}
	return chunks(28, 720, 12, 128), chunks(2, 720, 8, 128)
}

// chunks is Config(num_sms, nvl_send, nvl_recv, rdma_send, rdma_recv)'s
// chunking.
func chunks(nvlSend, nvlRecv, rdmaSend, rdmaRecv int) workload.HTChunks {
	return workload.HTChunks{NVLSend: nvlSend, NVLRecv: nvlRecv, RDMASend: rdmaSend, RDMARecv: rdmaRecv}
}

// Stats returns what the kernels sent so far; tests compare it with the
// routing.
func (w *Workload) Stats() Stats { return w.st }

// fillChunks returns c with zero fields taken from def, or an error.
func fillChunks(c, def workload.HTChunks, what string) (workload.HTChunks, error) {
	for _, x := range []struct{ v, d *int }{{&c.NVLSend, &def.NVLSend}, {&c.NVLRecv, &def.NVLRecv},
		{&c.RDMASend, &def.RDMASend}, {&c.RDMARecv, &def.RDMARecv}} {
		if *x.v == 0 {
			*x.v = *x.d
		}
		if *x.v < 0 {
			return c, fmt.Errorf("ht: %s chunking %+v: negative", what, c)
		}
	}
	if c.NVLRecv < c.NVLSend || c.RDMARecv < c.RDMASend {
		return c, fmt.Errorf("ht: %s chunking %+v: a ring must hold at least one chunk", what, c)
	}
	return c, nil
}

// Stats counts what the HT kernels sent; tests compare it with the
// routing.
type Stats struct {
	DispChunks, DispTails, DispCredits int64 // RDMA puts, tail and credit signals
	CombChunks, CombTails, CombCredits int64
	LocalChunks                        int64 // chunks to the local node (no RDMA)
	CreditWaits                        int64 // times a sender or forwarder waited for head credits
	Packets, CrossRail                 int64 // NIC-sent packets, of which between different local indices
	// FirstPut is, per phase (0 dispatch, 1 combine) and rank, when the
	// rank issued its first chunk put to another node (0: none).
	FirstPut [2][]sim.Time
}

// Workload is DeepEP V1 normal mode, internode.
type Workload struct {
	e       *workload.Env
	G, N, C int // GPUs per node, nodes, channels
	dc, cc  workload.HTChunks
	recD    uint64 // dispatch record bytes
	recC    uint64 // combine record bytes
	loadD   sim.Bytes
	out2H   sim.Bytes // BF16 hidden bytes

	// Contexts: data context of channel c is ctx c%4 of dataComms[c/4];
	// its credit context the same index of credComms.
	dataComms, credComms []*gin.DevComm
	// Per data communicator: [4 channels][node][RDMARecv] rings.
	dSend, dRecv, cSend, cRecv []*gin.Window

	// Routing, per rank: nodes[r][t] is token t's node set; gpus[r][t*N+n]
	// its local GPUs on node n; seq[(r*C+c)*N+n] the tokens of channel c
	// bound for node n, in ring order.
	nodes [][]uint64
	gpus  [][]uint64
	seq   [][]int32
	pairs []int64 // per rank: unique (token, node) pairs

	ctl  [][]*mem.Region // [rank][channel]: control words
	nvlD []*mem.Region   // per rank: dispatch NVLink rings [c][from][NVLRecv]
	nvlC []*mem.Region   // per rank: combine NVLink rings [c][from][source node][subC]
	subC int             // combine NVLink sub-ring slots per source node: NVLRecv / nodes
	sms  [][]gpu.SMPorts // [rank][sm]

	hbmLat, l2Lat, poll sim.Duration
	st                  Stats

	dch, cch []chanState           // per (rank, channel): shared-memory state
	land     []*workload.LandWatch // per (rank, channel, node): tail signal word watchers
	landBase int                   // signal id of node 0's tail in land
	fwdPath  []workload.Seen       // per (forwarder rank, channel, peer): last RDMA tail behind its NVLink tail
}

// chanState is the shared-memory state of one channel's SMs (the locks,
// windows and head arrays DeepEP keeps in __shared__).
type chanState struct {
	rel     [][]bool // dispatch: [dst node][ring index] record released by its sender warp
	relTail []int    // dispatch: [dst node] in-order released records
	head    []int    // [warp or peer][node] ring index consumed (htInf: retired)
	retired []bool   // [warp or peer]
}

// inf marks a retired forwarder or receiver in a head array.
const inf = int(^uint(0) >> 1)

func New(e *workload.Env) *Workload { return &Workload{e: e} }

// KernelSMs returns the SMs the kernels run on: num_sms, two per channel
// (after Setup).
func (w *Workload) KernelSMs() int { return 2 * w.C }

// Control words of one (rank, channel).
const (
	ctlSendProg  = iota // smem: dispatch sender releases
	ctlFwdProg          // smem: dispatch forwarder heads
	ctlCFwdProg         // smem: combine forwarder heads
	ctlCRecvProg        // smem: combine receiver heads
	ctlFixed
)

func (w *Workload) ctlDTail(f int) uint64 { return uint64(ctlFixed+f) * 8 }     // at receiver, from forwarder f
func (w *Workload) ctlDHead(p int) uint64 { return uint64(ctlFixed+w.G+p) * 8 } // at forwarder, from receiver p

// ctlCTail is the tail word, at the forwarder, of sender p's combine
// sub-ring for source node s (nvl_channel_tail[p][s]).
func (w *Workload) ctlCTail(p, s int) uint64 { return uint64(ctlFixed+2*w.G+p*w.N+s) * 8 }

// ctlCHead is the head word, at the sender, of its combine sub-ring for
// source node s in forwarder f's buffer (nvl_channel_head[f][s]).
func (w *Workload) ctlCHead(f, s int) uint64 { return uint64(ctlFixed+(2+w.N)*w.G+f*w.N+s) * 8 }

// ctlWords is the control words of one (rank, channel).
func (w *Workload) ctlWords() int { return ctlFixed + 2*w.G + 2*w.G*w.N }

func (w *Workload) Setup() error {
	e, st := w.e, w.e.Step
	h := e.Hdr
	prec, err := h.DispatchPrecision()
	if err != nil {
		return err
	}
	w.G = e.M.Spec.GPUsPerNode
	if st.EP%w.G != 0 {
		return fmt.Errorf("ht: EP %d is not a whole number of %d-GPU nodes", st.EP, w.G)
	}
	w.N = st.EP / w.G
	if w.G > 32 || w.N > 64 {
		return fmt.Errorf("ht: %d nodes of %d GPUs: DeepEP normal mode handles at most 8 NVLink peers", w.N, w.G)
	}
	p := e.P
	if p.HTSMs < 2 || p.HTSMs > e.M.Profile.GPU.SMs {
		return fmt.Errorf("ht: HTSMs %d out of [2, %d]", p.HTSMs, e.M.Profile.GPU.SMs)
	}
	if p.HTSMs%2 != 0 {
		// deep_ep/buffers/legacy.py:162, csrc/legacy/config.hpp:85.
		return fmt.Errorf("ht: HTSMs %d: DeepEP's num_sms must be even (a channel is two SMs)", p.HTSMs)
	}
	if p.SMReadRate <= 0 || p.SMWriteRate <= 0 || p.HTCoordSleep < 0 {
		return fmt.Errorf("ht: SM rates must be positive and HTCoordSleep not negative")
	}
	w.C = p.HTSMs / 2
	dd, cd := DefaultChunks(st.EP)
	if w.dc, err = fillChunks(p.HTDispatch, dd, "dispatch"); err != nil {
		return err
	}
	if w.cc, err = fillChunks(p.HTCombine, cd, "combine"); err != nil {
		return err
	}
	// DeepEP asserts NVLRecv % nodes == 0 as well; the sub-ring takes the
	// floor so that node counts off DeepEP's table still run.
	if w.subC = w.cc.NVLRecv / w.N; w.subC < w.cc.NVLSend {
		return fmt.Errorf("ht: combine chunking %+v: %d NVLink slots per source node (NVLRecv / %d nodes) hold less than one NVLSend chunk",
			w.cc, w.subC, w.N)
	}
	for i := range w.st.FirstPut {
		w.st.FirstPut[i] = make([]sim.Time, st.EP)
	}
	w.recD = uint64(traces.HTDispatchBytes(e.Hidden, st.TopK, prec))
	w.recC = uint64(traces.HTCombineBytes(e.Hidden, st.TopK))
	w.loadD = sim.Bytes(w.recD)
	w.out2H = sim.Bytes(2 * e.Hidden)
	gc := e.M.Profile.GPU
	w.hbmLat, w.l2Lat, w.poll = gc.HBMLatency, gc.L2Latency, gc.PollInterval

	w.route()

	nComm := (w.C + workload.CtxsPerComm - 1) / workload.CtxsPerComm
	N := uint64(w.N)
	for set := range 2 {
		for j := range nComm {
			comm, err := e.NewComm()
			if err != nil {
				return err
			}
			ctxs := min(workload.CtxsPerComm, w.C-j*workload.CtxsPerComm)
			dc, err := comm.DevCommCreate(gin.Requirements{GinContextCount: ctxs, GinSignalCount: 2 * w.N,
				ConnectionType: gin.ConnFull, Type: e.GinType()})
			if err != nil {
				return fmt.Errorf("ht: ht communicator %d: %w", j, err)
			}
			if set == 1 {
				w.credComms = append(w.credComms, dc)
				continue
			}
			w.dataComms = append(w.dataComms, dc)
			for _, x := range []struct {
				dst  *[]*gin.Window
				name string
				size uint64
			}{
				{&w.dSend, "ht/dispatch-send", workload.CtxsPerComm * N * uint64(w.dc.RDMARecv) * w.recD},
				{&w.dRecv, "ht/dispatch-recv", workload.CtxsPerComm * N * uint64(w.dc.RDMARecv) * w.recD},
				{&w.cSend, "ht/combine-send", workload.CtxsPerComm * N * uint64(w.cc.RDMARecv) * w.recC},
				{&w.cRecv, "ht/combine-recv", workload.CtxsPerComm * N * uint64(w.cc.RDMARecv) * w.recC},
			} {
				win, err := comm.WindowRegister(x.name+strconv.Itoa(j), sim.Bytes(x.size), 0, false)
				if err != nil {
					return fmt.Errorf("ht: %s: %w", x.name, err)
				}
				*x.dst = append(*x.dst, win)
			}
		}
	}
	G, C := uint64(w.G), uint64(w.C)
	for r := range st.EP {
		g := e.M.GPUs[r]
		cs := make([]*mem.Region, w.C)
		for c := range w.C {
			cs[c] = g.Alloc("ht/ctl"+strconv.Itoa(c), sim.Bytes(8*w.ctlWords()), true)
		}
		w.ctl = append(w.ctl, cs)
		w.nvlD = append(w.nvlD, g.Alloc("ht/nvl-dispatch", sim.Bytes(C*G*uint64(w.dc.NVLRecv)*w.recD), false))
		w.nvlC = append(w.nvlC, g.Alloc("ht/nvl-combine", sim.Bytes(C*G*uint64(w.cc.NVLRecv)*w.recC), false))
		sms := make([]gpu.SMPorts, 2*w.C)
		for i := range sms {
			sms[i] = gpu.NewSMPorts(p.SMReadRate, p.SMWriteRate)
		}
		w.sms = append(w.sms, sms)
	}
	// Rail check: count NIC packets between different local indices.
	if e.Obs != nil {
		e.Obs.Subscribe(obs.Func(func(ev obs.Event) {
			if ev.Kind == obs.Sent {
				w.st.Packets++
				if e.EPRank[ev.Addr]%w.G != e.EPRank[ev.Value]%w.G {
					w.st.CrossRail++
				}
			}
		}))
	}
	return nil
}

// route resolves the node sets, local GPU sets and ring sequences.
func (w *Workload) route() {
	e, st := w.e, w.e.Step
	N, C := w.N, w.C
	w.nodes = make([][]uint64, st.EP)
	w.gpus = make([][]uint64, st.EP)
	w.pairs = make([]int64, st.EP)
	w.seq = make([][]int32, st.EP*C*N)
	for r := range st.EP {
		T := st.Tokens[r]
		ns, gs := e.RouteSets(r, N)
		for _, m := range ns {
			w.pairs[r] += int64(bits.OnesCount64(m))
		}
		w.nodes[r], w.gpus[r] = ns, gs
		for c := range C {
			lo, hi := tokenRange(T, C, c)
			for t := lo; t < hi; t++ {
				for m := ns[t]; m != 0; m &= m - 1 {
					n := bits.TrailingZeros64(m)
					k := (r*C+c)*N + n
					w.seq[k] = append(w.seq[k], int32(t))
				}
			}
		}
	}
}

// tokenRange is get_channel_task_range: channel c's contiguous token range.
func tokenRange(tokens, channels, c int) (lo, hi int) {
	per := (tokens + channels - 1) / channels
	lo = min(per*c, tokens)
	return lo, min(lo+per, tokens)
}

// rank returns the world rank of (node, local).
func (w *Workload) rank(node, local int) int { return node*w.G + local }

// seqOf returns the ring sequence of rank r, channel c, node n.
func (w *Workload) seqOf(r, c, n int) []int32 { return w.seq[(r*w.C+c)*w.N+n] }

// ringOff is the offset of slot in the [4 channels][node][slots] ring
// window of channel c.
func ringOff(c, node, nodes, slots, slot int, rec uint64) uint64 {
	return ((uint64(c%workload.CtxsPerComm)*uint64(nodes)+uint64(node))*uint64(slots) + uint64(slot)) * rec
}

// sigWord returns rank r's word of signal id on the data (credit=false)
// or credit context of channel c, and the backend's offset.
func (w *Workload) sigWord(r, c, id int, credit bool) (*mem.Region, uint64, uint64) {
	dc := w.dataComms[c/workload.CtxsPerComm]
	if credit {
		dc = w.credComms[c/workload.CtxsPerComm]
	}
	b := dc.Backend()
	reg, off := b.SignalWord(dc, r, c%workload.CtxsPerComm, id)
	return reg, off, b.SignalOffset(dc, r, c%workload.CtxsPerComm, id)
}

// load is a warp's TMA/LSU read of n bytes of local HBM on SM sm: one HBM
// latency, then the bytes through the SM's shared load bandwidth.
func (w *Workload) load(t *gpu.Group, sm *gpu.SMPorts, n sim.Bytes) {
	end := sm.Read(t.Now().Add(w.hbmLat), n)
	t.Compute(end.Sub(t.Now()))
}

// store is a warp's posted store of n bytes to local HBM through the SM's
// shared store bandwidth.
func (w *Workload) store(t *gpu.Group, sm *gpu.SMPorts, n sim.Bytes) {
	end := sm.Write(t.Now(), n)
	t.Compute(end.Sub(t.Now()) + w.e.M.Profile.GPU.StoreIssue)
}

// storeNVL stores n bytes into region reg of GPU peer (same node) over
// NVLink (a TMA store; the local GPU's own ring is a local store), paying
// the SM's store bandwidth.
func (w *Workload) storeNVL(t *gpu.Group, sm *gpu.SMPorts, peer int, reg *mem.Region, off uint64, n sim.Bytes) {
	end := sm.Write(t.Now(), n)
	t.NVLinkWrite(peer, reg, off, nil, n)
	if d := end.Sub(t.Now()); d > 0 {
		t.Compute(d)
	}
}

// smemStore is a shared-memory store by a warp (st.release.cta under the
// channel lock): visible to the SM at once.
func (w *Workload) smemStore(t *gpu.Group, reg *mem.Region, off, v uint64) {
	reg.Store64(off, v, t.Agent())
	t.Compute(w.e.M.Profile.GPU.AtomicBlock)
}

// bump advances a shared-memory progress word that a coordinator polls.
func (w *Workload) bump(t *gpu.Group, reg *mem.Region, off uint64) {
	w.smemStore(t, reg, off, reg.Load64(off)+1)
}

// landTimes records when each watched signal word last changed.
type landTimes struct {
	s  *sim.Sim
	at []sim.Time
	r  []*mem.Region
	o  []uint64
}

func (l *landTimes) watch(r *mem.Region, off uint64) int {
	l.at = append(l.at, 0)
	l.r = append(l.r, r)
	l.o = append(l.o, off)
	r.Watch(off, l)
	return len(l.at) - 1
}

// WordChanged implements mem.Watcher.
func (l *landTimes) WordChanged(r *mem.Region, off uint64) {
	for i := range l.r {
		if l.r[i] == r && l.o[i] == off {
			l.at[i] = l.s.Now()
		}
	}
}

func (l *landTimes) stop() {
	for i, r := range l.r {
		r.Unwatch(l.o[i], l)
	}
}

// pathOf returns what rank to saw from rank from on (channel c, id): the
// op behind the signal word, now (land is not used).
func (w *Workload) pathOf(t *gpu.Group, to, from, c, id int, _ sim.Time) workload.Seen {
	reg, off, _ := w.sigWord(to, c, id, false)
	return w.e.Saw(from, to, reg, off)
}

// readSig is a warp's load of a signal word (raw − offset).
func readSig(t *gpu.Group, reg *mem.Region, off, o uint64) uint64 { return t.Load64(reg, off) - o }

// putChunk puts k records from slot of the send ring for node dst to the
// rail peer's receive ring for node me, then adds k to its tail signal id
// on the same context. local chunks only publish the tail with a local
// atomic (the records were written into the local receive ring).
func (w *Workload) putChunk(t *gpu.Group, gn *gin.Gin, dc *gin.DevComm, r, c, me, dst, slot, k, id int,
	send, recv *gin.Window, slots int, rec uint64, ph *workload.Phase, chunks, tails *int64) {
	e := w.e
	start := t.Now()
	if dst == me {
		t.Fence(gpu.ScopeDevice)
		reg, off, _ := w.sigWord(r, c, id, false)
		t.AtomicAdd64(reg, off, uint64(k), gpu.ScopeDevice)
		w.st.LocalChunks++
		return
	}
	peer := w.rank(dst, r%w.G)
	n := uint64(k) * rec
	fp := &w.st.FirstPut[0][r]
	if ph == &e.Comb {
		fp = &w.st.FirstPut[1][r]
	}
	if *fp == 0 {
		*fp = start
	}
	gn.Put(dc.World(r), peer, recv, ringOff(c, me, w.N, slots, slot, rec), send, ringOff(c, dst, w.N, slots, slot, rec),
		n, nil, nil)
	gn.Signal(dc.World(r), peer, gin.SignalAdd{Signal: id, Value: uint64(k)})
	ph.Msgs++
	ph.Sigs++
	ph.RDMABytes += int64(n)
	*chunks++
	*tails++
}

// credit returns v slots of the ring that rank (node src, our local index)
// fills for us: SignalAdd on the credit context, or a local atomic.
// launchCredits starts the coordinator that returns RDMA head credits of
// channel c on rank r lazily: per source node, the least head over ch's
// warps that have not retired; once it has moved by a chunk since the
// last credit, the difference goes back to that node as signal id. It
// re-checks every HTCoordSleep and, when the warps' progress word at off
// of ctl has not moved, waits for it.
func (w *Workload) launchCredits(g *gpu.GPU, name, why string, r, c, id int, ch *chanState, warps, chunk int,
	ctl *mem.Region, off uint64, ph *workload.Phase, count *int64) {
	N := w.N
	if w.thenGin() {
		m := &creditsMachine{w: w, ch: ch, ctl: ctl, off: off, why: why, r: r, c: c, id: id, warps: warps, chunk: chunk,
			ph: ph, count: count, dc: w.credComms[c/workload.CtxsPerComm], last: make([]int, N)}
		m.changed = func(v uint64) bool { return v != m.seen }
		m.t = g.LaunchHandler(name, 32, m, 0)
		return
	}
	g.Launch(name, 32, func(t *gpu.Group) {
		dc := w.credComms[c/workload.CtxsPerComm]
		gn := dc.Gin(t, r, c%workload.CtxsPerComm)
		last := make([]int, N)
		for {
			seen := ctl.Load64(off)
			all := true
			for s := range N {
				minH := inf
				for p := range warps {
					if !ch.retired[p] {
						all = false
						minH = min(minH, ch.head[p*N+s])
					}
				}
				if minH != inf && minH >= last[s]+chunk {
					w.credit(t, gn, dc, r, c, s, id, uint64(minH-last[s]), ph, count)
					last[s] = minH
				}
			}
			if all {
				return
			}
			t.Sleep(w.e.P.HTCoordSleep)
			if ctl.Load64(off) == seen {
				t.WaitWord(ctl, off, why, func(v uint64) bool { return v != seen })
			}
		}
	})
}

func (w *Workload) credit(t *gpu.Group, gn *gin.Gin, dc *gin.DevComm, r, c, src, id int, v uint64, ph *workload.Phase, n *int64) {
	if src == r/w.G {
		reg, off, _ := w.sigWord(r, c, id, true)
		t.AtomicAdd64(reg, off, v, gpu.ScopeDevice)
		return
	}
	gn.Signal(dc.World(r), w.rank(src, r%w.G), gin.SignalAdd{Signal: id, Value: v})
	ph.Sigs++
	*n++
}

// copyLocal is a warp's TMA load of rd bytes of local HBM followed by the
// store of wr bytes to local HBM, through the SM's shared bandwidth.
func (w *Workload) copyLocal(t *gpu.Group, sm *gpu.SMPorts, rd, wr sim.Bytes) {
	end := sm.Read(t.Now().Add(w.hbmLat), rd)
	if wr > 0 {
		end = sm.Write(end, wr)
	}
	t.Compute(end.Sub(t.Now()) + w.e.M.Profile.GPU.StoreIssue)
}

// forBits calls f for every set bit of m, lowest first.
func forBits(m uint64, f func(i int)) {
	for ; m != 0; m &= m - 1 {
		f(bits.TrailingZeros64(m))
	}
}

// dispatch launches the dispatch kernel on every rank.
func (w *Workload) Dispatch() {
	e, st := w.e, w.e.Step
	recv := make([]int, st.EP)
	for r := range st.EP {
		recv[r] = w.C * w.G
	}
	e.Begin(&e.Disp, "dispatch", recv)
	prec, _ := e.Hdr.DispatchPrecision()
	for r := range st.EP {
		e.Disp.BWBytes[r] = traces.HTBandwidthBytes(w.pairs[r], e.Hidden, prec)
	}
	w.watchTails(0)
	w.fwdPath = make([]workload.Seen, st.EP*w.C*w.G)
	w.dch = make([]chanState, st.EP*w.C)
	for r := range st.EP {
		for c := range w.C {
			ch := &w.dch[r*w.C+c]
			ch.rel = make([][]bool, w.N)
			ch.relTail = make([]int, w.N)
			for d := range w.N {
				ch.rel[d] = make([]bool, len(w.seqOf(r, c, d)))
			}
			ch.head = make([]int, w.G*w.N)
			ch.retired = make([]bool, w.G)
		}
	}
	for r := range st.EP {
		for c := range w.C {
			w.launchDispatch(r, c)
		}
	}
}

// watchTails installs watchers on every rank's tail signal words base+node
// (base 0: dispatch, N: combine), for the critical-path breakdown.
func (w *Workload) watchTails(base int) {
	for i, lw := range w.land {
		r, c, s := i/(w.C*w.N), i/w.N%w.C, i%w.N
		reg, off, _ := w.sigWord(r, c, w.landBase+s, false)
		reg.Unwatch(off, lw)
	}
	w.land, w.landBase = w.land[:0], base
	for r := range w.e.Step.EP {
		for c := range w.C {
			for s := range w.N {
				reg, off, _ := w.sigWord(r, c, base+s, false)
				lw := &workload.LandWatch{Sim: w.e.Sim}
				reg.Watch(off, lw)
				w.land = append(w.land, lw)
			}
		}
	}
}

func (w *Workload) landAt(r, c, s int) sim.Time { return w.land[(r*w.C+c)*w.N+s].At }

func (w *Workload) launchDispatch(r, c int) {
	e := w.e
	g := e.M.GPUs[r]
	ph := &e.Disp
	me, l := r/w.G, r%w.G
	ch := &w.dch[r*w.C+c]
	ctl := w.ctl[r][c]
	N, G, W := w.N, w.G, w.dc.RDMARecv
	name := "ht/dispatch/c" + strconv.Itoa(c) + "/"
	sendSM, fwdSM := &w.sms[r][2*c+1], &w.sms[r][2*c]
	lo, hi := tokenRange(e.Step.Tokens[r], w.C, c)
	// RDMA sender warps.
	for wi := range senderWarps {
		if w.useThen() {
			m := newHTSender(w, r, c, wi, lo, hi)
			m.t = g.LaunchHandler(name+"sender"+strconv.Itoa(wi), 32, m, 0)
			continue
		}
		g.Launch(name+"sender"+strconv.Itoa(wi), 32, func(t *gpu.Group) {
			cnt := make([]int, N)
			for tok := lo; tok < hi; tok++ {
				m := w.nodes[r][tok]
				if (tok-lo)%senderWarps != wi || m == 0 {
					forBits(m, func(d int) { cnt[d]++ })
					continue
				}
				// Wait for head credits of every destination ring.
				forBits(m, func(d int) {
					if cnt[d] < W {
						return
					}
					need := uint64(cnt[d] - W + 1)
					reg, off, o := w.sigWord(r, c, d, true)
					if reg.Load64(off)-o < need {
						w.st.CreditWaits++
						t.WaitWord(reg, off, "ht dispatch credit", func(v uint64) bool { return v-o >= need })
					}
				})
				// Read the token once, store one record per node.
				w.copyLocal(t, sendSM, w.loadD, sim.Bytes(w.recD)*sim.Bytes(bits.OnesCount64(m)))
				forBits(m, func(d int) {
					ch.rel[d][cnt[d]] = true
					for ch.relTail[d] < len(ch.rel[d]) && ch.rel[d][ch.relTail[d]] {
						ch.relTail[d]++
					}
					cnt[d]++
				})
				w.bump(t, ctl, ctlSendProg*8)
			}
		})
	}
	// Sender coordinator: chunk puts + tail signals, rotated start.
	if w.thenGin() {
		m := newHTCoord(w, r, c)
		m.t = g.LaunchHandler(name+"coordinator", 32, m, 0)
	} else {
		w.launchCoord(g, name, r, c)
	}
	// Forwarder warps, one per NVLink peer, consume every source node's ring.
	for p := range G {
		if w.useThen() {
			m := newHTFwd(w, r, c, p)
			m.t = g.LaunchHandler(name+"forwarder"+strconv.Itoa(p), 32, m, 0)
			m.aw = gpu.NewWaitAny(m.t)
			continue
		}
		peer := w.rank(me, p)
		g.Launch(name+"forwarder"+strconv.Itoa(p), 32, func(t *gpu.Group) {
			seqs := make([][]int32, N)
			left, head, tail := make([]int, N), make([]int, N), make([]int, N)
			total := 0
			for s := range N {
				seqs[s] = w.seqOf(w.rank(s, l), c, me)
				left[s] = len(seqs[s])
				total += left[s]
			}
			ring := w.nvlD[peer]
			base := uint64((c*G+l)*w.dc.NVLRecv) * w.recD
			peerCtl := w.ctl[peer][c]
			aw := gpu.NewWaitAny(t)
			regs, offs := make([]*mem.Region, 0, N), make([]uint64, 0, N)
			nvlTail, nvlHead := 0, 0
			src := (2 * c) % N
			var path workload.Seen
			for total > 0 {
				for w.dc.NVLRecv-(nvlTail-nvlHead) < w.dc.NVLSend {
					need := nvlTail + w.dc.NVLSend - w.dc.NVLRecv
					nvlHead = int(t.WaitWord(ctl, w.ctlDHead(p), "ht forwarder NVLink space",
						func(v uint64) bool { return int(v) >= need }))
				}
				// Next source node with records (round robin).
				for {
					found := false
					for range N {
						src = (src + 1) % N
						if left[src] == 0 {
							continue
						}
						if head[src] == tail[src] {
							reg, off, o := w.sigWord(r, c, src, false)
							tail[src] = int(readSig(t, reg, off, o))
							if tail[src] > len(seqs[src]) {
								panic(fmt.Sprintf("ht: t=%v rank %d channel %d: tail signal of node %d says %d records, %d were sent",
									t.Now(), r, c, src, tail[src], len(seqs[src])))
							}
						}
						if tail[src] > head[src] {
							found = true
							break
						}
					}
					if found {
						break
					}
					regs, offs = regs[:0], offs[:0]
					for s := range N {
						if left[s] > 0 {
							reg, off, _ := w.sigWord(r, c, s, false)
							regs, offs = append(regs, reg), append(offs, off)
						}
					}
					aw.Wait(regs, offs, w.poll, w.l2Lat, "ht forwarder RDMA tail")
				}
				s := src
				srcRank := w.rank(s, l)
				path = w.pathOf(t, r, srcRank, c, s, w.landAt(r, c, s))
				i, sent, scanned := head[s], 0, 0
				for ; i < tail[s]; i++ {
					tok := seqs[s][i]
					left[s]--
					total--
					scanned++
					if w.gpus[srcRank][int(tok)*N+me]&(1<<uint(p)) == 0 {
						continue
					}
					t.Compute(sim.Duration(scanned) * w.l2Lat) // SourceMeta loads
					scanned = 0
					w.load(t, fwdSM, w.loadD)
					w.storeNVL(t, fwdSM, p, ring, base+uint64(nvlTail%w.dc.NVLRecv)*w.recD, sim.Bytes(w.recD))
					nvlTail++
					if sent++; sent == w.dc.NVLSend {
						i++
						break
					}
				}
				t.Compute(sim.Duration(scanned) * w.l2Lat)
				head[s] = i
				ch.head[p*N+s] = i
				w.bump(t, ctl, ctlFwdProg*8)
				if sent > 0 {
					t.Store64(peerCtl, w.ctlDTail(l), uint64(nvlTail))
					w.fwdPath[(r*w.C+c)*G+p] = path
				}
			}
			ch.retired[p] = true
			w.bump(t, ctl, ctlFwdProg*8)
		})
	}
	// Forwarder coordinator: lazy head credits to every source node.
	w.launchCredits(g, name+"forward-coordinator", "ht forward coordinator", r, c, me, ch, G, w.dc.RDMASend,
		ctl, ctlFwdProg*8, ph, &w.st.DispCredits)
	// NVLink receivers, one per forwarder of the node.
	for f := range G {
		fr := w.rank(me, f)
		n := 0
		for s := range N {
			src := w.rank(s, f)
			for _, tok := range w.seqOf(src, c, me) {
				if w.gpus[src][int(tok)*N+me]&(1<<uint(l)) != 0 {
					n++
				}
			}
		}
		if w.useThen() {
			m := newHTRecv(w, r, c, f, n)
			m.t = g.LaunchHandler(name+"receiver"+strconv.Itoa(f), 32, m, 0)
			continue
		}
		g.Launch(name+"receiver"+strconv.Itoa(f), 32, func(t *gpu.Group) {
			fctl := w.ctl[fr][c]
			head, tail := 0, 0
			for head < n {
				if head == tail {
					h := head
					tail = int(t.WaitWord(ctl, w.ctlDTail(f), "ht NVLink receiver", func(v uint64) bool { return int(v) > h }))
				}
				for ; head < tail; head++ {
					w.copyLocal(t, sendSM, w.loadD, w.loadD)
				}
				t.Store64(fctl, w.ctlDHead(l), uint64(head))
			}
			e.ReceiverDone(r, w.fwdPath[(fr*w.C+c)*G+l])
		})
	}
}

// launchCoord launches the dispatch sender coordinator of channel c of
// rank r on a process: chunk puts + tail signals, rotated start.
func (w *Workload) launchCoord(g *gpu.GPU, name string, r, c int) {
	ph := &w.e.Disp
	me := r / w.G
	ch := &w.dch[r*w.C+c]
	ctl := w.ctl[r][c]
	N, W := w.N, w.dc.RDMARecv
	g.Launch(name+"coordinator", 32, func(t *gpu.Group) {
		dc := w.dataComms[c/workload.CtxsPerComm]
		gn := dc.Gin(t, r, c%workload.CtxsPerComm)
		remaining, last := make([]int, N), make([]int, N)
		total := 0
		for d := range N {
			remaining[d] = len(w.seqOf(r, c, d))
			total += remaining[d]
		}
		chunk := w.dc.RDMASend
		for total > 0 {
			seen := ctl.Load64(ctlSendProg * 8)
			issued := false
			for i := range N {
				d := (i + c + me) % N
				if remaining[d] == 0 {
					continue
				}
				done := ch.relTail[d] - last[d]
				if done != remaining[d] && done < chunk {
					continue
				}
				slot := last[d] % W
				k := min(done, chunk, W-slot)
				w.putChunk(t, gn, dc, r, c, me, d, slot, k, me, w.dSend[c/workload.CtxsPerComm], w.dRecv[c/workload.CtxsPerComm],
					W, w.recD, ph, &w.st.DispChunks, &w.st.DispTails)
				last[d] += k
				remaining[d] -= k
				total -= k
				issued = true
			}
			if !issued {
				t.WaitWord(ctl, ctlSendProg*8, "ht dispatch coordinator", func(v uint64) bool { return v != seen })
			}
		}
	})
}

// launchCFwdCoord launches the combine forwarder coordinator of channel c
// of rank r on a process: NVLink heads back to the senders, per (source
// node, peer) sub-ring.
func (w *Workload) launchCFwdCoord(g *gpu.GPU, name string, r, c int) {
	e := w.e
	fw := &w.cch[2*(r*w.C+c)]
	ctl := w.ctl[r][c]
	N, G := w.N, w.G
	me, l := r/w.G, r%w.G
	g.Launch(name+"forward-coordinator", 32, func(t *gpu.Group) {
		last := make([]int, N*G)
		for {
			seen := ctl.Load64(ctlCFwdProg * 8)
			all := true
			for s := range N {
				if !fw.retired[s] {
					all = false
				}
				for p := range G {
					if h := fw.head[s*G+p]; h > last[s*G+p] {
						t.Store64(w.ctl[w.rank(me, p)][c], w.ctlCHead(l, s), uint64(h))
						last[s*G+p] = h
					}
				}
			}
			if all {
				return
			}
			t.Sleep(e.P.HTCoordSleep)
			if ctl.Load64(ctlCFwdProg*8) == seen {
				t.WaitWord(ctl, ctlCFwdProg*8, "ht combine forward coordinator", func(v uint64) bool { return v != seen })
			}
		}
	})
}

// recvWarps is the combine kernel's RDMA receiver warps per channel:
// kNumForwarders − NVLink peers, with kNumForwarders = nodes × max(24 /
// nodes, 1).
func (w *Workload) recvWarps() int {
	return max(w.N*w.fwdWarps()-w.G, 1)
}

// fwdWarps is the combine forwarder warps per destination node.
func (w *Workload) fwdWarps() int { return max(combineForwarderWarps/w.N, 1) }

// combine launches the combine kernel on every rank.
func (w *Workload) Combine() {
	e, st := w.e, w.e.Step
	recv := make([]int, st.EP)
	for r := range st.EP {
		recv[r] = w.C * w.recvWarps()
	}
	e.Begin(&e.Comb, "combine", recv)
	for r := range st.EP {
		e.Comb.BWBytes[r] = traces.HTBandwidthBytes(w.pairs[r], e.Hidden, traces.BF16)
	}
	w.watchTails(w.N)
	nr := w.recvWarps()
	w.cch = make([]chanState, 2*st.EP*w.C)
	for r := range st.EP {
		for c := range w.C {
			fw := &w.cch[2*(r*w.C+c)] // forwarder groups: head[s*G+p], position in peer p's sub-ring s
			fw.head = make([]int, w.N*w.G)
			fw.retired = make([]bool, w.N)
			rv := &w.cch[2*(r*w.C+c)+1] // receiver warps: head[wi*N+s]
			rv.head = make([]int, nr*w.N)
			rv.retired = make([]bool, nr)
		}
	}
	for r := range st.EP {
		for c := range w.C {
			w.launchCombine(r, c)
		}
	}
}

// nvlCount returns how many records of channel c from source rank (s, l)
// local GPU p of node n contributes to in combine: the records p moves
// through its sub-ring s of forwarder l.
func (w *Workload) nvlCount(l, c, n, p, s int) int {
	k := 0
	src := w.rank(s, l)
	for _, tok := range w.seqOf(src, c, n) {
		if w.gpus[src][int(tok)*w.N+n]&(1<<uint(p)) != 0 {
			k++
		}
	}
	return k
}

func (w *Workload) launchCombine(r, c int) {
	e := w.e
	g := e.M.GPUs[r]
	ph := &e.Comb
	me, l := r/w.G, r%w.G
	fw, rv := &w.cch[2*(r*w.C+c)], &w.cch[2*(r*w.C+c)+1]
	ctl := w.ctl[r][c]
	N, G, W := w.N, w.G, w.cc.RDMARecv
	name := "ht/combine/c" + strconv.Itoa(c) + "/"
	sendSM, fwdSM := &w.sms[r][2*c], &w.sms[r][2*c+1]
	rec := sim.Bytes(w.recC)
	// NVLink senders: this GPU's expert outputs for the tokens forwarder f
	// gave it, one lane per source node s, each lane in token order through
	// its own sub-ring s of f's buffer.
	for f := range G {
		fr := w.rank(me, f)
		left := make([]int, N)
		total := 0
		for s := range N {
			left[s] = w.nvlCount(f, c, me, l, s)
			total += left[s]
		}
		if w.useThen() {
			m := newHTNVLSender(w, r, c, f, left, total)
			m.t = g.LaunchHandler(name+"nvl-sender"+strconv.Itoa(f), 32, m, 0)
			m.aw = gpu.NewWaitAny(m.t)
			continue
		}
		g.Launch(name+"nvl-sender"+strconv.Itoa(f), 32, func(t *gpu.Group) {
			ring := w.nvlC[fr]
			base := uint64((c*G + l) * w.cc.NVLRecv)
			fctl := w.ctl[fr][c]
			sub, chunk := w.subC, w.cc.NVLSend
			tail, head := make([]int, N), make([]int, N)
			ready := make([]bool, N)
			aw := gpu.NewWaitAny(t)
			regs, offs := make([]*mem.Region, 0, N), make([]uint64, 0, N)
			cur := c % N
			for total > 0 {
				// Until a lane has records and a chunk of room (cached
				// heads), reload the heads of the lanes with records.
				for {
					any := false
					for s := range N {
						ready[s] = left[s] > 0 && sub-(tail[s]-head[s]) >= chunk
						any = any || ready[s]
					}
					if any {
						break
					}
					regs, offs = regs[:0], offs[:0]
					moved := false
					for s := range N {
						if left[s] > 0 {
							regs, offs = append(regs, ctl), append(offs, w.ctlCHead(f, s))
							moved = moved || int(ctl.Load64(w.ctlCHead(f, s))) != head[s]
						}
					}
					if moved {
						t.Compute(w.l2Lat)
					} else {
						aw.Wait(regs, offs, w.poll, w.l2Lat, "ht combine NVLink space")
					}
					for s := range N {
						if left[s] > 0 {
							head[s] = int(ctl.Load64(w.ctlCHead(f, s)))
						}
					}
				}
				// One chunk into every ready sub-ring, round-robin.
				for range N {
					cur = (cur + 1) % N
					if !ready[cur] {
						continue
					}
					k := min(chunk, left[cur])
					for range k {
						w.load(t, sendSM, w.out2H)
						slot := base + uint64(cur*sub+tail[cur]%sub)
						w.storeNVL(t, sendSM, f, ring, slot*w.recC, rec)
						tail[cur]++
					}
					left[cur] -= k
					total -= k
				}
				for s := range N {
					if ready[s] {
						t.Store64(fctl, w.ctlCTail(l, s), uint64(tail[s]))
					}
				}
			}
		})
	}
	// Forwarders: per destination node s, sum the local contributions of
	// each token of source rank (s, l), read from every peer's sub-ring s,
	// and put chunks back to it.
	kw := w.fwdWarps()
	for s := range N {
		src := w.rank(s, l)
		seq := w.seqOf(src, c, me)
		if w.thenGin() {
			m := newHTCFwd(w, r, c, s, kw)
			m.t = g.LaunchHandler(name+"forwarder"+strconv.Itoa(s), 32*kw, m, 0)
			continue
		}
		g.Launch(name+"forwarder"+strconv.Itoa(s), 32*kw, func(t *gpu.Group) {
			dc := w.dataComms[c/workload.CtxsPerComm]
			gn := dc.Gin(t, r, c%workload.CtxsPerComm)
			next, seenTail := make([]int, G), make([]int, G)
			at := make([]sim.Time, kw)
			// Tokens of the chunk reduced or reducing, not yet released:
			// when each one's record is written, and the peers' sub-ring
			// positions after it.
			doneAt := make([]sim.Time, w.cc.RDMASend)
			doneHead := make([]int, w.cc.RDMASend*G)
			rel, j := 0, 0
			// release hands the heads of the tokens written by now to the
			// coordinator, in token order (its min over sub-warps); the
			// sub-warps' shared-memory head stores overlap their reduce.
			release := func(now sim.Time) {
				if rel == j || doneAt[rel] > now {
					return
				}
				for rel < j && doneAt[rel] <= now {
					rel++
				}
				copy(fw.head[s*G:(s+1)*G], doneHead[(rel-1)*G:rel*G])
				ctl.Store64(ctlCFwdProg*8, ctl.Load64(ctlCFwdProg*8)+1, t.Agent())
			}
			creg, coff, co := w.sigWord(r, c, N+s, true)
			for sent := 0; sent < len(seq); {
				slot := sent % W
				k := min(w.cc.RDMASend, len(seq)-sent, W-slot)
				if need := uint64(sent + k - W); sent+k > W && creg.Load64(coff)-co < need {
					w.st.CreditWaits++
					t.WaitWord(creg, coff, "ht combine credit", func(v uint64) bool { return v-co >= need })
				}
				// Sub-warp j%kw reduces token j once its contributions are
				// in its peers' sub-rings: the contributions in, one record
				// out, through the SM's shared bandwidth. While a tail is
				// short, the sub-warps that finished release their heads.
				now := t.Now()
				end := now
				for i := range at {
					at[i] = now
				}
				rel = 0
				for j = 0; j < k; j++ {
					m := w.gpus[src][int(seq[sent+j])*N+me]
					var reads sim.Bytes
					forBits(uint64(m), func(p int) {
						next[p]++
						reads += rec
						for seenTail[p] < next[p] {
							release(t.Now())
							if v := int(ctl.Load64(w.ctlCTail(p, s))); v >= next[p] || rel == j {
								need := next[p]
								seenTail[p] = int(t.WaitWord(ctl, w.ctlCTail(p, s), "ht combine NVLink tail",
									func(v uint64) bool { return int(v) >= need }))
								break
							}
							t.Sleep(doneAt[rel].Sub(t.Now()))
						}
					})
					re := fwdSM.Read(max(at[j%kw], t.Now()).Add(w.hbmLat), reads)
					we := fwdSM.Write(re, rec)
					at[j%kw] = we
					end = max(end, we)
					doneAt[j] = we
					copy(doneHead[j*G:(j+1)*G], next)
				}
				if d := end.Sub(t.Now()); d > 0 {
					t.Compute(d)
				}
				release(t.Now())
				w.bump(t, ctl, ctlCFwdProg*8)
				w.putChunk(t, gn, dc, r, c, me, s, slot, k, N+me, w.cSend[c/workload.CtxsPerComm], w.cRecv[c/workload.CtxsPerComm],
					W, w.recC, ph, &w.st.CombChunks, &w.st.CombTails)
				sent += k
			}
			fw.retired[s] = true
			w.bump(t, ctl, ctlCFwdProg*8)
		})
	}
	// Forwarder coordinator: NVLink heads back to the senders, per (source
	// node, peer) sub-ring.
	if w.useThen() {
		m := newHTCFwdCoord(w, r, c)
		m.t = g.LaunchHandler(name+"forward-coordinator", 32, m, 0)
	} else {
		w.launchCFwdCoord(g, name, r, c)
	}
	// RDMA receivers: sum each own token's records across nodes.
	nr := w.recvWarps()
	lo, hi := tokenRange(e.Step.Tokens[r], w.C, c)
	for wi := range nr {
		if w.useThen() {
			m := newHTCRecv(w, r, c, wi, nr, lo, hi)
			m.t = g.LaunchHandler(name+"receiver"+strconv.Itoa(wi), 32, m, 0)
			continue
		}
		g.Launch(name+"receiver"+strconv.Itoa(wi), 32, func(t *gpu.Group) {
			pos, seenTail := make([]int, N), make([]int, N)
			var path workload.Seen
			for tok := lo; tok < hi; tok++ {
				m := w.nodes[r][tok]
				if (tok-lo)%nr != wi {
					forBits(m, func(s int) { pos[s]++ })
					continue
				}
				for s := range N {
					rv.head[wi*N+s] = pos[s]
				}
				w.bump(t, ctl, ctlCRecvProg*8)
				if m == 0 {
					continue
				}
				forBits(m, func(s int) {
					if seenTail[s] > pos[s] {
						return
					}
					reg, off, o := w.sigWord(r, c, N+s, false)
					need := uint64(pos[s] + 1)
					v := reg.Load64(off) - o
					if v < need {
						v = t.WaitWord(reg, off, "ht combine RDMA tail", func(v uint64) bool { return v-o >= need }) - o
						p := w.pathOf(t, r, w.rank(s, l), c, N+s, w.landAt(r, c, s))
						if !path.Valid || p.At >= path.At {
							path = p
						}
					}
					seenTail[s] = int(v)
				})
				w.copyLocal(t, sendSM, rec*sim.Bytes(bits.OnesCount64(m)), w.out2H)
				forBits(m, func(s int) { pos[s]++ })
			}
			for s := range N {
				rv.head[wi*N+s] = inf
			}
			rv.retired[wi] = true
			w.bump(t, ctl, ctlCRecvProg*8)
			e.ReceiverDone(r, path)
		})
	}
	// Receiver coordinator: head credits back to the forwarders.
	w.launchCredits(g, name+"recv-coordinator", "ht combine receiver coordinator", r, c, N+me, rv, nr,
		w.cc.RDMASend, ctl, ctlCRecvProg*8, ph, &w.st.CombCredits)
}

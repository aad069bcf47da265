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
func (w *Workload) Stats() Stats {
	s := w.st
	for _, x := range w.rst {
		s.DispChunks += x.DispChunks
		s.DispTails += x.DispTails
		s.DispCredits += x.DispCredits
		s.CombChunks += x.CombChunks
		s.CombTails += x.CombTails
		s.CombCredits += x.CombCredits
		s.LocalChunks += x.LocalChunks
		s.CreditWaits += x.CreditWaits
	}
	return s
}

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
	st                  Stats   // the counts the obs stream feeds (Packets, CrossRail), FirstPut
	rst                 []Stats // per rank: what its warps sent

	dch, cch []chanState     // per (rank, channel): shared-memory state
	fwdPath  []workload.Seen // per (forwarder rank, channel, peer): last RDMA tail behind its NVLink tail
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
	w.rst = make([]Stats, st.EP)
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

// pathOf returns what rank to saw from rank from on (channel c, id): the
// op that last changed the signal word.
func (w *Workload) pathOf(to, from, c, id int) workload.Seen {
	reg, off, _ := w.sigWord(to, c, id, false)
	return w.e.Saw(from, to, reg, off)
}

package moe

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/nic"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/traces"
)

// The host-initiated NCCL baseline: Megatron-LM's MoEAlltoAllTokenDispatcher
// (spec moe-traffic 2.4) over NCCL's point-to-point transports.
//
// Dispatch, on every rank: the per-expert token counts (E int64) are
// all-gathered over the EP group by an NCCL ring (each rank forwards the
// block it received from its predecessor, ep-1 steps); the counts are copied
// to the host (cudaMemcpy D2H) and the host waits for the stream
// (cudaStreamSynchronize), builds the splits and enqueues the
// all_to_all_single as one NCCL group of ncclSend/ncclRecv (k copies per
// token, no dedup; the selections of a rank to its own experts are a local
// copy). Combine is the reverse all-to-all-v of 2H BF16 per selection; its
// splits are known, so the host enqueued it ahead and it starts at once.
//
// The all-to-all uses the Simple protocol; the counts all-gather uses LL
// on NET connections (AllGatherLL: NCCL's tuner picks LL for a few KiB per
// rank): the kernel stores 16-byte lines (8 data bytes, two flags) into an
// LL buffer in pinned host memory, the send proxy checks the size and the
// flags instead of a tail and RDMA-writes the lines into the receiver's
// host LL buffer, and the receiving kernel polls the flags over PCIe, so
// no receive-proxy hop or tail sits on the ring's per-step path.
//
// Transport (Simple). Remote-node peers (and, without --nvlink,
// same-node peers, as with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1) use the
// NET transport with IB verbs: the kernel's send warps wait for a FIFO slot
// credit (head, in pinned host memory, read over PCIe), write the slot's
// size, copy the chunk into the proxy's GPU-resident shared buffer (GDR),
// fence and publish the tail (host memory). The rank's proxy thread (one CPU
// thread, round robin over its connections, one action per connection per
// pass) posts slots, sees the tail, waits for the receiver's clear-to-send,
// posts an RDMA WRITE of the chunk plus a 0-byte WRITE_WITH_IMM (adaptive
// routing, chunks above ARThreshold) or one WRITE_WITH_IMM carrying the
// data, and polls its CQ. The receiver's proxy posts a receive WQE and
// RDMA-writes a 48-byte CTS (the ncclIbSendFifo element) into the sender's
// CTS FIFO per slot, polls its CQ for the immediate completion, does no
// GPU-direct flush (Hopper: ncclTopoNeedFlush returns FlushNone for compute
// capability 9.0) and stores the tail the receive warps poll over PCIe;
// they copy the chunk into the output and return the slot (head, host
// memory), which the proxy reads before posting the next receive.
// Same-node peers with --nvlink use NCCL's P2P transport in write mode
// (Hopper has P2P read off): the send warps copy the chunk over NVLink into
// the receiver's FIFO, fence and store the tail into the receiver's memory;
// the receiver copies out and stores the head back over NVLink. No proxy.
//
// Simplified: no LL128, and no LL for the all-to-all (NCCL would pick LL
// for per-peer sizes under 16 KiB per channel; P2P ring hops of the counts
// all-gather keep Simple), the receiving kernel of an LL step waits for
// the last line's flag and then reads the lines (NCCL polls every line;
// one WRITE lands them together), no PXN, no
// user-buffer registration (PyTorch does not register), zero-byte peers are
// skipped, the ring all-gather runs on one channel, the sender takes the
// remote slot address from its own step count rather than reading it out of
// the CTS (the CTS content is the same), CTS WRITEs are unsignalled (the NIC
// model frees send-queue slots on ACK), and the permute/unpermute kernels
// are not part of either phase.

// NCCLConfig holds the host, transport and proxy-thread parameters of the
// NCCL baseline. Every field stands for one fact of NCCL, CUDA or the CPU.
type NCCLConfig struct {
	// HostEnqueue is ncclGroupEnd's host work for one plan: task
	// scheduling, kernel arguments, proxy op posting and cudaLaunchKernel
	// (~4 us for a grouped all-to-all; NCCL's small-message latency is
	// dominated by it).
	HostEnqueue sim.Duration
	// HostPerOp is the host cost of one ncclSend or ncclRecv call inside
	// the group (argument checks, task append): ~0.2 us.
	HostPerOp sim.Duration
	// KernelStart is from cudaLaunchKernel returning to the kernel's
	// first instruction on an idle GPU: ~2 us launch latency.
	KernelStart sim.Duration
	// ProxyWake is waking a proxy thread that blocked in pthread_cond_wait
	// because it had no active op: futex wake and reschedule, ~3 us.
	ProxyWake sim.Duration
	// D2HStart is the copy engine starting a cudaMemcpyAsync D2H queued
	// behind the all-gather kernel: ~1.5 us of stream scheduling.
	D2HStart sim.Duration
	// SyncWake is cudaStreamSynchronize returning to Python once the
	// stream's completion semaphore landed in host memory: ~1 us.
	SyncWake sim.Duration
	// SplitsCost is the host building input/output splits from the
	// gathered counts (a few torch CPU ops and .tolist()): ~5 us.
	SplitsCost sim.Duration
	// CountBytes is one per-expert token count: int64 in Megatron.
	CountBytes sim.Bytes

	// NetChunk is NCCL_P2P_NET_CHUNKSIZE (128 KiB), the p2p step of a
	// communicator spanning several nodes, NVLink peers included.
	NetChunk sim.Bytes
	// NVLChunk is NCCL_P2P_NVL_CHUNKSIZE (512 KiB), the p2p step of a
	// single-node all-NVLink communicator.
	NVLChunk sim.Bytes
	// Steps is NCCL_STEPS: FIFO slots per connection.
	Steps int
	// ChannelsPerPeer is the channels a peer's bytes are split over:
	// NCCL halves p2pnChannelsPerPeer until it times the rank count fits
	// p2pnChannels (32 on an HGX H100), so 2 at EP16; the count per peer
	// is further capped by bytes / (chunk/2).
	ChannelsPerPeer int
	// OpThreads is the threads of a channel's CTA working on one send or
	// receive (the 512-640-thread CTA split between them): 256.
	OpThreads int
	// AdaptiveRouting makes a chunk above ARThreshold an RDMA WRITE plus a
	// 0-byte WRITE_WITH_IMM: NCCL enables AR on InfiniBand link layers.
	AdaptiveRouting bool
	// ARThreshold is NCCL_IB_AR_THRESHOLD: 8192 bytes.
	ARThreshold sim.Bytes
	// CTSBytes is sizeof(struct ncclIbSendFifo): addr, size, 4 rkeys,
	// nreqs, tag, idx = 48 bytes.
	CTSBytes sim.Bytes
	// CTSSlots is the slots of a connection's CTS FIFO modelled (NCCL has
	// NET_IB_MAX_REQUESTS; only Steps can be outstanding).
	CTSSlots int
	// AllGatherLL runs the counts all-gather with the LL protocol, as
	// NCCL's tuner picks for an all-gather of a few KiB per rank: LL
	// buffers in pinned host memory on both sides of a NET connection
	// (net.cc places only non-LL buffers in GPU memory), 16-byte lines of
	// 8 data bytes and two flags; the send proxy checks the flags instead
	// of waiting for a tail, and the receiving kernel polls the flags the
	// NIC wrote instead of waiting for the receive proxy.
	AllGatherLL bool
	// LLLineCheck is the send proxy's check of one more 64-byte line of
	// LL flags after the first miss: a hardware-prefetched streaming read
	// of lines the GPU wrote over PCIe, ~5 ns a line.
	LLLineCheck sim.Duration
	// MTU is the path MTU NCCL sets on RoCE/IB QPs: 4096.
	MTU int
	// QPTimeout is NCCL_IB_TIMEOUT (20); QPRetry NCCL_IB_RETRY_CNT (7).
	QPTimeout, QPRetry uint8

	// OpCheck is one progress call on one connection that finds nothing
	// to do (a few loads of cached fields and branches).
	OpCheck sim.Duration
	// LineMiss is reading a host line a device wrote (tail, CTS, head):
	// the same DRAM/LLC miss as proxy.Config.GFDLineCost.
	LineMiss sim.Duration
	// HostStore is a CPU store into pinned host memory (head, tail, CTS
	// element): a cached store, ~5 ns.
	HostStore sim.Duration
	// PostSendBase, PostSendPerWR, DoorbellIssue, PollCQCost, CQEReadCost
	// and YieldCost are the verbs and loop costs of proxy.Config.
	PostSendBase, PostSendPerWR, DoorbellIssue sim.Duration
	PollCQCost, CQEReadCost, YieldCost         sim.Duration
	// PostRecvCost is ibv_post_recv of one WQE: mlx5 builds the receive
	// WQE and updates the doorbell record, no MMIO (~PostSendBase).
	PostRecvCost sim.Duration
}

// DefaultNCCLConfig returns NCCL 2.2x defaults on an HGX H100 host, with
// the verbs costs of proxy.DefaultConfig.
func DefaultNCCLConfig() NCCLConfig {
	pc := proxy.DefaultConfig()
	return NCCLConfig{
		HostEnqueue: 4 * sim.Microsecond,
		HostPerOp:   200 * sim.Nanosecond,
		KernelStart: 2 * sim.Microsecond,
		ProxyWake:   3 * sim.Microsecond,
		D2HStart:    1500 * sim.Nanosecond,
		SyncWake:    1 * sim.Microsecond,
		SplitsCost:  5 * sim.Microsecond,
		CountBytes:  8,

		NetChunk:        128 << 10,
		NVLChunk:        512 << 10,
		Steps:           8,
		ChannelsPerPeer: 2,
		OpThreads:       256,
		AdaptiveRouting: true,
		ARThreshold:     8192,
		AllGatherLL:     true,
		LLLineCheck:     5 * sim.Nanosecond,
		CTSBytes:        48,
		CTSSlots:        16,
		MTU:             4096,
		QPTimeout:       20,
		QPRetry:         7,

		OpCheck:       10 * sim.Nanosecond,
		LineMiss:      pc.GFDLineCost,
		HostStore:     5 * sim.Nanosecond,
		PostSendBase:  pc.PostSendBase,
		PostSendPerWR: pc.PostSendPerWR,
		DoorbellIssue: pc.DoorbellIssue,
		PollCQCost:    pc.PollCQCost,
		CQEReadCost:   pc.CQEReadCost,
		YieldCost:     pc.YieldCost,
		PostRecvCost:  pc.PostSendBase,
	}
}

// Validate reports the first unusable parameter.
func (c NCCLConfig) Validate() error {
	switch {
	case c.Steps < 1 || c.CTSSlots < c.Steps:
		return fmt.Errorf("moe: nccl Steps %d must be >= 1 and CTSSlots %d >= Steps", c.Steps, c.CTSSlots)
	case c.NetChunk < 1024 || c.NVLChunk < 1024 || c.ChannelsPerPeer < 1:
		return fmt.Errorf("moe: nccl chunks %d/%d must be >= 1 KiB and ChannelsPerPeer %d >= 1",
			c.NetChunk, c.NVLChunk, c.ChannelsPerPeer)
	case c.OpThreads < 1 || c.OpThreads > 1024:
		return fmt.Errorf("moe: nccl OpThreads %d out of [1, 1024]", c.OpThreads)
	case c.CTSBytes < 16 || c.CountBytes < 1:
		return fmt.Errorf("moe: nccl CTSBytes %d must hold the idx word; CountBytes %d >= 1", c.CTSBytes, c.CountBytes)
	case c.LLLineCheck < 0:
		return fmt.Errorf("moe: nccl LLLineCheck %v must not be negative", c.LLLineCheck)
	case c.OpCheck+c.YieldCost <= 0:
		return fmt.Errorf("moe: nccl an idle proxy pass must take time (OpCheck+YieldCost > 0)")
	}
	return nil
}

// Host control words of a NET connection (pinned host memory, one region
// per side). Sender side: head (slots posted by the proxy: the kernel's
// credit), tail (steps the kernel published), the connFifo size word, then
// the CTS FIFO (one 64-byte slot per entry, idx in its last word). Receiver
// side: tail (steps received, stored by the proxy), head (steps the kernel
// consumed), then the CTS elements the proxy writes from.
const (
	ctlHead  = 0
	ctlTail  = 8
	ctlSize  = 16
	ctlSlots = 64
	ctsSlot  = 64
)

// ncclWorkload is the NCCL baseline.
type ncclWorkload struct {
	e   *env
	cfg NCCLConfig

	tok, comb     uint64 // bytes per selection on the wire: dispatch (Megatron token) and combine (2H BF16)
	bwDisp, bwCmb int64  // DeepEP LL numerator per selection (as ll.go)
	step          uint64 // p2p step (chunk) size of the communicator
	ranks         []*ncclRank
	conns         []*ncclConn // every connection ever built; index = id (doorbell events)
	a2a           []*ncclConn // the running phase's all-to-all connections
	ring          []*ncclConn // counts all-gather: rank r -> r+1
	nextVA        uint64
}

// ncclRank is one rank's NCCL resources.
type ncclRank struct {
	r     int
	g     *gpu.GPU
	nic   *nic.NIC
	px    *ncclProxy
	host  *sim.Proc
	fifo  *mem.Region // GDR shared buffers of the rank's NET connections
	mr    *nic.MR
	used  uint64
	out   *mem.Region // receive (output) buffer
	kick  sim.Time    // the phase's all-to-all kernel start
	recvs int         // receiver groups of the phase
}

// ncclConn is one (src, dst, channel) connection with one op.
type ncclConn struct {
	id       int
	src, dst int
	ch       int
	net      bool
	ring     bool
	ll       bool // LL protocol (NET only): host LL buffers, flags instead of tail
	bytes    uint64
	chunk    uint64
	nsteps   int

	// NET: host control regions, FIFO slot bases, QPs and CQs.
	sctl, rctl       *mem.Region
	sfifo, rfifo     uint64
	sqp, rqp         *nic.QP
	scq, rcq         *nic.CQ
	ctsMR, ctsSrcMR  *nic.MR
	sPosts, rPosts   []ncclPost // posted, doorbell still crossing PCIe
	sPostsH, rPostsH int
	// LL (NET): the LL FIFOs in pinned host memory, backed so that the
	// flags travel with the data, and their MRs.
	sll, rll     *mem.Region
	sllMR, rllMR *nic.MR
	llSrc, llDst []byte // the sending kernel's lines per slot; the receiving kernel's read of one slot

	// P2P (NVLink): FIFO and tail in the receiver's HBM, head in the
	// sender's.
	pfifo, ptail, phead *mem.Region

	// Proxy state (NET): sender posted/transmitted/done, receiver
	// posted/received/transmitted/done; cached device-written values.
	sPosted, sTrans, sDone        int
	rPosted, rRecv, rTrans, rDone int
	tailSeen, headSeen            uint64
	ctsSeen                       int

	// Instants of the last step, for the breakdown.
	lastQueued, lastPosted, lastCQE, lastLanded sim.Time
}

// ncclPost is one ibv_post_send whose doorbell is crossing PCIe.
type ncclPost struct {
	wrs [2]nic.WR
	n   int
}

func newNCCL(e *env) workload { return &ncclWorkload{e: e, cfg: DefaultNCCLConfig()} }

func (w *ncclWorkload) setup() error {
	e, st := w.e, w.e.st
	if err := w.cfg.Validate(); err != nil {
		return err
	}
	if st.ep < 2 {
		return fmt.Errorf("moe: nccl: EP %d: the all-to-all needs at least 2 ranks", st.ep)
	}
	prec, err := e.hdr.DispatchPrecision()
	if err != nil {
		return err
	}
	w.bwDisp = int64(traces.LLDispatchBytes(e.hidden, prec))
	w.bwCmb = int64(traces.LLCombineBytes(e.hidden))
	w.tok = uint64(w.bwDisp) - traces.LLHeaderBytes // Megatron sends the token (and FP8 scales), no DeepEP header
	w.comb = uint64(w.bwCmb)
	w.step = uint64(w.cfg.NVLChunk)
	if e.m.Nodes > 1 {
		w.step = uint64(w.cfg.NetChunk)
	}
	w.nextVA = 0x7e00_0000_0000
	var outMax uint64
	for r := range st.ep {
		outMax = max(outMax, uint64(st.selections[r]))
	}
	for r := range st.ep {
		var in uint64
		for s := range st.ep {
			for _, x := range st.experts[r] {
				in += uint64(st.count[s][x])
			}
		}
		outMax = max(outMax, in)
	}
	for r := range st.ep {
		rk := e.m.Ranks[r]
		if len(rk.NICs) == 0 {
			return fmt.Errorf("moe: nccl: rank %d has no NIC", r)
		}
		g := rk.GPU
		nr := &ncclRank{r: r, g: g, nic: rk.NICs[0]}
		nr.out = g.Alloc("nccl/out", sim.Bytes(max(outMax, 1)*max(w.tok, w.comb)), false)
		// Shared buffers: Steps slots for every NET connection the rank
		// may have (each direction, ChannelsPerPeer per peer, plus ring).
		size := uint64(w.cfg.Steps) * w.step * uint64(2*st.ep*w.cfg.ChannelsPerPeer+2)
		nr.fifo = g.Alloc("nccl/gdr-buffers", sim.Bytes(size), false)
		nr.mr, err = nr.nic.RegMR(nr.fifo, 0, size, w.va(size), nic.AccessLocalWrite|nic.AccessRemoteWrite, g.Dev(), true)
		if err != nil {
			return fmt.Errorf("moe: nccl: %w", err)
		}
		nr.px = newNCCLProxy(w, nr)
		w.ranks = append(w.ranks, nr)
	}
	return nil
}

func (w *ncclWorkload) va(n uint64) uint64 {
	v := w.nextVA
	w.nextVA += (n + 0xffff) &^ 0xffff
	return v
}

// viaNet reports whether a -> b uses the NET transport.
func (w *ncclWorkload) viaNet(a, b int) bool {
	m := w.e.m
	return m.Ranks[a].Node != m.Ranks[b].Node || !w.e.opt.NVLink
}

// newConn builds a connection carrying bytes from src to dst.
func (w *ncclWorkload) newConn(src, dst, ch int, bytes, chunk uint64, ring bool) (*ncclConn, error) {
	c := &ncclConn{id: len(w.conns), src: src, dst: dst, ch: ch, net: w.viaNet(src, dst), ring: ring,
		bytes: bytes, chunk: chunk}
	c.ll = c.net && ring && w.cfg.AllGatherLL
	c.nsteps = int((bytes + chunk - 1) / chunk)
	w.conns = append(w.conns, c)
	name := "nccl/" + strconv.Itoa(src) + ">" + strconv.Itoa(dst) + "." + strconv.Itoa(ch)
	S, D := w.ranks[src], w.ranks[dst]
	slots := uint64(w.cfg.Steps) * chunk
	if !c.net {
		c.pfifo = D.g.Alloc(name+"/p2p-fifo", sim.Bytes(slots), false)
		c.ptail = D.g.Alloc(name+"/p2p-tail", 8, false)
		c.phead = S.g.Alloc(name+"/p2p-head", 8, false)
		return c, nil
	}
	var err error
	if c.ll {
		// LL buffers: NCCL_STEPS slots of LL lines in host memory.
		n := uint64(w.cfg.Steps) * c.llSlot()
		c.llSrc, c.llDst = make([]byte, n), make([]byte, c.llSlot())
		c.sll = S.g.AllocHost(name+"/send-ll", sim.Bytes(n), true)
		c.rll = D.g.AllocHost(name+"/recv-ll", sim.Bytes(n), true)
		if c.sllMR, err = S.nic.RegMR(c.sll, 0, n, w.va(n), nic.AccessLocalWrite, S.g.Bus().Host(), true); err != nil {
			return nil, fmt.Errorf("moe: nccl: %w", err)
		}
		if c.rllMR, err = D.nic.RegMR(c.rll, 0, n, w.va(n), nic.AccessLocalWrite|nic.AccessRemoteWrite,
			D.g.Bus().Host(), true); err != nil {
			return nil, fmt.Errorf("moe: nccl: %w", err)
		}
	} else {
		if S.used+slots > uint64(S.fifo.Size()) || D.used+slots > uint64(D.fifo.Size()) {
			return nil, fmt.Errorf("moe: nccl: shared buffers of rank %d or %d exhausted", src, dst)
		}
		c.sfifo, c.rfifo = S.used, D.used
		S.used += slots
		D.used += slots
	}
	cs := uint64(w.cfg.CTSSlots) * ctsSlot
	c.sctl = S.g.AllocHost(name+"/send-ctl", sim.Bytes(ctlSlots+cs), false)
	c.rctl = D.g.AllocHost(name+"/recv-ctl", sim.Bytes(ctlSlots+cs), true)
	// An unbacked region keeps the words of backed writes (the CTS) only
	// once it holds a word.
	c.sctl.Store64(ctlHead, 0, "nccl/setup")
	if c.ctsMR, err = S.nic.RegMR(c.sctl, ctlSlots, cs, w.va(cs), nic.AccessLocalWrite|nic.AccessRemoteWrite,
		S.g.Bus().Host(), true); err != nil {
		return nil, fmt.Errorf("moe: nccl: %w", err)
	}
	if c.ctsSrcMR, err = D.nic.RegMR(c.rctl, ctlSlots, cs, w.va(cs), nic.AccessLocalWrite, D.g.Bus().Host(), true); err != nil {
		return nil, fmt.Errorf("moe: nccl: %w", err)
	}
	mk := func(rk *ncclRank, side string) (*nic.QP, *nic.CQ, error) {
		const depth = 64
		cfg := rk.nic.Config()
		ring := rk.g.AllocHost(name+"/"+side+"-cq", sim.Bytes(depth)*cfg.CQEBytes, false)
		cq, err := rk.nic.CreateCQ(depth, ring, rk.g.Bus().Host())
		if err != nil {
			return nil, nil, err
		}
		sq := rk.g.AllocHost(name+"/"+side+"-sq", sim.Bytes(depth)*cfg.WQEBytes, false)
		qp, err := rk.nic.CreateQP(nic.QPConfig{SendCQ: cq, RecvCQ: cq, SQDepth: depth, RQDepth: depth, SQRing: sq,
			SQWhere: rk.g.Bus().Host()})
		return qp, cq, err
	}
	if c.sqp, c.scq, err = mk(S, "send"); err != nil {
		return nil, fmt.Errorf("moe: nccl: %w", err)
	}
	if c.rqp, c.rcq, err = mk(D, "recv"); err != nil {
		return nil, fmt.Errorf("moe: nccl: %w", err)
	}
	for _, p := range []struct {
		qp, peer *nic.QP
		ep       *nic.NIC
	}{{c.sqp, c.rqp, D.nic}, {c.rqp, c.sqp, S.nic}} {
		for _, st := range []struct {
			to nic.QPState
			a  nic.ModifyAttr
		}{
			{nic.QPSInit, nic.ModifyAttr{}},
			{nic.QPSRTR, nic.ModifyAttr{RemoteEP: p.ep.Endpoint(), RemoteQPN: p.peer.QPN(), MTU: w.cfg.MTU, MinRNRTimer: 12}},
			{nic.QPSRTS, nic.ModifyAttr{Timeout: w.cfg.QPTimeout, RetryCnt: w.cfg.QPRetry, RNRRetry: 7}},
		} {
			if err := p.qp.Modify(st.to, st.a); err != nil {
				return nil, fmt.Errorf("moe: nccl: %w", err)
			}
		}
	}
	return c, nil
}

// buildA2A creates the phase's all-to-all connections from the byte
// matrix: per peer, ChannelsPerPeer channels capped at bytes/(step/2)
// (NCCL's minimum part size), and for NET the chunk tuning of addP2pToPlan
// (a quarter step below one step of bytes, half below eight steps).
func (w *ncclWorkload) buildA2A(bytes func(s, d int) uint64) error {
	st := w.e.st
	w.a2a = w.a2a[:0]
	for _, rk := range w.ranks {
		rk.recvs = 1 // the local copy
		rk.used = 0  // the earlier phase's buffers are free
	}
	for s := range st.ep {
		for d := range st.ep {
			b := bytes(s, d)
			if s == d || b == 0 {
				continue
			}
			chunk := w.step
			if w.viaNet(s, d) {
				switch {
				case b < w.step:
					chunk /= 4
				case b < 8*w.step:
					chunk /= 2
				}
			}
			minPart := w.step / 8
			if w.e.m.Nodes > 1 {
				minPart = w.step / 2
			}
			nch := int(min(uint64(w.cfg.ChannelsPerPeer), (b+minPart-1)/minPart))
			part := (b + uint64(nch) - 1) / uint64(nch)
			for ch := range nch {
				pb := min(part, b-uint64(ch)*part)
				c, err := w.newConn(s, d, ch, pb, chunk, false)
				if err != nil {
					return err
				}
				w.a2a = append(w.a2a, c)
				w.ranks[d].recvs++
			}
		}
	}
	return nil
}

// stepBytes is the size of step i of c.
func (c *ncclConn) stepBytes(i int) uint64 { return min(c.chunk, c.bytes-uint64(i)*c.chunk) }

// LL lines: 16 bytes carry 8 data bytes (data1, flag1, data2, flag2, four
// 32-bit words); the flag of step i is i+1.
const (
	llLine     = 16
	llLineData = 8
)

// llSlot is one LL FIFO slot of c: a chunk's lines.
func (c *ncclConn) llSlot() uint64 { return (c.chunk + llLineData - 1) / llLineData * llLine }

// llWire is the LL bytes of step i of c: its lines.
func (c *ncclConn) llWire(i int) uint64 {
	return (c.stepBytes(i) + llLineData - 1) / llLineData * llLine
}

// llFlagWord is the offset in c's LL FIFO of the 8-byte word holding the
// last line's data2 and flag2 for step i: the word both the send proxy
// and the receiving kernel test last.
func (c *ncclConn) llFlagWord(i, steps int) uint64 {
	return uint64(i%steps)*c.llSlot() + c.llWire(i) - 8
}

// llFlagSet reports whether the word v (data2 | flag2<<32) carries the
// flag of step i.
func llFlagSet(v uint64, i int) bool { return v>>32 == uint64(i+1) }

// dispatch: the counts all-gather on every rank's stream, then the host
// path (D2H, sync, splits, enqueue), then the all-to-all-v.
func (w *ncclWorkload) dispatch() {
	e, st := w.e, w.e.st
	err := w.buildA2A(func(s, d int) uint64 {
		var n uint64
		for _, x := range st.experts[d] {
			n += uint64(st.count[s][x])
		}
		return n * w.tok
	})
	if err == nil {
		blk := uint64(st.slots) * uint64(w.cfg.CountBytes)
		for r := range st.ep {
			var c *ncclConn
			c, err = w.newConn(r, (r+1)%st.ep, 0, blk*uint64(st.ep-1), blk, true)
			if err != nil {
				break
			}
			w.ring = append(w.ring, c)
		}
	}
	e.begin(&e.disp, "dispatch", w.receivers())
	if err != nil {
		e.s.Fail(err)
		return
	}
	for r := range st.ep {
		w.ranks[r].px.reset()
	}
	// The all-gather was enqueued by the host behind the router kernels:
	// its proxy ops are posted and its kernel starts with the phase.
	for r := range st.ep {
		if w.ring[r].net {
			w.ranks[r].px.add(w.ring[r], true, false)
			w.ranks[(r+1)%st.ep].px.add(w.ring[r], false, false)
		}
	}
	for r := range st.ep {
		w.launchAllGather(r)
	}
}

// launchAllGather runs the ring all-gather of the counts on rank r and then
// the rank's host thread through the host sync to the all-to-all launch.
func (w *ncclWorkload) launchAllGather(r int) {
	e, st := w.e, w.e.st
	rk := w.ranks[r]
	send, recv := w.ring[r], w.ring[(r+st.ep-1)%st.ep]
	blk := send.chunk
	rk.host = e.s.Spawn("nccl/rank"+strconv.Itoa(r)+"/host", func(p *sim.Proc) {
		p.Park("nccl host: cudaStreamSynchronize after the counts all-gather")
		w.hostPath(p, r)
	})
	sendStep, waitData := w.sendStep, w.waitData
	if send.ll {
		sendStep = w.llSendStep
	}
	if recv.ll {
		waitData = w.llWaitData
	}
	rk.g.Launch("nccl/allgather", w.cfg.OpThreads, func(t *gpu.Group) {
		sendStep(t, send, 0)
		for k := 0; k < st.ep-1; k++ {
			waitData(t, recv, k)
			t.Write(rk.out, 0, nil, sim.Bytes(blk)) // into the gathered counts
			if k < st.ep-2 {
				sendStep(t, send, k+1) // forward the block to the next rank
			}
			w.release(t, recv, k)
		}
		rk.host.Wake()
	})
}

// hostPath is rank r's host from the all-gather kernel's end: the counts'
// D2H copy and the completion semaphore cross PCIe, the sync returns, the
// host builds the splits and enqueues the all-to-all group.
func (w *ncclWorkload) hostPath(p *sim.Proc, r int) {
	e, st, cfg := w.e, w.e.st, &w.cfg
	rk := w.ranks[r]
	bus := rk.g.Bus()
	copied := bus.Write(p.Now().Add(cfg.D2HStart), rk.g.Dev(), bus.Host(), sim.Bytes(st.ep*st.slots)*cfg.CountBytes)
	sem := bus.Write(copied, rk.g.Dev(), bus.Host(), 8)
	p.SleepUntil(sem.Add(cfg.SyncWake))
	p.Sleep(cfg.SplitsCost)
	p.Sleep(cfg.HostEnqueue + cfg.HostPerOp*sim.Duration(2*st.ep))
	w.postA2A(r, true)
	p.Sleep(cfg.KernelStart)
	w.launchA2A(r, &e.disp, w.bwDisp)
}

// postA2A hands rank r's all-to-all proxy ops to its proxy thread.
func (w *ncclWorkload) postA2A(r int, wake bool) {
	px := w.ranks[r].px
	for _, c := range w.a2a {
		if !c.net {
			continue
		}
		if c.src == r {
			px.add(c, true, wake)
		}
		if c.dst == r {
			px.add(c, false, wake)
		}
	}
}

// launchA2A starts rank r's all-to-all kernel: one send and one receive
// warp group per (peer, channel), and the local copy.
func (w *ncclWorkload) launchA2A(r int, ph *phase, bwPerSel int64) {
	e, st := w.e, w.e.st
	rk := w.ranks[r]
	rk.kick = e.s.Now()
	ph.bwBytes[r] = st.selections[r] * bwPerSel
	self := w.selfBytes(r, ph)
	rk.g.Launch("nccl/a2a/self", w.cfg.OpThreads, func(t *gpu.Group) {
		if self > 0 {
			t.Write(rk.out, 0, nil, sim.Bytes(self))
		}
		e.receiverDone(r, sigPath{})
	})
	for _, c := range w.a2a {
		switch r {
		case c.src:
			rk.g.Launch("nccl/a2a/send"+strconv.Itoa(c.dst)+"."+strconv.Itoa(c.ch), w.cfg.OpThreads, func(t *gpu.Group) {
				for i := range c.nsteps {
					w.sendStep(t, c, i)
				}
			})
		case c.dst:
			rk.g.Launch("nccl/a2a/recv"+strconv.Itoa(c.src)+"."+strconv.Itoa(c.ch), w.cfg.OpThreads, func(t *gpu.Group) {
				var off uint64
				for i := range c.nsteps {
					w.waitData(t, c, i)
					n := c.stepBytes(i)
					t.Write(rk.out, off, nil, sim.Bytes(n))
					off += n
					w.release(t, c, i)
				}
				e.receiverDone(r, w.path(c))
			})
		}
	}
}

// selfBytes is what rank r keeps for itself in the running phase.
func (w *ncclWorkload) selfBytes(r int, ph *phase) uint64 {
	st := w.e.st
	var n uint64
	for _, x := range st.experts[r] {
		n += uint64(st.count[r][x])
	}
	if ph == &w.e.comb {
		return n * w.comb
	}
	return n * w.tok
}

// path is the critical-path record of c's last step, seen from its
// receiver: issue ends at the sender's all-to-all kernel start (the host
// path before it is the GPU-issue column), the proxy queue runs to the
// post of the last chunk, the remote write to its completion at the
// receiving proxy (NET) or the tail landing (P2P).
func (w *ncclWorkload) path(c *ncclConn) sigPath {
	S := w.ranks[c.src]
	p := sigPath{valid: true, issueStart: S.kick, issueEnd: S.kick, from: c.src, to: c.dst, rdma: c.net,
		seen: w.e.s.Now()}
	if c.net {
		p.proxyQueued = max(c.lastQueued, 1)
		p.proxyPosted = c.lastPosted
		p.landed = c.lastCQE
	} else {
		p.landed = c.lastLanded
	}
	return p
}

// sendStep is one step of a send: wait for the slot credit, write the
// slot's size, copy the chunk, fence and publish the tail.
func (w *ncclWorkload) sendStep(t *gpu.Group, c *ncclConn, i int) {
	n := c.stepBytes(i)
	slot := uint64(i % w.cfg.Steps)
	if c.net {
		t.WaitWord(c.sctl, ctlHead, "nccl send: proxy slot credit", func(v uint64) bool { return v > uint64(i) })
		t.Store64(c.sctl, ctlSize, n)
		t.Write(w.ranks[c.src].fifo, c.sfifo+slot*c.chunk, nil, sim.Bytes(n))
		t.Fence(gpu.ScopeSystem)
		c.lastQueued = t.Store64(c.sctl, ctlTail, uint64(i+1))
		return
	}
	steps := uint64(w.cfg.Steps)
	t.WaitWord(c.phead, 0, "nccl p2p send: receiver credit", func(v uint64) bool { return v+steps > uint64(i) })
	t.Write(c.pfifo, slot*c.chunk, nil, sim.Bytes(n))
	t.Fence(gpu.ScopeSystem)
	c.lastLanded = t.Store64(c.ptail, 0, uint64(i+1))
}

// llSendStep is one LL step of a NET send: wait for the slot credit, write
// the size and store the chunk as LL lines (each with the step's flag
// twice) into the host LL buffer over PCIe; no fence and no tail, the
// flags tell the proxy the lines are there.
func (w *ncclWorkload) llSendStep(t *gpu.Group, c *ncclConn, i int) {
	t.WaitWord(c.sctl, ctlHead, "nccl LL send: proxy slot credit", func(v uint64) bool { return v > uint64(i) })
	t.Store64(c.sctl, ctlSize, c.stepBytes(i))
	off := uint64(i%w.cfg.Steps) * c.llSlot()
	n := c.llWire(i)
	lines := c.llSrc[off : off+n]
	clear(lines)
	for k := uint64(0); k < n; k += llLine {
		binary.LittleEndian.PutUint32(lines[k+4:], uint32(i+1))
		binary.LittleEndian.PutUint32(lines[k+12:], uint32(i+1))
	}
	c.lastQueued = t.Write(c.sll, off, lines, sim.Bytes(n))
}

// llWaitData waits until the LL lines of step i of c are in the host LL
// buffer (the kernel polls the last line's flag over PCIe) and reads them.
// NCCL's threads poll every line; the lines of one WRITE land together
// here, so the last flag stands for all of them.
func (w *ncclWorkload) llWaitData(t *gpu.Group, c *ncclConn, i int) {
	t.WaitWord(c.rll, c.llFlagWord(i, w.cfg.Steps), "nccl LL recv: line flags",
		func(v uint64) bool { return llFlagSet(v, i) })
	off := uint64(i%w.cfg.Steps) * c.llSlot()
	t.Read(c.rll, off, c.llDst[:c.llWire(i)])
}

// waitData waits until step i of c is in the receive FIFO.
func (w *ncclWorkload) waitData(t *gpu.Group, c *ncclConn, i int) {
	if c.net {
		t.WaitWord(c.rctl, ctlTail, "nccl recv: proxy tail", func(v uint64) bool { return v > uint64(i) })
		return
	}
	t.WaitWord(c.ptail, 0, "nccl p2p recv: sender tail", func(v uint64) bool { return v > uint64(i) })
}

// release returns slot i of c to the sender (head).
func (w *ncclWorkload) release(t *gpu.Group, c *ncclConn, i int) {
	if c.net {
		t.Store64(c.rctl, ctlHead, uint64(i+1))
		return
	}
	t.Store64(c.phead, 0, uint64(i+1))
}

// combine: the reverse all-to-all-v, enqueued ahead by the host (its
// splits are known), so the proxies hold the ops and the kernel starts at
// the phase start.
func (w *ncclWorkload) combine() {
	e, st := w.e, w.e.st
	err := w.buildA2A(func(s, d int) uint64 {
		var n uint64
		for _, x := range st.experts[s] {
			n += uint64(st.count[d][x])
		}
		return n * w.comb
	})
	e.begin(&e.comb, "combine", w.receivers())
	if err != nil {
		e.s.Fail(err)
		return
	}
	for r := range st.ep {
		w.ranks[r].px.reset()
		w.postA2A(r, false)
	}
	for r := range st.ep {
		w.launchA2A(r, &e.comb, w.bwCmb)
	}
}

// receivers is each rank's count of receive connections, the phase's
// receivers.
func (w *ncclWorkload) receivers() []int {
	recv := make([]int, len(w.ranks))
	for r, rk := range w.ranks {
		recv[r] = rk.recvs
	}
	return recv
}

// Handle delivers a doorbell that crossed PCIe to the NIC (sim.Handler):
// arg is connection id << 1 | 1 for the receiver's QP.
func (w *ncclWorkload) Handle(s *sim.Sim, arg uint64) {
	c := w.conns[arg>>1]
	qp, q, h := c.sqp, &c.sPosts, &c.sPostsH
	if arg&1 == 1 {
		qp, q, h = c.rqp, &c.rPosts, &c.rPostsH
	}
	pp := &(*q)[*h]
	*h++
	if *h == len(*q) {
		*q, *h = (*q)[:0], 0
	}
	if err := qp.PostSend(pp.wrs[:pp.n]); err != nil {
		s.Fail(fmt.Errorf("moe: nccl: %s: %w", qp.Name(), err))
	}
}

// ncclProxy is one rank's NCCL proxy progress thread: round robin over its
// active connection ops, one action per op per pass; idle passes yield;
// with no op at all the thread blocks until the host posts one.
type ncclProxy struct {
	w       *ncclWorkload
	rk      *ncclRank
	name    string
	p       *sim.Proc
	subs    []ncclSub
	blocked bool
	parked  bool
	idleAt  sim.Time
	period  sim.Duration
	watched []watchRef
	busy    sim.Duration
}

// ncclSub is one connection op on one side.
type ncclSub struct {
	c    *ncclConn
	send bool
}

// watchRef is one word an idle proxy watches.
type watchRef struct {
	r   *mem.Region
	off uint64
}

func newNCCLProxy(w *ncclWorkload, rk *ncclRank) *ncclProxy {
	px := &ncclProxy{w: w, rk: rk, name: rk.g.Name() + "/nccl-proxy"}
	px.p = w.e.s.Spawn(px.name, px.loop)
	return px
}

// reset drops the ops of an earlier phase.
func (px *ncclProxy) reset() { px.subs = px.subs[:0] }

// add hands one op to the thread (ncclProxyPost); wake says whether a
// blocked thread pays the condition-variable wake-up.
func (px *ncclProxy) add(c *ncclConn, send, wake bool) {
	px.subs = append(px.subs, ncclSub{c, send})
	switch {
	case px.blocked:
		px.blocked = false
		at := px.p.Now()
		if wake {
			at = at.Add(px.w.cfg.ProxyWake)
		}
		px.p.WakeAt(at)
	case px.parked:
		px.resume()
	}
}

func (px *ncclProxy) work(d sim.Duration) {
	px.busy += d
	px.p.Sleep(d)
}

func (px *ncclProxy) loop(p *sim.Proc) {
	cfg := &px.w.cfg
	for {
		if len(px.subs) == 0 {
			px.blocked = true
			p.Park("nccl proxy: no op (pthread_cond_wait)")
			continue
		}
		start := p.Now()
		worked := false
		for i := 0; i < len(px.subs); i++ {
			s := px.subs[i]
			p.Sleep(cfg.OpCheck)
			if s.send && px.progressSend(s.c) || !s.send && px.progressRecv(s.c) {
				worked = true
			}
		}
		k := 0
		for _, s := range px.subs {
			if s.send && s.c.sDone < s.c.nsteps || !s.send && s.c.rDone < s.c.nsteps {
				px.subs[k] = s
				k++
			}
		}
		clear(px.subs[k:])
		px.subs = px.subs[:k]
		if !worked && len(px.subs) > 0 {
			p.Sleep(cfg.YieldCost)
			px.idle(start)
		}
	}
}

// progressSend is sendProxyProgress for one op: post a slot to the
// kernel, or send a published chunk whose CTS arrived, or retire a send.
func (px *ncclProxy) progressSend(c *ncclConn) bool {
	w, cfg := px.w, &px.w.cfg
	steps := cfg.Steps
	if c.sPosted < c.nsteps && c.sPosted < c.sDone+steps {
		c.sPosted++
		px.work(cfg.HostStore)
		c.sctl.Store64(ctlHead, uint64(c.sPosted), px.name)
		return true
	}
	if c.sTrans < c.sPosted && c.sTrans < c.sDone+steps {
		if px.dataReady(c, c.sTrans) {
			slot := uint64(c.sTrans % cfg.CTSSlots)
			if c.sctl.Load64(ctlSlots+slot*ctsSlot+ctsSlot-8) == uint64(c.sTrans+1) {
				if c.ctsSeen <= c.sTrans {
					c.ctsSeen = c.sTrans + 1
					px.work(cfg.LineMiss) // the CTS line the NIC wrote
				}
				px.isend(c, c.sTrans)
				c.sTrans++
				return true
			}
		}
	}
	if c.sDone < c.sTrans {
		px.p.Sleep(cfg.PollCQCost)
		var cqe [1]nic.CQE
		if c.scq.Poll(cqe[:]) == 1 {
			px.work(cfg.CQEReadCost)
			if cqe[0].Status != nic.StatusSuccess {
				w.fail(c, "send", cqe[0])
			}
			c.sDone++
			return true
		}
	}
	return false
}

// dataReady reports whether the kernel published step i of c, charging
// the reads: Simple waits for the tail (tail and connFifo lines, written
// over PCIe by the GPU); LL ignores the tail and checks the size and every
// line's flags in the host LL buffer.
func (px *ncclProxy) dataReady(c *ncclConn, i int) bool {
	cfg := &px.w.cfg
	if c.ll {
		if !llFlagSet(c.sll.Load64(c.llFlagWord(i, cfg.Steps)), i) {
			return false
		}
		if uint64(i+1) > c.tailSeen {
			c.tailSeen = uint64(i + 1)
			px.work(cfg.LineMiss + cfg.LLLineCheck*sim.Duration((c.llWire(i)+63)/64))
		}
		return true
	}
	tail := c.sctl.Load64(ctlTail)
	if tail <= uint64(i) {
		return false
	}
	if tail > c.tailSeen {
		c.tailSeen = tail
		px.work(cfg.LineMiss)
	}
	return true
}

// isend posts chunk i of c: WRITE + 0-byte WRITE_WITH_IMM (adaptive
// routing, above ARThreshold) or one WRITE_WITH_IMM, only the last WR
// signalled, and rings the doorbell.
func (px *ncclProxy) isend(c *ncclConn, i int) {
	w, cfg, e := px.w, &px.w.cfg, px.w.e
	S, D := w.ranks[c.src], w.ranks[c.dst]
	n := c.stepBytes(i)
	slot := uint64(i % cfg.Steps)
	var pp ncclPost
	data := nic.WR{ID: uint64(i), Op: nic.WRWrite, Local: nic.SGE{MR: S.mr, Off: c.sfifo + slot*c.chunk, Len: n},
		RemoteVA: D.mr.VA + c.rfifo + slot*c.chunk, RKey: D.mr.RKey}
	if c.ll {
		n = c.llWire(i)
		data.Local = nic.SGE{MR: c.sllMR, Off: slot * c.llSlot(), Len: n}
		data.RemoteVA, data.RKey = c.rllMR.VA+slot*c.llSlot(), c.rllMR.RKey
	}
	if cfg.AdaptiveRouting && n > uint64(cfg.ARThreshold) {
		pp.wrs[0] = data
		pp.wrs[1] = nic.WR{ID: uint64(i), Op: nic.WRWriteImm, Signaled: true, Local: nic.SGE{MR: S.mr},
			RemoteVA: data.RemoteVA, RKey: data.RKey, Imm: uint32(i)}
		pp.n = 2
		e.ph.sigs++
	} else {
		data.Op, data.Signaled, data.Imm = nic.WRWriteImm, true, uint32(i)
		pp.wrs[0] = data
		pp.n = 1
	}
	e.ph.msgs++
	e.ph.rdmaBytes += int64(n)
	px.post(c, false, pp)
	c.lastPosted = px.p.Now()
}

// post charges ibv_post_send and sends the doorbell across PCIe.
func (px *ncclProxy) post(c *ncclConn, recvSide bool, pp ncclPost) {
	cfg := &px.w.cfg
	px.work(cfg.PostSendBase + cfg.PostSendPerWR*sim.Duration(pp.n) + cfg.DoorbellIssue)
	db := sim.Bytes(8)
	if pp.n == 1 && px.rk.nic.Config().BlueFlame {
		db = 64
	}
	bus := px.rk.g.Bus()
	arrive := bus.Write(px.p.Now(), bus.Host(), px.rk.nic.Dev(), db)
	arg := uint64(c.id) << 1
	if recvSide {
		c.rPosts = append(c.rPosts, pp)
		arg |= 1
	} else {
		c.sPosts = append(c.sPosts, pp)
	}
	px.w.e.s.Schedule(arrive, px.w, arg)
}

// progressRecv is recvProxyProgress for one op: post a receive and its
// CTS, or take a completion, or publish the tail, or retire consumed
// slots (head).
func (px *ncclProxy) progressRecv(c *ncclConn) bool {
	w, cfg := px.w, &px.w.cfg
	if c.rPosted < c.nsteps && c.rPosted < c.rDone+cfg.Steps {
		i := c.rPosted
		px.work(cfg.PostRecvCost)
		if err := c.rqp.PostRecv(nic.RecvWR{ID: uint64(i)}); err != nil {
			w.e.s.Fail(fmt.Errorf("moe: nccl: %s: %w", c.rqp.Name(), err))
		}
		slot := uint64(i % cfg.CTSSlots)
		elem := ctlSlots + slot*ctsSlot
		px.work(cfg.HostStore)
		c.rctl.Store64(elem+ctsSlot-8, uint64(i+1), px.name) // idx; the addr/size/rkey words are implied
		// The element is CTSBytes long and ends with its idx word, at
		// the end of the slot, so that the word lands with it.
		lead := uint64(ctsSlot - w.cfg.CTSBytes)
		var pp ncclPost
		pp.wrs[0] = nic.WR{ID: uint64(i), Op: nic.WRWrite, Local: nic.SGE{MR: c.ctsSrcMR, Off: slot*ctsSlot + lead,
			Len: uint64(cfg.CTSBytes)}, RemoteVA: c.ctsMR.VA + slot*ctsSlot + lead, RKey: c.ctsMR.RKey}
		pp.n = 1
		w.e.ph.sigs++
		px.post(c, true, pp)
		c.rPosted++
		return true
	}
	if c.rRecv < c.rPosted {
		px.p.Sleep(cfg.PollCQCost)
		var cqe [1]nic.CQE
		if c.rcq.Poll(cqe[:]) == 1 {
			px.work(cfg.CQEReadCost)
			if cqe[0].Status != nic.StatusSuccess || cqe[0].Opcode != nic.WCRecvRDMAWithImm {
				w.fail(c, "recv", cqe[0])
			}
			c.rRecv++
			c.lastCQE = px.p.Now()
			return true
		}
	}
	if c.rTrans < c.rRecv {
		// No GPU-direct flush: Hopper needs none (ncclTopoNeedFlush).
		c.rTrans++
		px.work(cfg.HostStore)
		c.rctl.Store64(ctlTail, uint64(c.rTrans), px.name)
		return true
	}
	if c.rDone < c.rTrans {
		if head := c.rctl.Load64(ctlHead); head > uint64(c.rDone) {
			if head > c.headSeen {
				c.headSeen = head
				px.work(cfg.LineMiss) // written by the GPU over PCIe
			}
			c.rDone = int(min(head, uint64(c.rTrans)))
			return true
		}
	}
	return false
}

func (w *ncclWorkload) fail(c *ncclConn, side string, e nic.CQE) {
	w.e.s.Fail(fmt.Errorf("moe: nccl: t=%v connection %d>%d.%d %s completion: %v (%v)", w.e.s.Now(),
		c.src, c.dst, c.ch, side, e.Status, e.Opcode))
}

// idle parks the thread after a pass that found nothing, watching every
// word a later pass would find changed; it resumes at the first pass
// boundary at or after the change, as the busy loop would.
func (px *ncclProxy) idle(start sim.Time) {
	px.period = px.p.Now().Sub(start)
	px.idleAt = start
	for _, s := range px.subs {
		c := s.c
		if s.send {
			if c.ll {
				px.watch(c.sll, c.llFlagWord(c.sTrans, px.w.cfg.Steps))
			} else {
				px.watch(c.sctl, ctlTail)
			}
			px.watch(c.sctl, ctlSlots+uint64(c.sTrans%px.w.cfg.CTSSlots)*ctsSlot+ctsSlot-8)
			px.watch(c.scq.WordFor(c.scq.Landed()))
		} else {
			px.watch(c.rctl, ctlHead)
			px.watch(c.rcq.WordFor(c.rcq.Landed()))
		}
	}
	px.parked = true
	px.p.Park("nccl proxy idle: no tail, CTS, completion or head")
}

func (px *ncclProxy) watch(r *mem.Region, off uint64) {
	r.Watch(off, px)
	px.watched = append(px.watched, watchRef{r, off})
}

// WordChanged implements mem.Watcher.
func (px *ncclProxy) WordChanged(*mem.Region, uint64) {
	if px.parked {
		px.resume()
	}
}

func (px *ncclProxy) resume() {
	px.parked = false
	for _, x := range px.watched {
		x.r.Unwatch(x.off, px)
	}
	clear(px.watched)
	px.watched = px.watched[:0]
	now := px.p.Now()
	k := (now.Sub(px.idleAt) + px.period - 1) / px.period
	px.p.WakeAt(px.idleAt.Add(k * px.period))
}

// ncclNote is replay's note on what the nccl backend models.
func ncclNote(o *Options) string {
	intra := "same-node peers also through the NIC (as NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1; --nvlink: P2P transport, NVLink copies, no proxy)"
	if o.NVLink {
		intra = "same-node peers over NCCL's P2P transport (write mode: NVLink copy into the peer's FIFO, tail/head over NVLink, no proxy)"
	}
	return "nccl: Megatron all-to-all-v over NCCL, Simple protocol (no LL128, PXN, buffer registration; zero-byte peers skipped); " +
		"dispatch = counts all-gather (ring, E int64 per rank, LL protocol on NET hops: flag lines in host memory, no receive-proxy hop) + D2H copy + cudaStreamSynchronize + splits + ncclGroupEnd/kernel launch " +
		"+ all_to_all_single until every output is complete; combine = the reverse all-to-all-v, enqueued ahead (no host sync); " +
		"permute/unpermute kernels excluded; NET transport: kernel copies 128 KiB-step chunks (tuned by size) into GDR FIFO slots " +
		"(8 per connection, 2 channels per peer), one CPU proxy thread per GPU posts RDMA WRITE + 0-byte WRITE_WITH_IMM per chunk " +
		"after the receiver proxy's 48-byte CTS WRITE, no GPU flush (Hopper); " + intra + "; " +
		"breakdown: 'GPU issue' = host path until the critical sender's all-to-all kernel started (counts all-gather, host sync, launch), " +
		"'proxy queue' = FIFO copies, tail over PCIe and proxy wait until the last chunk was posted, 'remote write' = NIC, wire and the " +
		"receiving proxy's CQ poll, 'signal seen' = tail store, the kernel's PCIe poll and copy out; messages = data RDMA WRITEs, " +
		"signals = CTS and WRITE_WITH_IMM, RDMA bytes = payload of data WRITEs (counts all-gather included)"
}

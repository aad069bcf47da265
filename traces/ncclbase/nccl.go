package ncclbase

import (
	"fmt"
	"strconv"

	"github.com/ginsim/ginsim/gin/proxy"
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/nic"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
	"github.com/ginsim/ginsim/traces"
	"github.com/ginsim/ginsim/traces/workload"
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
// Protocols. The counts all-gather uses LL (AllGatherLL: NCCL's tuner picks
// LL for a few KiB per rank) on every ring hop. A point-to-point transfer
// uses LL when it is at most NCCL_P2P_LL_THRESHOLD (16 KiB) per channel and
// its connection has LL buffers (addP2pToPlan): the P2P transport always
// has them; NET connections of the p2p connection index have them only
// with NCCL_ALLOC_P2P_NET_LL_BUFFERS=1 (NetP2PLL, off by default as in
// NCCL), so by default small sends over the network stay Simple. An LL
// step is 16-byte lines of 8 data bytes and two flags (the step count);
// there is no tail and no fence: the sender waits only for the head credit
// and stores the lines, the receiver polls the flags. On NET the LL buffers
// are in pinned host memory on both sides (net.cc places only non-LL
// buffers in GPU memory): the send proxy checks the size and the flags
// instead of a tail and RDMA-writes the lines into the receiver's host LL
// buffer, and the receiving kernel polls the flags over PCIe, so no
// receive-proxy hop sits on the data path. On P2P the sender stores the
// lines over NVLink into the receiver's LL buffer in its HBM.
//
// NET transport (Simple). Remote-node peers (and, without --nvlink,
// same-node peers, as with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1) use the
// NET transport with IB verbs: the kernel's send warps wait for a FIFO slot
// credit (head, in pinned host memory, read over PCIe), write the slot's
// size, copy the chunk into the proxy's GPU-resident shared buffer (GDR),
// fence and publish the tail (host memory). The proxy thread (one CPU
// thread per GPU, round robin over its ops, one action per op per pass)
// posts slots, sees the tail, matches the receiver's clear-to-send and
// posts an RDMA WRITE of the chunk plus a 0-byte WRITE_WITH_IMM (adaptive
// routing, chunks above ARThreshold) or one WRITE_WITH_IMM carrying the
// data, and polls its CQ. The receiver's proxy posts a receive WQE and
// RDMA-writes a 48-byte CTS element (ncclIbSendFifo) per request into the
// send comm's CTS FIFO, polls its CQ for the immediate completion, does no
// GPU-direct flush (Hopper: ncclTopoNeedFlush returns FlushNone for compute
// capability 9.0) and stores the tail the receive warps poll over PCIe;
// they copy the chunk into the output and return the slot (head, host
// memory), which the proxy reads before posting the next receive.
//
// PXN (NCCL_P2P_PXN_LEVEL=2, the default; not with --rdma-only:
// NCCL_P2P_DISABLE removes the NVLink paths it needs). ncclTopoGetNetDev sends to a remote
// rank from the NIC of the local GPU with the destination's local index —
// the destination's rail — through that GPU (the intermediate) when NVLink
// joins the two GPUs and GDR reaches its NIC. The send connection's proxy
// runs in the intermediate's proxy thread: its shared send buffer is in the
// intermediate's HBM (sharedNetBuffersInit; imported by the sender over
// CUDA IPC), head, tail and connFifo in shared host memory. The sending
// kernel copies each chunk over NVLink into that buffer, fences and stores
// the tail over PCIe into host memory; the intermediate's proxy thread sees
// the tail and RDMA-writes the chunk from its own HBM through its own NIC
// to the destination's NIC, same rail, so no packet crosses a spine. The
// intermediate's SMs do nothing. Receives stay local (no PXN on receive).
// With NCCL_NET_SHARED_COMMS the sends of every local rank through one NIC
// to one remote rank on one channel share one IB connection (the P2P
// schedule puts all senders of a node on the destination on the same
// channels), and the receiver's proxy groups their receives (up to
// NCCL_NET_IB_MAX_RECVS): one receive WQE and one CTS listing every member
// per step; the intermediate's proxy posts the step only once every
// member's chunk is ready (a multi-send: one WRITE per member, then a
// WRITE_WITH_IMM of the sizes into the receiver's completion records), and
// the receiver stores all members' tails on the one completion. An LL send
// under PXN (NetP2PLL only) stores its lines into host memory that the
// intermediate's NIC reads: no NVLink on that path.
//
// P2P transport. Same-node peers use it by default (not with --rdma-only),
// in write mode (Hopper has P2P read off): Simple send warps copy the
// chunk over NVLink into the receiver's FIFO, fence and store the tail
// into the receiver's memory; the receiver copies out and stores the head
// back over NVLink. No proxy.
//
// No LL128, as in NCCL: p2p operations pick LL or Simple only
// (enqueue.cc, NCCL_P2P_LL_THRESHOLD), and the counts all-gather is small
// enough for LL. Simplified: the receiving kernel of an LL step waits for
// the last line's flag and then reads the lines (NCCL polls every line;
// one WRITE or NVLink copy lands them in order); no user-buffer
// registration (PyTorch does not register); zero-byte peers are skipped;
// the ring all-gather runs on one channel and its inter-node hops use the
// ranks' own NICs; channel c uses the GPU's NIC c mod NICs (NCCL picks
// each channel's NIC by topology distance); every p2p sub-op may have
// NCCL_STEPS slots in flight (NCCL shares NCCL_SHARED_STEPS per channel
// among the sub-ops of one proxy op); the sender takes the remote slot
// address from its own step count rather than reading it out of the CTS
// (the CTS content is the same); CTS WRITEs are unsignalled (the NIC model
// frees send-queue slots on ACK); the permute/unpermute kernels are not
// part of either phase.

// Config holds the host, transport and proxy-thread parameters of the
// NCCL baseline. Every field stands for one fact of NCCL, CUDA or the CPU.
type Config struct {
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
	// CTSSlots is the slots of a receive group's CTS FIFO modelled (NCCL
	// has NET_IB_MAX_REQUESTS; only Steps can be outstanding per group).
	CTSSlots int
	// AllGatherLL runs the counts all-gather with the LL protocol, as
	// NCCL's tuner picks for an all-gather of a few KiB per rank, on every
	// ring hop: on NET hops LL buffers in pinned host memory on both sides,
	// on P2P hops in the receiver's HBM; 16-byte lines of 8 data bytes and
	// two flags.
	AllGatherLL bool
	// P2PLLThreshold is NCCL_P2P_LL_THRESHOLD (16 KiB): a p2p transfer of
	// at most this many bytes per channel uses LL where the connection has
	// LL buffers.
	P2PLLThreshold sim.Bytes
	// LLBuffSize is buffSizes[NCCL_PROTO_LL], DEFAULT_LL_BUFFSIZE: 8 lines
	// per thread × 512 threads × NCCL_STEPS × 16 bytes = 512 KiB, so an LL
	// step of a P2P connection carries 32 KiB of data (16 KiB on NET,
	// where addP2pToPlan halves the chunk).
	LLBuffSize sim.Bytes
	// NetP2PLL is NCCL_ALLOC_P2P_NET_LL_BUFFERS (0 by default since NCCL
	// 2.14): only with it set do NET p2p connections get LL buffers, so
	// that small sends over the network may use LL.
	NetP2PLL bool
	// LLLineCheck is the send proxy's check of one more 64-byte line of
	// LL flags after the first miss: a hardware-prefetched streaming read
	// of lines the GPU wrote over PCIe, ~5 ns a line.
	LLLineCheck sim.Duration
	// PXNLevel is NCCL_P2P_PXN_LEVEL (2: use PXN as much as possible to
	// maximise aggregation; 1: when needed; 0: never). On an HGX node a
	// GPU reaches another GPU's NIC only through the CPU, so levels 1 and
	// 2 pick the same intermediate; PXN needs the NVLink paths (off with
	// --rdma-only).
	PXNLevel int
	// SharedComms is NCCL_NET_SHARED_COMMS (1): the p2p connections of all
	// local ranks through one NIC to one remote rank on one channel share
	// one IB connection, and their receives are grouped.
	SharedComms bool
	// MaxRecvs is NCCL_NET_IB_MAX_RECVS (8): the receives of one receive
	// comm grouped into one receive WQE and one CTS (a multi-recv).
	MaxRecvs int
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
	// element, completion record): a cached store, ~5 ns.
	HostStore sim.Duration
	// PostSendBase, PostSendPerWR, DoorbellIssue, PollCQCost, CQEReadCost
	// and YieldCost are the verbs and loop costs of proxy.Config.
	PostSendBase, PostSendPerWR, DoorbellIssue sim.Duration
	PollCQCost, CQEReadCost, YieldCost         sim.Duration
	// PostRecvCost is ibv_post_recv of one WQE: mlx5 builds the receive
	// WQE and updates the doorbell record, no MMIO (~PostSendBase).
	PostRecvCost sim.Duration
}

// DefaultConfig returns NCCL 2.2x defaults on an HGX H100 host, with
// the verbs costs of proxy.DefaultConfig.
func DefaultConfig() Config {
	pc := proxy.DefaultConfig()
	return Config{
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
		P2PLLThreshold:  16 << 10,
		LLBuffSize:      512 << 10,
		LLLineCheck:     5 * sim.Nanosecond,
		PXNLevel:        2,
		SharedComms:     true,
		MaxRecvs:        8,
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
func (c Config) Validate() error {
	switch {
	case c.Steps < 1 || c.CTSSlots < c.Steps:
		return fmt.Errorf("nccl Steps %d must be >= 1 and CTSSlots %d >= Steps", c.Steps, c.CTSSlots)
	case c.NetChunk < 1024 || c.NVLChunk < 1024 || c.ChannelsPerPeer < 1:
		return fmt.Errorf("nccl chunks %d/%d must be >= 1 KiB and ChannelsPerPeer %d >= 1",
			c.NetChunk, c.NVLChunk, c.ChannelsPerPeer)
	case c.OpThreads < 1 || c.OpThreads > 1024:
		return fmt.Errorf("nccl OpThreads %d out of [1, 1024]", c.OpThreads)
	case c.CTSBytes < 16 || c.CountBytes < 1:
		return fmt.Errorf("nccl CTSBytes %d must hold the idx word; CountBytes %d >= 1", c.CTSBytes, c.CountBytes)
	case c.LLLineCheck < 0:
		return fmt.Errorf("nccl LLLineCheck %v must not be negative", c.LLLineCheck)
	case c.P2PLLThreshold < 0 || c.llChunk(true) < llLineData:
		return fmt.Errorf("nccl P2PLLThreshold %d must not be negative; LLBuffSize %d must give every step a line",
			c.P2PLLThreshold, c.LLBuffSize)
	case c.PXNLevel < 0 || c.PXNLevel > 2:
		return fmt.Errorf("nccl PXNLevel %d out of [0, 2]", c.PXNLevel)
	case c.MaxRecvs < 1 || c.MaxRecvs > 64:
		return fmt.Errorf("nccl MaxRecvs %d out of [1, 64]", c.MaxRecvs)
	case c.OpCheck+c.YieldCost <= 0:
		return fmt.Errorf("nccl an idle proxy pass must take time (OpCheck+YieldCost > 0)")
	}
	return nil
}

// Host control words of a NET connection (pinned host memory, one region
// per side). Sender side: head (slots posted by the proxy: the kernel's
// credit), tail (steps the kernel published), the connFifo size word.
// Receiver side: tail (steps received, stored by the proxy), head (steps
// the kernel consumed).
const (
	ctlHead  = 0
	ctlTail  = 8
	ctlSize  = 16
	ctlBytes = 64
)

// Workload is the NCCL baseline.
type Workload struct {
	e   *workload.Env
	cfg Config

	tok, comb     uint64 // bytes per selection on the wire: dispatch (Megatron token) and combine (2H BF16)
	bwDisp, bwCmb int64  // DeepEP LL numerator per selection (as ll.go)
	step          uint64 // p2p step (chunk) size of the communicator
	ranks         []*ncclRank
	conns         []*ncclConn    // every connection ever built
	comms         []*ncclNetComm // every IB connection ever built; index = id (doorbell events)
	a2a           []*ncclConn    // the running phase's all-to-all connections
	ring          []*ncclConn    // counts all-gather: rank r -> r+1
	phComms       []*ncclNetComm // the running phase's IB connections
	shared        map[[3]int]*ncclNetComm
	nextVA        uint64
}

// ncclRank is one rank's NCCL resources.
type ncclRank struct {
	r     int
	g     *gpu.GPU
	nics  []*nic.NIC // the GPU's NICs: channel c's NET traffic uses nics[c mod len]
	px    *ncclProxy
	host  *sim.Proc
	fifo  *mem.Region // GDR shared buffers of the NET connections its proxy sends or receives
	mrs   []*nic.MR   // fifo's registration on each NIC
	used  uint64
	out   *mem.Region // receive (output) buffer
	recvs int         // receiver groups of the phase
}

// ncclConn is one (src, dst, channel) connection with one op.
type ncclConn struct {
	id       int
	src, dst int
	proxy    int // NET: the rank whose proxy thread and NIC send (src, or the PXN intermediate)
	ch       int
	net      bool
	ring     bool
	ll       bool // LL protocol: lines with flags in LL buffers, no tail
	bytes    uint64
	chunk    uint64 // data bytes per step
	nsteps   int

	// NET: the IB connection and receive group it belongs to, host
	// control words, FIFO slot bases (sender side in the proxy rank's
	// buffers, receiver side in dst's).
	comm         *ncclNetComm
	grp          *ncclRecvGroup
	sctl, rctl   *mem.Region
	sfifo, rfifo uint64
	sSlot        []int // per step mod Steps: the CTS slot its request matched
	// LL: the receiver's LL buffer (NET: host memory; P2P: its HBM) and,
	// on NET, the sender's (host memory) and their MRs; backed, so that
	// the flags and data travel. llSlots slots of one chunk's lines.
	sll, rll     *mem.Region
	sllMR, rllMR *nic.MR
	llSlots      int
	llSrc, llDst []byte // the sending kernel's lines per slot; the receiving kernel's read of one slot
	llGot        uint64 // LL data bytes the receiving kernel checked

	// P2P (NVLink): FIFO and tail in the receiver's HBM, head in the
	// sender's.
	pfifo, ptail, phead *mem.Region

	// Proxy state (NET): sender posted/transmitted/done, receiver done;
	// cached device-written values.
	sPosted, sTrans, sDone int
	rDone                  int
	tailSeen, headSeen     uint64

	// lastQueued is when the last NET step was in host memory; lastOp
	// the operation id (the step's bus) of the WR chain that carried it.
	lastQueued sim.Time
	lastOp     obs.OpID
}

// New returns the baseline on e with NCCL's default configuration.
func New(e *workload.Env) *Workload { return &Workload{e: e, cfg: DefaultConfig()} }

func (w *Workload) Setup() error {
	e, st := w.e, w.e.Step
	if err := w.cfg.Validate(); err != nil {
		return err
	}
	if st.EP < 2 {
		return fmt.Errorf("nccl: EP %d: the all-to-all needs at least 2 ranks", st.EP)
	}
	prec, err := e.Hdr.DispatchPrecision()
	if err != nil {
		return err
	}
	w.bwDisp = int64(traces.LLDispatchBytes(e.Hidden, prec))
	w.bwCmb = int64(traces.LLCombineBytes(e.Hidden))
	w.tok = uint64(w.bwDisp) - traces.LLHeaderBytes // Megatron sends the token (and FP8 scales), no DeepEP header
	w.comb = uint64(w.bwCmb)
	w.step = uint64(w.cfg.NVLChunk)
	if e.M.Nodes > 1 {
		w.step = uint64(w.cfg.NetChunk)
	}
	w.nextVA = 0x7e00_0000_0000
	w.shared = map[[3]int]*ncclNetComm{}
	var outMax uint64
	for r := range st.EP {
		outMax = max(outMax, uint64(st.Selections[r]))
	}
	for r := range st.EP {
		var in uint64
		for s := range st.EP {
			for _, x := range st.Experts[r] {
				in += uint64(st.Count[s][x])
			}
		}
		outMax = max(outMax, in)
	}
	local := uint64(e.M.Spec.GPUsPerNode)
	for r := range st.EP {
		rk := e.M.Ranks[r]
		if len(rk.NICs) == 0 {
			return fmt.Errorf("nccl: rank %d has no NIC", r)
		}
		g := rk.GPU
		nr := &ncclRank{r: r, g: g, nics: rk.NICs}
		nr.out = g.Alloc("nccl/out", sim.Bytes(max(outMax, 1)*max(w.tok, w.comb)), false)
		// Shared buffers: Steps slots for every NET connection the rank
		// may receive or send through its NIC (its own sends and, under
		// PXN, those of every local rank to its rail), plus the ring.
		size := uint64(w.cfg.Steps) * w.step * (uint64(st.EP*w.cfg.ChannelsPerPeer)*(1+local) + 2)
		nr.fifo = g.Alloc("nccl/gdr-buffers", sim.Bytes(size), false)
		va := w.va(size)
		for _, n := range nr.nics {
			mr, err := n.RegMR(nr.fifo, 0, size, va, nic.AccessLocalWrite|nic.AccessRemoteWrite, g.Dev(), true)
			if err != nil {
				return fmt.Errorf("nccl: %w", err)
			}
			nr.mrs = append(nr.mrs, mr)
		}
		nr.px = newNCCLProxy(w, nr)
		w.ranks = append(w.ranks, nr)
	}
	return nil
}

// nicFor returns the NIC that channel ch's NET traffic of the rank uses
// and its index in nics: the GPU's NICs in turn by channel, as NCCL's
// ncclTopoGetLocalNet spreads channels over the NICs closest to a GPU.
func (rk *ncclRank) nicFor(ch int) (*nic.NIC, int) {
	k := ch % len(rk.nics)
	return rk.nics[k], k
}

func (w *Workload) va(n uint64) uint64 {
	v := w.nextVA
	w.nextVA += (n + 0xffff) &^ 0xffff
	return v
}

// viaNet reports whether a -> b uses the NET transport.
func (w *Workload) viaNet(a, b int) bool {
	m := w.e.M
	return m.Ranks[a].Node != m.Ranks[b].Node || !w.e.Cfg.NVLink
}

// proxyOf is the rank whose proxy thread and NIC carry s's p2p NET sends
// to d (ncclTopoGetNetDev): under PXN the GPU of s's node with d's local
// index (d's rail), when NVLink joins it to s (the P2P transport is on)
// and it is a rank of the communicator; s itself otherwise.
func (w *Workload) proxyOf(s, d int) int {
	m := w.e.M
	S, D := m.Ranks[s], m.Ranks[d]
	if w.cfg.PXNLevel == 0 || !w.e.Cfg.NVLink || S.Node == D.Node || S.Local == D.Local {
		return s
	}
	p := S.Node*m.Spec.GPUsPerNode + D.Local
	if p >= w.e.Step.EP || m.Ranks[p].Node != S.Node {
		return s
	}
	return p
}

// newConn builds a connection carrying bytes from src to dst in steps of
// chunk data bytes; NET connections join their IB connection (finished
// by finishComms).
func (w *Workload) newConn(src, dst, ch int, bytes, chunk uint64, ring, ll bool) (*ncclConn, error) {
	c := &ncclConn{id: len(w.conns), src: src, dst: dst, proxy: src, ch: ch, net: w.viaNet(src, dst), ring: ring,
		ll: ll, bytes: bytes, chunk: chunk}
	if c.net && !ring {
		c.proxy = w.proxyOf(src, dst)
	}
	c.nsteps = int((bytes + chunk - 1) / chunk)
	w.conns = append(w.conns, c)
	name := "nccl/" + strconv.Itoa(src) + ">" + strconv.Itoa(dst) + "." + strconv.Itoa(ch)
	if ring {
		name += "/ring"
	}
	S, D, P := w.ranks[src], w.ranks[dst], w.ranks[c.proxy]
	if c.ll {
		c.llSlots = min(w.cfg.Steps, c.nsteps)
		n := uint64(c.llSlots) * c.llSlot()
		c.llSrc, c.llDst = make([]byte, n), make([]byte, c.llSlot())
	}
	if !c.net {
		c.phead = S.g.Alloc(name+"/p2p-head", 8, false)
		if c.ll {
			c.rll = D.g.Alloc(name+"/p2p-ll", sim.Bytes(len(c.llSrc)), true)
			return c, nil
		}
		c.pfifo = D.g.Alloc(name+"/p2p-fifo", sim.Bytes(uint64(w.cfg.Steps)*chunk), false)
		c.ptail = D.g.Alloc(name+"/p2p-tail", 8, false)
		return c, nil
	}
	var err error
	if c.ll {
		// LL buffers in pinned host memory: the sender's in the proxy
		// rank's (host) memory of the sender's node, registered on its NIC.
		n := uint64(len(c.llSrc))
		c.sll = S.g.AllocHost(name+"/send-ll", sim.Bytes(n), true)
		c.rll = D.g.AllocHost(name+"/recv-ll", sim.Bytes(n), true)
		pn, _ := P.nicFor(ch)
		dn, _ := D.nicFor(ch)
		if c.sllMR, err = pn.RegMR(c.sll, 0, n, w.va(n), nic.AccessLocalWrite, P.g.Bus().Host(), true); err != nil {
			return nil, fmt.Errorf("nccl: %w", err)
		}
		if c.rllMR, err = dn.RegMR(c.rll, 0, n, w.va(n), nic.AccessLocalWrite|nic.AccessRemoteWrite,
			D.g.Bus().Host(), true); err != nil {
			return nil, fmt.Errorf("nccl: %w", err)
		}
	} else {
		slots := uint64(w.cfg.Steps) * chunk
		if P.used+slots > uint64(P.fifo.Size()) || D.used+slots > uint64(D.fifo.Size()) {
			return nil, fmt.Errorf("nccl: shared buffers of rank %d or %d exhausted", c.proxy, dst)
		}
		c.sfifo, c.rfifo = P.used, D.used
		P.used += slots
		D.used += slots
	}
	c.sctl = S.g.AllocHost(name+"/send-ctl", ctlBytes, false)
	c.rctl = D.g.AllocHost(name+"/recv-ctl", ctlBytes, false)
	c.sSlot = make([]int, w.cfg.Steps)
	key := [3]int{c.proxy, dst, ch}
	m := w.shared[key]
	if m == nil || ring || !w.cfg.SharedComms {
		m = &ncclNetComm{id: len(w.comms), proxy: c.proxy, dst: dst, ch: ch}
		w.comms = append(w.comms, m)
		w.phComms = append(w.phComms, m)
		if !ring && w.cfg.SharedComms {
			w.shared[key] = m
		}
	}
	c.comm = m
	m.subs = append(m.subs, c)
	return c, nil
}

// finishComms groups the receives of the phase's new IB connections and
// builds their QPs, CQs and CTS FIFOs.
func (w *Workload) finishComms() error {
	for _, m := range w.phComms {
		if m.sqp != nil {
			continue
		}
		if err := w.finishComm(m); err != nil {
			return err
		}
	}
	return nil
}

func (w *Workload) finishComm(m *ncclNetComm) error {
	cfg := &w.cfg
	for i := 0; i < len(m.subs); i += cfg.MaxRecvs {
		g := &ncclRecvGroup{comm: m, subs: m.subs[i:min(i+cfg.MaxRecvs, len(m.subs))]}
		for _, c := range g.subs {
			c.grp = g
			g.nsteps = max(g.nsteps, c.nsteps)
		}
		g.left = len(g.subs)
		m.groups = append(m.groups, g)
	}
	n := uint64(min(cfg.MaxRecvs, len(m.subs)))
	m.slots = cfg.CTSSlots * len(m.groups)
	m.cts = make([]ncclCTS, m.slots)
	m.stride = (n*uint64(cfg.CTSBytes) + 63) &^ 63
	m.recStride = (4*n + 7) &^ 7
	m.recBase = uint64(m.slots) * m.stride
	size := m.recBase + uint64(m.slots)*m.recStride
	P, D := w.ranks[m.proxy], w.ranks[m.dst]
	name := "nccl/comm" + strconv.Itoa(m.proxy) + ">" + strconv.Itoa(m.dst) + "." + strconv.Itoa(m.ch)
	m.sh = P.g.AllocHost(name+"/send-comm", sim.Bytes(size), false)
	m.rh = D.g.AllocHost(name+"/recv-comm", sim.Bytes(size), true)
	// An unbacked region keeps the words of backed writes (the CTS) only
	// once it holds a word.
	m.sh.Store64(0, 0, "nccl/setup")
	var err error
	access := nic.AccessLocalWrite | nic.AccessRemoteWrite
	m.snic, m.sk = P.nicFor(m.ch)
	m.rnic, m.rk = D.nicFor(m.ch)
	if m.sMR, err = m.snic.RegMR(m.sh, 0, size, w.va(size), access, P.g.Bus().Host(), true); err != nil {
		return fmt.Errorf("nccl: %w", err)
	}
	if m.rMR, err = m.rnic.RegMR(m.rh, 0, size, w.va(size), access, D.g.Bus().Host(), true); err != nil {
		return fmt.Errorf("nccl: %w", err)
	}
	// Outstanding per group: Steps multi-sends of up to n data WRs and an
	// immediate, Steps receives and CTS WRITEs.
	depth := max(64, cfg.Steps*len(m.groups)*(int(n)+1))
	// Room for a post of each kind crossing PCIe, so that posting does not
	// allocate (the queues keep their storage).
	m.sq.wrs, m.sq.n = make([]nic.WR, 0, n+1), make([]int, 0, 2)
	m.rq.wrs, m.rq.n = make([]nic.WR, 0, 2), make([]int, 0, 2)
	m.inSlot = make([]*ncclConn, 0, n)
	mk := func(rk *ncclRank, n *nic.NIC, side string) (*nic.QP, *nic.CQ, error) {
		ncfg := n.Config()
		ring := rk.g.AllocHost(name+"/"+side+"-cq", sim.Bytes(depth)*ncfg.CQEBytes, false)
		cq, err := n.CreateCQ(depth, ring, rk.g.Bus().Host())
		if err != nil {
			return nil, nil, err
		}
		sq := rk.g.AllocHost(name+"/"+side+"-sq", sim.Bytes(depth)*ncfg.WQEBytes, false)
		qp, err := n.CreateQP(nic.QPConfig{SendCQ: cq, RecvCQ: cq, SQDepth: depth, RQDepth: depth, SQRing: sq,
			SQWhere: rk.g.Bus().Host()})
		return qp, cq, err
	}
	if m.sqp, m.scq, err = mk(P, m.snic, "send"); err != nil {
		return fmt.Errorf("nccl: %w", err)
	}
	if m.rqp, m.rcq, err = mk(D, m.rnic, "recv"); err != nil {
		return fmt.Errorf("nccl: %w", err)
	}
	for _, p := range []struct {
		qp, peer *nic.QP
		ep       *nic.NIC
	}{{m.sqp, m.rqp, m.rnic}, {m.rqp, m.sqp, m.snic}} {
		if err := p.qp.Connect(p.ep.Endpoint(), p.peer.QPN(),
			nic.ConnParams{MTU: cfg.MTU, MinRNRTimer: 12, Timeout: cfg.QPTimeout, RetryCnt: cfg.QPRetry, RNRRetry: 7}); err != nil {
			return fmt.Errorf("nccl: %w", err)
		}
	}
	return nil
}

// beginPhase forgets the earlier phase's connections: their buffers are
// free and their IB connections are not reused.
func (w *Workload) beginPhase() {
	w.a2a = w.a2a[:0]
	w.ring = w.ring[:0]
	w.phComms = w.phComms[:0]
	clear(w.shared)
	for _, rk := range w.ranks {
		rk.recvs = 1 // the local copy
		rk.used = 0
		rk.px.reset()
	}
}

// selections returns the selections of rank s's tokens for the experts
// homed at rank d.
func (w *Workload) selections(s, d int) uint64 {
	st := w.e.Step
	var n uint64
	for _, x := range st.Experts[d] {
		n += uint64(st.Count[s][x])
	}
	return n
}

// startPhase finishes the phase's connections (unless err already
// failed their building), begins phase ph and records NCCL's facts in it.
// On an error it fails the run and returns false.
func (w *Workload) startPhase(ph *workload.Phase, name string, err error) bool {
	if err == nil {
		err = w.finishComms()
	}
	w.e.Begin(ph, name, w.receivers())
	ph.NCCL = w.facts()
	if err != nil {
		w.e.Sim.Fail(err)
		return false
	}
	return true
}

// buildA2A creates the phase's all-to-all connections from the byte
// matrix: per peer, ChannelsPerPeer channels capped at bytes/(step/2)
// (NCCL's minimum part size); LL where p2pLL says so, with LL steps; for
// Simple over NET the chunk tuning of addP2pToPlan (a quarter step below
// one step of bytes, half below eight steps).
func (w *Workload) buildA2A(bytes func(s, d int) uint64) error {
	st := w.e.Step
	for s := range st.EP {
		for d := range st.EP {
			b := bytes(s, d)
			if s == d || b == 0 {
				continue
			}
			net := w.viaNet(s, d)
			minPart := w.step / 8
			if w.e.M.Nodes > 1 {
				minPart = w.step / 2
			}
			nch := int(min(uint64(w.cfg.ChannelsPerPeer), (b+minPart-1)/minPart))
			ll := w.cfg.p2pLL(b, nch, net)
			chunk := w.step
			switch {
			case ll:
				chunk = w.cfg.llChunk(net)
			case net && b < w.step:
				chunk /= 4
			case net && b < 8*w.step:
				chunk /= 2
			}
			part := (b + uint64(nch) - 1) / uint64(nch)
			for ch := range nch {
				pb := min(part, b-uint64(ch)*part)
				c, err := w.newConn(s, d, ch, pb, chunk, false, ll)
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

// dispatch: the counts all-gather on every rank's stream, then the host
// path (D2H, sync, splits, enqueue), then the all-to-all-v.
func (w *Workload) Dispatch() {
	e, st := w.e, w.e.Step
	w.beginPhase()
	err := w.buildA2A(func(s, d int) uint64 { return w.selections(s, d) * w.tok })
	if err == nil {
		blk := uint64(st.Slots) * uint64(w.cfg.CountBytes)
		for r := range st.EP {
			var c *ncclConn
			c, err = w.newConn(r, (r+1)%st.EP, 0, blk*uint64(st.EP-1), blk, true, w.cfg.AllGatherLL)
			if err != nil {
				break
			}
			w.ring = append(w.ring, c)
		}
	}
	if !w.startPhase(&e.Disp, "dispatch", err) {
		return
	}
	// The all-gather was enqueued by the host behind the router kernels:
	// its proxy ops are posted and its kernel starts with the phase.
	for r := range st.EP {
		if c := w.ring[r]; c.net {
			w.ranks[r].px.add(ncclSub{c: c}, false)
			w.ranks[(r+1)%st.EP].px.add(ncclSub{g: c.grp}, false)
		}
	}
	for r := range st.EP {
		w.launchAllGather(r)
	}
}

// launchAllGather runs the ring all-gather of the counts on rank r and then
// the rank's host thread through the host sync to the all-to-all launch.
func (w *Workload) launchAllGather(r int) {
	e, st := w.e, w.e.Step
	rk := w.ranks[r]
	send, recv := w.ring[r], w.ring[(r+st.EP-1)%st.EP]
	blk := send.chunk
	rk.host = e.SimOf(r).Spawn("nccl/rank"+strconv.Itoa(r)+"/host", func(p *sim.Proc) {
		p.Park("nccl host: cudaStreamSynchronize after the counts all-gather")
		w.hostPath(p, r)
	})
	rk.g.Launch("nccl/allgather", w.cfg.OpThreads, func(t *gpu.Group) {
		w.sendStep(t, send, 0)
		for k := 0; k < st.EP-1; k++ {
			w.waitData(t, recv, k)
			t.Write(rk.out, 0, nil, sim.Bytes(blk)) // into the gathered counts
			if k < st.EP-2 {
				w.sendStep(t, send, k+1) // forward the block to the next rank
			}
			w.release(t, recv, k)
		}
		rk.host.Wake()
	})
}

// hostPath is rank r's host from the all-gather kernel's end: the counts'
// D2H copy and the completion semaphore cross PCIe, the sync returns, the
// host builds the splits and enqueues the all-to-all group.
func (w *Workload) hostPath(p *sim.Proc, r int) {
	e, st, cfg := w.e, w.e.Step, &w.cfg
	rk := w.ranks[r]
	bus := rk.g.Bus()
	copied := bus.Write(p.Now().Add(cfg.D2HStart), rk.g.Dev(), bus.Host(), sim.Bytes(st.EP*st.Slots)*cfg.CountBytes)
	sem := bus.Write(copied, rk.g.Dev(), bus.Host(), 8)
	p.SleepUntil(sem.Add(cfg.SyncWake))
	p.Sleep(cfg.SplitsCost)
	p.Sleep(cfg.HostEnqueue + cfg.HostPerOp*sim.Duration(2*st.EP))
	w.postA2A(r, true)
	p.Sleep(cfg.KernelStart)
	w.launchA2A(r, &e.Disp, w.bwDisp)
}

// postA2A hands rank r's all-to-all proxy ops to the proxy threads: its
// sends to the thread of each connection's proxy rank (its own, or under
// PXN the intermediate's), its receive groups to its own.
func (w *Workload) postA2A(r int, wake bool) {
	for _, c := range w.a2a {
		if !c.net {
			continue
		}
		if c.src == r {
			w.ranks[c.proxy].px.add(ncclSub{c: c}, wake)
		}
		if c.dst == r && c.grp.subs[0] == c {
			w.ranks[r].px.add(ncclSub{g: c.grp}, wake)
		}
	}
}

// launchA2A starts rank r's all-to-all kernel: one send and one receive
// warp group per (peer, channel), and the local copy.
func (w *Workload) launchA2A(r int, ph *workload.Phase, bwPerSel int64) {
	e, st := w.e, w.e.Step
	rk := w.ranks[r]
	ph.BWBytes[r] = st.Selections[r] * bwPerSel
	self := w.selfBytes(r, ph)
	rk.g.Launch("nccl/a2a/self", w.cfg.OpThreads, func(t *gpu.Group) {
		if self > 0 {
			t.Write(rk.out, 0, nil, sim.Bytes(self))
		}
		e.ReceiverDone(r, workload.Seen{})
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
				e.ReceiverDone(r, w.path(c))
			})
		}
	}
}

// selfBytes is what rank r keeps for itself in the running phase.
func (w *Workload) selfBytes(r int, ph *workload.Phase) uint64 {
	st := w.e.Step
	var n uint64
	for _, x := range st.Experts[r] {
		n += uint64(st.Count[r][x])
	}
	if ph == &w.e.Comb {
		return n * w.comb
	}
	return n * w.tok
}

// path is what c's receiver saw last: over NET, the WR chain of its last
// step (the proxy gave it an operation id, multiSend); over P2P, no
// operation.
func (w *Workload) path(c *ncclConn) workload.Seen {
	s := workload.Seen{Valid: true, From: c.src, To: c.dst, At: w.e.SimOf(c.dst).Now()}
	if c.net {
		s.Op = c.lastOp
	}
	return s
}

// sendStep is one step of a send. Simple: wait for the slot credit, write
// the slot's size, copy the chunk (NET: into the proxy rank's GDR buffer,
// over NVLink when that is a PXN intermediate; P2P: into the receiver's
// FIFO over NVLink), fence and publish the tail.
func (w *Workload) sendStep(t *gpu.Group, c *ncclConn, i int) {
	if c.ll {
		w.llSendStep(t, c, i)
		return
	}
	n := c.stepBytes(i)
	slot := uint64(i % w.cfg.Steps)
	if c.net {
		t.WaitWord(c.sctl, ctlHead, "nccl send: proxy slot credit", func(v uint64) bool { return v > uint64(i) })
		t.Store64(c.sctl, ctlSize, n)
		t.Write(w.ranks[c.proxy].fifo, c.sfifo+slot*c.chunk, nil, sim.Bytes(n))
		t.Fence(gpu.ScopeSystem)
		c.lastQueued = t.Store64(c.sctl, ctlTail, uint64(i+1))
		return
	}
	steps := uint64(w.cfg.Steps)
	t.WaitWord(c.phead, 0, "nccl p2p send: receiver credit", func(v uint64) bool { return v+steps > uint64(i) })
	t.Write(c.pfifo, slot*c.chunk, nil, sim.Bytes(n))
	t.Fence(gpu.ScopeSystem)
	t.Store64(c.ptail, 0, uint64(i+1))
}

// waitData waits until step i of c is in the receive buffer: the tail
// (Simple) or the lines' flags (LL, which also reads and checks them).
func (w *Workload) waitData(t *gpu.Group, c *ncclConn, i int) {
	switch {
	case c.ll:
		w.llWaitData(t, c, i)
	case c.net:
		t.WaitWord(c.rctl, ctlTail, "nccl recv: proxy tail", func(v uint64) bool { return v > uint64(i) })
	default:
		t.WaitWord(c.ptail, 0, "nccl p2p recv: sender tail", func(v uint64) bool { return v > uint64(i) })
	}
}

// release returns slot i of c to the sender (head).
func (w *Workload) release(t *gpu.Group, c *ncclConn, i int) {
	if c.net {
		t.Store64(c.rctl, ctlHead, uint64(i+1))
		return
	}
	t.Store64(c.phead, 0, uint64(i+1))
}

// combine: the reverse all-to-all-v, enqueued ahead by the host (its
// splits are known), so the proxies hold the ops and the kernel starts at
// the phase start.
func (w *Workload) Combine() {
	e, st := w.e, w.e.Step
	w.beginPhase()
	err := w.buildA2A(func(s, d int) uint64 { return w.selections(d, s) * w.comb }) // the tokens back
	if !w.startPhase(&e.Comb, "combine", err) {
		return
	}
	for r := range st.EP {
		w.postA2A(r, false)
	}
	for r := range st.EP {
		w.launchA2A(r, &e.Comb, w.bwCmb)
	}
}

// facts counts the phase's connections by path.
func (w *Workload) facts() *workload.NCCLFacts {
	f := &workload.NCCLFacts{IBConns: len(w.phComms)}
	for _, c := range w.a2a {
		f.Sends++
		if c.net {
			f.NET++
			if c.proxy != c.src {
				f.PXN++
			}
		} else {
			f.P2P++
		}
		if c.ll {
			f.LL++
		}
	}
	f.RingSends = len(w.ring)
	f.RingLL = len(w.ring) > 0 && w.ring[0].ll
	return f
}

// receivers is each rank's count of receive connections, the phase's
// receivers.
func (w *Workload) receivers() []int {
	recv := make([]int, len(w.ranks))
	for r, rk := range w.ranks {
		recv[r] = rk.recvs
	}
	return recv
}

// Note is replay's note on what the nccl backend models.
func Note(nvlink bool) string {
	intra := "--rdma-only: same-node peers also through the NIC (as NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1; NCCL's default, " +
		"without --rdma-only: P2P transport, NVLink copies, no proxy)"
	pxn := "no PXN: with NCCL_P2P_DISABLE=1 NCCL has no NVLink path to another GPU's NIC, so every rank sends from its own NIC and " +
		"cross-rail sends cross the spine (NCCL's default, without --rdma-only, is PXN)"
	if nvlink {
		intra = "same-node peers over NCCL's P2P transport (write mode: NVLink copy into the peer's FIFO, tail/head over NVLink, no proxy)"
		pxn = "PXN (NCCL_P2P_PXN_LEVEL=2): a send to a remote-node rank with another local index is copied over NVLink into the " +
			"shared GDR buffer of the local GPU on the destination's rail, whose proxy thread posts the RDMA from its NIC " +
			"(traffic stays on rails, the intermediate's SMs idle); the sends of all local ranks through one NIC to one rank and " +
			"channel share one IB connection (NCCL_NET_SHARED_COMMS) and the receiver groups them (up to 8 per CTS, one " +
			"WRITE per member + one WRITE_WITH_IMM of the sizes per step, posted once every member's chunk is ready)"
	}
	return "nccl: Megatron all-to-all-v over NCCL, Simple protocol except sends <= 16 KiB per channel (NCCL_P2P_LL_THRESHOLD) " +
		"on connections with LL buffers, which use LL: P2P/NVLink ones; NET p2p connections have none unless " +
		"NCCL_ALLOC_P2P_NET_LL_BUFFERS=1, so NCCL and the model keep Simple over the network (p2p never uses LL128; no buffer " +
		"registration; zero-byte peers skipped); " +
		"dispatch = counts all-gather (ring, E int64 per rank, LL protocol on NET hops: flag lines in host memory, no receive-proxy hop; " +
		"and on NVLink hops: lines into the peer's LL buffer) + D2H copy + cudaStreamSynchronize + splits + ncclGroupEnd/kernel launch " +
		"+ all_to_all_single until every output is complete; combine = the reverse all-to-all-v, enqueued ahead (no host sync); " +
		"permute/unpermute kernels excluded; NET transport: kernel copies 128 KiB-step chunks (tuned by size) into GDR FIFO slots " +
		"(8 per connection, 2 channels per peer), one CPU proxy thread per GPU posts RDMA WRITE + 0-byte WRITE_WITH_IMM per chunk " +
		"after the receiver proxy's 48-byte CTS WRITE, no GPU flush (Hopper); " + pxn + "; " + intra + "; " +
		"breakdown: the proxy's WR chain of the critical connection's last step is followed as one operation: 'GPU issue' = host " +
		"path, kernel and FIFO copies until the step was in host memory (tail store or LL lines), 'proxy' = the proxy thread's wait " +
		"and post until its doorbell, then PCIe, NIC, wire and remote write as for GIN, 'signal seen' = the receiving proxy's CQ poll, " +
		"tail store and the kernel's PCIe poll; a P2P (NVLink) connection has no operation: all of it is 'signal seen'; messages = data RDMA WRITEs, " +
		"signals = CTS and WRITE_WITH_IMM, RDMA bytes = payload of data WRITEs (counts all-gather included)"
}

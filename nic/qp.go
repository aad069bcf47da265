package nic

import (
	"fmt"
	"math/bits"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
)

// qpnBase is the first QP number a NIC hands out (low numbers are reserved
// for special QPs on real HCAs).
const qpnBase = 0x100

// MaxInlineData is the largest inline payload a WQE carries: what fits in
// one 64-byte mlx5 WQEBB after the control (16 B), remote-address (16 B)
// and inline (4 B) segments, the GDAKI inline-data limit of 28 B.
const MaxInlineData = 28

// SGE is a scatter/gather element: Len bytes at byte offset Off into MR
// (that is, at virtual address MR.VA+Off).
type SGE struct {
	MR  *MR
	Off uint64
	Len uint64
}

// WR is a send work request.
type WR struct {
	ID       uint64
	Op       WROpcode
	Signaled bool // generate a CQE on success (errors always generate one)
	Fence    bool // wait for earlier READs and atomics to complete before executing
	Inline   bool // payload carried in the WQE (Local.Len <= QPConfig.MaxInline bytes; Local.MR unused)
	Local    SGE  // payload (WRITE/SEND) or result buffer (READ: Len bytes; atomics: 8 bytes)
	// InlineData holds an inline payload of up to 8 bytes, little-endian.
	InlineData uint64
	// InlineBytes holds an inline payload of 9 to MaxInlineData bytes
	// (Local.Len > 8); shorter ones come from InlineData.
	InlineBytes [MaxInlineData]byte
	RemoteVA    uint64
	RKey        uint32
	CompareAdd  uint64 // FetchAdd: add value; CmpSwap: compare value
	Swap        uint64 // CmpSwap: swap value
	Imm         uint32 // WRITE_IMM / SEND_IMM immediate data
	WaitCQ      *CQ    // WAIT: the CQ to watch
	WaitIndex   uint64 // WAIT: proceed once WaitCQ.Landed() >= WaitIndex
	// OpID is the GIN operation the WR carries out (0: none): the NIC
	// stamps it on the WR's packets, landings and CQE for the observer.
	OpID obs.OpID
}

// RecvWR is a receive work request.
type RecvWR struct {
	ID    uint64
	Local SGE
}

// QPConfig configures CreateQP.
type QPConfig struct {
	SendCQ, RecvCQ *CQ
	SQDepth        int
	RQDepth        int
	SQRing         *mem.Region // where the SQ ring lives (WQE fetches read it); may be nil for BlueFlame-only use
	SQWhere        pcie.DevID  // PCIe device holding SQRing
	MaxInline      int         // largest inline payload accepted (at most MaxInlineData)
	MaxRdAtomic    int         // initiator depth default (ModifyAttr.MaxRdAtomic overrides when > 0)
	// QPN, when non-zero, is a number set aside by ReserveQPNs for this
	// QP; zero takes the next free number.
	QPN uint32
}

// ModifyAttr carries the attributes of a state transition. Fields not used
// by a transition are ignored.
type ModifyAttr struct {
	RemoteEP        fabric.EndpointID // RTR: the peer's port
	RemoteQPN       uint32            // RTR: the peer's QP number
	SQPSN, RQPSN    uint32            // RTS: first send PSN; RTR: first expected receive PSN
	MTU             int               // RTR: path MTU, 256..4096, power of two
	Timeout         uint8             // RTS: local ACK timeout code (4.096us*2^Timeout; 0 infinite)
	RetryCnt        uint8             // RTS: transport retries (0..7)
	RNRRetry        uint8             // RTS: RNR retries (0..6; 7 infinite)
	MinRNRTimer     uint8             // RTR: RNR NAK timer code this responder advertises
	MaxRdAtomic     int               // RTS: outstanding READs/atomics this requester issues
	MaxDestRdAtomic int               // RTR: responder resources (cached atomic results)
	SrcPort         uint16            // RTR: UDP source port of this QP's packets (0: derived from the QPN)
}

// swqe is a send WQE in the QP's shadow of its SQ ring, with the NIC's
// per-WQE execution state.
type swqe struct {
	wr       WR
	readyAt  sim.Time // fetched and through the WQE pipeline
	firstPSN uint32
	npsn     uint32 // PSNs the message consumes (READ: response packets)
	npkt     uint32 // request packets (READ/atomic: 1)
	rcvd     uint32 // READ responses received in order
	status   Status // non-success: complete with this status when at the head
	done     bool   // READ/atomic response complete; WAIT satisfied
	out      bool   // READ/atomic: counted in the QP's rdOut (request sent, response awaited)
	result   uint64 // atomic: original value
}

// QP is an RC queue pair.
//
// Not safe for concurrent use.
type QP struct {
	n    *NIC
	idx  int
	name string
	cfg  QPConfig

	qpn      uint32
	rqpn     uint32
	remoteEP fabric.EndpointID
	mtu      uint32
	timeout  sim.Duration
	maxRd    int
	maxDest  int
	srcPort  uint16
	state    QPState
	retryCnt uint8
	rnrRetry uint8
	minRNR   uint8
	retries  uint8
	rnrLeft  uint8

	// Send queue (absolute indices).
	sq        []swqe // slots of the WQEs written and not completed (a power of two; grows with them)
	sqDepth   uint64 // SQ depth in WQEs
	pi        uint64 // WQEs written by the producer
	db        uint64 // doorbell producer index seen by the NIC
	bf        uint64 // WQEs up to here arrived with a BlueFlame doorbell
	fetchIss  uint64 // WQEs whose fetch read has been issued
	fetched   uint64 // WQEs arrived at the NIC
	fetchQ    []uint64
	fetchLast sim.Time
	pipeFree  sim.Time
	head      uint64 // oldest uncompleted WQE (== completed count)
	sw        uint64 // send cursor: WQE
	rw        uint64 // payload read cursor: WQE
	sp        uint32 // send cursor: packet (READ: response offset to request from)
	rp        uint32 // payload read cursor: packet
	assigned  uint64 // WQEs that have PSNs
	rseq      uint64 // payload reads issued (stream packets)
	sseq      uint64 // stream packets sent
	rdy       []sim.Time
	nextPSN   uint32
	ackedPSN  uint32 // last PSN acknowledged
	rdOut     int
	rnrUntil  sim.Time
	rnrPSN    uint32
	sentHigh  uint32   // highest PSN sent (retransmission accounting)
	lastLand  sim.Time // latest local DMA write (READ data, atomic results)
	actPos    int      // index in the NIC's act list while active (its last place)
	places    int      // places the QP holds in the NIC's act list (2 after a drop and re-activation within one scan)
	txUntil   sim.Time // the last trySend's answer holds until then if nothing happens to the QP (0: no promise)
	txBudget  bool     //   and only while the NIC's read budget stays spent
	pumpUntil sim.Time // pumpReads has nothing to do before then (a WQE's readyAt; MaxTime: not by the clock; 0: the read budget is spent)
	timerAt   sim.Time
	// readWait sums the time the head of the send queue waited for its
	// payload read, until readWaitTo (obs: Fetched and Sent carry it).
	readWait   sim.Duration
	readWaitTo sim.Time
	cc         *rpState // DCQCN reaction and notification point (nil until a CE mark or CNP)

	readBlocked  bool // queued on the NIC's readWait list
	rnrArmed     bool
	active       bool
	waiting      bool // registered on a WAIT's CQ
	timerArmed   bool
	timerPending bool
	impliedSet   bool   // an implied NAK (ACK beyond an unanswered READ/atomic) was acted on
	impliedPSN   uint32 //   at this acknowledged PSN

	// Responder.
	epsn     uint32
	msn      uint32
	nakSent  bool
	inWrite  bool
	inSend   bool
	rrk      uint32 // responder read cursor: packet (of entry rri)
	wmr      *MR
	woff     uint64
	wrem     uint64
	soff     uint64
	slen     uint64
	rq       []RecvWR
	rqHead   uint64
	rqTail   uint64
	resp     respQueue
	atom     []atomEntry
	atomNext uint64
	respLand sim.Time // latest responder DMA write landing (ordering of atomics)
	rxOp     obs.OpID // OpID of the request being handled (stamped on its responses)
	rdAct    int      // READs/atomics started and not yet answered (<= maxDest)
	actCur   uint64   // response queue index up to which entries were considered for starting
	rrdy     []sim.Time
	rri      uint64 // responder read cursor: entry
	rrseq    uint64
	rsseq    uint64
}

type atomEntry struct {
	psn   uint32
	valid bool
	done  bool
	orig  uint64
}

// CreateQP creates an RC QP in the RESET state.
func (n *NIC) CreateQP(c QPConfig) (*QP, error) {
	if c.SendCQ == nil || c.RecvCQ == nil || c.SendCQ.n != n || c.RecvCQ.n != n {
		return nil, fmt.Errorf("%w: CreateQP needs send and receive CQs of this NIC", ErrInvalid)
	}
	if c.SQDepth < 1 || c.RQDepth < 0 || c.MaxInline < 0 || c.MaxInline > MaxInlineData {
		return nil, fmt.Errorf("%w: CreateQP SQDepth %d RQDepth %d MaxInline %d", ErrInvalid, c.SQDepth, c.RQDepth, c.MaxInline)
	}
	if c.SQRing != nil && c.SQRing.Size() < sim.Bytes(c.SQDepth)*n.cfg.WQEBytes {
		return nil, fmt.Errorf("%w: SQ ring %v smaller than %d WQEs", ErrInvalid, c.SQRing, c.SQDepth)
	}
	if c.MaxRdAtomic <= 0 || c.MaxRdAtomic > n.cfg.MaxRdAtomic {
		c.MaxRdAtomic = n.cfg.MaxRdAtomic
	}
	idx := len(n.qps)
	if c.QPN != 0 {
		idx = int(c.QPN) - qpnBase
		if idx < 0 || idx >= len(n.qps) || n.qps[idx] != nil {
			return nil, fmt.Errorf("%w: CreateQP QPN %#x was not reserved or is taken", ErrInvalid, c.QPN)
		}
	}
	qp := &QP{n: n, idx: idx, qpn: uint32(qpnBase + idx), cfg: c}
	qp.name = fmt.Sprintf("%s/qp%d", n.name, qp.qpn)
	// The SQ's slots are allocated as WQEs are written (WriteWQE grows
	// them with the WQEs outstanding): a machine with tens of thousands
	// of QPs that each carry a handful of WQEs at a time stays small.
	qp.sqDepth = uint64(c.SQDepth)
	qp.rq = make([]RecvWR, max(c.RQDepth, 1))
	// rdy, rrdy and atom are allocated on first use (pumpReads,
	// pumpRespReads, the first atomic received): most QPs of a large
	// all-to-all machine never carry payload reads or atomics. The read
	// pumps' rings grow with the reads in flight (ringPut), the atomic
	// result cache with the atomics received (recvAtomic).
	qp.maxRd = c.MaxRdAtomic
	if idx == len(n.qps) {
		n.qps = append(n.qps, qp)
	} else {
		n.qps[idx] = qp // a reserved slot: the only nil entries
	}
	return qp, nil
}

// ReserveQPNs sets k consecutive QP numbers aside and returns the first:
// CreateQP with QPConfig.QPN set to one of them creates that QP later.
// A caller that builds QPs on first use keeps the numbers (and so the
// UDP source ports and ECMP paths) that creating them now would give.
// Packets to a reserved number whose QP does not exist yet are dropped
// like packets to any unknown QPN.
func (n *NIC) ReserveQPNs(k int) uint32 {
	first := uint32(qpnBase + len(n.qps))
	n.qps = append(n.qps, make([]*QP, k)...)
	return first
}

// QPN returns the QP number.
func (qp *QP) QPN() uint32 { return qp.qpn }

// Name returns the QP's name ("nic0/qp256"), also its memory-effect agent.
func (qp *QP) Name() string { return qp.name }

// State returns the QP state.
func (qp *QP) State() QPState { return qp.state }

// SQCompleted returns the number of send WQEs completed so far (with or
// without a CQE), for credit logic.
func (qp *QP) SQCompleted() uint64 { return qp.head }

// SQPosted returns the number of WQEs written to the send queue.
func (qp *QP) SQPosted() uint64 { return qp.pi }

// Modify moves the QP to state to. Legal transitions: RESET->INIT,
// INIT->INIT, INIT->RTR, RTR->RTS, RTS->RTS, any->ERR, any->RESET.
func (qp *QP) Modify(to QPState, a ModifyAttr) error {
	qp.unhint()
	from := qp.state
	switch {
	case to == QPSErr:
		qp.toErr()
		return nil
	case to == QPSReset:
		qp.reset()
		return nil
	case from == QPSReset && to == QPSInit, from == QPSInit && to == QPSInit:
	case from == QPSInit && to == QPSRTR:
		if a.MTU < 256 || a.MTU > 4096 || a.MTU&(a.MTU-1) != 0 {
			return fmt.Errorf("%w: MTU %d", ErrInvalid, a.MTU)
		}
		if a.RemoteQPN > roce.Max24 || a.RQPSN > roce.Max24 || int(a.RemoteEP) < 0 || int(a.RemoteEP) >= qp.n.net.Endpoints() {
			return fmt.Errorf("%w: RTR remote ep %d qpn %#x rq_psn %#x", ErrInvalid, a.RemoteEP, a.RemoteQPN, a.RQPSN)
		}
		qp.remoteEP, qp.rqpn, qp.mtu = a.RemoteEP, a.RemoteQPN, uint32(a.MTU)
		qp.epsn, qp.minRNR = a.RQPSN, a.MinRNRTimer&31
		qp.maxDest = a.MaxDestRdAtomic
		if qp.maxDest <= 0 || qp.maxDest > qp.n.cfg.MaxRdAtomic {
			qp.maxDest = qp.n.cfg.MaxRdAtomic
		}
		// The atomic result cache covers every atomic a requester may have
		// outstanding (up to the device's MaxRdAtomic), not only the
		// maxDest in progress: atomics queued beyond maxDest must still
		// be answered from it when their responses are lost.
		qp.atom = nil // up to MaxRdAtomic entries, allocated as atomics arrive
		qp.srcPort = a.SrcPort
		if qp.srcPort == 0 {
			qp.srcPort = 0xC000 | uint16((qp.qpn*0x9E3779B1)>>18)&0x3FFF
		}
	case from == QPSRTR && to == QPSRTS, from == QPSRTS && to == QPSRTS:
		if a.SQPSN > roce.Max24 || a.RetryCnt > 7 || a.RNRRetry > 7 || a.Timeout > 31 {
			return fmt.Errorf("%w: RTS sq_psn %#x retry %d rnr_retry %d timeout %d", ErrInvalid, a.SQPSN, a.RetryCnt, a.RNRRetry, a.Timeout)
		}
		if from == QPSRTR {
			qp.nextPSN, qp.ackedPSN, qp.sentHigh = a.SQPSN, psnSub(a.SQPSN, 1), psnSub(a.SQPSN, 1)
		}
		qp.timeout, qp.retryCnt, qp.rnrRetry = AckTimeout(a.Timeout), a.RetryCnt, a.RNRRetry
		qp.retries, qp.rnrLeft = a.RetryCnt, a.RNRRetry
		if a.MaxRdAtomic > 0 {
			qp.maxRd = min(a.MaxRdAtomic, qp.n.cfg.MaxRdAtomic)
		}
	default:
		return fmt.Errorf("%w: %v -> %v on %s", ErrTransit, from, to, qp.name)
	}
	qp.state = to
	if to == QPSRTS && qp.db > qp.fetchIss {
		qp.n.s.Post(qp.n.s.Now(), qp.n, evFetchIssue<<evShift|uint64(qp.idx))
	}
	return nil
}

// reset returns the QP to RESET, discarding all queue state (no CQEs).
func (qp *QP) reset() {
	c := qp.cfg
	n := qp.n
	n.freeReads(int(qp.rseq - qp.sseq))
	*qp = QP{n: n, idx: qp.idx, qpn: qp.qpn, name: qp.name, cfg: c, sq: qp.sq, sqDepth: qp.sqDepth, actPos: qp.actPos, places: qp.places, rq: qp.rq, rdy: qp.rdy, rrdy: qp.rrdy, readBlocked: qp.readBlocked,
		maxRd: c.MaxRdAtomic, active: qp.active, resp: respQueue{e: qp.resp.e[:0]}}
	clear(qp.sq)
	clear(qp.rq)
}

// WriteWQE stores wr into the next SQ slot, as the producer's stores into
// the ring would; it rings no doorbell. It returns the WQE's index. It fails
// if the SQ is full, the QP is in RESET, INIT or RTR, or wr is malformed in a
// way ibv_post_send rejects (unknown opcode, inline payload too long).
func (qp *QP) WriteWQE(wr *WR) (uint64, error) {
	switch {
	case qp.state < QPSRTS:
		return 0, fmt.Errorf("%w: post send in %v on %s", ErrQPState, qp.state, qp.name)
	case qp.pi-qp.head >= qp.sqDepth:
		return 0, fmt.Errorf("%w: %s depth %d", ErrSQFull, qp.name, qp.sqDepth)
	case wr.Op >= numWROpcodes:
		return 0, fmt.Errorf("%w: opcode %d", ErrInvalid, wr.Op)
	case wr.Inline && (!wr.Op.hasPayload() || wr.Local.Len > uint64(qp.cfg.MaxInline)):
		return 0, fmt.Errorf("%w: inline %v of %d bytes (max %d)", ErrInvalid, wr.Op, wr.Local.Len, qp.cfg.MaxInline)
	}
	i := qp.pi
	if i-qp.sqLow() >= uint64(len(qp.sq)) {
		qp.growSQ()
	}
	*qp.slot(i) = swqe{wr: *wr}
	qp.pi++
	return i, nil
}

// slot returns the SQ slot of WQE i, one of those the NIC may still read
// ([sqLow, pi)).
func (qp *QP) slot(i uint64) *swqe { return &qp.sq[i&uint64(len(qp.sq)-1)] }

// sqLow is the oldest WQE the NIC may still read: the oldest not
// completed, or the payload read cursor if it lags behind (it passes
// NOPs and WAITs the send cursor executed only on its next pump).
func (qp *QP) sqLow() uint64 { return min(qp.head, qp.rw) }

// growSQ doubles the SQ's slots (a power of two, from 4 or the SQ depth
// if smaller), moving the WQEs the NIC may still read to their new
// slots: a QP's memory follows the most WQEs it has had outstanding at
// once, not its configured depth nor the number it has written.
func (qp *QP) growSQ() {
	n := max(2*len(qp.sq), min(4, int(qp.sqDepth)))
	n = 1 << bits.Len(uint(n-1)) // a power of two
	sq := make([]swqe, n)
	for i := qp.sqLow(); i < qp.pi; i++ {
		sq[i&uint64(n-1)] = *qp.slot(i)
	}
	qp.sq = sq
}

// Doorbell tells the NIC that its doorbell MMIO carrying producer index pi
// has arrived now: the NIC fetches WQEs below pi. A pi beyond the WQEs
// written is clamped.
func (qp *QP) Doorbell(pi uint64) {
	pi = min(pi, qp.pi)
	if pi <= qp.db {
		return
	}
	qp.db = pi
	qp.n.s.Post(qp.n.s.Now().Add(qp.n.cfg.DoorbellCost), qp.n, evFetchIssue<<evShift|uint64(qp.idx))
}

// PostSend writes wrs into the SQ and rings the doorbell now (ibv_post_send;
// the caller charges the CPU and MMIO time before calling). With
// Config.BlueFlame a single WR travels with the doorbell and is not fetched.
// On error, the WRs before the failing one stay posted.
func (qp *QP) PostSend(wrs []WR) error {
	for i := range wrs {
		if _, err := qp.WriteWQE(&wrs[i]); err != nil {
			if i > 0 {
				qp.Doorbell(qp.pi)
			}
			return err
		}
	}
	if len(wrs) == 1 && qp.n.cfg.BlueFlame && qp.db == qp.pi-1 {
		qp.bf = qp.pi
	}
	qp.Doorbell(qp.pi)
	return nil
}

// PostRecv posts a receive WQE. In the error state it completes at once
// with StatusWRFlushErr.
func (qp *QP) PostRecv(wr RecvWR) error {
	if qp.state == QPSReset {
		return fmt.Errorf("%w: post recv in RESET on %s", ErrQPState, qp.name)
	}
	if qp.rqTail-qp.rqHead >= uint64(qp.cfg.RQDepth) {
		return fmt.Errorf("%w: %s depth %d", ErrRQFull, qp.name, qp.cfg.RQDepth)
	}
	if qp.state == QPSErr {
		qp.cfg.RecvCQ.push(CQE{WRID: wr.ID, Status: StatusWRFlushErr, Opcode: WCRecv, QPN: qp.qpn, WQEIndex: uint32(qp.rqTail)}, 0)
		qp.rqTail++
		qp.rqHead++
		return nil
	}
	qp.rq[qp.rqTail%uint64(len(qp.rq))] = wr
	qp.rqTail++
	return nil
}

// issueFetches issues WQE fetch reads for doorbelled WQEs, up to the
// outstanding limit.
func (qp *QP) issueFetches() {
	n := qp.n
	if qp.state == QPSErr {
		qp.flush()
		return
	}
	if qp.state != QPSRTS {
		return
	}
	now := n.s.Now()
	for len(qp.fetchQ) < n.cfg.FetchOutstanding && qp.fetchIss < qp.db {
		var arrive sim.Time
		if qp.fetchIss < qp.bf {
			// BlueFlame: the WQE came with the doorbell.
			end64 := qp.bf
			qp.fetchIss = end64
			qp.fetchQ = append(qp.fetchQ, end64)
			arrive = max(now, qp.fetchLast)
			qp.fetchLast = arrive
			n.s.Post(arrive, n, evFetchDone<<evShift|uint64(qp.idx))
			continue
		}
		k := min(uint64(n.cfg.FetchBatch), qp.db-qp.fetchIss)
		depth := qp.sqDepth
		if slot := qp.fetchIss % depth; slot+k > depth {
			k = depth - slot // a fetch does not wrap around the ring
		}
		where := qp.cfg.SQWhere
		arrive = max(n.bus.Read(now, n.dev, where, sim.Bytes(k)*n.cfg.WQEBytes), qp.fetchLast)
		qp.fetchLast = arrive
		if n.obs != nil {
			qp.emitFetch(now, arrive, k)
		}
		qp.fetchIss += k
		qp.fetchQ = append(qp.fetchQ, qp.fetchIss)
		n.s.Post(arrive, n, evFetchDone<<evShift|uint64(qp.idx))
	}
}

// emitFetch reports the fetch read of the k WQEs from qp.fetchIss, one
// obs.DMARead per WQE (each carries its own op).
func (qp *QP) emitFetch(at, arrive sim.Time, k uint64) {
	for i := qp.fetchIss; i < qp.fetchIss+k; i++ {
		qp.n.obs.Emit(obs.Event{Kind: obs.DMARead, At: at, Then: arrive, Op: qp.slot(i).wr.OpID, Who: qp.name,
			Note: "wqe", QP: qp.qpn, Index: i})
	}
}

// fetchDone takes the oldest fetch's WQEs through the WQE pipeline.
func (qp *QP) fetchDone() {
	end := qp.fetchQ[0]
	copy(qp.fetchQ, qp.fetchQ[1:])
	qp.fetchQ = qp.fetchQ[:len(qp.fetchQ)-1]
	if qp.state != QPSRTS || end <= qp.fetched {
		if qp.state == QPSErr {
			qp.flush()
		}
		return
	}
	n := qp.n
	now := n.s.Now()
	for i := qp.fetched; i < end; i++ {
		w := qp.slot(i)
		qp.pipeFree = max(qp.pipeFree, now).Add(n.cfg.WQECost)
		w.readyAt = qp.pipeFree
		qp.prepare(w)
		if n.obs != nil {
			n.obs.Emit(obs.Event{Kind: obs.Fetched, At: now, Then: w.readyAt, Op: w.wr.OpID, Who: qp.name, QP: qp.qpn, Index: i,
				Old: uint64(qp.readWait)})
		}
	}
	qp.fetched = end
	qp.issueFetches()
	n.activate(qp)
}

// prepare validates a fetched WQE (local checks) and sizes it.
func (qp *QP) prepare(w *swqe) {
	n := qp.n
	wr := &w.wr
	w.npkt, w.npsn = 1, 1
	switch op := wr.Op; {
	case op == WRWait:
		if wr.WaitCQ == nil || wr.WaitCQ.n != n {
			w.status = StatusLocQPOpErr
		}
		w.npkt, w.npsn = 0, 0
	case op == WRNop:
		w.npkt, w.npsn = 0, 0
	case op.hasPayload():
		if wr.Local.Len > 1<<31 {
			w.status = StatusLocLenErr
		} else if !wr.Inline && wr.Local.Len > 0 {
			w.status = n.local(&wr.Local, false)
		}
		w.npkt = max(1, uint32((wr.Local.Len+uint64(qp.mtu)-1)/uint64(qp.mtu)))
		w.npsn = w.npkt
	case op == WRRead:
		if wr.Local.Len > 1<<31 {
			w.status = StatusLocLenErr
		} else if wr.Local.Len > 0 {
			w.status = n.local(&wr.Local, true)
		}
		w.npsn = max(1, uint32((wr.Local.Len+uint64(qp.mtu)-1)/uint64(qp.mtu)))
	case op.isAtomic():
		if wr.Local.Len != 8 {
			w.status = StatusLocLenErr
		} else {
			w.status = n.local(&wr.Local, true)
		}
	}
}

// midMessage reports whether the QP's send cursor is inside a message.
func (qp *QP) midMessage() bool { return qp.sp != 0 }

// psn arithmetic on 24 bits.
func psnAdd(a, b uint32) uint32 { return (a + b) & roce.Max24 }
func psnSub(a, b uint32) uint32 { return (a - b) & roce.Max24 }

// psnCmp returns a-b as a signed distance in the 24-bit circular space.
func psnCmp(a, b uint32) int32 { return int32((a-b)<<8) >> 8 }

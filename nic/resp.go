package nic

import (
	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
)

type respKind uint8

const (
	respAck    respKind = iota // ACK or NAK (syndrome)
	respAtomic                 // atomic ACK with the original value
	respRead                   // RDMA READ response stream
)

// respEntry is one response the responder owes, sent in PSN order.
type respEntry struct {
	kind    respKind
	syn     uint8
	applied bool
	// A READ or atomic beyond the responder's MaxDestRdAtomic resources
	// waits (held) until an earlier one has been answered; an atomic's
	// operation is kept here until it executes.
	held  bool
	op    WROpcode
	psn   uint32
	msn   uint32
	npkt  uint32
	sent  uint32
	ready sim.Time
	orig  uint64
	r     *mem.Region
	where pcie.DevID
	off   uint64
	len   uint64
	a, b  uint64
	opid  obs.OpID // the GIN operation of the request answered
}

func (e *respEntry) rdAtomic() bool { return e.kind != respAck }

// respQueue is a FIFO of responses with absolute indices; it grows by
// doubling from 2 entries (rarely: ACKs coalesce and READs/atomics are
// bounded by the requester's depth).
type respQueue struct {
	e          []respEntry
	head, tail uint64
}

func (q *respQueue) at(i uint64) *respEntry { return &q.e[i&uint64(len(q.e)-1)] }

func (q *respQueue) push(e respEntry) uint64 {
	if q.tail-q.head == uint64(len(q.e)) {
		k := max(2, 2*len(q.e))
		ne := make([]respEntry, k)
		for i := q.head; i < q.tail; i++ {
			ne[i&uint64(k-1)] = *q.at(i)
		}
		q.e = ne
	}
	i := q.tail
	*q.at(i) = e
	q.tail++
	return i
}

// pushAck queues an ACK or NAK, coalescing a positive ACK into an unsent
// positive ACK at the tail.
func (qp *QP) pushAck(syn uint8, psn uint32) {
	q := &qp.resp
	if roce.IsAck(syn) && q.tail > q.head {
		if t := q.at(q.tail - 1); t.kind == respAck && roce.IsAck(t.syn) {
			t.psn, t.msn, t.opid = psn, qp.msn, qp.rxOp
			return
		}
	}
	q.push(respEntry{kind: respAck, syn: syn, psn: psn, msn: qp.msn, ready: qp.n.s.Now().Add(qp.n.cfg.AckDelay), opid: qp.rxOp})
	qp.n.activate(qp)
}

// handleRequest is the responder's receive path for a request packet.
func (qp *QP) handleRequest(p *fabric.Packet) {
	n := qp.n
	if qp.state != QPSRTR && qp.state != QPSRTS {
		n.net.Free(p)
		return
	}
	h := &p.Hdr
	qp.rxOp = p.Op
	d := psnCmp(h.PSN, qp.epsn)
	switch {
	case d < 0:
		qp.duplicate(p)
		return
	case d > 0 && n.cfg.Mutations&MutAckAhead != 0:
		qp.pushAck(roce.AckSyndrome(roce.CreditsUnlimited), h.PSN)
		n.net.Free(p)
		return
	case d > 0:
		if !qp.nakSent {
			qp.nakSent = true
			n.stats.SeqNAKs++
			qp.pushAck(roce.NakSyndrome(roce.NakPSNSeqError), qp.epsn)
		}
		n.net.Free(p)
		return
	}
	n.stats.InOrder++
	switch op := h.Opcode; {
	case op.IsWrite():
		qp.recvWrite(p)
	case op.IsSend():
		qp.recvSend(p)
	case op == roce.OpReadRequest:
		qp.recvRead(p)
	case op.IsAtomic():
		qp.recvAtomic(p)
	default:
		qp.respError(p, roce.NakInvalidRequest)
	}
}

// respError NAKs p with code and moves the QP to the error state.
func (qp *QP) respError(p *fabric.Packet, code uint8) {
	qp.pushAck(roce.NakSyndrome(code), p.Hdr.PSN)
	qp.n.net.Free(p)
	qp.toErr()
}

// accepted advances the expected PSN past an accepted request packet.
func (qp *QP) accepted(npsn uint32, ackReq bool) {
	qp.nakSent = false
	qp.epsn = psnAdd(qp.epsn, npsn)
	if ackReq {
		qp.pushAck(roce.AckSyndrome(roce.CreditsUnlimited), psnSub(qp.epsn, 1))
	}
}

// dmaWrite writes p's payload to r at off over PCIe; the packet is freed
// when the write lands.
func (qp *QP) dmaWrite(p *fabric.Packet, mr *MR, r *mem.Region, where pcie.DevID, off uint64, strict bool) {
	n := qp.n
	ln := uint64(p.PayloadLen)
	if ln == 0 {
		n.net.Free(p)
		return
	}
	landed := n.bus.Write(n.s.Now(), n.dev, where, sim.Bytes(ln))
	if strict {
		landed = max(landed, qp.respLand)
	}
	qp.respLand = max(qp.respLand, landed)
	n.schedLand(landed, landing{kind: landWrite, qp: qp, r: r, off: off, n: ln, pkt: p, opid: p.Op})
}

func (qp *QP) recvWrite(p *fabric.Packet) {
	n := qp.n
	h := &p.Hdr
	op := h.Opcode
	first := op.IsFirst() || op.IsOnly()
	last := op.IsLast() || op.IsOnly()
	ln := uint64(p.PayloadLen)
	if first {
		if qp.inWrite || qp.inSend {
			qp.respError(p, roce.NakInvalidRequest)
			return
		}
	} else if !qp.inWrite {
		qp.respError(p, roce.NakInvalidRequest)
		return
	}
	if op.HasImm() && qp.rqHead == qp.rqTail {
		qp.rnr(p)
		return
	}
	if first {
		mr := n.lookupRKey(h.RKey)
		off, ok := mr.remote(h.VA, uint64(h.DMALen), AccessRemoteWrite)
		if !ok {
			qp.respError(p, roce.NakRemoteAccessError)
			return
		}
		qp.wmr, qp.woff, qp.wrem, qp.slen = mr, off, uint64(h.DMALen), uint64(h.DMALen)
	}
	if ln > qp.wrem || !last && ln != uint64(qp.mtu) || last && ln != qp.wrem {
		qp.respError(p, roce.NakInvalidRequest)
		return
	}
	qp.inWrite = !last
	mr := qp.wmr
	ackReq := h.AckReq
	imm := h.Imm
	hasImm := op.HasImm()
	qp.dmaWrite(p, mr, mr.Region, mr.Where, qp.woff, mr.StrictOrder)
	qp.woff += ln
	qp.wrem -= ln
	if last {
		qp.msn = psnAdd(qp.msn, 1)
		if hasImm {
			r := &qp.rq[qp.rqHead%uint64(len(qp.rq))]
			qp.cfg.RecvCQ.push(CQE{WRID: r.ID, Status: StatusSuccess, Opcode: WCRecvRDMAWithImm, ByteLen: uint32(qp.slen),
				QPN: qp.qpn, Imm: imm, WQEIndex: uint32(qp.rqHead)}, qp.respLand.Add(n.cfg.RecvWQECost))
			qp.rqHead++
		}
	}
	qp.accepted(1, ackReq)
}

// rnr answers a request that needs a receive WQE when none is posted.
func (qp *QP) rnr(p *fabric.Packet) {
	qp.nakSent = true
	qp.pushAck(roce.RNRNakSyndrome(qp.minRNR), p.Hdr.PSN)
	qp.n.net.Free(p)
}

func (qp *QP) recvSend(p *fabric.Packet) {
	n := qp.n
	h := &p.Hdr
	op := h.Opcode
	first := op.IsFirst() || op.IsOnly()
	last := op.IsLast() || op.IsOnly()
	ln := uint64(p.PayloadLen)
	if first {
		if qp.inWrite || qp.inSend {
			qp.respError(p, roce.NakInvalidRequest)
			return
		}
		if qp.rqHead == qp.rqTail {
			qp.rnr(p)
			return
		}
		qp.soff = 0
	} else if !qp.inSend {
		qp.respError(p, roce.NakInvalidRequest)
		return
	}
	r := &qp.rq[qp.rqHead%uint64(len(qp.rq))]
	if st := n.local(&r.Local, true); st != StatusSuccess && r.Local.Len > 0 || qp.soff+ln > r.Local.Len {
		st := StatusLocLenErr
		code := roce.NakInvalidRequest
		if qp.soff+ln <= r.Local.Len {
			st, code = StatusLocProtErr, roce.NakRemoteOpError
		}
		qp.cfg.RecvCQ.push(CQE{WRID: r.ID, Status: st, Opcode: WCRecv, QPN: qp.qpn, WQEIndex: uint32(qp.rqHead)}, qp.respLand)
		qp.rqHead++
		qp.respError(p, code)
		return
	}
	qp.inSend = !last
	ackReq := h.AckReq
	imm := h.Imm
	hasImm := op.HasImm()
	if ln > 0 {
		mr := r.Local.MR
		qp.dmaWrite(p, mr, mr.Region, mr.Where, mr.Off+r.Local.Off+qp.soff, true)
	} else {
		n.net.Free(p)
	}
	qp.soff += ln
	if last {
		qp.msn = psnAdd(qp.msn, 1)
		e := CQE{WRID: r.ID, Status: StatusSuccess, Opcode: WCRecv, ByteLen: uint32(qp.soff), QPN: qp.qpn, WQEIndex: uint32(qp.rqHead)}
		if hasImm {
			e.Imm = imm
		}
		qp.cfg.RecvCQ.push(e, qp.respLand.Add(n.cfg.RecvWQECost))
		qp.rqHead++
	}
	qp.accepted(1, ackReq)
}

func (qp *QP) recvRead(p *fabric.Packet) {
	h := &p.Hdr
	if qp.inWrite || qp.inSend {
		qp.respError(p, roce.NakInvalidRequest)
		return
	}
	mr := qp.n.lookupRKey(h.RKey)
	off, ok := mr.remote(h.VA, uint64(h.DMALen), AccessRemoteRead)
	if !ok {
		qp.respError(p, roce.NakRemoteAccessError)
		return
	}
	npkt := max(1, uint32((uint64(h.DMALen)+uint64(qp.mtu)-1)/uint64(qp.mtu)))
	qp.msn = psnAdd(qp.msn, 1)
	qp.pushRdAtomic(respEntry{kind: respRead, psn: h.PSN, msn: qp.msn, npkt: npkt,
		r: mr.Region, where: mr.Where, off: off, len: uint64(h.DMALen)})
	qp.n.net.Free(p)
	qp.accepted(npkt, false)
	qp.n.activate(qp)
}

func (qp *QP) recvAtomic(p *fabric.Packet) {
	n := qp.n
	h := &p.Hdr
	if qp.inWrite || qp.inSend || h.VA%8 != 0 {
		qp.respError(p, roce.NakInvalidRequest)
		return
	}
	mr := n.lookupRKey(h.RKey)
	off, ok := mr.remote(h.VA, 8, AccessRemoteAtomic)
	if !ok {
		qp.respError(p, roce.NakRemoteAccessError)
		return
	}
	qp.msn = psnAdd(qp.msn, 1)
	// The cache's entries are allocated as atomics arrive, up to
	// MaxRdAtomic (then the oldest is replaced).
	slot := qp.atomNext % uint64(n.cfg.MaxRdAtomic)
	if k := uint64(len(qp.atom)); slot >= k {
		qp.atom = append(qp.atom, make([]atomEntry, slot+1-k)...)
	}
	qp.atom[slot] = atomEntry{psn: h.PSN, valid: true}
	qp.atomNext++
	e := respEntry{kind: respAtomic, syn: roce.AckSyndrome(roce.CreditsUnlimited), psn: h.PSN, msn: qp.msn,
		held: true, r: mr.Region, where: mr.Where, off: off, op: WRFetchAdd, a: h.SwapAdd}
	if h.Opcode == roce.OpCmpSwap {
		e.op, e.a, e.b = WRCmpSwap, h.Compare, h.SwapAdd
	}
	qp.pushRdAtomic(e)
	n.net.Free(p)
	qp.accepted(1, false)
	n.activate(qp)
}

// pushRdAtomic queues a READ or atomic response entry; it starts at once
// if the responder has a free READ/atomic resource (MaxDestRdAtomic),
// else it waits for the earlier ones to be answered.
func (qp *QP) pushRdAtomic(e respEntry) {
	e.held = true
	e.opid = qp.rxOp
	qp.resp.push(e)
	qp.startRdAtomic()
	if q := &qp.resp; q.at(q.tail - 1).held {
		qp.n.stats.RdAtomicQueued++
	}
}

// startRdAtomic starts queued READs and atomics, in order, while fewer
// than MaxDestRdAtomic are in progress: a READ's payload reads may then be
// issued; an atomic executes at the target (after this QP's earlier
// writes landed, RC order).
func (qp *QP) startRdAtomic() {
	n := qp.n
	q := &qp.resp
	if qp.actCur < q.head {
		qp.actCur = q.head
	}
	for ; qp.actCur < q.tail; qp.actCur++ {
		e := q.at(qp.actCur)
		if !e.rdAtomic() {
			continue
		}
		if qp.rdAct >= max(qp.maxDest, 1) {
			return
		}
		qp.rdAct++
		if !e.held {
			continue
		}
		e.held = false
		now := n.s.Now()
		if e.kind == respRead {
			e.ready = now
			continue
		}
		if e.applied {
			e.ready = now.Add(n.cfg.AckDelay) // duplicate: answered from the atomic cache
			continue
		}
		applied, done := n.bus.Atomic(now, n.dev, e.where)
		if qp.respLand > applied {
			// RC order: the atomic executes after this QP's earlier writes landed.
			done = done.Add(qp.respLand.Sub(applied))
			applied = qp.respLand
		}
		qp.respLand = applied
		e.ready = done
		n.schedLand(applied, landing{kind: landAtomic, qp: qp, r: e.r, off: e.off, entry: qp.actCur, psn: e.psn, op: e.op, a: e.a, b: e.b, opid: e.opid})
	}
}

// atomicApplied records the original value of an executed atomic.
func (qp *QP) atomicApplied(entry uint64, psn uint32, old uint64) {
	if entry >= qp.resp.head && entry < qp.resp.tail {
		if e := qp.resp.at(entry); e.kind == respAtomic && e.psn == psn {
			e.orig, e.applied = old, true
		}
	}
	if a := qp.atomFind(psn); a != nil {
		a.orig, a.done = old, true
	}
}

// duplicate answers a request whose PSN was already accepted.
func (qp *QP) duplicate(p *fabric.Packet) {
	n := qp.n
	h := &p.Hdr
	switch op := h.Opcode; {
	case op == roce.OpReadRequest:
		// Re-execute the READ from the requested PSN.
		mr := n.lookupRKey(h.RKey)
		if off, ok := mr.remote(h.VA, uint64(h.DMALen), AccessRemoteRead); ok {
			npkt := max(1, uint32((uint64(h.DMALen)+uint64(qp.mtu)-1)/uint64(qp.mtu)))
			qp.pushRdAtomic(respEntry{kind: respRead, psn: h.PSN, msn: qp.msn, npkt: npkt,
				r: mr.Region, where: mr.Where, off: off, len: uint64(h.DMALen)})
			n.activate(qp)
		}
	case op.IsAtomic():
		if n.cfg.Mutations&MutDupAtomic != 0 {
			mr := n.lookupRKey(h.RKey)
			if off, ok := mr.remote(h.VA, 8, AccessRemoteAtomic); ok && h.Opcode != roce.OpCmpSwap {
				mr.Region.FetchAdd64(off, h.SwapAdd, "mutant")
			}
		}
		if a := qp.atomFind(h.PSN); a != nil && a.done {
			qp.pushRdAtomic(respEntry{kind: respAtomic, syn: roce.AckSyndrome(roce.CreditsUnlimited), psn: h.PSN,
				msn: qp.msn, orig: a.orig, applied: true})
			n.activate(qp)
		}
	default:
		qp.pushAck(roce.AckSyndrome(roce.CreditsUnlimited), psnSub(qp.epsn, 1))
	}
	n.stats.DupRequests++
	n.net.Free(p)
}

// trySendResp sends the next response packet if ready.
func (qp *QP) trySendResp(now sim.Time) (bool, sim.Time) {
	n := qp.n
	q := &qp.resp
	if q.head == q.tail {
		return false, sim.MaxTime
	}
	e := q.at(q.head)
	if e.held {
		return false, sim.MaxTime // waits for a READ/atomic resource
	}
	var p *fabric.Packet
	switch e.kind {
	case respAck, respAtomic:
		if t := e.ready.Add(n.cfg.TxLatency); t > now {
			qp.txUntil = t
			return false, t
		}
		if e.kind == respAck {
			p = qp.newPacket(roce.OpAck, e.psn, 0, false)
		} else {
			p = qp.newPacket(roce.OpAtomicAck, e.psn, 0, false)
			p.Hdr.OrigData = e.orig
		}
		p.Hdr.Syndrome, p.Hdr.MSN = e.syn, e.msn
		p.Op = e.opid
		qp.popResp()
	case respRead:
		qp.txUntil = 0 // pumpRespReads issues reads as time passes
		qp.pumpRespReads(now)
		if qp.rrseq == qp.rsseq {
			return false, sim.MaxTime
		}
		if t := qp.rrdy[qp.rsseq%uint64(len(qp.rrdy))].Add(n.cfg.TxLatency); t > now {
			return false, t
		}
		if qp.rateLimited() && qp.cc.next > now {
			return false, qp.cc.next // DCQCN rate limiter
		}
		qp.rsseq++
		k := e.sent
		off := uint64(k) * uint64(qp.mtu)
		ln := min(uint64(qp.mtu), e.len-min(off, e.len))
		var code roce.Opcode
		switch {
		case e.npkt == 1:
			code = roce.OpReadRespOnly
		case k == 0:
			code = roce.OpReadRespFirst
		case k == e.npkt-1:
			code = roce.OpReadRespLast
		default:
			code = roce.OpReadRespMiddle
		}
		p = qp.newPacket(code, psnAdd(e.psn, k), uint32(ln), ln > 0 && e.r.Backed())
		p.Op = e.opid
		if p.Payload != nil {
			e.r.Read(e.off+off, p.Payload)
		}
		if code.HasAETH() {
			p.Hdr.Syndrome, p.Hdr.MSN = roce.AckSyndrome(roce.CreditsUnlimited), e.msn
		}
		e.sent++
		if e.sent == e.npkt {
			qp.popResp()
		}
		if qp.rateLimited() {
			qp.paced(now, p.WireLen(n.net.IPv6()))
		}
	}
	n.send(p, 0)
	return true, 0
}

func (qp *QP) popResp() {
	q := &qp.resp
	e := q.at(q.head)
	rd := e.rdAtomic()
	*e = respEntry{}
	q.head++
	if qp.rri < q.head {
		qp.rri, qp.rrk = q.head, 0
	}
	if rd {
		qp.rdAct--
		qp.startRdAtomic()
	}
}

// pumpRespReads issues the DMA reads of READ response payloads ahead of
// the transmitter.
func (qp *QP) pumpRespReads(now sim.Time) {
	n := qp.n
	q := &qp.resp
	P := uint64(n.cfg.PayloadPrefetch)
	if qp.rri < q.head {
		qp.rri, qp.rrk = q.head, 0
	}
	for qp.rrseq-qp.rsseq < P && qp.rri < q.tail {
		e := q.at(qp.rri)
		if e.held {
			return // READs beyond MaxDestRdAtomic wait
		}
		if e.kind != respRead {
			qp.rri++
			qp.rrk = 0
			continue
		}
		off := uint64(qp.rrk) * uint64(qp.mtu)
		ln := min(uint64(qp.mtu), e.len-min(off, e.len))
		t := now
		if ln > 0 {
			t = n.bus.Read(now, n.dev, e.where, sim.Bytes(ln))
		}
		qp.rrdy = ringPut(qp.rrdy, qp.rsseq, qp.rrseq, t, P)
		qp.rrseq++
		qp.rrk++
		if qp.rrk == e.npkt {
			qp.rri++
			qp.rrk = 0
		}
	}
}

// atomFind returns the cached result of the atomic with the given PSN (the
// responder keeps the last MaxDestRdAtomic), or nil.
func (qp *QP) atomFind(psn uint32) *atomEntry {
	for i := range qp.atom {
		if a := &qp.atom[i]; a.valid && a.psn == psn {
			return a
		}
	}
	return nil
}

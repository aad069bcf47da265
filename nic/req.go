package nic

import (
	"encoding/binary"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// trySend sends one packet of qp if one is ready now. Otherwise it returns
// the time one will be ready, or sim.MaxTime if that takes another event.
//
// It also sets qp.txUntil: until then, and as long as no event touches the
// QP, calling trySend again would give the same answer and change nothing
// (0 when the answer came through a path with side effects, such as
// issuing payload reads, or under a DCQCN rate limiter). With qp.txBudget
// set, the answer holds only while the NIC's read budget stays spent.
func (qp *QP) trySend(now sim.Time) (bool, sim.Time) {
	if qp.rateLimited() && !qp.n.ccEager {
		qp.ccCatchUp(now)
	}
	qp.txUntil, qp.txBudget = sim.MaxTime, false
	if qp.state == QPSReset {
		return false, sim.MaxTime
	}
	ok, w1 := qp.trySendResp(now)
	if ok {
		return true, 0
	}
	u := qp.txUntil
	qp.txUntil = sim.MaxTime
	ok, w2 := qp.trySendReq(now)
	if ok {
		return true, 0
	}
	qp.txUntil = min(u, qp.txUntil)
	if qp.rateLimited() {
		qp.txUntil = 0
	}
	return false, min(w1, w2)
}

// newPacket returns a packet of this QP's connection.
func (qp *QP) newPacket(op roce.Opcode, psn uint32, ln uint32, data bool) *fabric.Packet {
	n := qp.n
	p := n.net.NewPacketAt(n.ep, ln, data)
	p.Src, p.Dst, p.SrcPort = n.ep, qp.remoteEP, qp.srcPort
	if n.cfg.ECT || n.cfg.DCQCN {
		p.ECN = 2
	}
	p.Hdr.Opcode = op
	p.Hdr.PKey = roce.DefaultPKey
	p.Hdr.DestQP = qp.rqpn
	p.Hdr.PSN = psn
	p.Hdr.PadCount = uint8(-ln & 3)
	return p
}

// trySendReq sends the next request packet of the send queue if ready.
func (qp *QP) trySendReq(now sim.Time) (bool, sim.Time) {
	n := qp.n
	if qp.state != QPSRTS || qp.rnrArmed {
		return false, sim.MaxTime
	}
	var w *swqe
	for {
		if qp.sw >= qp.fetched {
			return false, sim.MaxTime
		}
		w = qp.slot(qp.sw)
		if t := w.readyAt.Add(n.cfg.TxLatency); t > now {
			qp.txUntil = t
			return false, t
		}
		if w.status != StatusSuccess {
			qp.progress()
			qp.txUntil = 0
			return false, sim.MaxTime
		}
		if qp.sw == qp.assigned {
			w.firstPSN = qp.nextPSN
			qp.nextPSN = psnAdd(qp.nextPSN, w.npsn)
			qp.assigned++
		}
		switch w.wr.Op {
		case WRNop:
			qp.sw++
			qp.progress()
			if qp.state != QPSRTS {
				return false, sim.MaxTime
			}
			continue
		case WRWait:
			if w.wr.WaitCQ.landed < w.wr.WaitIndex {
				if !qp.waiting {
					qp.waiting = true
					w.wr.WaitCQ.waiters = append(w.wr.WaitCQ.waiters, qp)
				}
				return false, sim.MaxTime
			}
			w.done = true
			qp.sw++
			qp.progress()
			if qp.state != QPSRTS {
				return false, sim.MaxTime
			}
			continue
		}
		if qp.sp == 0 && (w.wr.Fence && qp.rdOut > 0 || w.wr.Op.isRdAtomic() && qp.rdOut >= qp.maxRd) {
			return false, sim.MaxTime
		}
		break
	}
	qp.pumpReads(now)
	if qp.rseq == qp.sseq {
		if qp.pumpUntil == 0 && qp.readBlocked {
			// Nothing read, and the read budget is spent: the same answer
			// while it stays spent (see below). Alone it drops the QP
			// from the scheduler; it matters when a response waits too.
			qp.txBudget = true
		} else {
			qp.txUntil = qp.pumpUntil
		}
		return false, sim.MaxTime
	}
	if rdy := qp.rdy[qp.sseq%uint64(len(qp.rdy))]; rdy.Add(n.cfg.TxLatency) > now {
		t := rdy.Add(n.cfg.TxLatency)
		if rdy > now {
			qp.waitRead(now, rdy)
		}
		switch {
		case qp.pumpUntil == 0 && qp.readBlocked:
			// pumpReads found the read budget spent and the QP waits for
			// it: called again while the budget stays spent, it would stop
			// at the same place (its WQEs and the QP are unchanged until an
			// event or the QP's own send) and change nothing.
			qp.txUntil, qp.txBudget = t, true
		default:
			qp.txUntil = min(t, qp.pumpUntil) // later, pumpReads would issue more reads
		}
		return false, t
	}
	if qp.rateLimited() && qp.cc.next > now {
		return false, qp.cc.next // DCQCN rate limiter
	}
	qp.sseq++
	n.freeReads(1)
	wr := &w.wr
	var p *fabric.Packet
	switch op := wr.Op; {
	case op.hasPayload():
		L := wr.Local.Len
		off := uint64(qp.sp) * uint64(qp.mtu)
		ln := min(uint64(qp.mtu), L-off)
		first, last := qp.sp == 0, qp.sp == w.npkt-1
		var code roce.Opcode
		write := op == WRWrite || op == WRWriteImm
		imm := op == WRWriteImm || op == WRSendImm
		switch {
		case first && last && write && imm:
			code = roce.OpWriteOnlyImm
		case first && last && write:
			code = roce.OpWriteOnly
		case first && last && imm:
			code = roce.OpSendOnlyImm
		case first && last:
			code = roce.OpSendOnly
		case first && write:
			code = roce.OpWriteFirst
		case first:
			code = roce.OpSendFirst
		case last && write && imm:
			code = roce.OpWriteLastImm
		case last && write:
			code = roce.OpWriteLast
		case last && imm:
			code = roce.OpSendLastImm
		case last:
			code = roce.OpSendLast
		case write:
			code = roce.OpWriteMiddle
		default:
			code = roce.OpSendMiddle
		}
		data := wr.Inline || ln > 0 && wr.Local.MR.Region.Backed()
		p = qp.newPacket(code, psnAdd(w.firstPSN, qp.sp), uint32(ln), data)
		if p.Payload != nil {
			if wr.Inline && L <= 8 {
				var b [8]byte
				binary.LittleEndian.PutUint64(b[:], wr.InlineData)
				copy(p.Payload, b[:ln])
			} else if wr.Inline {
				copy(p.Payload, wr.InlineBytes[:ln])
			} else {
				mr := wr.Local.MR
				mr.Region.Read(mr.Off+wr.Local.Off+off, p.Payload)
			}
		}
		if code.HasRETH() {
			p.Hdr.VA, p.Hdr.RKey, p.Hdr.DMALen = wr.RemoteVA, wr.RKey, uint32(L)
		}
		if imm {
			p.Hdr.Imm = wr.Imm
		}
		k := n.cfg.AckReqEvery
		p.Hdr.AckReq = last || k > 0 && (qp.sp+1)%uint32(k) == 0
		p.Hdr.SE = last && !write
		qp.sp++
		if qp.sp == w.npkt {
			qp.sw++
			qp.sp = 0
		}
	case op == WRRead:
		off := uint64(qp.sp) * uint64(qp.mtu)
		p = qp.newPacket(roce.OpReadRequest, psnAdd(w.firstPSN, qp.sp), 0, false)
		p.Hdr.VA, p.Hdr.RKey, p.Hdr.DMALen = wr.RemoteVA+off, wr.RKey, uint32(wr.Local.Len-min(off, wr.Local.Len))
		qp.countOut(w)
		qp.sw++
		qp.sp = 0
	default: // atomics
		code := roce.OpFetchAdd
		if op == WRCmpSwap {
			code = roce.OpCmpSwap
		}
		p = qp.newPacket(code, w.firstPSN, 0, false)
		p.Hdr.VA, p.Hdr.RKey = wr.RemoteVA, wr.RKey
		if op == WRCmpSwap {
			p.Hdr.Compare, p.Hdr.SwapAdd = wr.CompareAdd, wr.Swap
		} else {
			p.Hdr.SwapAdd = wr.CompareAdd
		}
		qp.countOut(w)
		qp.sw++
		qp.sp = 0
	}
	p.Tag = uint64(qp.qpn)<<40 | (qp.sw-1)&(1<<40-1)
	p.Op = wr.OpID
	last := p.Hdr.PSN
	if w.wr.Op == WRRead {
		last = psnAdd(w.firstPSN, w.npsn-1)
	}
	if psnCmp(p.Hdr.PSN, qp.sentHigh) <= 0 {
		n.stats.Retransmits++
	}
	if psnCmp(last, qp.sentHigh) > 0 {
		qp.sentHigh = last
	}
	if qp.rateLimited() {
		qp.paced(now, p.WireLen(n.net.IPv6()))
	}
	n.send(p, qp.readWait)
	qp.armTimer()
	return true, 0
}

// dropReads discards the payload read ahead of the send cursor (a rewind
// or flush), returning it to the NIC's budget.
func (qp *QP) dropReads() {
	qp.n.freeReads(int(qp.rseq - qp.sseq))
	qp.sseq = qp.rseq
}

// freeReads returns k reads to the NIC's budget and wakes as many QPs
// that waited for it, in the order they found it spent.
func (n *NIC) freeReads(k int) {
	n.readAhead -= k
	for k > 0 && n.readWaitH < len(n.readWait) {
		qp := n.readWait[n.readWaitH]
		n.readWait[n.readWaitH] = nil
		n.readWaitH++
		if !qp.readBlocked {
			// A stale entry: the QP found the budget since, on another
			// wake-up. Waking it would spend this read on a QP that
			// may not need it and strand the waiters behind it.
			continue
		}
		qp.readBlocked = false
		n.activate(qp)
		k--
	}
	if n.readWaitH == len(n.readWait) {
		n.readWait, n.readWaitH = n.readWait[:0], 0
	}
}

// waitRead notes that the packet at the head of the send queue waits
// from now until rdy for its payload read, issued and crossing PCIe:
// readWait sums such waits, each instant once. (A wait for a slot of the
// NIC's read budget is not one: the budget is held as much by reads done
// and buffered behind the port as by reads in flight.)
func (qp *QP) waitRead(now, rdy sim.Time) {
	from := max(now, qp.readWaitTo)
	if rdy > from {
		qp.readWait += rdy.Sub(from)
		qp.readWaitTo = rdy
	}
}

// pumpReads issues payload DMA reads ahead of the send cursor, one per
// packet, up to PayloadPrefetch in flight or buffered.
func (qp *QP) pumpReads(now sim.Time) {
	n := qp.n
	P := uint64(n.cfg.PayloadPrefetch)
	qp.pumpUntil = sim.MaxTime
	for qp.rseq-qp.sseq < P && qp.rw < qp.fetched {
		if n.readAhead >= n.cfg.ReadAhead {
			// The NIC's read budget is spent: the next packet another QP
			// transmits frees a read and wakes a waiter.
			qp.pumpUntil = 0
			if !qp.readBlocked {
				qp.readBlocked = true
				n.readWait = append(n.readWait, qp)
			}
			return
		}
		w := qp.slot(qp.rw)
		if w.readyAt > now {
			qp.pumpUntil = w.readyAt
			return
		}
		if w.status != StatusSuccess {
			return
		}
		if w.npkt == 0 {
			if w.wr.Op == WRWait && qp.rw >= qp.sw {
				return // do not read payload past an unpassed WAIT
			}
			qp.rw++
			qp.rp = 0
			continue
		}
		if w.wr.Fence && qp.rw > qp.sw {
			return // a fenced WQE's payload may depend on earlier READs
		}
		t := now
		wr := &w.wr
		if wr.Op.hasPayload() && !wr.Inline && wr.Local.Len > 0 {
			off := uint64(qp.rp) * uint64(qp.mtu)
			ln := min(uint64(qp.mtu), wr.Local.Len-off)
			t = n.bus.Read(now, n.dev, wr.Local.MR.Where, sim.Bytes(ln))
			if n.obs != nil {
				n.obs.Emit(obs.Event{Kind: obs.DMARead, At: now, Then: t, Op: wr.OpID, Who: qp.name, Note: "payload",
					QP: qp.qpn, Index: qp.rw, PSN: qp.rp, Bytes: ln})
			}
		}
		qp.rdy = ringPut(qp.rdy, qp.sseq, qp.rseq, t, P)
		qp.rseq++
		n.readAhead++
		qp.readBlocked = false // its readWait entry, if any, is stale
		qp.rp++
		if qp.rp >= w.npkt {
			qp.rw++
			qp.rp = 0
		}
	}
}

// ringPut stores t for sequence number seq in r, a ring of the times of
// sequence numbers [lo, seq) indexed modulo its length, and returns the
// ring. A full ring doubles, from 4 entries up to most entries (seq-lo <
// most): a QP's read pumps take memory by the reads it has had in flight
// at once, not by the configured depth.
func ringPut(r []sim.Time, lo, seq uint64, t sim.Time, most uint64) []sim.Time {
	if seq-lo >= uint64(len(r)) {
		nr := make([]sim.Time, min(max(4, 2*uint64(len(r))), most))
		for i := lo; i < seq; i++ {
			nr[i%uint64(len(nr))] = r[i%uint64(len(r))]
		}
		r = nr
	}
	r[seq%uint64(len(r))] = t
	return r
}

// handleResponse processes an ACK, NAK, atomic ACK or READ response.
func (qp *QP) handleResponse(p *fabric.Packet) {
	n := qp.n
	if qp.state != QPSRTS {
		n.net.Free(p)
		return
	}
	h := &p.Hdr
	psn := h.PSN
	switch op := h.Opcode; {
	case op == roce.OpAck:
		n.net.Free(p)
		syn := h.Syndrome
		switch {
		case roce.IsAck(syn):
			qp.ackUpTo(psn)
		case roce.IsRNRNak(syn):
			qp.ackUpTo(psnSub(psn, 1))
			qp.rnrNak(psn, roce.RNRTimer(syn))
		case roce.NakCode(syn) == roce.NakPSNSeqError:
			qp.ackUpTo(psnSub(psn, 1))
			qp.seqNak(psn)
		default:
			qp.ackUpTo(psnSub(psn, 1))
			st := StatusRemOpErr
			switch roce.NakCode(syn) {
			case roce.NakRemoteAccessError:
				st = StatusRemAccessErr
			case roce.NakInvalidRequest:
				st = StatusRemInvReqErr
			}
			qp.fail(psn, st)
		}
	case op == roce.OpAtomicAck:
		orig := h.OrigData
		n.net.Free(p)
		w := qp.find(psn)
		if w == nil || !w.wr.Op.isAtomic() || w.done || w.firstPSN != psn {
			return // duplicate
		}
		w.done, w.result = true, orig
		qp.uncountOut(w)
		g := &w.wr.Local
		landed := max(n.bus.Write(n.s.Now(), n.dev, g.MR.Where, 8), qp.lastLand)
		qp.lastLand = landed
		n.schedLand(landed, landing{kind: landStore, qp: qp, r: g.MR.Region, off: g.MR.Off + g.Off, a: orig, opid: w.wr.OpID})
		qp.ackUpTo(psn)
		qp.progress()
		n.activate(qp)
	case op.IsReadResponse():
		w := qp.find(psn)
		if w == nil || w.wr.Op != WRRead || w.done {
			n.net.Free(p)
			return
		}
		want := psnAdd(w.firstPSN, w.rcvd)
		if psn != want {
			if psnCmp(psn, want) > 0 && qp.sw > qp.indexOf(w) {
				qp.rewind(want) // a response was lost: re-request from it
			}
			n.net.Free(p)
			return
		}
		ln := uint64(p.PayloadLen)
		off := uint64(w.rcvd) * uint64(qp.mtu)
		if ln > 0 {
			g := &w.wr.Local
			landed := max(n.bus.Write(n.s.Now(), n.dev, g.MR.Where, sim.Bytes(ln)), qp.lastLand)
			qp.lastLand = landed
			n.schedLand(landed, landing{kind: landWrite, qp: qp, r: g.MR.Region, off: g.MR.Off + g.Off + off, n: ln, pkt: p, opid: w.wr.OpID})
		} else {
			n.net.Free(p)
		}
		w.rcvd++
		if w.rcvd == w.npsn {
			w.done = true
			qp.uncountOut(w)
			qp.ackUpTo(psn)
			qp.progress()
			n.activate(qp)
		} else {
			qp.ackUpTo(psnSub(psn, 1))
		}
	default:
		n.net.Free(p)
	}
}

// indexOf returns the absolute SQ index of w (which must be in [head, assigned)).
func (qp *QP) indexOf(w *swqe) uint64 {
	slot := uint64(0)
	for i := range qp.sq {
		if &qp.sq[i] == w {
			slot = uint64(i)
		}
	}
	d := uint64(len(qp.sq))
	base := qp.head - qp.head%d + slot
	if base < qp.head {
		base += d
	}
	return base
}

// findIndex returns the index of the issued WQE whose PSN range holds psn.
func (qp *QP) findIndex(psn uint32) (uint64, bool) {
	for i := qp.head; i < qp.assigned; i++ {
		w := qp.slot(i)
		if w.npsn == 0 {
			continue
		}
		if d := psnCmp(psn, w.firstPSN); d >= 0 && d < int32(w.npsn) {
			return i, true
		}
	}
	return 0, false
}

func (qp *QP) find(psn uint32) *swqe {
	i, ok := qp.findIndex(psn)
	if !ok {
		return nil
	}
	return qp.slot(i)
}

// ackUpTo records that every PSN up to psn has been acknowledged.
func (qp *QP) ackUpTo(psn uint32) {
	if psnCmp(psn, qp.ackedPSN) <= 0 || psnCmp(psn, qp.nextPSN) >= 0 {
		return
	}
	qp.ackedPSN = psn
	qp.retries, qp.rnrLeft = qp.retryCnt, qp.rnrRetry
	qp.progress()
	qp.restartTimer()
}

// progress completes WQEs in order from the head.
func (qp *QP) progress() {
	n := qp.n
	for qp.state == QPSRTS && qp.head < qp.fetched {
		w := qp.slot(qp.head)
		if w.status != StatusSuccess {
			if qp.head > qp.sw {
				return
			}
			qp.complete(w, w.status)
			qp.toErr()
			return
		}
		switch op := w.wr.Op; {
		case op.hasPayload():
			// Complete once acknowledged, even if a rewind put the send
			// cursor back behind it (a late ACK covers it).
			if qp.head >= qp.assigned || psnCmp(psnAdd(w.firstPSN, w.npsn-1), qp.ackedPSN) > 0 {
				return
			}
		case op.isRdAtomic():
			if qp.head >= qp.assigned {
				return
			}
			if !w.done {
				if qp.head < qp.sw && psnCmp(qp.ackedPSN, psnAdd(w.firstPSN, w.npsn-1)) >= 0 &&
					(!qp.impliedSet || psnCmp(qp.ackedPSN, qp.impliedPSN) > 0) {
					// A later PSN was acknowledged: the response was lost.
					qp.impliedSet, qp.impliedPSN = true, qp.ackedPSN
					qp.rewind(psnAdd(w.firstPSN, w.rcvd))
				}
				return
			}
		default: // NOP, WAIT: executed by the send cursor
			if qp.head >= qp.sw {
				return
			}
		}
		qp.complete(w, StatusSuccess)
		if qp.sw < qp.head {
			// Acknowledged beyond a rewound send cursor: skip what is done.
			qp.sw, qp.sp = qp.head, 0
			qp.dropReads()
			qp.rw, qp.rp = qp.head, 0
		}
		n.activate(qp)
	}
}

// complete retires the head WQE with status st, writing a CQE if it is
// signaled or failed.
func (qp *QP) complete(w *swqe, st Status) {
	i := qp.head
	qp.head++
	qp.impliedSet = false
	if qp.n.obs != nil {
		qp.n.obs.Emit(obs.Event{Kind: obs.Acked, At: qp.n.s.Now(), Op: w.wr.OpID, Who: qp.name, QP: qp.qpn, Index: i, Code: uint32(st)})
	}
	if st == StatusSuccess && !w.wr.Signaled {
		return
	}
	var blen uint32
	if w.wr.Op.isRdAtomic() || w.wr.Op.hasPayload() {
		blen = uint32(w.wr.Local.Len)
	}
	qp.cfg.SendCQ.push(CQE{WRID: w.wr.ID, Status: st, Opcode: w.wr.Op.wc(), ByteLen: blen, QPN: qp.qpn, WQEIndex: uint32(i), OpID: w.wr.OpID}, qp.lastLand)
}

// fail marks the WQE holding psn to complete with st (a remote error).
func (qp *QP) fail(psn uint32, st Status) {
	w := qp.find(psn)
	if w == nil {
		return
	}
	w.status = st
	qp.progress()
}

// rewind restarts transmission go-back-N from psn.
func (qp *QP) rewind(psn uint32) {
	i, ok := qp.findIndex(psn)
	if !ok {
		return
	}
	w := qp.slot(i)
	qp.sw, qp.rw, qp.rp = i, i, 0
	qp.sp = uint32(psnCmp(psn, w.firstPSN))
	switch {
	case w.wr.Op == WRRead:
		w.rcvd = qp.sp
	case w.wr.Op.isAtomic():
		qp.sp = 0
		w.done = false
	default:
		qp.rp = qp.sp
	}
	for j := i + 1; j < qp.assigned; j++ {
		x := qp.slot(j)
		if x.wr.Op.isRdAtomic() && x.status == StatusSuccess {
			x.rcvd, x.done = 0, false
		}
	}
	qp.dropReads()
	qp.rdOut = 0
	for j := qp.head; j < qp.assigned; j++ {
		x := qp.slot(j)
		x.out = j < qp.sw && x.wr.Op.isRdAtomic() && !x.done
		if x.out {
			qp.rdOut++
		}
	}
	qp.n.activate(qp)
}

// countOut counts a READ/atomic request just sent as awaiting its
// response, unless it is already counted or its response already came (a
// late response to the request sent before a rewind: the resent request
// is a duplicate the responder answers again, and its answer is ignored).
func (qp *QP) countOut(w *swqe) {
	if !w.out && !w.done {
		w.out = true
		qp.rdOut++
	}
}

// uncountOut removes a READ/atomic whose response is complete from rdOut.
// A response may complete a WQE the rewound send cursor has not resent
// yet, which is not counted.
func (qp *QP) uncountOut(w *swqe) {
	if w.out {
		w.out = false
		qp.rdOut--
	}
}

// outstanding reports whether requests await acknowledgement.
func (qp *QP) outstanding() bool {
	return psnCmp(qp.nextPSN, psnAdd(qp.ackedPSN, 1)) > 0 || qp.rdOut > 0
}

func (qp *QP) armTimer() {
	if qp.timeout == 0 || qp.timerArmed {
		return
	}
	qp.timerArmed = true
	qp.timerAt = qp.n.s.Now().Add(qp.timeout)
	qp.schedTimer()
}

func (qp *QP) schedTimer() {
	if !qp.timerPending {
		qp.timerPending = true
		qp.n.s.Post(qp.timerAt, qp.n, evTimer<<evShift|uint64(qp.idx))
	}
}

func (qp *QP) restartTimer() {
	if qp.timeout == 0 {
		return
	}
	if !qp.outstanding() {
		qp.timerArmed = false
		return
	}
	qp.timerArmed = true
	qp.timerAt = qp.n.s.Now().Add(qp.timeout)
	qp.schedTimer()
}

func (qp *QP) timerFired() {
	qp.timerPending = false
	if !qp.timerArmed || qp.state != QPSRTS {
		return
	}
	now := qp.n.s.Now()
	if now < qp.timerAt {
		qp.schedTimer()
		return
	}
	if !qp.outstanding() {
		qp.timerArmed = false
		return
	}
	psn := qp.oldestUnacked()
	if qp.retries == 0 {
		qp.fail(psn, StatusRetryExcErr)
		return
	}
	qp.retries--
	qp.n.stats.Timeouts++
	qp.timerAt = now.Add(qp.timeout)
	qp.schedTimer()
	qp.rewind(psn)
}

// oldestUnacked returns the first PSN whose acknowledgement or response is
// missing.
func (qp *QP) oldestUnacked() uint32 {
	for i := qp.head; i < qp.assigned; i++ {
		w := qp.slot(i)
		switch {
		case w.npsn == 0:
			continue
		case w.wr.Op.isRdAtomic():
			if !w.done {
				return psnAdd(w.firstPSN, w.rcvd)
			}
		default:
			last := psnAdd(w.firstPSN, w.npsn-1)
			if psnCmp(last, qp.ackedPSN) > 0 {
				if psnCmp(psnAdd(qp.ackedPSN, 1), w.firstPSN) > 0 {
					return psnAdd(qp.ackedPSN, 1)
				}
				return w.firstPSN
			}
		}
	}
	return psnAdd(qp.ackedPSN, 1)
}

func (qp *QP) seqNak(psn uint32) {
	if qp.retries == 0 {
		qp.fail(psn, StatusRetryExcErr)
		return
	}
	qp.retries--
	qp.rewind(psn)
}

func (qp *QP) rnrNak(psn uint32, code uint8) {
	if qp.rnrArmed {
		return
	}
	if qp.rnrLeft == 0 {
		qp.fail(psn, StatusRNRRetryExcErr)
		return
	}
	if qp.rnrRetry != 7 {
		qp.rnrLeft--
	}
	qp.rnrArmed, qp.rnrPSN = true, psn
	qp.timerArmed = false
	qp.n.s.Post(qp.n.s.Now().Add(RNRTimer(code)), qp.n, evRNR<<evShift|uint64(qp.idx))
}

func (qp *QP) rnrFired() {
	if !qp.rnrArmed {
		return
	}
	qp.rnrArmed = false
	if qp.state != QPSRTS {
		return
	}
	qp.rewind(qp.rnrPSN)
	qp.armTimer()
}

// toErr moves the QP to the error state and flushes its queues.
func (qp *QP) toErr() {
	if qp.state == QPSErr {
		return
	}
	qp.state = QPSErr
	qp.timerArmed = false
	qp.rnrArmed = false
	qp.inWrite, qp.inSend = false, false
	qp.flush()
}

// flush completes every doorbelled send WQE and every receive WQE with
// StatusWRFlushErr.
func (qp *QP) flush() {
	for qp.head < qp.db {
		w := qp.slot(qp.head)
		qp.complete(w, StatusWRFlushErr)
	}
	qp.sw, qp.sp, qp.rw, qp.rp = qp.head, 0, qp.head, 0
	qp.fetched, qp.fetchIss, qp.assigned = qp.head, qp.head, qp.head
	qp.dropReads()
	qp.rdOut = 0
	for qp.rqHead < qp.rqTail {
		r := &qp.rq[qp.rqHead%uint64(len(qp.rq))]
		qp.cfg.RecvCQ.push(CQE{WRID: r.ID, Status: StatusWRFlushErr, Opcode: WCRecv, QPN: qp.qpn, WQEIndex: uint32(qp.rqHead)}, 0)
		qp.rqHead++
	}
}

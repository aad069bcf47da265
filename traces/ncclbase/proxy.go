package ncclbase

import (
	"fmt"

	"github.com/ginsim/ginsim/nic"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
)

// ncclNetComm is one IB connection of the NET transport: the send comm
// (ncclIbSendComm: QP, CQ and the CTS FIFO the receiver writes into) in the
// proxy rank's process on its NIC, and the receive comm (ncclIbRecvComm)
// on the receiver's NIC. With NCCL_NET_SHARED_COMMS every p2p connection
// through one NIC to one remote rank on one channel shares it: under PXN
// the sends of all local ranks whose intermediate is that NIC's GPU.
type ncclNetComm struct {
	id             int
	proxy, dst, ch int
	subs           []*ncclConn // its p2p connections, in build order
	groups         []*ncclRecvGroup

	sqp, rqp *nic.QP
	scq, rcq *nic.CQ
	// The NICs of the two ends (the channel's NIC of the proxy rank and of
	// the receiver) and their indices in the ranks' nics.
	snic, rnic *nic.NIC
	sk, rk     int
	// sh is the send comm's host memory: the CTS FIFO (slots × stride,
	// each slot up to MaxRecvs ncclIbSendFifo elements ending with the idx
	// word) and the completion records the multi-send writes from; rh the
	// receive comm's: the CTS elements it writes from and the records.
	sh, rh            *mem.Region
	sMR, rMR          *nic.MR
	slots             int
	stride, recStride uint64
	recBase           uint64
	cts               []ncclCTS // per CTS slot: what the element list names (implied by its content)

	// Send side (ncclIbIsend): the slot the next request matches, the
	// requests matched to it, multi-sends posted and completed.
	fifoHead, ctsSeen, completed int
	inSlot                       []*ncclConn
	// Receive side (ncclIbIrecv): CTS slots posted.
	recvHead int

	sq, rq ncclPostQ // posts whose doorbell is crossing PCIe
}

// ncclCTS is what one posted CTS slot asks for: step step of the receive
// group g, nreqs element(s), one per connection of g still receiving.
type ncclCTS struct {
	g     *ncclRecvGroup
	step  int
	nreqs int
}

// ncclRecvGroup is a group of receive sub-ops sharing a receive comm
// (recvProxyProgress groups up to maxRecvs of them): one receive WQE, one
// CTS listing every member and one completion per step, and the tails of
// all members stored together. Its steps run to the longest member's.
type ncclRecvGroup struct {
	comm                 *ncclNetComm
	subs                 []*ncclConn
	nsteps               int
	posted, recvd, trans int
	left                 int // members not done
}

// active reports whether c still receives in step k.
func (c *ncclConn) active(k int) bool { return k < c.nsteps }

// ncclPostQ is a FIFO of ibv_post_send calls whose doorbell is crossing
// PCIe: their WRs, flat, and the WR count of each.
type ncclPostQ struct {
	wrs    []nic.WR
	n      []int
	hw, hn int
}

// push closes a post of the last k WRs appended to q.wrs.
func (q *ncclPostQ) push(k int) { q.n = append(q.n, k) }

// front returns the WRs of the oldest post.
func (q *ncclPostQ) front() []nic.WR { return q.wrs[q.hw : q.hw+q.n[q.hn]] }

// drop removes the oldest post, reusing the storage once q is empty.
func (q *ncclPostQ) drop() {
	q.hw += q.n[q.hn]
	q.hn++
	if q.hn == len(q.n) {
		clear(q.wrs)
		q.wrs, q.n, q.hw, q.hn = q.wrs[:0], q.n[:0], 0, 0
	}
}

// Handle delivers a doorbell that crossed PCIe to the NIC (sim.Handler):
// arg is comm id << 1 | 1 for the receive comm's QP.
func (w *Workload) Handle(s *sim.Sim, arg uint64) {
	m := w.comms[arg>>1]
	qp, q := m.sqp, &m.sq
	if arg&1 == 1 {
		qp, q = m.rqp, &m.rq
	}
	err := qp.PostSend(q.front())
	q.drop()
	if err != nil {
		s.Fail(fmt.Errorf("nccl: %s: %w", qp.Name(), err))
	}
}

// ncclProxy is one rank's NCCL proxy progress thread: round robin over its
// active ops — the sends through its NIC (its own and, under PXN, those of
// local ranks whose destination is on its rail) and its receive groups —
// one action per op per pass; idle passes yield; with no op at all the
// thread blocks until a host posts one.
type ncclProxy struct {
	w       *Workload
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

// ncclSub is one op: a send sub-op (c) or a receive group (g).
type ncclSub struct {
	c *ncclConn
	g *ncclRecvGroup
}

// watchRef is one word an idle proxy watches.
type watchRef struct {
	r   *mem.Region
	off uint64
}

func newNCCLProxy(w *Workload, rk *ncclRank) *ncclProxy {
	px := &ncclProxy{w: w, rk: rk, name: rk.g.Name() + "/nccl-proxy"}
	px.p = w.e.SimOf(rk.r).Spawn(px.name, px.loop)
	return px
}

// reset drops the ops of an earlier phase.
func (px *ncclProxy) reset() { px.subs = px.subs[:0] }

// add hands one op to the thread (ncclProxyPost into the proxy's op pool,
// from this rank's host or, under PXN, a local peer's); wake says whether
// a blocked thread pays the condition-variable wake-up.
func (px *ncclProxy) add(s ncclSub, wake bool) {
	px.subs = append(px.subs, s)
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
			if s.c != nil && px.progressSend(s.c) || s.g != nil && px.progressRecv(s.g) {
				worked = true
			}
		}
		k := 0
		for _, s := range px.subs {
			if s.c != nil && s.c.sDone < s.c.nsteps || s.g != nil && s.g.left > 0 {
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

// progressSend is sendProxyProgress for one sub-op: post a slot to the
// kernel, or hand a published chunk whose CTS arrived to the NIC (isend),
// or retire a completed send.
func (px *ncclProxy) progressSend(c *ncclConn) bool {
	cfg := &px.w.cfg
	m := c.comm
	steps := cfg.Steps
	if c.sPosted < c.nsteps && c.sPosted < c.sDone+steps {
		c.sPosted++
		px.work(cfg.HostStore)
		c.sctl.Store64(ctlHead, uint64(c.sPosted), px.name)
		return true
	}
	if c.sTrans < c.sPosted && c.sTrans < c.sDone+steps && px.dataReady(c, c.sTrans) && px.isend(c) {
		c.sTrans++
		return true
	}
	if c.sDone < c.sTrans {
		slot := c.sSlot[c.sDone%steps]
		if m.completed <= slot {
			// ncclIbTest: the request is not done yet; poll the CQ.
			px.p.Sleep(cfg.PollCQCost)
			var cqe [1]nic.CQE
			if m.scq.Poll(cqe[:]) == 1 {
				px.work(cfg.CQEReadCost)
				if cqe[0].Status != nic.StatusSuccess {
					px.w.fail(px.p.Sim(), m, "send", cqe[0])
				}
				if cqe[0].WRID != uint64(m.completed) {
					panic(fmt.Sprintf("nccl: t=%v %s: send completion of slot %d, expected %d", px.p.Now(),
						m.sqp.Name(), cqe[0].WRID, m.completed))
				}
				m.completed++
			}
		}
		if m.completed > slot {
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
		if !llFlagSet(c.sll.Load64(c.llFlagWord(i)), i) {
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

// isend is ncclIbIsend for step c.sTrans: the CTS slot at the send comm's
// FIFO head must have landed and list c for that step. The request is
// created (and the step counts as transmitted); the send goes out when
// every request the slot lists has matched (a multi-recv waits for all
// its senders).
func (px *ncclProxy) isend(c *ncclConn) bool {
	cfg := &px.w.cfg
	m := c.comm
	j := m.fifoHead
	slot := uint64(j % m.slots)
	if m.sh.Load64(slot*m.stride+m.stride-8) != uint64(j+1) {
		return false
	}
	cts := &m.cts[slot]
	if cts.g != c.grp || cts.step != c.sTrans {
		return false
	}
	if m.ctsSeen <= j {
		m.ctsSeen = j + 1
		px.work(cfg.LineMiss) // the CTS line the NIC wrote
	}
	if cts.nreqs > 1 {
		px.work(cfg.HostStore) // the request's size into the completion records
	}
	c.sSlot[c.sTrans%cfg.Steps] = j
	m.inSlot = append(m.inSlot, c)
	if len(m.inSlot) == cts.nreqs {
		px.multiSend(m, j, cts)
		clear(m.inSlot)
		m.inSlot = m.inSlot[:0]
		m.fifoHead++
	}
	return true
}

// multiSend is ncclIbMultiSend of CTS slot j: one RDMA WRITE per request
// from the proxy rank's buffers into each receiver slot, then, for a
// multi-recv, a WRITE_WITH_IMM of the sizes into the receiver's completion
// records; for one request, a 0-byte WRITE_WITH_IMM after the data above
// ARThreshold (adaptive routing) or one WRITE_WITH_IMM carrying the data.
// Only the last WR is signalled; one doorbell for the chain.
func (px *ncclProxy) multiSend(m *ncclNetComm, j int, cts *ncclCTS) {
	w, cfg, e := px.w, &px.w.cfg, px.w.e
	P, D := w.ranks[m.proxy], w.ranks[m.dst]
	q := &m.sq
	start := len(q.wrs)
	var n uint64
	for _, c := range m.inSlot {
		i := cts.step
		n = c.stepBytes(i)
		slot := uint64(i % cfg.Steps)
		smr, rmr := P.mrs[m.sk], D.mrs[m.rk]
		data := nic.WR{ID: uint64(j), Op: nic.WRWrite, Local: nic.SGE{MR: smr, Off: c.sfifo + slot*c.chunk, Len: n},
			RemoteVA: rmr.VA + c.rfifo + slot*c.chunk, RKey: rmr.RKey}
		if c.ll {
			n = c.llWire(i)
			data.Local = nic.SGE{MR: c.sllMR, Off: c.llOff(i), Len: n}
			data.RemoteVA, data.RKey = c.rllMR.VA+c.llOff(i), c.rllMR.RKey
		}
		q.wrs = append(q.wrs, data)
		e.Ph.Count(px.rk.r).Msgs++
		e.Ph.Count(px.rk.r).RDMABytes += int64(n)
	}
	nreq := uint64(len(m.inSlot))
	switch {
	case nreq > 1:
		off := m.recBase + uint64(j%m.slots)*m.recStride
		q.wrs = append(q.wrs, nic.WR{ID: uint64(j), Op: nic.WRWriteImm, Signaled: true,
			Local: nic.SGE{MR: m.sMR, Off: off, Len: 4 * nreq}, RemoteVA: m.rMR.VA + off, RKey: m.rMR.RKey, Imm: uint32(j)})
		e.Ph.Count(px.rk.r).Sigs++
	case cfg.AdaptiveRouting && n > uint64(cfg.ARThreshold):
		last := &q.wrs[len(q.wrs)-1]
		q.wrs = append(q.wrs, nic.WR{ID: uint64(j), Op: nic.WRWriteImm, Signaled: true, Local: nic.SGE{MR: P.mrs[m.sk]},
			RemoteVA: last.RemoteVA, RKey: last.RKey, Imm: uint32(j)})
		e.Ph.Count(px.rk.r).Sigs++
	default:
		last := &q.wrs[len(q.wrs)-1]
		last.Op, last.Signaled, last.Imm = nic.WRWriteImm, true, uint32(j)
	}
	k := len(q.wrs) - start
	op := px.issued(m, q.wrs[start:])
	q.push(k)
	at, arrive := px.post(m, false, k)
	if op != 0 {
		e.ObsOf(px.rk.r).Emit(obs.Event{Kind: obs.Doorbell, At: at, Then: arrive, Op: op, Who: px.name, Value: uint64(k)})
	}
}

// issued gives a WR chain of m's current CTS slot an operation id on the
// step's bus, so that the critical path follows it through the NIC and the
// fabric as a GIN operation: issued and its descriptor in host memory
// when the last of its requests was (the GPU's tail store or LL lines
// landing), handed over by this thread. 0 when the step is not observed.
func (px *ncclProxy) issued(m *ncclNetComm, wrs []nic.WR) obs.OpID {
	b := px.w.e.ObsOf(px.rk.r)
	if b == nil {
		return 0
	}
	op := b.NewOp()
	var queued sim.Time
	var n uint64
	for _, c := range m.inSlot {
		queued = max(queued, c.lastQueued)
		c.lastOp = op
	}
	for i := range wrs {
		wrs[i].OpID = op
		n += wrs[i].Local.Len
	}
	b.Emit(obs.Event{Kind: obs.Issued, At: queued, Op: op, Who: px.name, Where: "nccl send", Index: uint64(m.proxy),
		Value: uint64(m.dst), Bytes: n, Code: obs.IssuedSignal})
	b.Emit(obs.Event{Kind: obs.Posted, At: queued, Then: queued, Op: op, Who: px.name, Bytes: n})
	return op
}

// post charges ibv_post_send of k WRs and sends the doorbell across PCIe
// to the NIC of this thread's end of m: it leaves at and arrives at arrive.
func (px *ncclProxy) post(m *ncclNetComm, recvSide bool, k int) (at, arrive sim.Time) {
	cfg := &px.w.cfg
	px.work(cfg.PostSendBase + cfg.PostSendPerWR*sim.Duration(k) + cfg.DoorbellIssue)
	n := m.snic
	if recvSide {
		n = m.rnic
	}
	at = px.p.Now()
	arrive = n.HostDoorbell(at, k)
	arg := uint64(m.id) << 1
	if recvSide {
		arg |= 1
	}
	px.p.Sim().Post(arrive, px.w, arg)
	return at, arrive
}

// progressRecv is recvProxyProgress for one receive group: post the next
// step's receive and its CTS, or take a completion, or publish the tails,
// or retire consumed slots (heads).
func (px *ncclProxy) progressRecv(g *ncclRecvGroup) bool {
	w, cfg := px.w, &px.w.cfg
	m := g.comm
	if g.posted < g.nsteps && g.canPost(cfg.Steps) {
		k := g.posted
		j := m.recvHead
		px.work(cfg.PostRecvCost)
		if err := m.rqp.PostRecv(nic.RecvWR{ID: uint64(j)}); err != nil {
			px.p.Sim().Fail(fmt.Errorf("nccl: %s: %w", m.rqp.Name(), err))
		}
		nreq := 0
		for _, c := range g.subs {
			if c.active(k) {
				nreq++
			}
		}
		slot := uint64(j % m.slots)
		m.cts[slot] = ncclCTS{g: g, step: k, nreqs: nreq}
		// The elements (addr, size, rkeys, nreqs, tag, idx) are implied;
		// the list ends with the idx word at the end of the slot, so that
		// the word lands with it.
		px.work(cfg.HostStore * sim.Duration(nreq))
		m.rh.Store64(slot*m.stride+m.stride-8, uint64(j+1), px.name)
		size := uint64(nreq) * uint64(cfg.CTSBytes)
		off := slot*m.stride + m.stride - size
		m.rq.wrs = append(m.rq.wrs, nic.WR{ID: uint64(j), Op: nic.WRWrite, Local: nic.SGE{MR: m.rMR, Off: off, Len: size},
			RemoteVA: m.sMR.VA + off, RKey: m.sMR.RKey})
		m.rq.push(1)
		w.e.Ph.Count(px.rk.r).Sigs++
		px.post(m, true, 1)
		m.recvHead++
		g.posted++
		return true
	}
	if g.recvd < g.posted {
		px.p.Sleep(cfg.PollCQCost)
		var cqe [1]nic.CQE
		if m.rcq.Poll(cqe[:]) == 1 {
			px.work(cfg.CQEReadCost)
			if cqe[0].Status != nic.StatusSuccess || cqe[0].Opcode != nic.WCRecvRDMAWithImm {
				w.fail(px.p.Sim(), m, "recv", cqe[0])
			}
			// The receive WQEs of a comm complete in order; the slot names
			// the group (another of this comm's groups when it has several).
			o := m.cts[cqe[0].WRID%uint64(m.slots)].g
			o.recvd++
			return true
		}
	}
	if g.trans < g.recvd {
		// No GPU-direct flush: Hopper needs none (ncclTopoNeedFlush).
		k := g.trans
		g.trans++
		for _, c := range g.subs {
			if c.active(k) {
				px.work(cfg.HostStore)
				c.rctl.Store64(ctlTail, uint64(k+1), px.name)
			}
		}
		return true
	}
	worked := false
	for _, c := range g.subs {
		top := min(g.trans, c.nsteps)
		if c.rDone >= top {
			continue
		}
		if head := c.rctl.Load64(ctlHead); head > uint64(c.rDone) {
			if head > c.headSeen {
				c.headSeen = head
				px.work(cfg.LineMiss) // written by the GPU over PCIe
			}
			c.rDone = int(min(head, uint64(top)))
			if c.rDone == c.nsteps {
				g.left--
			}
			worked = true
		}
	}
	return worked
}

// canPost reports whether every member still receiving in the next step
// has a free slot.
func (g *ncclRecvGroup) canPost(steps int) bool {
	for _, c := range g.subs {
		if c.active(g.posted) && g.posted >= c.rDone+steps {
			return false
		}
	}
	return true
}

func (w *Workload) fail(s *sim.Sim, m *ncclNetComm, side string, e nic.CQE) {
	s.Fail(fmt.Errorf("nccl: t=%v comm %d>%d.%d %s completion: %v (%v)", s.Now(),
		m.proxy, m.dst, m.ch, side, e.Status, e.Opcode))
}

// idle parks the thread after a pass that found nothing, watching every
// word a later pass would find changed; it resumes at the first pass
// boundary at or after the change, as the busy loop would. A word that
// changed during the pass, after its op was checked, is seen by the next
// pass at once: the thread does not park.
func (px *ncclProxy) idle(start sim.Time) {
	for _, s := range px.subs {
		if px.pending(s) {
			return
		}
	}
	px.period = px.p.Now().Sub(start)
	px.idleAt = start
	for _, s := range px.subs {
		if c := s.c; c != nil {
			m := c.comm
			if c.ll {
				px.watch(c.sll, c.llFlagWord(c.sTrans))
			} else {
				px.watch(c.sctl, ctlTail)
			}
			px.watch(m.sh, uint64(m.fifoHead%m.slots)*m.stride+m.stride-8)
			px.watch(m.scq.WordFor(m.scq.Landed()))
			continue
		}
		for _, c := range s.g.subs {
			px.watch(c.rctl, ctlHead)
		}
		px.watch(s.g.comm.rcq.WordFor(s.g.comm.rcq.Landed()))
	}
	px.parked = true
	px.p.Park("nccl proxy idle: no tail, CTS, completion or head")
}

// pending reports, without charging time, whether a pass would find work
// for s now: the words idle would watch already changed.
func (px *ncclProxy) pending(s ncclSub) bool {
	steps := px.w.cfg.Steps
	if c := s.c; c != nil {
		m := c.comm
		if c.sDone < c.sTrans && (m.completed > c.sSlot[c.sDone%steps] || m.scq.Landed() > m.scq.Consumed()) {
			return true
		}
		if c.sTrans >= c.sPosted || c.sTrans >= c.sDone+steps {
			return false
		}
		if c.ll && !llFlagSet(c.sll.Load64(c.llFlagWord(c.sTrans)), c.sTrans) ||
			!c.ll && c.sctl.Load64(ctlTail) <= uint64(c.sTrans) {
			return false
		}
		slot := uint64(m.fifoHead % m.slots)
		cts := &m.cts[slot]
		return m.sh.Load64(slot*m.stride+m.stride-8) == uint64(m.fifoHead+1) && cts.g == c.grp && cts.step == c.sTrans
	}
	g := s.g
	if g.recvd < g.posted && g.comm.rcq.Landed() > g.comm.rcq.Consumed() || g.trans < g.recvd ||
		g.posted < g.nsteps && g.canPost(steps) {
		return true
	}
	for _, c := range g.subs {
		if c.rDone < min(g.trans, c.nsteps) && c.rctl.Load64(ctlHead) > uint64(c.rDone) {
			return true
		}
	}
	return false
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

package nic

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
)

// Errors returned by the verbs-shaped API (wrapped with details; test with
// errors.Is).
var (
	ErrInvalid  = errors.New("nic: invalid argument")
	ErrQPState  = errors.New("nic: operation not allowed in this QP state")
	ErrSQFull   = errors.New("nic: send queue full")
	ErrRQFull   = errors.New("nic: receive queue full")
	ErrBusy     = errors.New("nic: resource in use")
	ErrTransit  = errors.New("nic: illegal QP state transition")
	ErrOverrun  = errors.New("nic: completion queue overrun") // kept for compatibility; an overrun is now an AsyncCQErr event
	ErrNotOwned = errors.New("nic: object belongs to another NIC")
)

// Event kinds, in the top byte of an event argument; the rest is an index.
const (
	evKick uint64 = iota
	evFetchIssue
	evFetchDone
	evRx
	evLand
	evCQE
	evTimer
	evRNR
	evAlpha   // DCQCN alpha timer of a QP
	evRateInc // DCQCN rate-increase timer of a QP
)

const evShift = 56

// NIC is one RDMA NIC port: its QPs, CQs and memory registrations, its
// transmit scheduler and receive pipeline. It is a fabric.Endpoint and a
// sim.Handler. Several NICs may share a PCIe tree and a network.
//
// Not safe for concurrent use.
type NIC struct {
	s    *sim.Sim
	cfg  Config
	name string
	net  *fabric.Network
	ep   fabric.EndpointID
	bus  *pcie.Tree
	dev  pcie.DevID

	mrs []*MR
	cqs []*CQ
	qps []*QP

	// readAhead counts payload reads issued and not yet transmitted, over
	// all QPs (bounded by Config.ReadAhead); readWait lists, in order, the
	// QPs that found the budget spent (the scheduler drops a QP with
	// nothing to send, so a freed read must wake one).
	readAhead int
	readWait  []*QP
	readWaitH int

	// Transmit scheduler.
	act []*QP // QPs that may have something to send, in round-robin order (nil: a place gone)
	// actWake[i] caches act[i]'s last trySend answer while it still
	// holds (see txHint). Dense, so that the scheduler's scan over
	// hundreds of waiting QPs stays in cache.
	actWake     []txHint
	gone        int   // places of act no QP holds (before the last held one)
	dropped     []*QP // QPs the current scan dropped, to leave the list after it
	leaving     []int // scratch: the places they leave
	rr          int
	txFree      sim.Time // transmit pipeline free (TxPacketCost occupancy)
	kickAt      sim.Time
	kickPending bool

	// Receive pipeline: packets in processing order.
	rxq    []*fabric.Packet
	rxHead int
	rxFree sim.Time

	// In-flight DMA effects (payload writes, atomics) by slot.
	lands    []landing
	landFree []int32

	// CNPs waiting for the transmitter (strict priority over QPs).
	cnpq []cnpReq

	stats Stats

	// Tap, if set, sees every packet this NIC sends, just before Send.
	tap func(p *fabric.Packet)
	// obs, if set, receives the NIC's observer events.
	obs *obs.Bus
	// ccEager runs the DCQCN timers as events (while an observer is set,
	// so that obs.Rate events come at their instants)
	// instead of lazily; ccTies counts the same-instant orders lazy
	// timers could not know (QP.ccCatchUp).
	ccEager bool
	ccTies  uint64
	// posted is when the kick or receive event being handled was posted
	// (carried in its argument), for the lazy DCQCN timers.
	posted sim.Time
	// rxHook, if set (tests), sees every arriving packet first; when it
	// returns false it has taken the packet (dropped, delayed, duplicated).
	rxHook func(p *fabric.Packet) bool
}

// New creates a NIC called name attached to endpoint ep of net and to PCIe
// device dev of bus, and binds it to the endpoint. s must be the Sim the
// endpoint runs on (net.SimOf(ep)): on a partitioned network, its
// partition; the NIC touches nothing of other partitions. cfg must Validate; an
// invalid configuration panics (it is a programming error of the caller
// that builds the machine, checked by Config.Validate beforehand).
func New(s *sim.Sim, cfg Config, name string, net *fabric.Network, ep fabric.EndpointID, bus *pcie.Tree, dev pcie.DevID) *NIC {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if net.SimOf(ep) != s {
		panic(fmt.Sprintf("nic: %s runs on partition %d, its endpoint %d on partition %d", name, s.Part(), ep, net.PartOf(ep)))
	}
	n := &NIC{s: s, cfg: cfg, name: name, net: net, ep: ep, bus: bus, dev: dev}
	net.Bind(ep, n)
	return n
}

// Name returns the NIC's name.
func (n *NIC) Name() string { return n.name }

// Config returns the NIC's configuration.
func (n *NIC) Config() Config { return n.cfg }

// Endpoint returns the NIC's network endpoint.
func (n *NIC) Endpoint() fabric.EndpointID { return n.ep }

// Dev returns the NIC's PCIe device.
func (n *NIC) Dev() pcie.DevID { return n.dev }

// Sim returns the simulation the NIC runs on.
func (n *NIC) Sim() *sim.Sim { return n.s }

// SetTap installs f to see every packet the NIC hands to the network (nil
// removes it). f must not keep the packet.
func (n *NIC) SetTap(f func(p *fabric.Packet)) { n.tap = f }

// SetObserver makes the NIC emit its events into b (nil: off): obs.DMARead,
// Fetched, Sent, Landed, Atomic, Acked and CQE, each stamped with the WR's
// OpID, obs.Rate for its QPs' DCQCN rate changes and obs.Async for its
// asynchronous events (a CQ overrun).
func (n *NIC) SetObserver(b *obs.Bus) {
	n.obs = b
	n.setEagerCC(b != nil)
}

// EventName names an event for traces.
func (n *NIC) EventName(arg uint64) string {
	names := [...]string{"kick", "fetch-issue", "fetch-done", "rx", "land", "cqe", "timer", "rnr", "dcqcn-alpha", "dcqcn-rate"}
	k := arg >> evShift
	if k == evKick || k == evRx {
		return fmt.Sprintf("%s/%s posted %v", n.name, names[k], sim.Time(arg&(1<<evShift-1)))
	}
	if int(k) < len(names) {
		return fmt.Sprintf("%s/%s[%d]", n.name, names[k], arg&(1<<evShift-1))
	}
	return n.name
}

// Handle dispatches the NIC's events.
func (n *NIC) Handle(s *sim.Sim, arg uint64) {
	i := int(arg & (1<<evShift - 1))
	k := arg >> evShift
	switch k {
	case evFetchIssue, evFetchDone, evTimer, evRNR, evAlpha, evRateInc:
		n.qps[i].unhint() // every event of a QP may change what it can send
	}
	switch k {
	case evKick:
		n.posted = sim.Time(i)
		if !n.kickPending || s.Now() != n.kickAt {
			return // superseded by an earlier kick
		}
		n.kickPending = false
		n.transmit()
	case evFetchIssue:
		n.qps[i].issueFetches()
	case evFetchDone:
		n.qps[i].fetchDone()
	case evRx:
		n.posted = sim.Time(i)
		p := n.rxq[n.rxHead]
		n.rxq[n.rxHead] = nil
		n.rxHead++
		if n.rxHead == len(n.rxq) {
			n.rxq, n.rxHead = n.rxq[:0], 0
		}
		n.process(p)
	case evLand:
		n.land(int32(i))
	case evCQE:
		n.cqs[i].landOne()
	case evTimer:
		n.qps[i].timerFired()
	case evRNR:
		n.qps[i].rnrFired()
	case evAlpha:
		n.qps[i].alphaFired()
	case evRateInc:
		n.qps[i].rateFired()
	}
}

// kick makes the transmit scheduler run at time t (or earlier if already
// due earlier).
func (n *NIC) kick(t sim.Time) {
	if now := n.s.Now(); t < now {
		t = now
	}
	// The scheduler can send nothing before the port and the transmit
	// pipeline are free: running it earlier would only re-kick.
	t = max(t, n.txFree, n.net.PortFreeAt(n.ep))
	if n.kickPending && n.kickAt <= t {
		return
	}
	n.kickPending, n.kickAt = true, t
	n.s.Post(t, n, evKick<<evShift|postedArg(n.s.Now()))
}

// activate puts qp on the transmit scheduler's list and kicks it.
func (n *NIC) activate(qp *QP) {
	if !qp.active {
		qp.active = true
		qp.actPos = len(n.act)
		qp.places++
		n.act = append(n.act, qp)
		n.actWake = append(n.actWake, txHint{})
	} else {
		n.actWake[qp.actPos] = txHint{}
	}
	n.kick(n.s.Now())
}

// txHint is a QP's cached "cannot send before wake" answer, valid while
// the clock is before until and nothing happened to the QP (and, for an
// answer that came from the NIC's read budget being spent, while it
// stays spent): trySend would give the same answer again, with no side
// effect (QP.txUntil, QP.txBudget). Every event of the QP and every
// activation clears it, so the scheduler skips exactly the calls whose
// outcome is known; it sends the same packets at the same instants as
// without the cache. A place left by a QP dropped from the list holds
// a hint that never expires (gone).
type txHint struct {
	until, wake sim.Time
	budget      bool
}

// gone is the hint of a place no QP holds any more: the scan skips it.
var gone = txHint{until: sim.MaxTime, wake: sim.MaxTime}

// unhint forgets qp's cached transmit answer: its state may have changed.
func (qp *QP) unhint() {
	if qp.active {
		qp.n.actWake[qp.actPos] = txHint{}
	}
}

// transmit sends at most one packet now, choosing among active QPs
// round-robin, and schedules itself for the next one.
//
// The active list keeps its order: QPs activated later come later. A QP
// the scan finds with nothing to send leaves the list, but its place is
// only marked gone (nil, with the gone hint) and the list is compacted
// once gone places outnumber held ones, so that dropping a QP costs no
// pass over the list. The round-robin order over held places is the
// same as with the list compacted after every scan: n.rr may point at a
// gone place, and the scan then starts at the next held one, as the
// compacted list's cursor would.
func (n *NIC) transmit() {
	now := n.s.Now()
	if free := max(n.net.PortFreeAt(n.ep), n.txFree); free > now {
		n.kick(free)
		return
	}
	next := sim.MaxTime
	k := len(n.act)
	sent := false
	if len(n.cnpq) > 0 {
		n.sendCNP()
		sent, k = true, 0
	}
	for j := 0; j < k && !sent; j++ {
		idx := n.rr + j
		if idx >= k {
			idx -= k
		}
		if h := &n.actWake[idx]; h.until > now && (!h.budget || n.readAhead >= n.cfg.ReadAhead) {
			next = min(next, h.wake) // trySend would answer (false, h.wake) again
			continue
		}
		qp := n.act[idx]
		ok, wake := qp.trySend(now)
		var h txHint
		// A QP holding two places (dropped and added back within one
		// scan) has its events clear only its last place's hint, so an
		// answer that depends on the read budget is cached only for a
		// QP in one place.
		if !ok && wake != sim.MaxTime && qp.txUntil > now && (!qp.txBudget || qp.places == 1) {
			h = txHint{until: qp.txUntil, wake: wake, budget: qp.txBudget}
		}
		n.actWake[idx] = h
		if ok {
			sent = true
			n.rr = idx
			if n.cfg.TxArb == ArbPacket || !qp.midMessage() {
				n.rr = idx + 1
			}
			break
		}
		if wake < next {
			next = wake
		}
		if wake == sim.MaxTime {
			qp.active = false // an event that makes it sendable activates it again
			n.dropped = append(n.dropped, qp)
		}
	}
	if len(n.dropped) > 0 {
		n.leave()
	}
	if n.rr >= len(n.act) {
		n.rr = 0
	}
	if sent {
		n.txFree = now.Add(n.cfg.TxPacketCost)
		n.kick(max(n.txFree, n.net.PortFreeAt(n.ep)))
		return
	}
	if next != sim.MaxTime {
		n.kick(next)
	}
}

// leave takes the QPs the scan dropped off the active list, unless an
// event in the same scan activated them again (then they keep every place
// they hold, the old one included). Their places are marked gone and the
// cursor moves as the list compacted after every scan moved it; trailing
// gone places are cut and the list is compacted when most places are
// gone.
func (n *NIC) leave() {
	pos := n.leaving[:0]
	for _, qp := range n.dropped {
		if qp.active || qp.places == 0 {
			continue
		}
		if qp.places == 1 {
			pos = append(pos, qp.actPos)
		} else {
			for i, q := range n.act {
				if q == qp {
					pos = append(pos, i)
				}
			}
		}
		qp.places = 0
	}
	clear(n.dropped)
	n.dropped = n.dropped[:0]
	n.leaving = pos
	if len(pos) == 0 {
		return
	}
	slices.Sort(pos)
	extra := n.cursorSkip(pos)
	for _, p := range pos {
		n.act[p], n.actWake[p] = nil, gone
	}
	n.gone += len(pos)
	// The cursor goes to the first held place at or after it (wrapping),
	// then extra held places further.
	w := len(n.act)
	for w > 0 && n.act[w-1] == nil {
		w--
	}
	n.gone -= len(n.act) - w
	n.act, n.actWake = n.act[:w], n.actWake[:w]
	if w == 0 {
		n.rr = 0
		return
	}
	r := n.rr
	for ; ; extra-- {
		for r < w && n.act[r] == nil {
			r++
		}
		if r >= w {
			for r = 0; n.act[r] == nil; r++ {
			}
		}
		if extra == 0 {
			break
		}
		r++
	}
	n.rr = r
	if 2*n.gone <= w {
		return
	}
	// Compact, keeping the order and the cursor's held place.
	w = 0
	for j, qp := range n.act {
		if qp == nil {
			continue
		}
		if j == n.rr {
			n.rr = w
		}
		n.act[w], n.actWake[w] = qp, n.actWake[j]
		qp.actPos = w
		w++
	}
	clear(n.act[w:])
	n.act, n.actWake = n.act[:w], n.actWake[:w]
	n.gone = 0
}

// cursorSkip returns how many held places beyond the first one at or
// after the cursor the list compacted after every scan would start the
// next scan at, when the places at pos (sorted; not yet marked gone)
// leave. That compaction moved the cursor back by one for each leaving
// place before it, but compared each place with the cursor already moved
// back: the i-th leaving place (from 1) moved it only if it lay more
// than i-1 places before the cursor's original place, so a run of
// places leaving just before the cursor (the QPs a scan dropped before
// reaching its sender) moves the next scan's start forward, past held
// QPs. The order of service is part of the model's output, so this
// scheduler keeps it.
func (n *NIC) cursorSkip(pos []int) int {
	c, _ := slices.BinarySearch(pos, n.rr) // leaving places before the cursor
	// The places that failed to move the cursor back form a suffix of
	// those c: walk back from the cursor counting held places.
	extra, held := 0, 0
	for p, i := n.rr-1, c-1; i >= 0; p-- {
		if n.act[p] != nil {
			held++
		}
		if p == pos[i] {
			if held >= i+1 {
				break
			}
			extra++
			i--
		}
	}
	return extra
}

// send hands a built packet to the network.
// readWait is the sending QP's QP.readWait for obs.Sent (0 for responses
// and CNPs).
func (n *NIC) send(p *fabric.Packet, readWait sim.Duration) {
	if n.tap != nil {
		n.tap(p)
	}
	if n.obs != nil {
		n.obs.Emit(obs.Event{Kind: obs.Sent, At: n.s.Now(), Op: p.Op, Who: n.name, QP: p.Hdr.DestQP, PSN: p.Hdr.PSN,
			Code: uint32(p.Hdr.Opcode), Index: p.ID, Bytes: uint64(p.PayloadLen), Addr: uint64(p.Src), Value: uint64(p.Dst),
			Old: uint64(readWait)})
	}
	n.net.Send(p)
}

// Receive is called by the network when a packet's last bit has arrived.
func (n *NIC) Receive(p *fabric.Packet) {
	if n.rxHook != nil && !n.rxHook(p) {
		return
	}
	n.deliver(p)
}

// deliver enters p into the receive pipeline.
func (n *NIC) deliver(p *fabric.Packet) {
	now := n.s.Now()
	start := max(now, n.rxFree)
	n.rxFree = start.Add(n.cfg.RxPacketCost)
	n.rxq = append(n.rxq, p)
	n.s.Post(start.Add(n.cfg.RxLatency), n, evRx<<evShift|postedArg(now))
}

// postedArg is the posting time t carried in a kick's or receive event's
// argument (below the event kind; after 2^56 ps, 20 hours, it saturates).
func postedArg(t sim.Time) uint64 { return min(uint64(t), 1<<evShift-1) }

// process handles one received packet after the receive pipeline.
func (n *NIC) process(p *fabric.Packet) {
	qpn := p.Hdr.DestQP
	var qp *QP
	if i := int(qpn) - qpnBase; i >= 0 && i < len(n.qps) {
		qp = n.qps[i]
	}
	switch {
	case p.Corrupt:
		n.stats.ICRCErrors++ // the ICRC check fails: silently dropped (IBTA 9.2)
		n.net.Free(p)
		return
	case qp == nil || p.Dst != n.ep || qp.remoteEP != p.Src:
		n.stats.UnknownQP++
		n.net.Free(p)
		return
	}
	qp.unhint()
	switch {
	case p.Hdr.Opcode.IsCNP():
		qp.cnpReceived()
		n.net.Free(p)
		return
	}
	if p.ECN == 3 && n.cfg.DCQCN {
		qp.congested(p)
	}
	if p.Hdr.Opcode.IsRequest() {
		qp.handleRequest(p)
	} else {
		qp.handleResponse(p)
	}
}

// Stats counts a NIC's protocol events.
type Stats struct {
	ICRCErrors     uint64 // packets dropped by the ICRC check (fabric.Packet.Corrupt)
	UnknownQP      uint64 // packets dropped for an unknown QP or a source not connected to it
	Retransmits    uint64 // request packets sent again (go-back-N after a NAK, timeout or implied NAK)
	DupRequests    uint64 // duplicate requests the responder answered again
	CEReceived     uint64 // CE-marked packets received (DCQCN notification point)
	CNPsSent       uint64 // CNPs sent
	CNPsReceived   uint64 // CNPs received
	RateCuts       uint64 // DCQCN rate cuts
	RateIncreases  uint64 // DCQCN rate-increase events (lazy timers: those applied so far, see rpState)
	RdAtomicQueued uint64 // incoming READ/atomic requests held back by the MaxDestRdAtomic limit
	CQOverruns     uint64 // CQs that overran and went to the error state
	Timeouts       uint64 // local ACK timeouts that rewound a QP (go-back-N from the oldest unacknowledged PSN)
	SeqNAKs        uint64 // PSN sequence error NAKs this NIC's responders sent (a request packet arrived after a gap)
	InOrder        uint64 // request packets responders took at the expected PSN: each is executed exactly once
}

// Stats returns the NIC's counters.
func (n *NIC) Stats() Stats { return n.stats }

// landing is one DMA effect waiting for its landed/applied time.
type landing struct {
	kind  uint8
	qp    *QP
	r     *mem.Region
	off   uint64
	n     uint64
	pkt   *fabric.Packet
	a, b  uint64 // atomic operands / value to store
	opid  obs.OpID
	op    WROpcode
	entry uint64 // atomic: responder queue entry; cache slot in low bits
	psn   uint32
}

const (
	landWrite  uint8 = iota // payload write from pkt (or unknown content when pkt has no data)
	landAtomic              // responder atomic at target memory
	landStore               // requester stores an 8-byte atomic result locally
)

func (n *NIC) schedLand(at sim.Time, l landing) {
	var i int32
	if k := len(n.landFree); k > 0 {
		i = n.landFree[k-1]
		n.landFree = n.landFree[:k-1]
		n.lands[i] = l
	} else {
		i = int32(len(n.lands))
		n.lands = append(n.lands, l)
	}
	n.s.Post(at, n, evLand<<evShift|uint64(i))
}

func (n *NIC) land(i int32) {
	l := n.lands[i]
	n.lands[i] = landing{}
	if l.qp != nil {
		l.qp.unhint()
	}
	n.landFree = append(n.landFree, i)
	switch l.kind {
	case landWrite:
		var src []byte
		if l.pkt != nil && l.pkt.Payload != nil {
			src = l.pkt.Payload
		}
		l.r.Write(l.off, src, l.n, l.qp.name)
		if n.obs != nil {
			n.obs.Emit(obs.Event{Kind: obs.Landed, At: n.s.Now(), Op: l.opid, Who: l.qp.name, QP: l.qp.qpn, Where: l.r.Name(), Addr: l.off, Bytes: l.n})
		}
		if l.pkt != nil {
			n.net.Free(l.pkt)
		}
	case landAtomic:
		var old uint64
		if l.op == WRFetchAdd {
			old = l.r.FetchAdd64(l.off, l.a, l.qp.name)
		} else {
			old = l.r.CompareSwap64(l.off, l.a, l.b, l.qp.name)
		}
		if n.obs != nil {
			v := old + l.a
			if l.op != WRFetchAdd {
				v = old
				if old == l.a {
					v = l.b
				}
			}
			n.obs.Emit(obs.Event{Kind: obs.Atomic, At: n.s.Now(), Op: l.opid, Who: l.qp.name, QP: l.qp.qpn, Where: l.r.Name(), Addr: l.off, Old: old, Value: v})
		}
		l.qp.atomicApplied(l.entry, l.psn, old)
	case landStore:
		l.r.Store64(l.off, l.a, l.qp.name)
	}
}

// MR is a memory registration: [VA, VA+Len) maps to Region bytes
// [Off, Off+Len), which the NIC reaches over PCIe at device Where.
type MR struct {
	LKey, RKey  uint32
	VA          uint64
	Len         uint64
	Region      *mem.Region
	Off         uint64
	Access      Access
	Where       pcie.DevID
	StrictOrder bool // payload writes into the region land in the order the NIC issued them

	nic   *NIC
	valid bool
}

// RegMR registers region bytes [off, off+length) at virtual address va.
func (n *NIC) RegMR(r *mem.Region, off, length, va uint64, access Access, where pcie.DevID, strictOrder bool) (*MR, error) {
	if r == nil || length == 0 || !r.InBounds(off, length) || va+length < va {
		return nil, fmt.Errorf("%w: RegMR of [%d,+%d) in %v", ErrInvalid, off, length, r)
	}
	idx := len(n.mrs) + 1
	if idx >= 1<<24 {
		return nil, fmt.Errorf("%w: too many memory regions", ErrInvalid)
	}
	key := uint32(idx)<<8 | uint32(idx*37)&0xff
	mr := &MR{LKey: key, RKey: key, VA: va, Len: length, Region: r, Off: off, Access: access, Where: where,
		StrictOrder: strictOrder, nic: n, valid: true}
	n.mrs = append(n.mrs, mr)
	return mr, nil
}

// DeregMR invalidates mr: later local uses complete with StatusLocProtErr and
// remote uses are NAKed with a remote access error.
func (n *NIC) DeregMR(mr *MR) error {
	if mr == nil || mr.nic != n {
		return fmt.Errorf("%w: DeregMR", ErrNotOwned)
	}
	if !mr.valid {
		return fmt.Errorf("%w: MR already deregistered", ErrInvalid)
	}
	mr.valid = false
	return nil
}

// lookupRKey returns the valid MR with the given R_Key, or nil.
func (n *NIC) lookupRKey(key uint32) *MR {
	i := int(key>>8) - 1
	if i < 0 || i >= len(n.mrs) {
		return nil
	}
	mr := n.mrs[i]
	if mr.RKey != key || !mr.valid {
		return nil
	}
	return mr
}

// remote checks a remote access of n bytes at va and returns the region
// offset, or false.
func (mr *MR) remote(va, n uint64, need Access) (uint64, bool) {
	if mr == nil || mr.Access&need == 0 || va < mr.VA || va-mr.VA > mr.Len || n > mr.Len-(va-mr.VA) {
		return 0, false
	}
	return mr.Off + (va - mr.VA), true
}

// local checks a local SGE of this NIC; it returns the status to complete
// with on failure.
func (n *NIC) local(g *SGE, write bool) Status {
	mr := g.MR
	if mr == nil || mr.nic != n || !mr.valid {
		return StatusLocProtErr
	}
	if g.Off > mr.Len || g.Len > mr.Len-g.Off {
		return StatusLocProtErr
	}
	if write && mr.Access&AccessLocalWrite == 0 {
		return StatusLocProtErr
	}
	return StatusSuccess
}

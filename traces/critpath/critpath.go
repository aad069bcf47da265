package critpath

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// Phase is one segment of an operation's critical path.
type Phase uint8

// Phases in path order (see the package doc).
const (
	Issue Phase = iota
	Descriptor
	Proxy
	Doorbell
	Fetch
	Payload
	NIC
	Wire
	Landing
	Signal
	NumPhases
)

var phaseNames = [NumPhases]string{"issue", "descriptor", "proxy", "doorbell", "fetch", "payload", "nic", "wire", "landing",
	"signal"}

func (p Phase) String() string {
	if p < NumPhases {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// Row is the critical path of one operation.
type Row struct {
	Op    obs.OpID
	Kind  string // "put", "signal", ...
	Who   string // the issuing coop
	Bytes uint64
	// Start is the device call; End the signal seen (or the last landing).
	Start, End sim.Time
	Phases     [NumPhases]sim.Duration
	// Local is the issuer's completion (counter or flush returned, else
	// the last CQE written) minus Start; 0 if none was observed.
	Local sim.Duration
	// Seen reports whether a waiter's SignalSeen ended the path.
	Seen bool
	// Proxy reports a proxy GFD (Descriptor is then its PCIe crossing).
	Proxy bool
	// Rank is the issuing rank, Peer the target rank (Issued's Index and
	// Value).
	Rank, Peer int
	// NIC names the NIC that sent the path's first request packet (its
	// Sent event's Who); DstEP is the fabric endpoint its packets reached
	// (Received's Value).
	NIC   string
	DstEP int
	// Ports are the fabric ports the path's request packets left, in the
	// order first crossed (Hop's Value): the sending NIC's port, the
	// switch ports, the last switch's port to the target NIC. Empty unless
	// the fabric was observed.
	Ports []int
}

// Total returns End - Start (the sum of the phases).
func (r *Row) Total() sim.Duration { return r.End.Sub(r.Start) }

// Effect returns when the operation's effect was applied at the target
// (the end of its Landing phase).
func (r *Row) Effect() sim.Time { return r.End.Add(-r.Phases[Signal]) }

// op gathers one operation's milestones while the stream is read.
type op struct {
	row    Row
	issued bool
	// The op's first descriptor written (GDAKI publish / proxy GFD store
	// issued) and its landing (proxy), and its first doorbell: a GDAKI
	// counter's companion WQEs are published and rung after the data's.
	posted, gfdLand sim.Time
	proxy, hasPost  bool
	dbAt, dbArrive  sim.Time
	hasDB           bool
	// The op's first WQE fetch read and first payload read (obs.DMARead)
	// after its doorbell arrived, and its QP's read wait when its first
	// WQE was fetched (obs.Fetched's Old).
	fetch, payload read
	fetchedWait    sim.Duration
	fetched        bool
	seenAt         sim.Time
	seenWord       word
	local          sim.Time
	cqe            sim.Time
	// Per responder QP: first request sent, last request received, last
	// effect applied (landing or atomic) and the words atomics hit.
	qps []qpPath
	// Storage for the first path, its ports and its atomic, the usual
	// case: an op then costs no allocation of its own (ops come from
	// Tracker's slab and are never copied).
	qps0   [1]qpPath
	ports0 [4]int
	atoms0 [1]word
}

type word struct {
	where string
	addr  uint64
}

// read is a DMA read's issue and arrival.
type read struct {
	at, then sim.Time
	ok       bool
}

func (r *read) note(e *obs.Event) {
	if !r.ok {
		*r = read{e.At, e.Then, true}
	}
}

type qpPath struct {
	qp              uint32
	sent, rcvd, eff sim.Time
	hasSent, landed bool
	atomics         []word
	nic             string
	dstEP           int
	ports           []int
	sentWait        sim.Duration // the sending QP's read wait at the first request sent
}

func (o *op) path(qp uint32) *qpPath {
	for i := range o.qps {
		if o.qps[i].qp == qp {
			return &o.qps[i]
		}
	}
	if o.qps == nil {
		o.qps = o.qps0[:0]
		o.qps = append(o.qps, qpPath{qp: qp, ports: o.ports0[:0], atomics: o.atoms0[:0]})
	} else {
		o.qps = append(o.qps, qpPath{qp: qp})
	}
	return &o.qps[len(o.qps)-1]
}

// Tracker builds the critical path of operations as their events
// arrive: an obs.Observer. An operation is followed from its Issued event
// on; events of operations it did not see issued are ignored.
type Tracker struct {
	// ops[id-base] is operation id's state (nil: not followed). Ids are
	// drawn in order, so the slice grows at its end as ops are issued.
	ops  []*op
	base obs.OpID
	// follow has bit id-base set when ops[id-base] is not nil: most
	// events are of ops not followed (data puts, the fabric's hops of
	// them), and a bit per id stays in cache where a pointer does not.
	follow []uint64
	// slab holds ops not yet issued, allocated a chunk at a time.
	slab []op
	// Signals follows only operations that update a signal at the peer
	// (Issued's Code has IssuedSignal or IssuedVASignal): the ones a
	// waiter can see. A run's data puts then cost one index per event.
	Signals bool
}

// opChunk is how many ops Tracker allocates at once.
const opChunk = 256

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{base: 1} }

// Reset forgets every operation issued so far (between phases: the ones
// in flight are then no longer followed).
func (t *Tracker) Reset() {
	t.base += obs.OpID(len(t.ops))
	clear(t.ops)
	t.ops = t.ops[:0]
	clear(t.follow)
	t.follow = t.follow[:0]
}

// get returns operation id's state, nil if it is not followed.
func (t *Tracker) get(id obs.OpID) *op {
	i := id - t.base
	if id < t.base || i >= obs.OpID(len(t.ops)) || t.follow[i/64]&(1<<(i%64)) == 0 {
		return nil
	}
	return t.ops[i]
}

// Observe implements obs.Observer.
func (t *Tracker) Observe(e obs.Event) {
	if e.Op == 0 {
		return
	}
	if e.Kind == obs.Issued {
		if e.Op < t.base || t.Signals && e.Code&(obs.IssuedSignal|obs.IssuedVASignal) == 0 {
			return
		}
		if len(t.slab) == 0 {
			t.slab = make([]op, opChunk)
		}
		o := &t.slab[0]
		t.slab = t.slab[1:]
		o.issued = true
		o.row.Op, o.row.Start, o.row.Kind, o.row.Who, o.row.Bytes = e.Op, e.At, e.Where, e.Who, e.Bytes
		o.row.Rank, o.row.Peer = int(e.Index), int(e.Value)
		i := e.Op - t.base
		for obs.OpID(len(t.ops)) <= i {
			t.ops = append(t.ops, nil)
		}
		for obs.OpID(len(t.follow)) <= i/64 {
			t.follow = append(t.follow, 0)
		}
		t.ops[i] = o
		t.follow[i/64] |= 1 << (i % 64)
		return
	}
	if o := t.get(e.Op); o != nil {
		o.add(&e)
	}
}

// Row returns the critical path of operation id, if it was followed and
// reached its target.
func (t *Tracker) Row(id obs.OpID) (Row, bool) {
	if o := t.get(id); o != nil {
		return o.finish()
	}
	return Row{}, false
}

// Rows returns one row per operation followed that reached its target,
// in op id order.
func (t *Tracker) Rows() []Row {
	var rows []Row
	for _, o := range t.ops {
		if o == nil {
			continue
		}
		if r, ok := o.finish(); ok {
			rows = append(rows, r)
		}
	}
	return rows
}

// Table computes one row per operation that was issued and reached its
// target, in op id order.
func Table(events []obs.Event) []Row {
	t := NewTracker()
	for _, e := range events {
		t.Observe(e)
	}
	return t.Rows()
}

// add notes one event of the operation.
func (o *op) add(e *obs.Event) {
	switch e.Kind {
	case obs.Posted:
		if !o.hasPost {
			o.hasPost, o.posted = true, e.At
			if e.Then != 0 { // a proxy GFD store: Then is its landing
				o.proxy, o.gfdLand = true, e.Then
			}
		}
	case obs.Doorbell:
		if !o.hasDB {
			o.hasDB, o.dbAt, o.dbArrive = true, e.At, e.Then
		}
	case obs.DMARead:
		if o.hasDB && e.At >= o.dbArrive {
			if e.Note == "wqe" {
				o.fetch.note(e)
			} else {
				o.payload.note(e)
			}
		}
	case obs.Fetched:
		if !o.fetched {
			o.fetched, o.fetchedWait = true, sim.Duration(e.Old)
		}
	case obs.Sent:
		if roce.Opcode(e.Code).IsRequest() {
			p := o.path(e.QP)
			if !p.hasSent || e.At < p.sent {
				p.sent, p.hasSent, p.nic, p.sentWait = e.At, true, e.Who, sim.Duration(e.Old)
			}
		}
	case obs.Hop:
		if roce.Opcode(e.Code).IsRequest() {
			p := o.path(e.QP)
			if port := int(e.Value); !slices.Contains(p.ports, port) {
				p.ports = append(p.ports, port)
			}
		}
	case obs.Received:
		if roce.Opcode(e.Code).IsRequest() {
			p := o.path(e.QP)
			p.rcvd, p.dstEP = max(p.rcvd, e.At), int(e.Value)
		}
	case obs.Landed:
		p := o.path(e.QP)
		p.eff, p.landed = max(p.eff, e.At), true
	case obs.Atomic:
		p := o.path(e.QP)
		p.eff = max(p.eff, e.At)
		p.atomics = append(p.atomics, word{e.Where, e.Addr})
	case obs.SignalSeen:
		o.seenAt, o.seenWord = e.At, word{e.Where, e.Addr}
	case obs.Completed:
		o.local = max(o.local, e.At)
	case obs.CQE:
		o.cqe = max(o.cqe, e.At)
	}
}

// target picks the responder QP whose effect ends the path: the one whose
// atomic hit the word the waiter saw; else (no waiter saw this op) the
// first one that landed a payload; else the first one reached (a signal
// alone). A GDAKI counter's loopback QP comes after the data's.
func (o *op) target() (*qpPath, bool) {
	if o.seenWord.where != "" {
		for i := range o.qps {
			if slices.Contains(o.qps[i].atomics, o.seenWord) && o.qps[i].hasSent {
				return &o.qps[i], true
			}
		}
	}
	for _, payload := range []bool{true, false} {
		for i := range o.qps {
			if p := &o.qps[i]; p.hasSent && p.eff != 0 && (p.landed || !payload) {
				return p, true
			}
		}
	}
	return nil, false
}

func (o *op) finish() (Row, bool) {
	p, ok := o.target()
	if !o.issued || !ok || !o.hasPost || !o.hasDB {
		return Row{}, false
	}
	r := o.row
	seen := o.seenWord.where != "" && slices.Contains(p.atomics, o.seenWord)
	end := p.eff
	if seen {
		end = o.seenAt
	}
	// Milestones in path order; a phase is the difference of two. GDAKI
	// has no proxy phase: it starts and ends at the doorbell.
	proxyFrom := o.dbAt
	if o.proxy {
		proxyFrom = o.gfdLand
	}
	ms := [...]sim.Time{r.Start, o.posted, proxyFrom, o.dbAt, o.dbArrive, p.sent, p.rcvd, p.eff, end}
	for i, ph := range [...]Phase{Issue, Descriptor, Proxy, Doorbell, NIC, Wire, Landing, Signal} {
		r.Phases[ph] = ms[i+1].Sub(ms[i])
	}
	// The NIC's span (doorbell arrived -> first packet sent) holds its
	// reads over PCIe; what is left is the NIC's own time. Payload is the
	// time the QP's send queue head waited for payload reads between the
	// op's fetch and its first packet (the reads of WQEs ahead of it
	// included), else its own first payload read.
	var fetch, payload sim.Duration
	if o.fetch.ok && o.fetch.then <= p.sent {
		fetch = o.fetch.then.Sub(o.fetch.at)
	}
	switch {
	case o.fetched && p.sentWait > o.fetchedWait:
		payload = p.sentWait - o.fetchedWait
	case o.payload.ok && o.payload.then <= p.sent:
		payload = o.payload.then.Sub(o.payload.at)
	}
	for _, x := range [...]struct {
		ph Phase
		d  sim.Duration
	}{{Fetch, fetch}, {Payload, payload}} {
		d := min(x.d, r.Phases[NIC])
		r.Phases[x.ph], r.Phases[NIC] = d, r.Phases[NIC]-d
	}
	r.End, r.Seen, r.Proxy = end, seen, o.proxy
	r.NIC, r.DstEP = p.nic, p.dstEP
	if len(p.ports) > 0 { // nil when none, as before
		r.Ports = slices.Clip(p.ports)
	}
	if o.local != 0 {
		r.Local = o.local.Sub(r.Start)
	} else if o.cqe != 0 {
		r.Local = o.cqe.Sub(r.Start)
	}
	return r, true
}

// Write prints rows as a table, times in microseconds.
func Write(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "op\tkind\tbytes\t")
	for p := range NumPhases {
		fmt.Fprintf(tw, "%s\t", p)
	}
	fmt.Fprint(tw, "total\tend\tlocal\t\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%d\t", r.Op, r.Kind, r.Bytes)
		for _, d := range r.Phases {
			fmt.Fprintf(tw, "%.3f\t", d.Us())
		}
		end := "landed"
		if r.Seen {
			end = "seen"
		}
		fmt.Fprintf(tw, "%.3f\t%s\t%.3f\t\n", r.Total().Us(), end, r.Local.Us())
	}
	return tw.Flush()
}

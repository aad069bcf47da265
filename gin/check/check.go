package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// Kind is the kind of a violation.
type Kind uint8

// Violation kinds (see the package doc).
const (
	DoubleLanding       Kind = iota // an op's bytes landed more than once
	DoubleUpdate                    // an op updated a signal or counter word twice
	SignalBeforePayload             // a signal's atomic landed before a put it covers
	CounterEarly                    // a counter moved before its op completed locally
	FlushEarly                      // a flush or wait returned before an op it covers completed
	UnwrittenValue                  // a read or wait saw a value the word never held
	LostUpdate                      // an atomic's old value was not the word's value
	Lost                            // an issued op never took effect (run did not fail)
	Race                            // device code read landed bytes no observation covers
	NumKinds
)

var kindNames = [NumKinds]string{"double_landing", "double_update", "signal_before_payload", "counter_early",
	"flush_early", "unwritten_value", "lost_update", "lost", "race"}

func (k Kind) String() string {
	if k < NumKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Violation is one breach of the spec: the op at fault and, where there is
// one, the other op involved (the put a signal overtook, the op a flush
// did not wait for), with ranks, contexts and times.
type Violation struct {
	Kind Kind
	At   sim.Time // when the breach was observed
	// Op is the op at fault (the signal, the flushed-over op, the put
	// read too early); OpKind its kind ("put", ...). Rank, Ctx and Peer
	// are its issuer, context and peer.
	Op              obs.OpID
	OpKind          string
	Rank, Ctx, Peer int
	Other           obs.OpID // the other op (0: none)
	OtherKind       string
	OtherRank       int      // the other op's issuer (-1: none)
	OtherAt         sim.Time // the other op's issue time
	Who             string   // the agent that observed or caused it (waiter, reader, NIC QP)
	Where           string   // region
	Addr            uint64
	Detail          string
}

func (v *Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v at %v: op %d (%s, rank %d ctx %d -> %d)", v.Kind, v.At, v.Op, v.OpKind, v.Rank, v.Ctx, v.Peer)
	if v.Other != 0 {
		fmt.Fprintf(&b, " vs op %d (%s, rank %d, issued %v)", v.Other, v.OtherKind, v.OtherRank, v.OtherAt)
	}
	if v.Who != "" {
		fmt.Fprintf(&b, " by %s", v.Who)
	}
	if v.Where != "" {
		fmt.Fprintf(&b, " at %s+%d", v.Where, v.Addr)
	}
	if v.Detail != "" {
		b.WriteString(": ")
		b.WriteString(v.Detail)
	}
	return b.String()
}

// Report counts what the checker saw and found.
type Report struct {
	Events    uint64 `json:"events"`
	Ops       uint64 `json:"ops"`      // GIN ops issued
	Landings  uint64 `json:"landings"` // payload landings
	Updates   uint64 `json:"updates"`  // signal and counter updates
	Observed  uint64 `json:"observed"` // waits and reads checked by the memory oracle
	Reads     uint64 `json:"reads"`    // window reads checked for races
	Undecided uint64 `json:"undecided"`
	// Untracked counts landings dropped from the race check (MaxSpans).
	Untracked uint64 `json:"untracked"`
	// Live and Spans are the state held when the report was taken: ops
	// not yet retired and landings not yet overwritten.
	Live       int              `json:"live"`
	Spans      int              `json:"spans"`
	Violations uint64           `json:"violations"`
	ByKind     map[string]int64 `json:"by_kind,omitempty"`
	// Kept are the first MaxKept violations.
	Kept []Violation `json:"-"`
}

// Limits of the checker's memory.
const (
	MaxKept  = 1000 // violations kept in Report.Kept (all are counted)
	MaxSpans = 4096 // uncovered landings remembered per region of a rank
	history  = 16   // values remembered per signal or counter word
)

type chanKey struct {
	dom             uint64 // the device communicator (obs.Issued Addr)
	rank, ctx, peer int32
}

// channel is one (rank, context, peer) ordering domain: the ops posted on
// it that are not yet applied, in post order.
type channel struct {
	key chanKey
	seq uint64
	// pending are the ops posted that may not be applied yet, in post
	// order; an entry whose op was applied or retired since is dropped
	// when it reaches the front (the common case, ops applied in order,
	// is then O(1)).
	pending fifo[pend]
	// covered is the highest post sequence of a strong signal on the
	// channel that its destination observed.
	covered uint64
}

// pend is an entry of channel.pending: the op and its id, which tells a
// retired op (reused for a later id) from a live one.
type pend struct {
	o  *op
	id obs.OpID
}

// waiting says whether the entry's op is still to be applied.
func (p pend) waiting() bool { return p.o.id == p.id && !p.o.applied() }

// trim drops the entries at the front that no longer wait.
func (ch *channel) trim() {
	for ch.pending.len() > 0 && !ch.pending.items()[0].waiting() {
		ch.pending.pop()
	}
}

// fifo is a queue on a slice that reuses its storage: pop moves a head
// index, and push moves the items down when the head has passed half
// the slice (plain reslicing would make append reallocate over and over).
type fifo[T any] struct {
	s    []T
	head int
}

func (q *fifo[T]) len() int   { return len(q.s) - q.head }
func (q *fifo[T]) items() []T { return q.s[q.head:] }

func (q *fifo[T]) push(v T) {
	if q.head > 0 && q.head*2 >= len(q.s) {
		n := copy(q.s, q.s[q.head:])
		clear(q.s[n:])
		q.s, q.head = q.s[:n], 0
	}
	q.s = append(q.s, v)
}

func (q *fifo[T]) pop() {
	var zero T
	q.s[q.head] = zero
	q.head++
}

// opTable holds the live ops by id. Ids are dense (obs.Bus.NewOp hands
// them out 1, 2, ...) and ops retire roughly in issue order, so a window
// of ids [base, base+q.len()) whose front moves past retired ops replaces
// a map.
type opTable struct {
	base obs.OpID
	q    fifo[*op]
	n    int // live ops
}

func (t *opTable) get(id obs.OpID) *op {
	if id < t.base || id-t.base >= obs.OpID(t.q.len()) {
		return nil
	}
	return t.q.items()[id-t.base]
}

func (t *opTable) put(o *op) {
	id := o.id
	switch {
	case t.q.len() == 0:
		t.base = id
		t.q.push(o)
	case id < t.base: // issued after later ids retired: widen the front
		old := t.q.items()
		s := make([]*op, int(t.base-id)+len(old), int(t.base-id)+cap(old))
		copy(s[t.base-id:], old)
		s[0] = o
		t.q, t.base = fifo[*op]{s: s}, id
	default:
		for id-t.base >= obs.OpID(t.q.len()) {
			t.q.push(nil)
		}
		t.q.items()[id-t.base] = o
	}
	t.n++
}

func (t *opTable) remove(id obs.OpID) {
	t.q.items()[id-t.base] = nil
	t.n--
	for t.q.len() > 0 && t.q.items()[0] == nil {
		t.q.pop()
		t.base++
	}
}

// all returns the window, retired ops included (nil).
func (t *opTable) all() []*op { return t.q.items() }

type op struct {
	id              obs.OpID
	kind            string
	who             string
	at              sim.Time
	dom             uint64
	rank, ctx, peer int32
	code            uint32
	bytes           uint64
	landed          uint64
	signaled        bool
	countered       bool
	cqe             bool
	cqeErr          bool     // a CQE with an error status
	cqeAt           sim.Time // the first CQE
	posted          bool
	nwords          uint8
	seq             uint64
	ch              *channel
	words           [2]*wordState // words this op updated (a signal and a counter)
	last            *span         // the span its last landing made or extended
	spans           []*span       // its spans, kept for a weak signal to cover
}

func (o *op) data() bool {
	return o.kind == "put" || o.kind == "put_value" || o.kind == "get"
}
func (o *op) wantSignal() bool  { return o.code&(obs.IssuedSignal|obs.IssuedVASignal) != 0 }
func (o *op) wantCounter() bool { return o.code&obs.IssuedCounter != 0 }
func (o *op) weak() bool        { return o.code&obs.IssuedWeak != 0 }

// applied: payload landed and signal applied (what a later strong signal
// on the channel must wait for).
func (o *op) applied() bool {
	return (!o.data() || o.landed >= o.bytes) && (!o.wantSignal() || o.signaled)
}

func (o *op) done() bool {
	return o.applied() && (!o.wantCounter() || o.countered) && o.cqe
}

type word struct {
	where string
	addr  uint64
}

// wordState is a signal or counter word's recent history: update k
// (from 0) is h[k%history]; h grows to history entries as updates come
// (most words see one or two per run).
type wordState struct {
	h     []wordVal
	n     uint64 // updates seen
	last  uint64
	reset bool
}

// wordVal is a value a word held and what observing it covers (ref.ch
// nil: nothing).
type wordVal struct {
	val uint64
	ref sigRef
}

func (ws *wordState) at(k uint64) *wordVal { return &ws.h[k%history] }

func (ws *wordState) add(v wordVal) {
	if len(ws.h) < history {
		ws.h = append(ws.h, v)
	} else {
		*ws.at(ws.n) = v
	}
	ws.n++
	ws.last = v.val
}

// sigRef is what an observation of a signal value covers: the signalling
// op's channel and post sequence (strong), or the op alone (weak).
type sigRef struct {
	ch    *channel
	seq   uint64
	weak  bool
	spans []*span // a weak signal's own put
}

// span is a landed byte range of a put or get at a rank, not yet covered
// for the readers of that rank.
type span struct {
	id      obs.OpID
	kind    string
	rank    int32 // issuer
	ctx     int32
	at      sim.Time
	lo, hi  uint64
	ch      *channel
	seq     uint64
	get     bool
	covered bool
	dead    bool // overwritten or dropped
	rs      *regionSpans
}

// isCovered reports whether a read of s is safe: an observation marked
// it, or a strong signal posted after it on its channel was observed.
func (s *span) isCovered() bool {
	return s.covered || !s.get && s.seq > 0 && s.seq <= s.ch.covered
}

type spanKey struct {
	rank   int
	region string
}

// regionSpans are the uncovered landings in one region of one rank,
// sorted by start offset.
type regionSpans struct {
	s      []spanAt
	maxLen uint64 // the longest span, to find those that start before a range
}

// spanAt is a span and its start, kept beside it for the binary search.
type spanAt struct {
	lo uint64
	s  *span
}

// lowerBound is the index of the first span that starts at or after lo.
func (rs *regionSpans) lowerBound(lo uint64) int {
	i, j := 0, len(rs.s)
	for i < j {
		h := int(uint(i+j) >> 1)
		if rs.s[h].lo < lo {
			i = h + 1
		} else {
			j = h
		}
	}
	return i
}

func (rs *regionSpans) grow(s *span) { rs.maxLen = max(rs.maxLen, s.hi-s.lo) }

func (rs *regionSpans) insert(s *span) {
	i := rs.lowerBound(s.lo)
	rs.s = slices.Insert(rs.s, i, spanAt{s.lo, s})
	rs.grow(s)
}

// Checker is the semantic checker; use New, subscribe it to the run's bus
// (Attach), run, then End and Report.
type Checker struct {
	ops    opTable
	issued []uint64 // bitset of issued op ids
	chans  map[chanKey]*channel
	words  map[word]*wordState
	spans  map[spanKey]*regionSpans
	byRank map[int][]*regionSpans
	rep    Report
	byKind [NumKinds]int64
	ended  bool
	free   []*op // retired ops to reuse
	// opSlab and spanSlab are allocated in blocks of slab, which costs
	// the collector far less than one object each.
	opSlab   []op
	spanSlab []span
	// lastKey and lastRS cache the region of the last landing.
	lastKey spanKey
	lastRS  *regionSpans
}

// slab is how many ops or spans are allocated at once.
const slab = 256

func (c *Checker) newSpan() *span {
	if len(c.spanSlab) == 0 {
		c.spanSlab = make([]span, slab)
	}
	s := &c.spanSlab[0]
	c.spanSlab = c.spanSlab[1:]
	return s
}

// region returns the spans of region where at rank (nil: none yet).
func (c *Checker) region(rank int, where string) *regionSpans {
	k := spanKey{rank, where}
	if c.lastRS != nil && c.lastKey == k {
		return c.lastRS
	}
	rs := c.spans[k]
	if rs != nil {
		c.lastKey, c.lastRS = k, rs
	}
	return rs
}

// New returns an empty checker.
func New() *Checker {
	return &Checker{chans: map[chanKey]*channel{}, words: map[word]*wordState{},
		spans: map[spanKey]*regionSpans{}, byRank: map[int][]*regionSpans{}}
}

// Attach subscribes a new checker to bus and returns it.
func Attach(bus *obs.Bus) *Checker {
	c := New()
	bus.Subscribe(c)
	return c
}

// Observable is a component that emits into a bus: gin.Comm (the device
// API front end and its op ids), gin/machine.Machine (fabric and NICs),
// gdaki.Backend, proxy.Backend, nic.NIC.
type Observable interface{ SetObserver(b *obs.Bus) }

// Wire makes a bus, hands it to every component of xs and attaches a new
// checker: for a driver that builds its own machine, pass the machine,
// the communicator and its backends before the kernels run.
func Wire(xs ...Observable) (*Checker, *obs.Bus) {
	b := obs.NewBus()
	for _, x := range xs {
		x.SetObserver(b)
	}
	return Attach(b), b
}

func (c *Checker) markIssued(id obs.OpID) {
	i := uint64(id)
	for uint64(len(c.issued))*64 <= i {
		c.issued = append(c.issued, 0)
	}
	c.issued[i/64] |= 1 << (i % 64)
}

func (c *Checker) wasIssued(id obs.OpID) bool {
	i := uint64(id)
	return i/64 < uint64(len(c.issued)) && c.issued[i/64]&(1<<(i%64)) != 0
}

func (c *Checker) flag(v Violation) {
	c.rep.Violations++
	c.byKind[v.Kind]++
	if len(c.rep.Kept) < MaxKept {
		c.rep.Kept = append(c.rep.Kept, v)
	}
}

// violation builds a violation about o (nil: an op no longer known).
func violation(k Kind, at sim.Time, id obs.OpID, o *op) Violation {
	v := Violation{Kind: k, At: at, Op: id, OtherRank: -1, Rank: -1, Ctx: -1, Peer: -1}
	if o != nil {
		v.OpKind, v.Rank, v.Ctx, v.Peer = o.kind, int(o.rank), int(o.ctx), int(o.peer)
	}
	return v
}

func (v *Violation) other(o *op) {
	v.Other, v.OtherKind, v.OtherRank, v.OtherAt = o.id, o.kind, int(o.rank), o.at
}

// Observe implements obs.Observer.
func (c *Checker) Observe(e obs.Event) {
	c.rep.Events++
	switch e.Kind {
	case obs.Issued:
		c.issue(&e)
	case obs.Posted:
		if o := c.ops.get(e.Op); o != nil && !o.posted {
			c.post(o)
		}
	case obs.Landed:
		c.land(&e)
	case obs.Atomic, obs.Counter:
		c.update(&e)
	case obs.CQE:
		if o := c.ops.get(e.Op); o != nil {
			if !o.cqe {
				o.cqe, o.cqeAt = true, e.At
			}
			o.cqeErr = o.cqeErr || e.Code != 0 // nic.StatusSuccess is 0
			c.retire(o)
		}
	case obs.SignalSeen:
		c.seen(&e, int(e.Index))
	case obs.Completed:
		c.completed(&e)
	case obs.Read:
		if e.Note == "window" {
			c.read(&e)
		} else {
			c.seen(&e, int(e.Index))
		}
	}
}

func (c *Checker) issue(e *obs.Event) {
	if e.Op == 0 {
		return
	}
	c.rep.Ops++
	c.markIssued(e.Op)
	var o *op
	if n := len(c.free); n > 0 {
		o = c.free[n-1]
		c.free = c.free[:n-1]
	} else {
		if len(c.opSlab) == 0 {
			c.opSlab = make([]op, slab)
		}
		o = &c.opSlab[0]
		c.opSlab = c.opSlab[1:]
	}
	*o = op{id: e.Op, kind: e.Where, who: e.Who, at: e.At, dom: e.Addr, rank: int32(e.Index), ctx: int32(e.QP),
		peer: int32(e.Value), bytes: e.Bytes, code: e.Code}
	c.ops.put(o)
}

func (c *Checker) post(o *op) {
	o.posted = true
	k := chanKey{o.dom, o.rank, o.ctx, o.peer}
	ch := c.chans[k]
	if ch == nil {
		ch = &channel{key: k}
		c.chans[k] = ch
	}
	ch.seq++
	o.ch, o.seq = ch, ch.seq
	if o.kind != "get" && !o.applied() {
		ch.pending.push(pend{o, o.id})
	}
}

// retire forgets o once every effect it has was observed.
func (c *Checker) retire(o *op) {
	if ch := o.ch; ch != nil && ch.pending.len() > 0 && ch.pending.items()[0].o == o && o.applied() {
		// Only the front can have stopped waiting: every earlier
		// change of an op's state came through here.
		ch.trim()
	}
	if o.done() {
		c.ops.remove(o.id)
		// Only channel.pending may still point to o, and its entry's
		// id tells the reuse apart. The free list is at most the peak
		// of live ops.
		c.free = append(c.free, o)
	}
}

func (c *Checker) land(e *obs.Event) {
	if e.Op == 0 {
		return
	}
	c.rep.Landings++
	o := c.ops.get(e.Op)
	if o == nil {
		if c.wasIssued(e.Op) {
			v := violation(DoubleLanding, e.At, e.Op, nil)
			v.Who, v.Where, v.Addr = e.Who, e.Where, e.Addr
			v.Detail = fmt.Sprintf("%d bytes landed after the op had taken full effect", e.Bytes)
			c.flag(v)
		}
		return
	}
	if o.landed+e.Bytes > o.bytes {
		v := violation(DoubleLanding, e.At, e.Op, o)
		v.Who, v.Where, v.Addr = e.Who, e.Where, e.Addr
		v.Detail = fmt.Sprintf("%d bytes land on top of %d of a %d-byte op", e.Bytes, o.landed, o.bytes)
		c.flag(v)
	}
	o.landed += e.Bytes
	rank := o.peer
	if o.kind == "get" {
		rank = o.rank
	}
	c.addSpan(int(rank), o, e)
	c.retire(o)
}

// isCounter says whether an update by o of region where is its counter.
func isCounter(o *op, e *obs.Event) bool {
	if e.Kind == obs.Counter {
		return true
	}
	if !o.wantCounter() {
		return false
	}
	return !o.wantSignal() || strings.HasSuffix(e.Where, "counters")
}

func (c *Checker) update(e *obs.Event) {
	c.rep.Updates++
	w := word{e.Where, e.Addr}
	ws := c.words[w]
	if ws == nil {
		ws = &wordState{}
		c.words[w] = ws
	}
	if e.Old != ws.last && e.Old != 0 {
		v := violation(LostUpdate, e.At, e.Op, c.ops.get(e.Op))
		v.Who, v.Where, v.Addr = e.Who, e.Where, e.Addr
		v.Detail = fmt.Sprintf("old value %d, the word held %d", e.Old, ws.last)
		c.flag(v)
	}
	var ref sigRef
	if e.Op != 0 {
		ref = c.opUpdate(e, ws)
	}
	ws.add(wordVal{e.Value, ref})
}

// opUpdate checks an update of w by op e.Op and returns what observing
// it covers.
func (c *Checker) opUpdate(e *obs.Event, w *wordState) sigRef {
	o := c.ops.get(e.Op)
	if o == nil {
		if c.wasIssued(e.Op) {
			v := violation(DoubleUpdate, e.At, e.Op, nil)
			v.Who, v.Where, v.Addr = e.Who, e.Where, e.Addr
			v.Detail = "update after the op had taken full effect"
			c.flag(v)
		}
		return sigRef{}
	}
	for _, x := range o.words[:o.nwords] {
		if x == w {
			v := violation(DoubleUpdate, e.At, e.Op, o)
			v.Who, v.Where, v.Addr = e.Who, e.Where, e.Addr
			v.Detail = "second update of the word by one op"
			c.flag(v)
			return sigRef{}
		}
	}
	if int(o.nwords) == len(o.words) { // a third word: no op has one
		v := violation(DoubleUpdate, e.At, e.Op, o)
		v.Who, v.Where, v.Addr = e.Who, e.Where, e.Addr
		v.Detail = "a third word updated by one op"
		c.flag(v)
		return sigRef{}
	}
	o.words[o.nwords] = w
	o.nwords++
	if isCounter(o, e) {
		if !o.cqe {
			v := violation(CounterEarly, e.At, e.Op, o)
			v.Who, v.Where, v.Addr = e.Who, e.Where, e.Addr
			v.Detail = "counter moved before any CQE of its op"
			c.flag(v)
		}
		o.countered = true
		c.retire(o)
		return sigRef{}
	}
	c.signalApplied(e, o)
	ref := sigRef{ch: o.ch, seq: o.seq, weak: o.weak(), spans: o.spans}
	o.signaled = true
	c.retire(o)
	return ref
}

// signalApplied checks that what signal o covers has landed.
func (c *Checker) signalApplied(e *obs.Event, o *op) {
	if o.data() && o.landed < o.bytes {
		v := violation(SignalBeforePayload, e.At, o.id, o)
		v.other(o)
		v.Who, v.Where, v.Addr = e.Who, e.Where, e.Addr
		v.Detail = fmt.Sprintf("its own put had landed %d of %d bytes", o.landed, o.bytes)
		c.flag(v)
	}
	if o.weak() || o.ch == nil {
		return
	}
	for _, pe := range o.ch.pending.items() {
		if !pe.waiting() {
			continue
		}
		p := pe.o
		if p.seq >= o.seq {
			break
		}
		v := violation(SignalBeforePayload, e.At, o.id, o)
		v.other(p)
		v.Who, v.Where, v.Addr = e.Who, e.Where, e.Addr
		v.Detail = fmt.Sprintf("strong signal overtook an earlier op on its (context, peer) (landed %d of %d bytes)", p.landed, p.bytes)
		c.flag(v)
	}
}

// seen checks a value a waiter or reader at rank saw in a signal or
// counter word and applies what it covers.
func (c *Checker) seen(e *obs.Event, rank int) {
	if e.Where == "" {
		return
	}
	c.rep.Observed++
	ws := c.words[word{e.Where, e.Addr}]
	v := e.Value
	if ws == nil {
		// No GIN update reached the word: what wrote it (a driver's
		// own store, host set-up) is outside the stream.
		if v != 0 {
			c.rep.Undecided++
		}
		return
	}
	n := min(ws.n, history)
	for i := uint64(0); i < n; i++ {
		if ws.at(ws.n-1-i).val == v {
			// Seeing this value covers it and every update before it
			// that is still in the history.
			for k := i; k < n; k++ {
				c.cover(rank, &ws.at(ws.n-1-k).ref)
			}
			return
		}
	}
	switch {
	case v == 0:
	case ws.n > history:
		c.rep.Undecided++
	default:
		c.unwritten(e, fmt.Sprintf("the word's last value is %d", ws.last))
	}
}

func (c *Checker) unwritten(e *obs.Event, why string) {
	vi := violation(UnwrittenValue, e.At, e.Op, c.ops.get(e.Op))
	vi.Who, vi.Where, vi.Addr = e.Who, e.Where, e.Addr
	vi.Detail = fmt.Sprintf("saw %d; %s", e.Value, why)
	c.flag(vi)
}

// cover records that rank observed signal ref.
func (c *Checker) cover(rank int, ref *sigRef) {
	if ref.ch == nil {
		return
	}
	if !ref.weak {
		ref.ch.covered = max(ref.ch.covered, ref.seq)
		return
	}
	for _, s := range ref.spans {
		s.covered = true
	}
}

func (c *Checker) completed(e *obs.Event) {
	rank, ctx, dom := int(e.Index), int32(e.QP), e.Addr
	switch e.Note {
	case "counter":
		c.seen(e, rank)
	case "flush", "wait":
		for _, o := range c.ops.all() {
			if o == nil || o.dom != dom || int(o.rank) != rank || o.ctx != ctx || o.who != e.Who || o.at > e.At || (e.Note == "wait" && o.peer != int32(e.Value)) {
				continue
			}
			if !o.cqe || (o.kind == "get" && o.landed < o.bytes) {
				v := violation(FlushEarly, e.At, o.id, o)
				v.Who = e.Who
				v.Detail = fmt.Sprintf("%s returned before the op completed locally (landed %d of %d bytes)", e.Note, o.landed, o.bytes)
				c.flag(v)
			}
		}
		onePeer := e.Note == "wait"
		c.coverAt(rank, func(s *span) bool {
			return s.get && s.ch.key.dom == dom && s.ctx == ctx && (!onePeer || s.ch.key.peer == int32(e.Value))
		})
	case "barrier":
		all := e.Value == 1
		put, get := e.Code&1 != 0, e.Code&2 != 0 // gin.FencePut, gin.FenceGet
		if put || get {
			c.coverAt(rank, func(s *span) bool {
				return s.ch.key.dom == dom && (all || s.ctx == ctx) && (s.get && get || !s.get && put)
			})
		}
	}
}

// coverAt marks the spans at rank that pick accepts covered.
func (c *Checker) coverAt(rank int, pick func(*span) bool) {
	for _, rs := range c.byRank[rank] {
		for _, x := range rs.s {
			if pick(x.s) {
				x.s.covered = true
			}
		}
	}
}

func (c *Checker) addSpan(rank int, o *op, e *obs.Event) {
	lo, hi := e.Addr, e.Addr+e.Bytes
	if s := o.last; s != nil && !s.dead && s.hi == lo && s.rs == c.region(rank, e.Where) {
		// This landing continues the op's last one.
		s.hi = hi
		s.rs.grow(s)
		c.dropContained(s.rs, s.lo, s.hi, s)
		return
	}
	rs := c.region(rank, e.Where)
	if rs == nil {
		rs = &regionSpans{}
		c.spans[spanKey{rank, e.Where}] = rs
		c.byRank[rank] = append(c.byRank[rank], rs)
	}
	ch := o.ch
	if ch == nil { // landed before its post was seen: order by nothing
		ch = &channel{key: chanKey{o.dom, o.rank, o.ctx, o.peer}}
	}
	s := c.newSpan()
	*s = span{id: o.id, kind: o.kind, rank: o.rank, at: o.at, lo: lo, hi: hi,
		ch: ch, seq: o.seq, ctx: o.ctx, get: o.kind == "get", rs: rs}
	c.dropContained(rs, lo, hi, s)
	if len(rs.s) >= MaxSpans {
		rs.s = slices.DeleteFunc(rs.s, func(x spanAt) bool {
			x.s.dead = x.s.isCovered()
			return x.s.dead
		})
	}
	if len(rs.s) >= MaxSpans {
		c.rep.Untracked++
		rs.s[0].s.dead = true
		rs.s = slices.Delete(rs.s, 0, 1)
	}
	rs.insert(s)
	o.last = s
	if o.weak() {
		o.spans = append(o.spans, s)
	}
}

// dropContained removes the spans of rs other than keep that [lo, hi)
// overwrote entirely.
func (c *Checker) dropContained(rs *regionSpans, lo, hi uint64, keep *span) {
	for i := rs.lowerBound(lo); i < len(rs.s) && rs.s[i].lo < hi; {
		if s := rs.s[i].s; s != keep && s.hi <= hi {
			s.dead = true
			rs.s = slices.Delete(rs.s, i, i+1)
			continue
		}
		i++
	}
}

func (c *Checker) read(e *obs.Event) {
	c.rep.Reads++
	rank := int(e.Index)
	rs := c.region(rank, e.Where)
	if rs == nil {
		return
	}
	lo, hi := e.Addr, e.Addr+e.Bytes
	for i := rs.lowerBound(lo - min(lo, rs.maxLen)); i < len(rs.s) && rs.s[i].lo < hi; i++ {
		s := rs.s[i].s
		if s.hi <= lo || s.isCovered() {
			continue
		}
		v := Violation{Kind: Race, At: e.At, Op: s.id, OpKind: s.kind, Rank: int(s.rank), Ctx: int(s.ctx), Peer: int(s.ch.key.peer), OtherRank: -1,
			Who: e.Who, Where: e.Where, Addr: max(lo, s.lo)}
		// The reader: its rank, context (QP carries it) and the read's
		// time (At); the op at fault: its issuer, context, peer and issue
		// time.
		if s.get {
			v.Detail = fmt.Sprintf("rank %d ctx %d read [%d,%d) at %v of a get issued at %v before a flush, wait or Get-fenced barrier",
				rank, e.QP, lo, hi, e.At, s.at)
		} else {
			v.Detail = fmt.Sprintf("rank %d ctx %d read [%d,%d) at %v before observing a signal that covers the put issued at %v",
				rank, e.QP, lo, hi, e.At, s.at)
		}
		c.flag(v)
		return
	}
}

// End runs the end-of-run checks: unless the run failed, every op issued
// must have taken all its effects (Lost). Call it once, after the run.
func (c *Checker) End(failed bool) {
	if c.ended {
		return
	}
	c.ended = true
	if failed {
		return
	}
	for _, o := range c.ops.all() {
		if o == nil {
			continue
		}
		id := o.id
		if o.applied() && (!o.wantCounter() || o.countered) {
			continue
		}
		v := violation(Lost, o.at, id, o)
		v.Who = o.who
		v.Detail = fmt.Sprintf("landed %d of %d bytes, signal %v (wanted %v), counter %v (wanted %v)",
			o.landed, o.bytes, o.signaled, o.wantSignal(), o.countered, o.wantCounter())
		c.flag(v)
	}
}

// Drained ends the check of a run that failed because its simulation ran
// out of events with work left (a deadlock): nothing can still land, so
// an op the NIC completed without error (its CQE) whose payload, signal or
// counter never took effect was lost, the NIC having acknowledged what it
// never carried out (Lost). Ops without a CQE are stuck behind the
// deadlock, not judged.
func (c *Checker) Drained() {
	if c.ended {
		return
	}
	c.ended = true
	for _, o := range c.ops.all() {
		if o == nil || !o.cqe || o.cqeErr || o.applied() && (!o.wantCounter() || o.countered) {
			continue
		}
		v := violation(Lost, o.at, o.id, o)
		v.Who = o.who
		v.Detail = fmt.Sprintf("completed (CQE at %v) but landed %d of %d bytes, signal %v (wanted %v), counter %v (wanted %v), and nothing was left in flight",
			o.cqeAt, o.landed, o.bytes, o.signaled, o.wantSignal(), o.countered, o.wantCounter())
		c.flag(v)
	}
}

// Cut ends the check of a run that its driver stopped while work may
// still be in flight: replay stops a step's simulation as soon as the last
// receiver of the phase is done, and the credits a DeepEP HT kernel
// returns as it exits may not have landed by then. The end-of-run checks
// judge nothing (an op in flight is not lost); Report.Live counts the ops
// that had not taken all their effects.
func (c *Checker) Cut() { c.End(true) }

// Add adds o's counts to r and keeps o's violations up to MaxKept (a
// driver that runs one machine per step sums the steps' reports).
func (r *Report) Add(o Report) {
	r.Events += o.Events
	r.Ops += o.Ops
	r.Landings += o.Landings
	r.Updates += o.Updates
	r.Observed += o.Observed
	r.Reads += o.Reads
	r.Undecided += o.Undecided
	r.Untracked += o.Untracked
	r.Violations += o.Violations
	r.Live += o.Live
	r.Spans += o.Spans
	for k, n := range o.ByKind {
		if r.ByKind == nil {
			r.ByKind = map[string]int64{}
		}
		r.ByKind[k] += n
	}
	for _, v := range o.Kept {
		if len(r.Kept) < MaxKept {
			r.Kept = append(r.Kept, v)
		}
	}
}

// Report returns the counts so far and the violations kept.
func (c *Checker) Report() Report {
	r := c.rep
	r.ByKind = map[string]int64{}
	for k, n := range c.byKind {
		if n > 0 {
			r.ByKind[Kind(k).String()] = n
		}
	}
	r.Kept = append([]Violation(nil), c.rep.Kept...)
	r.Live = c.ops.n
	for _, rs := range c.spans {
		r.Spans += len(rs.s)
	}
	return r
}

// Count returns the number of violations of kind k so far.
func (c *Checker) Count(k Kind) int64 { return c.byKind[k] }

// Err returns nil when no violation was found, else an error naming the
// first one and the total.
func (c *Checker) Err() error {
	if c.rep.Violations == 0 {
		return nil
	}
	return fmt.Errorf("check: %d violation(s); first: %s", c.rep.Violations, c.rep.Kept[0].String())
}

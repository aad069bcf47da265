package obs

import (
	"fmt"

	"github.com/ginsim/ginsim/sim"
)

// OpID identifies one GIN device operation within a run (0: none).
type OpID uint64

// Kind says what an Event reports.
type Kind uint8

// Event kinds, in the order they occur along one put. The comment of each
// says who emits it and what its fields hold beyond At, Op and Who.
const (
	None Kind = iota

	// Issued: the GIN front end accepted an operation (gin). Where is the
	// operation kind ("put", "signal", ...), Index the issuing rank, Value
	// the peer rank, Bytes the payload size (a put_value's value size),
	// QP the context, Code the actions (IssuedSignal, ...), Addr the
	// device communicator (Bus.NewDomain).
	Issued
	// Fence: a backend ran fence.release.sys before publishing (gin/gdaki,
	// gin/proxy).
	Fence
	// Reserved: GDAKI reserved SQ slots [Index, Value] (Where: channel).
	Reserved
	// Poll: a GDAKI issuer waits for CQE Index to land (Where: channel,
	// Note: why, "gdaki credit" or "gdaki flush").
	Poll
	// CreditWait: a proxy issuer waits for a free slot for GFD Index; the
	// consumer index is Value (Where: channel).
	CreditWait
	// Posted: the descriptor is written. GDAKI: WQEs published, Value is
	// sq_ready after them. Proxy: GFD Index stored, Code its op, Bytes its
	// size, Then when its last store lands in host memory.
	Posted
	// Doorbell: a doorbell MMIO was sent; Then is its arrival at the NIC
	// (Where: channel). GDAKI: Value is the producer index it carries.
	// Proxy (its ibv_post_send for GFD Index): Value is the WRs posted.
	Doorbell
	// Pickup: the proxy thread took GFD Index (Code: op, Bytes: size):
	// Then is when it found the GFD's first qword flagged, At when it
	// had read and decoded it (the Doorbell that follows is at its
	// ibv_post_send's return).
	Pickup
	// DMARead: the NIC read over its PCIe link for WQE Index of QP QP:
	// At it issued the read, Then the data arrived (the PCIe links'
	// queueing, their bandwidth cap, included). Note says what: "wqe"
	// (the descriptor fetch; a batch reports each of its WQEs) or
	// "payload" (one packet's payload, Bytes long, PSN its packet's
	// sequence within the WQE).
	DMARead
	// Fetched: the NIC has WQE Index of QP QP through its WQE pipeline;
	// Then is when it is ready to transmit (nic). Old is the QP's read
	// wait so far: the time, summed, that the head of its send queue
	// waited for a payload read (PCIe), in ps.
	Fetched
	// Sent: the NIC handed a packet to the fabric (nic). QP is the
	// destination QP, PSN the packet's, Code its RoCE opcode, Bytes its
	// payload, Index the fabric packet id, Addr and Value its source and
	// destination fabric endpoints; Old the sending QP's read wait (as in
	// Fetched; 0 for a response or CNP).
	Sent
	// Hop: a packet started leaving a port (fabric): Index the packet id,
	// Value the port, Then when its last bit leaves.
	Hop
	// Dropped: the fabric dropped a packet at port Value (Code: reason).
	Dropped
	// Received: a packet's last bit reached its NIC (fabric delivery, before
	// the receive pipeline). Fields as Sent.
	Received
	// Landed: a payload DMA write landed in memory (nic, responder side or
	// a READ response at the requester): Where the region, Addr the offset,
	// Bytes the length, QP the number of the QP that wrote it (the DestQP
	// of the packets that carried it).
	Landed
	// Atomic: an atomic was applied to the word at Addr of region Where
	// (a signal, a VA signal or a GDAKI counter) by QP QP: Value the new
	// value, Old the previous one.
	Atomic
	// Acked: the requester retired WQE Index of QP QP (its ACK or response
	// arrived, or it completed in error; Code is the nic.Status).
	Acked
	// CQE: a CQE for WQE Index landed in CQ memory Where (Value: CQ entry
	// count after it).
	CQE
	// Consumed: the issuer saw CQE Index (GDAKI poll, proxy poll_cq).
	Consumed
	// Counter: the proxy thread's store made counter Index of context
	// Code reach Value (Old before it; Where the region, Addr the offset).
	Counter
	// ConsumerIndex: the proxy published consumer index Value of a
	// channel's GFD ring (Where).
	ConsumerIndex
	// Completed: the issuer observed completion (Index its rank, QP its
	// context; Note says what): a counter wait ("counter"; Where, Addr the
	// word), a flush ("flush"), a flushAsync's wait ("wait", Value the
	// peer) or a GIN barrier ("barrier", Code its fence bits, Value 1 when
	// it fenced every context) returned; for the last three Addr is the
	// device communicator as in Issued. Then is when the wait (or the
	// barrier) began.
	Completed
	// SignalSeen: a waiter's signal wait returned with Value; Op is the op
	// whose atomic last changed the word (Where: region, Addr: offset).
	// Then is when the wait began: the call, or the launch of a group
	// launched waiting on the word (gpu.GPU.LaunchWaiting).
	SignalSeen
	// LSAStored: an LSA (NVLink) store of Bytes at Addr of region Where was
	// issued by rank Index; Then is when it is visible at the peer. It has
	// an op id of its own.
	LSAStored
	// Read: device code of rank Index on context QP read Bytes at Addr of
	// region Where (gin's ReadWindow, readSignal, readCounter): Note says
	// what ("window", "signal", "va signal", "counter"), Value is the word
	// read (word reads), Op the op that last changed the word.
	Read
	// Rate: the DCQCN rate limiter of QP QP changed (nic; Who is the QP):
	// Code is the nic.RateEvent, Value the current rate and Old the target
	// rate after it, in bit/s.
	Rate
	// Async: the NIC raised an asynchronous event (ibv_get_async_event;
	// nic): Code is the nic.AsyncKind, Where the CQ's ring region, QP the
	// QP it moved to the error state (AsyncQPFatal), Who the NIC.
	Async

	numKinds
)

var kindNames = [...]string{
	None: "none", Issued: "issued", Fence: "fence", Reserved: "reserved", Poll: "poll", CreditWait: "credit_wait",
	Posted: "posted", Doorbell: "doorbell", Pickup: "pickup", DMARead: "dma_read", Fetched: "fetched", Sent: "sent", Hop: "hop",
	Dropped: "dropped", Received: "received", Landed: "landed", Atomic: "atomic", Acked: "acked", CQE: "cqe",
	Consumed: "consumed", Counter: "counter", ConsumerIndex: "ci", Completed: "completed",
	SignalSeen: "signal_seen", LSAStored: "lsa_stored", Read: "read", Rate: "rate", Async: "async",
}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind returns the kind named s (Kind.String's inverse).
func ParseKind(s string) (Kind, bool) {
	for k, n := range kindNames {
		if n == s {
			return Kind(k), true
		}
	}
	return None, false
}

// Action bits of an Issued event's Code: what the operation asks for
// beyond its payload.
const (
	IssuedSignal   = 1 << iota // an indexed signal at the peer
	IssuedVASignal             // a VA signal at the peer
	IssuedWeak                 // the signal is weak (covers only its own put)
	IssuedCounter              // a local counter increment
)

// Event is one observation. Fields a kind does not use are zero (see the
// Kind constants).
type Event struct {
	At    sim.Time
	Kind  Kind
	Op    OpID
	Who   string // the agent: "n0g0/k" (a coop), "n0g0/nic0", "cpu0/proxy", a QP
	Where string // a channel, region or operation kind
	Note  string // a static reason (credit or flush poll)
	QP    uint32
	PSN   uint32
	Code  uint32 // RoCE opcode, GFD op, drop reason or status
	Index uint64 // WQE, GFD, CQE or packet index; issuing rank
	Addr  uint64
	Bytes uint64
	Value uint64
	Old   uint64
	Then  sim.Time // a second instant: arrival, landing, ready
}

// Observer receives events. Observe must not keep pointers into the run
// beyond the call other than the strings of e.
type Observer interface {
	Observe(e Event)
}

// Func adapts a function to Observer.
type Func func(e Event)

// Observe implements Observer.
func (f Func) Observe(e Event) { f(e) }

// word names an 8-byte word of a region, for the last-writer map.
type word struct {
	where string
	addr  uint64
}

// Bus is a run's observation point: components emit into it, it fans the
// events out to its observers in subscription order, allocates operation
// ids and remembers which op last changed each atomically updated word.
// A nil *Bus is "off": emitters test for nil before building an event.
//
// A bus made by Split serves a sim.World: it has one partition bus per
// partition (Part, Of), into which that partition's components emit; see
// Split for the merge.
//
// Not safe for concurrent use; the partition buses of a split bus may be
// used concurrently, one goroutine each.
type Bus struct {
	subs []Observer
	next OpID
	doms uint64
	last map[word]OpID

	// A split bus: parts are its partition buses. A partition bus: root
	// is the split bus, part its index among stride partitions, and buf
	// the events emitted since the last merge.
	parts  []*Bus
	root   *Bus
	part   int
	stride int
	buf    []Event
	// A split bus made by SplitOverlapped: held[i] are partition i's
	// events of the last window, handed over between windows and merged
	// beside the next one.
	held  [][]Event
	src   [][]Event // merge scratch: the events being merged, by partition
	bufs  [][]Event // Flush's scratch: the partitions' bufs
	heads []int     // merge scratch: the next event of each partition
	heap  []int     // merge scratch: partitions by their next event
}

// NewBus returns a bus delivering to subs.
func NewBus(subs ...Observer) *Bus {
	return &Bus{subs: subs, last: map[word]OpID{}}
}

// Split returns a bus for the partitions of w, delivering to subs: one
// partition bus per partition (Part, Of), which the partition's
// components emit into and which answers LastOp for the words of its
// partition (a signal word lives in its receiver's node, where its atomic
// lands). A partition bus keeps its events; after every window of w (and
// at Flush) the split bus merges them, in the order (At, partition, emit
// order), and delivers them to its subscribers on the caller of w.Run,
// so a subscriber sees one stream, the same for every worker count. Ids
// are drawn per partition: partition p of P draws p+1, p+1+P, p+1+2P, ...
// (with one partition, 1, 2, 3, ... as a lone bus). Domains (NewDomain)
// are drawn from the split bus: draw them before the run.
func Split(w *sim.World, subs ...Observer) *Bus {
	root := split(w, subs)
	w.OnWindow(func(sim.Time) { root.Flush() })
	return root
}

// SplitOverlapped is Split with the merge off the World's serial step:
// between windows each partition bus only hands its events over (a swap
// of two buffers), and the split bus merges window k's events and its
// subscribers observe them while the partitions run window k+1
// (sim.World.OnWindowOverlapped); the last window's before w.Run returns.
// The stream is Split's, event for event. The subscribers then run
// concurrently with the partitions: they may read the events and their
// own state only (no model state: a phase's counters, a NIC, a Sim), must
// not call into the run (Stop, Fail, Post, Emit), and what they gather is
// complete when w.Run returns. LastOp, NewOp and Emit stay on the
// partition buses, exact at every instant.
func SplitOverlapped(w *sim.World, subs ...Observer) *Bus {
	root := split(w, subs)
	root.held = make([][]Event, len(root.parts))
	w.OnWindow(func(sim.Time) { root.hand() })
	w.OnWindowOverlapped(func(sim.Time) { root.merge(root.held) })
	return root
}

func split(w *sim.World, subs []Observer) *Bus {
	root := NewBus(subs...)
	n := w.Parts()
	root.parts = make([]*Bus, n)
	for i := range n {
		root.parts[i] = &Bus{root: root, part: i, stride: n, last: map[word]OpID{}}
	}
	return root
}

// hand moves the partitions' events to held (merged since: empty), and
// held's emptied buffers to the partitions.
func (b *Bus) hand() {
	for i, p := range b.parts {
		p.buf, b.held[i] = b.held[i], p.buf
	}
}

// Part returns the bus partition i emits into: b's partition bus i for a
// split bus (or a partition bus of one), b itself for a lone bus (and nil
// for nil).
func (b *Bus) Part(i int) *Bus {
	if b == nil {
		return nil
	}
	r := b
	if b.root != nil {
		r = b.root
	}
	if r.parts == nil {
		return b
	}
	return r.parts[i]
}

// Parts returns the number of partition buses of a split bus (or of the
// split bus of a partition bus), 0 for a lone bus.
func (b *Bus) Parts() int {
	if b.root != nil {
		b = b.root
	}
	return len(b.parts)
}

// Of returns the bus the components of s's partition emit into: Part of
// s.Part().
func (b *Bus) Of(s *sim.Sim) *Bus {
	if b == nil || (b.parts == nil && b.root == nil) {
		return b
	}
	return b.Part(s.Part())
}

// Subscribe adds o; it sees events emitted from now on (on a partition
// bus, o subscribes to its split bus).
func (b *Bus) Subscribe(o Observer) {
	if b.root != nil {
		b.root.Subscribe(o)
		return
	}
	b.subs = append(b.subs, o)
}

// NewOp returns a fresh operation id (1, 2, ... in call order; see Split
// for a partition bus).
func (b *Bus) NewOp() OpID {
	b.next++
	if b.root == nil {
		return b.next
	}
	return (b.next-1)*OpID(b.stride) + OpID(b.part) + 1
}

// NewDomain returns a fresh id (0, 1, ... in call order) for an ordering
// domain: gin numbers its device communicators with it, so that contexts
// of two communicators, which GIN never orders, are told apart (Issued
// and Completed carry it in Addr). A partition bus draws from its split
// bus.
func (b *Bus) NewDomain() uint64 {
	if b.root != nil {
		return b.root.NewDomain()
	}
	b.doms++
	return b.doms - 1
}

// Emit delivers e to every subscriber (a partition bus keeps it for the
// next merge).
func (b *Bus) Emit(e Event) {
	switch e.Kind {
	case Atomic, Counter:
		if b.last == nil {
			b.last = map[word]OpID{}
		}
		b.last[word{e.Where, e.Addr}] = e.Op
	}
	if b.root != nil {
		b.buf = append(b.buf, e)
		return
	}
	for _, s := range b.subs {
		s.Observe(e)
	}
}

// LastOp returns the op whose Atomic or Counter event last changed the
// word at addr of region where (0 if none did); a partition bus knows the
// words its partition's events changed.
func (b *Bus) LastOp(where string, addr uint64) OpID { return b.last[word{where, addr}] }

// Flush delivers the events the partition buses of a split bus keep,
// merged in the order (At, partition, emit order): each partition's
// events stay in the order it emitted them, and the next event delivered
// is the earliest of the partitions' next ones, the lowest partition
// first among equals. It is a no-op on a lone bus; a split bus calls it
// after every window (SplitOverlapped's merges beside the next one: call
// Flush only between runs).
func (b *Bus) Flush() {
	if b.root != nil {
		b.root.Flush()
		return
	}
	if b.parts == nil {
		return
	}
	if b.held != nil {
		b.merge(b.held)
	}
	src := b.bufs[:0]
	for _, p := range b.parts {
		src = append(src, p.buf)
	}
	b.merge(src)
	for i, p := range b.parts {
		p.buf = src[i]
		src[i] = nil
	}
	b.bufs = src[:0]
}

// merge delivers the events of src (partition i's in src[i]) merged as
// Flush says, then empties src's slices, keeping their arrays.
func (b *Bus) merge(src [][]Event) {
	if len(b.heads) != len(src) {
		b.heads = make([]int, len(src))
	}
	b.src = src
	h := b.heap[:0]
	for i, es := range src {
		b.heads[i] = 0
		if len(es) > 0 {
			h = append(h, i)
			b.up(h, len(h)-1)
		}
	}
	// Runs: the first partition delivers every event before the runner-
	// up's next one (the earlier of the heap root's children) before the
	// heap is touched again; a partition alone delivers all it has.
	for len(h) > 1 {
		i, r := h[0], h[1]
		if len(h) > 2 && b.before(h[2], r) {
			r = h[2]
		}
		buf, k := src[i], b.heads[i]
		at := src[r][b.heads[r]].At
		end := k + 1
		for end < len(buf) && (buf[end].At < at || buf[end].At == at && i < r) {
			end++
		}
		b.deliver(buf[k:end])
		b.heads[i] = end
		if end == len(buf) {
			last := len(h) - 1
			h[0] = h[last]
			h = h[:last]
		}
		b.down(h, 0)
	}
	if len(h) == 1 {
		b.deliver(src[h[0]][b.heads[h[0]]:])
	}
	b.heap = h[:0]
	for i := range src {
		clear(src[i]) // drop the strings
		src[i] = src[i][:0]
	}
	b.src = nil
}

// deliver hands es, in order, to every subscriber.
func (b *Bus) deliver(es []Event) {
	if len(b.subs) == 1 {
		o := b.subs[0]
		for k := range es {
			o.Observe(es[k])
		}
		return
	}
	for k := range es {
		for _, o := range b.subs {
			o.Observe(es[k])
		}
	}
}

// before orders partitions i and j by their next events: (At, partition).
func (b *Bus) before(i, j int) bool {
	a, c := b.src[i][b.heads[i]].At, b.src[j][b.heads[j]].At
	return a < c || (a == c && i < j)
}

func (b *Bus) up(h []int, k int) {
	for k > 0 {
		p := (k - 1) / 2
		if !b.before(h[k], h[p]) {
			return
		}
		h[k], h[p] = h[p], h[k]
		k = p
	}
}

func (b *Bus) down(h []int, k int) {
	for {
		l := 2*k + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && b.before(h[r], h[l]) {
			m = r
		}
		if !b.before(h[m], h[k]) {
			return
		}
		h[k], h[m] = h[m], h[k]
		k = m
	}
}

// Recorder is an Observer that keeps every event in order.
type Recorder struct {
	Events []Event
}

// Observe implements Observer.
func (r *Recorder) Observe(e Event) { r.Events = append(r.Events, e) }

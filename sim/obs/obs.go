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
// Not safe for concurrent use.
type Bus struct {
	subs []Observer
	next OpID
	doms uint64
	last map[word]OpID
}

// NewBus returns a bus delivering to subs.
func NewBus(subs ...Observer) *Bus {
	return &Bus{subs: subs, last: map[word]OpID{}}
}

// Subscribe adds o; it sees events emitted from now on.
func (b *Bus) Subscribe(o Observer) { b.subs = append(b.subs, o) }

// NewOp returns a fresh operation id (1, 2, ... in call order).
func (b *Bus) NewOp() OpID {
	b.next++
	return b.next
}

// NewDomain returns a fresh id (0, 1, ... in call order) for an ordering
// domain: gin numbers its device communicators with it, so that contexts
// of two communicators, which GIN never orders, are told apart (Issued
// and Completed carry it in Addr).
func (b *Bus) NewDomain() uint64 {
	b.doms++
	return b.doms - 1
}

// Emit delivers e to every subscriber.
func (b *Bus) Emit(e Event) {
	switch e.Kind {
	case Atomic, Counter:
		if b.last == nil {
			b.last = map[word]OpID{}
		}
		b.last[word{e.Where, e.Addr}] = e.Op
	}
	for _, s := range b.subs {
		s.Observe(e)
	}
}

// LastOp returns the op whose Atomic or Counter event last changed the
// word at addr of region where (0 if none did).
func (b *Bus) LastOp(where string, addr uint64) OpID { return b.last[word{where, addr}] }

// Recorder is an Observer that keeps every event in order.
type Recorder struct {
	Events []Event
}

// Observe implements Observer.
func (r *Recorder) Observe(e Event) { r.Events = append(r.Events, e) }

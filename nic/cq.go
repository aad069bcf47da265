package nic

import (
	"fmt"

	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/mem"
	"github.com/ginsim/ginsim/sim/obs"
)

// CQE is one completion.
type CQE struct {
	WRID     uint64
	Status   Status
	Opcode   WCOpcode
	ByteLen  uint32
	QPN      uint32
	Imm      uint32
	WQEIndex uint32 // SQ (or RQ) index of the completed WQE, modulo 2^32
	// OpID is the GIN operation of the completed WR (observer only; no
	// hardware CQE carries it).
	OpID obs.OpID
}

// CQ is a completion queue whose CQEs the NIC DMA-writes into a ring of
// Depth*CQEBytes bytes in Ring at PCIe device Where. CQE #i occupies slot
// i%Depth; its last 8-byte word (the owner word) is set to i+1 when the CQE
// has landed, so a poller that watches WordFor(i) wakes exactly then.
//
// Not safe for concurrent use.
type CQ struct {
	n     *NIC
	idx   int
	depth int
	ring  *mem.Region
	where pcie.DevID

	entries  []CQE
	produced uint64 // CQEs generated (DMA write issued)
	landed   uint64 // CQEs in memory
	consumed uint64 // CQEs consumed (Poll or SetConsumer)
	lastLand sim.Time

	waiters []*QP // QPs whose WAIT WQE waits on this CQ

	err     bool   // overran: in the error state
	dropped uint64 // CQEs discarded since the overrun
}

// AsyncKind is the kind of an asynchronous NIC event (ibv_event_type), the
// Code of the obs.Async event the NIC's observer gets.
type AsyncKind uint8

// Asynchronous events.
const (
	// AsyncCQErr: a CQ overran (IBV_EVENT_CQ_ERR). The CQ is in the error
	// state and discards further CQEs.
	AsyncCQErr AsyncKind = iota
	// AsyncQPFatal: a QP went to the error state because its CQ overran
	// (IBV_EVENT_QP_FATAL); its WQEs are flushed.
	AsyncQPFatal
)

// Err reports whether the CQ overran and is in the error state.
func (cq *CQ) Err() bool { return cq.err }

// Dropped returns the number of CQEs discarded because the CQ is in the
// error state.
func (cq *CQ) Dropped() uint64 { return cq.dropped }

// CreateCQ creates a CQ of depth entries whose ring lives in ring (at least
// depth*CQEBytes bytes) at PCIe device where.
func (n *NIC) CreateCQ(depth int, ring *mem.Region, where pcie.DevID) (*CQ, error) {
	if depth < 1 || ring == nil || ring.Size() < sim.Bytes(depth)*n.cfg.CQEBytes {
		return nil, fmt.Errorf("%w: CreateCQ depth %d with ring %v", ErrInvalid, depth, ring)
	}
	// CQE slots are allocated as CQEs are generated (push grows entries).
	cq := &CQ{n: n, idx: len(n.cqs), depth: depth, ring: ring, where: where}
	n.cqs = append(n.cqs, cq)
	return cq, nil
}

// Depth returns the number of CQE slots.
func (cq *CQ) Depth() int { return cq.depth }

// Landed returns the number of CQEs written to memory so far (the producer
// index as a poller of the ring sees it).
func (cq *CQ) Landed() uint64 { return cq.landed }

// Consumed returns the consumer index.
func (cq *CQ) Consumed() uint64 { return cq.consumed }

// WordFor returns the region and offset of CQE #index's owner word, which
// changes (to index+1) when that CQE lands.
func (cq *CQ) WordFor(index uint64) (*mem.Region, uint64) {
	slot := index % uint64(cq.depth)
	return cq.ring, slot*uint64(cq.n.cfg.CQEBytes) + uint64(cq.n.cfg.CQEBytes) - 8
}

// Poll consumes up to len(out) landed CQEs into out and returns how many.
// The poller charges its own time.
func (cq *CQ) Poll(out []CQE) int {
	k := 0
	for k < len(out) && cq.consumed < cq.landed {
		out[k] = cq.entries[cq.consumed%uint64(cq.depth)]
		cq.consumed++
		k++
	}
	return k
}

// Entry returns landed CQE #index without consuming it (for GPU pollers
// that read the ring directly); ok is false if it has not landed or its slot
// has been reused.
func (cq *CQ) Entry(index uint64) (CQE, bool) {
	if index >= cq.landed || cq.landed-index > uint64(cq.depth) {
		return CQE{}, false
	}
	return cq.entries[index%uint64(cq.depth)], true
}

// SetConsumer advances the consumer index to ci (a poller that reads the
// ring directly updates the CQ doorbell record this way).
func (cq *CQ) SetConsumer(ci uint64) {
	if ci > cq.consumed && ci <= cq.landed {
		cq.consumed = ci
	}
}

// push generates a CQE: its DMA write is issued after CQECost and lands no
// earlier than after (data the completion covers) and than the previous CQE.
func (cq *CQ) push(e CQE, after sim.Time) {
	n := cq.n
	if cq.err {
		cq.dropped++
		return
	}
	if cq.produced-cq.consumed >= uint64(cq.depth) {
		cq.overrun()
		cq.dropped++
		return
	}
	slot := cq.produced % uint64(cq.depth)
	if slot >= uint64(len(cq.entries)) {
		ne := make([]CQE, min(max(2*uint64(len(cq.entries)), slot+1, 4), uint64(cq.depth)))
		copy(ne, cq.entries)
		cq.entries = ne
	}
	cq.entries[slot] = e
	cq.produced++
	at := n.s.Now().Add(n.cfg.CQECost)
	landed := max(n.bus.Write(at, n.dev, cq.where, n.cfg.CQEBytes), after, cq.lastLand)
	cq.lastLand = landed
	n.s.Post(landed, n, evCQE<<evShift|uint64(cq.idx))
}

// overrun puts the CQ in the error state (a CQE found no free slot): the
// application is told by an AsyncCQErr event, and every QP that completes
// into this CQ goes to the error state with an AsyncQPFatal event; their
// flushed WQEs complete with StatusWRFlushErr into their other CQ, if
// any. The run goes on (ErrOverrun is no longer raised through Sim.Fail).
func (cq *CQ) overrun() {
	n := cq.n
	cq.err = true
	n.stats.CQOverruns++
	now := n.s.Now()
	// The QPs move to the error state in an event of their own, not in
	// the middle of the completion that overran.
	n.s.At(now, func() { cq.fatal(now) })
}

func (cq *CQ) fatal(now sim.Time) {
	n := cq.n
	if n.obs != nil {
		n.obs.Emit(obs.Event{Kind: obs.Async, At: now, Who: n.name, Where: cq.ring.Name(), Code: uint32(AsyncCQErr)})
	}
	for _, qp := range n.qps {
		if qp == nil {
			continue // reserved, not created
		}
		if (qp.cfg.SendCQ == cq || qp.cfg.RecvCQ == cq) && qp.state != QPSErr && qp.state != QPSReset {
			qp.toErr()
			if n.obs != nil {
				n.obs.Emit(obs.Event{Kind: obs.Async, At: now, Who: n.name, Where: cq.ring.Name(), QP: qp.qpn,
					Code: uint32(AsyncQPFatal)})
			}
		}
	}
}

func (cq *CQ) landOne() {
	i := cq.landed
	cq.landed++
	r, off := cq.WordFor(i)
	r.Store64(off, i+1, cq.n.name)
	if b := cq.n.obs; b != nil {
		e := &cq.entries[i%uint64(cq.depth)]
		b.Emit(obs.Event{Kind: obs.CQE, At: cq.n.s.Now(), Op: e.OpID, Who: cq.n.name, Where: r.Name(), QP: e.QPN,
			Index: uint64(e.WQEIndex), Value: i + 1, Code: uint32(e.Status)})
	}
	if len(cq.waiters) > 0 {
		ws := cq.waiters
		cq.waiters = cq.waiters[:0]
		for _, qp := range ws {
			qp.waiting = false
			cq.n.activate(qp)
		}
	}
}

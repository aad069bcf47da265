package gdaki

import (
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// setID records the operation id of the WQE at SQ index i. ids grows
// with the slots used, up to the depth: most channels of a large
// all-to-all carry a few WQEs, and a table of the whole depth per
// channel (1 KiB at depth 128, 8 KiB at V2's 1024) was half of V2
// EP64's peak heap.
func (ch *channel) setID(i uint64, id obs.OpID) {
	s := i % ch.depth
	if s >= uint64(len(ch.ids)) {
		n := min(max(s+1, 2*uint64(len(ch.ids)), 4), ch.depth)
		ids := make([]obs.OpID, n)
		copy(ids, ch.ids)
		ch.ids = ids
	}
	ch.ids[s] = id
}

// id returns the operation id recorded at SQ index i (0: none).
func (ch *channel) id(i uint64) obs.OpID {
	if s := i % ch.depth; s < uint64(len(ch.ids)) {
		return ch.ids[s]
	}
	return 0
}

// emitDoorbell reports a doorbell that moved ch's producer index from
// from to pi: one obs.Doorbell event per operation whose WQEs it covers
// (in SQ order), so that an operation whose WQEs another group's
// doorbell rang still learns which doorbell carried it. A doorbell over
// WQEs of no operation (a flush's NOP, a barrier's signal) reports op 0.
func (ln *lane) emitDoorbell(t *gpu.Group, ch *channel, from, pi uint64, arrive sim.Time) {
	e := obs.Event{Kind: obs.Doorbell, Where: ch.name, Index: from, Value: pi, Then: arrive}
	if ch.ids == nil || pi <= from {
		ln.emit(t, e)
		return
	}
	for i := from; i < pi; i++ {
		id := ch.id(i)
		if i > from && id == ch.id(i-1) {
			continue
		}
		e.Op = id
		ln.emit(t, e)
	}
}

package gdaki

import (
	"github.com/ginsim/ginsim/gpu"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// setID records the operation id of the WQE at SQ index i.
func (ch *channel) setID(i uint64, id obs.OpID) {
	if ch.ids == nil {
		ch.ids = make([]obs.OpID, ch.depth)
	}
	ch.ids[i%ch.depth] = id
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
		id := ch.ids[i%ch.depth]
		if i > from && id == ch.ids[(i-1)%ch.depth] {
			continue
		}
		e.Op = id
		ln.emit(t, e)
	}
}

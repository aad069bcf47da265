package link

import "github.com/ginsim/ginsim/sim"

// Pipe is a serialising FIFO resource: one direction of a point-to-point link
// (a PCIe lane group, an NVLink port) that carries one transfer at a time at
// Rate, each arriving Latency after its last byte was serialised. It holds no
// events: callers reserve time on it and schedule their own events at the
// returned instants.
//
// Reservations are served in call order. A reservation made with at in the
// future still queues behind every earlier call and ahead of every later
// call, even one whose at is earlier: callers that reserve ahead of time
// trade exact arbitration for zero events. Reserve transfers at the time they
// are issued where arbitration matters.
type Pipe struct {
	Name    string       // for reports, e.g. "pcie/gpu0-sw0/up"
	Rate    sim.BitRate  // serialisation rate (after line encoding)
	Latency sim.Duration // flight + PHY/DLL time from last byte sent to last byte received

	// Backfill lets a transfer use an idle gap left before a reservation
	// made ahead of time, instead of queueing behind every earlier call:
	// a link that is idle at an instant carries whatever is ready then.
	// The owner must call Forget with the current time as it advances.
	Backfill bool

	freeAt sim.Time
	busyIv []span // Backfill: reserved spans, sorted, disjoint
	// Backfill: per source, the start of its latest posted transfer, which
	// nothing later from that source may pass (ReserveOrdered).
	posted []postMark
	bytes  sim.Bytes
	busy   sim.Duration
	xfers  uint64
	wait   sim.Duration
	maxW   sim.Duration
}

// Stats is the accounting of one Pipe since it was created.
type Stats struct {
	Name      string
	Bytes     sim.Bytes    // wire bytes serialised (payload plus overheads)
	Busy      sim.Duration // time spent serialising
	Transfers uint64       // reservations made
	// Wait sums, over the reservations, the time from when each was
	// ready (its at) to when its first byte started: the queueing
	// delay the pipe added. MaxWait is the largest such delay.
	Wait, MaxWait sim.Duration
}

// Utilisation returns Busy as a fraction of the span d, for reporting only.
func (s Stats) Utilisation(d sim.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(s.Busy) / float64(d)
}

// FreeAt returns when the pipe finishes everything reserved so far.
func (p *Pipe) FreeAt() sim.Time { return p.freeAt }

// Backlog returns the bytes still to be serialised at time now:
// Rate × (FreeAt − now), or 0 when idle.
func (p *Pipe) Backlog(now sim.Time) sim.Bytes {
	if p.freeAt <= now {
		return 0
	}
	return p.Rate.BytesIn(p.freeAt.Sub(now))
}

// Reserve serialises n wire bytes starting no earlier than at and after all
// earlier reservations. It returns when the first byte starts and when the
// last byte has been sent; the last byte arrives at the far end Latency
// later.
func (p *Pipe) Reserve(at sim.Time, n sim.Bytes) (start, end sim.Time) {
	return p.ReserveStream(at, n, 0)
}

// ReserveStream is Reserve for a transfer that streams in from an upstream
// hop (cut-through): its last byte cannot leave before minEnd, because it
// has not arrived yet. The pipe is held until the later of its own
// serialisation end and minEnd; only the serialisation time counts as busy.
func (p *Pipe) ReserveStream(at sim.Time, n sim.Bytes, minEnd sim.Time) (start, end sim.Time) {
	tx := p.Rate.TxTime(n)
	if !p.Backfill {
		start = max(at, p.freeAt)
		end = max(start.Add(tx), minEnd)
		p.freeAt = end
	} else {
		start, end = p.fit(at, tx, minEnd)
		p.freeAt = max(p.freeAt, end)
	}
	p.bytes += n
	p.busy += tx
	p.xfers++
	if w := start.Sub(at); w > 0 {
		p.wait += w
		p.maxW = max(p.maxW, w)
	}
	return start, end
}

// postMark is a source's latest posted transfer start on a backfilling
// pipe.
type postMark struct {
	src   int32
	start sim.Time
}

// ReserveOrdered is ReserveStream for a transfer of source src that keeps
// PCIe's producer-consumer order on a backfilling pipe: no transfer starts
// before the latest posted transfer (a write) of the same source, while a
// posted transfer may still pass that source's earlier reads and
// completions, as the PCIe ordering rules allow. Different sources are
// arbitrated by readiness. Without Backfill it is ReserveStream.
func (p *Pipe) ReserveOrdered(src int32, posted bool, at sim.Time, n sim.Bytes, minEnd sim.Time) (start, end sim.Time) {
	if !p.Backfill {
		return p.ReserveStream(at, n, minEnd)
	}
	i := 0
	for i < len(p.posted) && p.posted[i].src != src {
		i++
	}
	if i < len(p.posted) {
		at = max(at, p.posted[i].start)
	}
	start, end = p.ReserveStream(at, n, minEnd)
	if posted {
		if i == len(p.posted) {
			p.posted = append(p.posted, postMark{src: src})
		}
		p.posted[i].start = start
	}
	return start, end
}

// span is one reserved interval [a, b) of a backfilling pipe.
type span struct{ a, b sim.Time }

// maxSpans bounds a backfilling pipe's list; beyond it the two earliest
// spans merge (the gap between them is given up, never double-booked).
const maxSpans = 64

// fit places a transfer of tx serialisation time (held at least until
// minEnd) in the earliest gap at or after at, and records it.
func (p *Pipe) fit(at sim.Time, tx sim.Duration, minEnd sim.Time) (start, end sim.Time) {
	start = at
	k := 0
	for ; k < len(p.busyIv); k++ {
		if max(start.Add(tx), minEnd) <= p.busyIv[k].a {
			break
		}
		start = max(start, p.busyIv[k].b)
	}
	end = max(start.Add(tx), minEnd)
	// Merge with touching neighbours to keep the list short.
	switch {
	case k > 0 && p.busyIv[k-1].b == start && k < len(p.busyIv) && p.busyIv[k].a == end:
		p.busyIv[k-1].b = p.busyIv[k].b
		p.busyIv = append(p.busyIv[:k], p.busyIv[k+1:]...)
	case k > 0 && p.busyIv[k-1].b == start:
		p.busyIv[k-1].b = end
	case k < len(p.busyIv) && p.busyIv[k].a == end:
		p.busyIv[k].a = start
	default:
		if len(p.busyIv) == maxSpans {
			p.busyIv[1].a = p.busyIv[0].a
			p.busyIv = append(p.busyIv[:0], p.busyIv[1:]...)
			if k > 0 {
				k--
			}
		}
		p.busyIv = append(p.busyIv, span{})
		copy(p.busyIv[k+1:], p.busyIv[k:])
		p.busyIv[k] = span{start, end}
	}
	return start, end
}

// Forget drops a backfilling pipe's spans that ended by now: no later
// call can start before now.
func (p *Pipe) Forget(now sim.Time) {
	k := 0
	for k < len(p.busyIv) && p.busyIv[k].b <= now {
		k++
	}
	if k > 0 {
		p.busyIv = append(p.busyIv[:0], p.busyIv[k:]...)
	}
}

// Stats returns the pipe's accounting.
func (p *Pipe) Stats() Stats {
	return Stats{Name: p.Name, Bytes: p.bytes, Busy: p.busy, Transfers: p.xfers, Wait: p.wait, MaxWait: p.maxW}
}

package fabric

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

	freeAt sim.Time
	bytes  sim.Bytes
	busy   sim.Duration
	xfers  uint64
}

// PipeStats is the accounting of one Pipe since it was created.
type PipeStats struct {
	Name      string
	Bytes     sim.Bytes    // wire bytes serialised (payload plus overheads)
	Busy      sim.Duration // time spent serialising
	Transfers uint64       // reservations made
}

// Utilisation returns Busy as a fraction of the span d, for reporting only.
func (s PipeStats) Utilisation(d sim.Duration) float64 {
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
	start = max(at, p.freeAt)
	tx := p.Rate.TxTime(n)
	end = max(start.Add(tx), minEnd)
	p.freeAt = end
	p.bytes += n
	p.busy += tx
	p.xfers++
	return start, end
}

// Stats returns the pipe's accounting.
func (p *Pipe) Stats() PipeStats {
	return PipeStats{Name: p.Name, Bytes: p.bytes, Busy: p.busy, Transfers: p.xfers}
}

package replay

import (
	"fmt"
	"io"
	"slices"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/traces"
)

// Transport counts what the fabric lost and what the RC transport did
// about it, over every NIC and link of a step (both phases) or, in Report,
// of every step.
type Transport struct {
	// Lost counts packets lost on links: injected loss and links down.
	Lost uint64 `json:"packets_lost"`
	// Dropped counts packets a switch dropped with its egress buffer full.
	Dropped uint64 `json:"packets_dropped"`
	// Corrupted counts packets the receiving NIC's ICRC check dropped.
	Corrupted uint64 `json:"packets_corrupted"`
	// Retransmits counts request packets sent again (go-back-N).
	Retransmits uint64 `json:"retransmits"`
	// SeqNAKs counts PSN sequence error NAKs: a responder saw a gap and
	// asked for go-back-N from the missing PSN.
	SeqNAKs uint64 `json:"seq_naks"`
	// Timeouts counts local ACK timeouts that rewound a QP: what a lost
	// tail (nothing behind it to reveal the gap) costs.
	Timeouts uint64 `json:"timeouts"`
	// Duplicates counts duplicate requests responders answered again
	// without executing them.
	Duplicates uint64 `json:"duplicate_requests"`
	// InOrder counts request packets responders took at the expected
	// PSN, each executed exactly once.
	InOrder uint64 `json:"requests_in_order"`
}

// transportOf reads the counters of machine m.
func transportOf(m *machine.Machine) Transport {
	var t Transport
	for _, n := range m.NICs {
		st := n.Stats()
		t.Corrupted += st.ICRCErrors
		t.Retransmits += st.Retransmits
		t.SeqNAKs += st.SeqNAKs
		t.Timeouts += st.Timeouts
		t.Duplicates += st.DupRequests
		t.InOrder += st.InOrder
	}
	for p := range m.Net.Ports() {
		ps := m.Net.PortStats(fabric.PortID(p))
		t.Lost += ps.Lost
		t.Dropped += ps.Drops
	}
	return t
}

func (t *Transport) add(o Transport) {
	t.Lost += o.Lost
	t.Dropped += o.Dropped
	t.Corrupted += o.Corrupted
	t.Retransmits += o.Retransmits
	t.SeqNAKs += o.SeqNAKs
	t.Timeouts += o.Timeouts
	t.Duplicates += o.Duplicates
	t.InOrder += o.InOrder
}

// Tail is the distribution of the ranks' receive-done times of a phase
// over every step (PhaseReport.RecvDoneUS), in microseconds: where a lost
// packet's retransmission or a straggler shows as max far above p50.
type Tail struct {
	P50 float64 `json:"p50_us"`
	P90 float64 `json:"p90_us"`
	P99 float64 `json:"p99_us"`
	Max float64 `json:"max_us"`
}

// PhaseTails pairs the tails of the two phases.
type PhaseTails struct {
	Dispatch Tail `json:"dispatch"`
	Combine  Tail `json:"combine"`
}

// tailOf returns the nearest-rank percentiles of v.
func tailOf(v []float64) Tail {
	if len(v) == 0 {
		return Tail{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	q := func(p int) float64 { return round3(traces.Percentile(s, p)) }
	return Tail{P50: q(50), P90: q(90), P99: q(99), Max: round3(s[len(s)-1])}
}

// finishTransport sums the steps' transport counters and the receive tails.
func (r *Report) finishTransport() {
	r.Transport = Transport{}
	var d, c []float64
	for _, l := range r.Layers {
		r.Transport.add(l.Transport)
		d = append(d, l.Dispatch.RecvDoneUS...)
		c = append(c, l.Combine.RecvDoneUS...)
	}
	r.RecvTail = PhaseTails{Dispatch: tailOf(d), Combine: tailOf(c)}
}

// writeTransport prints the transport line when anything was lost or
// retransmitted, with the receive tails.
func (r *Report) writeTransport(w io.Writer) {
	fmt.Fprintf(w, "\nreceive done over ranks, us:\n")
	for _, p := range []struct {
		name string
		t    Tail
	}{{"dispatch", r.RecvTail.Dispatch}, {"combine", r.RecvTail.Combine}} {
		fmt.Fprintf(w, "  %-9s p50 %.1f  p90 %.1f  p99 %.1f  max %.1f\n", p.name+":", p.t.P50, p.t.P90, p.t.P99, p.t.Max)
	}
	t := r.Transport
	if t.Lost+t.Dropped+t.Corrupted+t.Retransmits == 0 {
		return
	}
	fmt.Fprintf(w, "transport: %d packets lost, %d dropped by full switch buffers, %d corrupted; %d retransmitted "+
		"(go-back-N after %d sequence NAKs and %d ACK timeouts), %d duplicates answered\n",
		t.Lost, t.Dropped, t.Corrupted, t.Retransmits, t.SeqNAKs, t.Timeouts, t.Duplicates)
}

package gpu

import (
	"github.com/ginsim/ginsim/fabric/link"
	"github.com/ginsim/ginsim/sim"
)

// SMPorts is one SM's load and store bandwidth, shared by every warp on
// it (TMA and LSU copies of records): a transfer takes its bytes at the
// port's rate after every earlier one on the same port, in call order.
// DeepEP's analytic SM model (elastic.py, get_theoretical_num_sms) uses
// 200 GB/s read and 50 GB/s write per SM. The ports hold no events: the
// caller waits until the instant Read or Write returns (plus whatever
// memory latency applies).
type SMPorts struct{ rd, wr link.Pipe }

// NewSMPorts returns the ports of an SM that loads at read and stores at
// write.
func NewSMPorts(read, write sim.BitRate) SMPorts {
	return SMPorts{rd: link.Pipe{Rate: read}, wr: link.Pipe{Rate: write}}
}

// Read reserves n bytes of load bandwidth from at, behind earlier reads,
// and returns when the last byte is through.
func (p *SMPorts) Read(at sim.Time, n sim.Bytes) sim.Time {
	_, end := p.rd.Reserve(at, n)
	return end
}

// Write reserves n bytes of store bandwidth from at, behind earlier
// writes, and returns when the last byte is through.
func (p *SMPorts) Write(at sim.Time, n sim.Bytes) sim.Time {
	_, end := p.wr.Reserve(at, n)
	return end
}

package fabric

import (
	"fmt"

	"github.com/ginsim/ginsim/sim"
)

// Network is the packet-switched fabric between NIC ports: links with a rate
// and a propagation delay, switches with output queues, and the routes
// between endpoints. It owns the packet pool.
//
// This first implementation is a single non-blocking switch with one
// output-queued port per endpoint and unbounded buffers; topologies, ECMP,
// finite buffers, ECN and faults build on the same API.
//
// Not safe for concurrent use.
type Network struct {
	s     *sim.Sim
	ipv6  bool
	chunk [][]Packet
	free  []int32
	ids   uint64
	eps   []endpoint
}

type endpoint struct {
	ep     Endpoint
	rate   sim.BitRate
	prop   sim.Duration
	upFree sim.Time // uplink (NIC -> switch) busy until
	dnFree sim.Time // downlink (switch -> NIC) busy until
}

const chunkSize = 1024

// Stage of a packet's trip through the single switch, kept in Packet.port.
const (
	stageAtSwitch = iota
	stageAtNIC
)

// NewSingleSwitch builds a network of n endpoints, each attached to one
// switch by a link of the given rate and propagation delay.
func NewSingleSwitch(s *sim.Sim, n int, rate sim.BitRate, prop sim.Duration) *Network {
	if rate <= 0 {
		panic(fmt.Sprintf("fabric: link rate %v must be positive", rate))
	}
	nw := &Network{s: s}
	nw.eps = make([]endpoint, n)
	for i := range nw.eps {
		nw.eps[i].rate = rate
		nw.eps[i].prop = prop
	}
	return nw
}

// Sim returns the simulation the network runs on.
func (n *Network) Sim() *sim.Sim { return n.s }

// IPv6 reports whether packets are framed over IPv6.
func (n *Network) IPv6() bool { return n.ipv6 }

// Endpoints returns the number of endpoints.
func (n *Network) Endpoints() int { return len(n.eps) }

// Bind attaches the NIC port ep to endpoint id.
func (n *Network) Bind(id EndpointID, ep Endpoint) { n.eps[id].ep = ep }

// LinkRate returns the rate of endpoint id's link.
func (n *Network) LinkRate(id EndpointID) sim.BitRate { return n.eps[id].rate }

// NewPacket returns a zeroed packet from the pool with a fresh ID. If
// payload > 0 and withData, p.Payload is a slice of payload bytes owned by the
// packet (contents undefined).
func (n *Network) NewPacket(payload uint32, withData bool) *Packet {
	var p *Packet
	if k := len(n.free); k > 0 {
		i := n.free[k-1]
		n.free = n.free[:k-1]
		p = &n.chunk[i/chunkSize][i%chunkSize]
	} else {
		total := int32(len(n.chunk) * chunkSize)
		if len(n.chunk) == 0 || int(total) == 0 {
			n.chunk = append(n.chunk, make([]Packet, 0, chunkSize))
		}
		last := len(n.chunk) - 1
		if len(n.chunk[last]) == chunkSize {
			n.chunk = append(n.chunk, make([]Packet, 0, chunkSize))
			last++
		}
		n.chunk[last] = append(n.chunk[last], Packet{})
		p = &n.chunk[last][len(n.chunk[last])-1]
		p.idx = int32(last*chunkSize + len(n.chunk[last]) - 1)
	}
	idx, buf := p.idx, p.buf
	*p = Packet{idx: idx, buf: buf}
	n.ids++
	p.ID = n.ids
	p.PayloadLen = payload
	if withData && payload > 0 {
		if cap(p.buf) < int(payload) {
			p.buf = make([]byte, payload)
		}
		p.Payload = p.buf[:payload]
	}
	return p
}

// Free returns p to the pool.
func (n *Network) Free(p *Packet) {
	p.Payload = nil
	n.free = append(n.free, p.idx)
}

func (n *Network) pkt(i int32) *Packet { return &n.chunk[i/chunkSize][i%chunkSize] }

// PortFreeAt returns when endpoint id's transmitter finishes the packets
// already handed to it.
func (n *Network) PortFreeAt(id EndpointID) sim.Time {
	return max(n.eps[id].upFree, n.s.Now())
}

// Send hands p to its source port for transmission and returns the time its
// last bit leaves the port; a NIC pacing itself sends the next packet then.
func (n *Network) Send(p *Packet) sim.Time {
	now := n.s.Now()
	p.Born = now
	e := &n.eps[p.Src]
	start := max(now, e.upFree)
	done := start.Add(e.rate.TxTime(p.WireLen(n.ipv6)))
	e.upFree = done
	p.hops = 1
	p.port = stageAtSwitch
	n.s.Schedule(done.Add(e.prop), n, uint64(p.idx))
	return done
}

// Handle moves a packet one hop: the switch queues it on the destination's
// port; the destination NIC receives it.
func (n *Network) Handle(s *sim.Sim, arg uint64) {
	p := n.pkt(int32(arg))
	switch p.port {
	case stageAtSwitch:
		e := &n.eps[p.Dst]
		start := max(s.Now(), e.dnFree)
		done := start.Add(e.rate.TxTime(p.WireLen(n.ipv6)))
		e.dnFree = done
		p.hops++
		p.port = stageAtNIC
		s.Schedule(done.Add(e.prop), n, arg)
	case stageAtNIC:
		ep := n.eps[p.Dst].ep
		if ep == nil {
			n.Free(p)
			return
		}
		ep.Receive(p)
	}
}

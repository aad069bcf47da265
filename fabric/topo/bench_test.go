package topo

import (
	"testing"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/nic/roce"
	"github.com/ginsim/ginsim/sim"
)

// gen is a packet-generator endpoint for all-to-all traffic: source i sends
// perPair bytes to (i+1)%N, then to (i+2)%N, ..., in MTU-sized packets,
// paced by its port (the next packet is handed over when the previous one
// has left). It counts the hops of what it receives.
type gen struct {
	n       *fabric.Network
	eps     int
	perPair uint32
	mtu     uint32
	state   []genState
	rxPkts  uint64
	rxHops  uint64
}

type genState struct {
	peer int    // offset of the current destination, 1..eps-1
	left uint32 // bytes left for it
	psn  uint32
}

func (g *gen) Receive(p *fabric.Packet) {
	g.rxPkts++
	g.rxHops += uint64(p.Hops())
	g.n.Free(p)
}

// Handle sends the next packet of source arg.
func (g *gen) Handle(s *sim.Sim, arg uint64) {
	st := &g.state[arg]
	if st.peer >= g.eps {
		return
	}
	ln := min(st.left, g.mtu)
	p := g.n.NewPacket(ln, false)
	p.Src = fabric.EndpointID(arg)
	p.Dst = fabric.EndpointID((int(arg) + st.peer) % g.eps)
	p.SrcPort = uint16(49152 + st.peer) // one flow (QP) per pair
	p.ECN = 2
	p.Hdr.Opcode = roce.OpWriteMiddle
	p.Hdr.PSN = st.psn
	st.psn++
	st.left -= ln
	if st.left == 0 {
		st.peer++
		st.left = g.perPair
	}
	s.Schedule(g.n.Send(p), g, arg)
}

// allToAll runs one all-to-all of perPair bytes on a 16-node × 8-NIC rail
// fat tree and returns the packets delivered and their hops.
func allToAll(b *testing.B, perPair uint32) (pkts, hops uint64, drops uint64) {
	s := sim.New(sim.Config{Seed: 1})
	c, err := Build(s, Spec{Kind: KindRail, Nodes: 16, Spines: 8})
	if err != nil {
		b.Fatal(err)
	}
	n := c.Net
	g := &gen{n: n, eps: n.Endpoints(), perPair: perPair, mtu: 4096, state: make([]genState, n.Endpoints())}
	for i := range g.state {
		g.state[i] = genState{peer: 1, left: perPair}
		n.Bind(fabric.EndpointID(i), g)
		s.Schedule(0, g, uint64(i))
	}
	if err := s.Run(); err != nil {
		b.Fatal(err)
	}
	for p := range n.Ports() {
		drops += n.PortStats(fabric.PortID(p)).Drops
	}
	return g.rxPkts, g.rxHops, drops
}

// BenchmarkAllToAll128 is an all-to-all among 128 NIC ports (16 nodes × 8
// NICs) on a rail-optimised fat tree (8 rail switches, 8 spines), 4096 B
// payload packets. 1 MiB per pair is 4.2 M packets per iteration; the
// per-pair size is scaled to 256 KiB to keep an iteration near a second.
// The metric is packet-hops per second of wall time.
func BenchmarkAllToAll128(b *testing.B) {
	const perPair = 256 << 10
	b.ReportAllocs()
	var pkts, hops, drops uint64
	for b.Loop() {
		p, h, d := allToAll(b, perPair)
		pkts, hops, drops = pkts+p, hops+h, drops+d
	}
	b.ReportMetric(float64(hops)/b.Elapsed().Seconds(), "packet-hops/s")
	b.ReportMetric(float64(pkts)/float64(b.N), "packets/op")
	b.ReportMetric(float64(drops)/float64(b.N), "drops/op")
}

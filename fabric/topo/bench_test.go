package topo

import (
	"flag"
	"testing"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/sim"
)

// a2aKiB overrides the per-pair size of the all-to-all benchmarks, e.g.
// to count instructions of a short run under callgrind.
var a2aKiB = flag.Int("a2a-kib", 0, "bytes per pair of the all-to-all benchmarks in KiB (0: their default)")

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
	// window, when positive, caps the packets a source has outstanding
	// (sent, not yet received) towards one destination, as an RC QP with
	// a bounded send window; out counts them per (source, destination).
	// The credit returns when the packet arrives (an idealised ACK that
	// takes no return path).
	window int32
	out    []int32
}

type genState struct {
	peer int    // offset of the current destination, 1..eps-1
	left uint32 // bytes left for it
	psn  uint32
	// blocked: the source waits for window credit from its current peer.
	blocked bool
}

func (g *gen) Receive(p *fabric.Packet) {
	g.rxPkts++
	g.rxHops += uint64(p.Hops())
	if g.window > 0 {
		src, dst := int(p.Src), int(p.Dst)
		g.out[src*g.eps+dst]--
		if st := &g.state[src]; st.blocked && (src+st.peer)%g.eps == dst {
			st.blocked = false
			s := g.n.Sim()
			s.Schedule(g.n.PortFreeAt(fabric.EndpointID(src)), g, uint64(src))
		}
	}
	g.n.Free(p)
}

// Handle sends the next packet of source arg.
func (g *gen) Handle(s *sim.Sim, arg uint64) {
	st := &g.state[arg]
	if st.peer >= g.eps {
		return
	}
	dst := (int(arg) + st.peer) % g.eps
	if g.window > 0 {
		if g.out[int(arg)*g.eps+dst] >= g.window {
			st.blocked = true
			return
		}
		g.out[int(arg)*g.eps+dst]++
	}
	ln := min(st.left, g.mtu)
	p := g.n.NewPacket(ln, false)
	p.Src = fabric.EndpointID(arg)
	p.Dst = fabric.EndpointID(dst)
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
// fat tree and returns the packets delivered and their hops. window > 0
// caps the packets outstanding per (source, destination).
func allToAll(b *testing.B, perPair uint32, window int32) (pkts, hops uint64, drops uint64) {
	if *a2aKiB > 0 {
		perPair = uint32(*a2aKiB) << 10
	}
	s := sim.New(sim.Config{Seed: 1})
	c, err := Build(s, Spec{Kind: KindRail, Nodes: 16, Spines: 8})
	if err != nil {
		b.Fatal(err)
	}
	n := c.Net
	g := &gen{n: n, eps: n.Endpoints(), perPair: perPair, mtu: 4096, state: make([]genState, n.Endpoints())}
	if window > 0 {
		g.window, g.out = window, make([]int32, n.Endpoints()*n.Endpoints())
	}
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
		p, h, d := allToAll(b, perPair, 0)
		pkts, hops, drops = pkts+p, hops+h, drops+d
	}
	b.ReportMetric(float64(hops)/b.Elapsed().Seconds(), "packet-hops/s")
	b.ReportMetric(float64(pkts)/float64(b.N), "packets/op")
	b.ReportMetric(float64(drops)/float64(b.N), "drops/op")
}

// BenchmarkAllToAll128Window is the all-to-all of BenchmarkAllToAll128 at
// the full 1 MiB per pair, with each source keeping at most 16 packets
// (64 KiB, about one bandwidth-delay product of the fabric) outstanding
// per destination, like an RC QP with a bounded window: queues stay near
// what a congestion-controlled fabric sees instead of filling every
// buffer.
func BenchmarkAllToAll128Window(b *testing.B) {
	const perPair, window = 1 << 20, 16
	b.ReportAllocs()
	var pkts, hops, drops uint64
	for b.Loop() {
		p, h, d := allToAll(b, perPair, window)
		pkts, hops, drops = pkts+p, hops+h, drops+d
	}
	b.ReportMetric(float64(hops)/b.Elapsed().Seconds(), "packet-hops/s")
	b.ReportMetric(float64(pkts)/float64(b.N), "packets/op")
	b.ReportMetric(float64(drops)/float64(b.N), "drops/op")
}

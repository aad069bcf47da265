package topo

import (
	"fmt"
	"testing"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/sim"
)

// pairSink records, per (source, destination), the hops of the packets it
// receives.
type pairSink struct {
	n    *fabric.Network
	eps  int
	hops []int8 // src*eps+dst; -1: nothing arrived
	got  int
}

func (k *pairSink) Receive(p *fabric.Packet) {
	k.hops[int(p.Src)*k.eps+int(p.Dst)] = int8(p.Hops())
	k.got++
	k.n.Free(p)
}

// TestFatTree builds k-ary fat trees, checks their size against the
// closed forms, sends one packet between every ordered pair of hosts (the
// network is connected across every bisection) and checks each crossed the
// links a fat tree needs: 2 under one edge switch, 4 within a pod, 6
// between pods.
func TestFatTree(t *testing.T) {
	for _, c := range []struct {
		k, nodes, gpus int
	}{
		{2, 2, 1},  // 2 hosts, one per pod
		{4, 16, 1}, // 16 hosts
		{4, 3, 4},  // 12 of 16 host ports used
		{8, 16, 8}, // 128 hosts: htsim's 128-host fat tree
		{16, 1024, 1},
	} {
		t.Run(fmt.Sprintf("k%d_%dx%d", c.k, c.nodes, c.gpus), func(t *testing.T) {
			s := sim.New(sim.Config{Seed: 1})
			cl, err := Build(s, Spec{Kind: KindFatTree, K: c.k, Nodes: c.nodes, GPUsPerNode: c.gpus, LinkGbps: 100,
				HostPropNs: 1000, FabricPropNs: 1000})
			if err != nil {
				t.Fatal(err)
			}
			n, k, h := cl.Net, c.k, c.k/2
			eps := c.nodes * c.gpus
			if n.Endpoints() != eps || eps > FatTreeHosts(k) {
				t.Fatalf("%d endpoints, want %d ≤ k³/4 = %d", n.Endpoints(), eps, FatTreeHosts(k))
			}
			if got, want := n.Switches(), 5*k*k/4; got != want {
				t.Errorf("%d switches, want 5k²/4 = %d", got, want)
			}
			if len(cl.Leaves()) != k*h || len(cl.Aggregation()) != k*h || len(cl.Spines()) != h*h {
				t.Errorf("edge/agg/core %d/%d/%d", len(cl.Leaves()), len(cl.Aggregation()), len(cl.Spines()))
			}
			if got, want := n.Links(), eps+2*k*h*h; got != want {
				t.Errorf("%d links, want hosts + k³/2 = %d", got, want)
			}
			// Every switch has k ports at most (exactly k when the tree is full).
			ports := map[fabric.NodeID]int{}
			for p := range n.Ports() {
				from, _ := n.PortEnds(fabric.PortID(p))
				ports[from]++
			}
			for _, sw := range append(append(append([]fabric.NodeID{}, cl.Leaves()...), cl.Aggregation()...), cl.Spines()...) {
				if ports[sw] > k || (eps == FatTreeHosts(k) && ports[sw] != k) {
					t.Fatalf("switch %s has %d ports, k = %d", n.NodeName(sw), ports[sw], k)
				}
			}
			// Full bisection: each pod has as many core-facing links as host ports.
			up := 0
			for _, a := range cl.Aggregation()[:h] {
				for p := range n.Ports() {
					if from, to := n.PortEnds(fabric.PortID(p)); from == a && isIn(to, cl.Spines()) {
						up++
					}
				}
			}
			if up != h*h {
				t.Errorf("pod 0 has %d core links, want k²/4 = %d", up, h*h)
			}

			// All pairs: k=16 samples every 7th source to keep the test short.
			step := 1
			if eps > 200 {
				step = 7
			}
			sk := &pairSink{n: n, eps: eps, hops: make([]int8, eps*eps)}
			for i := range sk.hops {
				sk.hops[i] = -1
			}
			for e := range eps {
				n.Bind(fabric.EndpointID(e), sk)
			}
			sent := 0
			for a := 0; a < eps; a += step {
				for b := range eps {
					if a == b {
						continue
					}
					p := n.NewPacket(64, false)
					p.Src, p.Dst = fabric.EndpointID(a), fabric.EndpointID(b)
					p.SrcPort = uint16(49152 + b)
					p.Hdr.Opcode = roce.OpSendOnly
					n.Send(p)
					sent++
				}
			}
			if err := s.Run(); err != nil {
				t.Fatal(err)
			}
			if sk.got != sent {
				t.Fatalf("%d of %d packets arrived", sk.got, sent)
			}
			for a := 0; a < eps; a += step {
				for b := range eps {
					if a == b {
						continue
					}
					want := 6
					switch {
					case a/h == b/h:
						want = 2
					case a/(h*h) == b/(h*h):
						want = 4
					}
					if got := int(sk.hops[a*eps+b]); got != want {
						t.Fatalf("host %d to %d: %d hops, want %d", a, b, got, want)
					}
				}
			}
		})
	}
}

func isIn(x fabric.NodeID, set []fabric.NodeID) bool {
	for _, y := range set {
		if x == y {
			return true
		}
	}
	return false
}

// TestFatTreeECMP sends flows that differ only in their UDP source port
// from one pod to another of a k=4 fat tree and checks that ECMP spreads
// them over every core switch.
func TestFatTreeECMP(t *testing.T) {
	s := sim.New(sim.Config{Seed: 1})
	cl, err := Build(s, Spec{Kind: KindFatTree, K: 4, Nodes: 16, GPUsPerNode: 1})
	if err != nil {
		t.Fatal(err)
	}
	n := cl.Net
	sk := &pairSink{n: n, eps: 16, hops: make([]int8, 16*16)}
	n.Bind(15, sk)
	const flows = 256
	for i := range flows {
		p := n.NewPacket(64, false)
		p.Src, p.Dst, p.SrcPort = 0, 15, uint16(49152+i)
		p.Hdr.Opcode = roce.OpSendOnly
		n.Send(p)
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if sk.got != flows {
		t.Fatalf("%d of %d arrived", sk.got, flows)
	}
	for _, core := range cl.Spines() {
		var through uint64
		for p := range n.Ports() {
			if from, _ := n.PortEnds(fabric.PortID(p)); from == core {
				through += n.PortStats(fabric.PortID(p)).Packets
			}
		}
		// 4 cores: each should see about 64; a balanced hash stays well inside [32, 96].
		if through < flows/8 || through > 3*flows/8 {
			t.Errorf("core %s forwarded %d of %d flows", n.NodeName(core), through, flows)
		}
	}
}

// TestFatTreeValidate checks the fat tree's own fields and the default k.
func TestFatTreeValidate(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Kind: KindFatTree, Nodes: 4, K: 3}, `topo: field "k": 3 must be even and ≥ 2`},
		{Spec{Kind: KindFatTree, Nodes: 3, GPUsPerNode: 1, K: 2}, `topo: field "k": a k=2 fat tree has 2 host ports, fewer than the 3 NIC ports`},
		{Spec{Kind: KindFatTree, Nodes: 1, K: 130}, `topo: field "k": 130 is more than 128`},
	} {
		if err := c.spec.Validate(); err == nil || err.Error() != c.want {
			t.Errorf("%+v: error %v, want %s", c.spec, err, c.want)
		}
	}
	for _, c := range []struct{ eps, k int }{{1, 2}, {2, 2}, {3, 4}, {16, 4}, {17, 6}, {128, 8}, {129, 10}, {1024, 16}} {
		if got := (Spec{Kind: KindFatTree, Nodes: c.eps, GPUsPerNode: 1}).withDefaults().K; got != c.k {
			t.Errorf("%d hosts: default k %d, want %d", c.eps, got, c.k)
		}
	}
}

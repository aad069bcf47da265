package topo

import (
	"strings"
	"testing"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/sim"
	"gopkg.in/yaml.v3"
)

type sink struct {
	n    *fabric.Network
	hops []int
}

func (k *sink) Receive(p *fabric.Packet) { k.hops = append(k.hops, p.Hops()); k.n.Free(p) }

// hops sends one packet from a to b and returns the links it crossed.
func hops(t *testing.T, c *Cluster, a, b fabric.EndpointID) int {
	t.Helper()
	k := &sink{n: c.Net}
	c.Net.Bind(b, k)
	p := c.Net.NewPacket(64, false)
	p.Src, p.Dst = a, b
	p.Hdr.Opcode = roce.OpSendOnly
	c.Net.Send(p)
	if err := c.Net.Sim().Run(); err != nil {
		t.Fatal(err)
	}
	if len(k.hops) != 1 {
		t.Fatalf("%d packets arrived", len(k.hops))
	}
	return k.hops[0]
}

func TestBuild(t *testing.T) {
	for _, c := range []struct {
		name                 string
		spec                 Spec
		switches, links, eps int
		near, far            [2][2]int // (node, nic) pairs
		nearHops, farHops    int
	}{
		{"single", Spec{Kind: KindSingle, Nodes: 2, GPUsPerNode: 4}, 1, 8, 8, [2][2]int{{0, 0}, {1, 3}}, [2][2]int{{0, 1}, {1, 2}}, 2, 2},
		// 4 nodes × 8 NICs on 4 leaves of 8, 2 spines, 8/2 = 4 uplinks per leaf.
		{"leafspine", Spec{Kind: KindLeafSpine, Nodes: 4, Leaves: 4, Spines: 2, Oversubscription: 2}, 6, 32 + 4*4, 32,
			[2][2]int{{1, 0}, {1, 7}}, [2][2]int{{0, 0}, {3, 0}}, 2, 4},
		// 4 nodes × 8 NICs: 8 rail switches of 4, 4 spines, 1 link each.
		{"rail", Spec{Kind: KindRail, Nodes: 4, Spines: 4}, 12, 32 + 8*4, 32,
			[2][2]int{{0, 3}, {2, 3}}, [2][2]int{{0, 3}, {0, 4}}, 2, 4},
		// Two leaves per rail: same rail but other leaf crosses a spine.
		{"rail2", Spec{Kind: KindRail, Nodes: 4, NodesPerLeaf: 2, Spines: 2}, 18, 32 + 16*2, 32,
			[2][2]int{{0, 5}, {1, 5}}, [2][2]int{{0, 5}, {2, 5}}, 2, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := Build(sim.New(sim.Config{}), c.spec)
			if err != nil {
				t.Fatal(err)
			}
			n := cl.Net
			if n.Switches() != c.switches || n.Links() != c.links || n.Endpoints() != c.eps {
				t.Fatalf("switches/links/endpoints %d/%d/%d, want %d/%d/%d", n.Switches(), n.Links(), n.Endpoints(), c.switches, c.links, c.eps)
			}
			if h := hops(t, cl, cl.Endpoint(c.near[0][0], c.near[0][1]), cl.Endpoint(c.near[1][0], c.near[1][1])); h != c.nearHops {
				t.Errorf("near pair: %d hops, want %d", h, c.nearHops)
			}
			if h := hops(t, cl, cl.Endpoint(c.far[0][0], c.far[0][1]), cl.Endpoint(c.far[1][0], c.far[1][1])); h != c.farHops {
				t.Errorf("far pair: %d hops, want %d", h, c.farHops)
			}
		})
	}
}

func TestLookups(t *testing.T) {
	c, err := Build(sim.New(sim.Config{}), Spec{Kind: KindRail, Nodes: 3, Spines: 1, NICsPerGPU: 2, GPUsPerNode: 4})
	if err != nil {
		t.Fatal(err)
	}
	ep := c.Endpoint(2, 5)
	if node, nic := c.Locate(ep); node != 2 || nic != 5 || c.GPUOfNIC(nic) != 2 {
		t.Fatalf("Locate(%d) = %d,%d gpu %d", ep, node, nic, c.GPUOfNIC(nic))
	}
	if ip, mac := c.IP(ep), c.MAC(ep); ip != [4]byte{10, 0, 2, 6} || mac != [6]byte{2, 0, 0, 0, 2, 5} {
		t.Fatalf("addresses %v %v", ip, mac)
	}
	tr := c.PCIe(1)
	// GPU 2 and its NICs 4, 5 share a PCIe switch (2 GPUs per switch: with 0-3).
	g, nic := c.GPUDev(1, 2), c.NICDev(1, 5)
	if tr.Switch(g) != tr.Switch(nic) || tr.Hops(g, nic) != 2 || tr.Hops(c.GPUDev(1, 0), nic) != 4 {
		t.Fatalf("PCIe placement: gpu2 sw%d nic5 sw%d", tr.Switch(g), tr.Switch(nic))
	}
	if c.HostDev(1) != tr.Host() || c.NVLink(2).GPUs() != 4 || tr.Name(nic) != "n1/nic5" {
		t.Fatal("host/nvlink lookups")
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Kind: "torus", Nodes: 1}, `topo: field "kind"`},
		{Spec{Kind: KindSingle}, `topo: field "nodes": must be ≥ 1`},
		{Spec{Kind: KindLeafSpine, Nodes: 2, Leaves: 2}, `topo: field "spines": must be ≥ 1`},
		{Spec{Kind: KindLeafSpine, Nodes: 2, Leaves: 3, Spines: 1}, `topo: field "leaves"`},
		{Spec{Kind: KindRail, Nodes: 4, NodesPerLeaf: 3, Spines: 1}, `topo: field "nodes_per_leaf"`},
		{Spec{Kind: KindRail, Nodes: 4, Spines: 3}, `topo: field "spines"`},
		{Spec{Kind: KindSingle, Nodes: 1, Switch: SwitchSpec{ECNPmax: 2}}, `topo: field "switch.ecn_pmax"`},
		{Spec{Kind: KindSingle, Nodes: 1, LinkGbps: -1}, `topo: field "link_gbps"`},
	} {
		err := c.spec.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want prefix %s", c.spec, err, c.want)
		}
		if _, berr := Build(sim.New(sim.Config{}), c.spec); berr == nil || berr.Error() != err.Error() {
			t.Errorf("Build error %v differs from Validate %v", berr, err)
		}
	}
}

func TestYAML(t *testing.T) {
	src := `
kind: rail
nodes: 16
spines: 8
link_gbps: 400
switch:
  latency_ns: 500
  port_buffer_kib: 4096
`
	var s Spec
	if err := yaml.Unmarshal([]byte(src), &s); err != nil {
		t.Fatal(err)
	}
	c, err := Build(sim.New(sim.Config{}), s)
	if err != nil {
		t.Fatal(err)
	}
	if c.Net.Endpoints() != 128 || c.Net.Switches() != 16 || c.Spec.Switch.LatencyNs != 500 || c.Spec.GPUsPerNode != 8 {
		t.Fatalf("built %d endpoints, %d switches, spec %+v", c.Net.Endpoints(), c.Net.Switches(), c.Spec)
	}
}

// TestBuildWorld checks a cluster built over a World's partitions: node n
// and its NIC ports on partition n % parts, Spec.Lookahead equal to the
// built network's, and a World whose lookahead is too long refused.
func TestBuildWorld(t *testing.T) {
	for _, spec := range []Spec{
		{Kind: KindRail, Nodes: 6, GPUsPerNode: 2, Spines: 2},
		{Kind: KindFatTree, K: 4, Nodes: 16, GPUsPerNode: 1, HostPropNs: 1000, FabricPropNs: 1000},
		{Kind: KindSingle, Nodes: 3, GPUsPerNode: 2, HostPropNs: 20},
	} {
		w := sim.NewWorld(sim.Config{}, 4, spec.Lookahead())
		c, err := BuildWorld(w, spec)
		if err != nil {
			t.Fatal(err)
		}
		if la, ok := c.Net.Lookahead(); !ok || la != spec.Lookahead() {
			t.Errorf("%s: network lookahead %v, Spec.Lookahead %v", spec.Kind, la, spec.Lookahead())
		}
		if c.Net.World() != w || c.Net.Parts() != 4 {
			t.Fatalf("%s: network on %d partitions", spec.Kind, c.Net.Parts())
		}
		for node := range c.Nodes() {
			if c.Sim(node) != w.Part(node%4) {
				t.Errorf("%s: node %d on partition %d", spec.Kind, node, c.Sim(node).Part())
			}
			for nic := range c.NICsPerNode() {
				ep := c.Endpoint(node, nic)
				if c.Net.SimOf(ep) != c.Sim(node) || c.Net.PortPart(c.Net.EndpointPort(ep)) != node%4 {
					t.Errorf("%s: endpoint %d of node %d on partition %d", spec.Kind, ep, node, c.Net.PartOf(ep))
				}
			}
		}
		long := sim.NewWorld(sim.Config{}, 4, spec.Lookahead()+1)
		if _, err := BuildWorld(long, spec); err == nil || !strings.Contains(err.Error(), "lookahead") {
			t.Errorf("%s: a world with a lookahead 1 ps too long: %v", spec.Kind, err)
		}
	}
	s := sim.New(sim.Config{})
	c, err := Build(s, Spec{Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	if c.Sim(1) != s || c.Net.SimOf(3) != s || c.Net.World() != nil || c.Net.Parts() != 1 {
		t.Error("a cluster on one Sim does not run on it")
	}
}

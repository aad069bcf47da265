package topo

import (
	"fmt"
	"strconv"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/nvlink"
	"github.com/ginsim/ginsim/fabric/pcie"
	"github.com/ginsim/ginsim/sim"
)

// Kinds of network.
const (
	KindSingle    = "single"    // every NIC port on one switch
	KindLeafSpine = "leafspine" // NIC ports on leaves by node, leaves joined by spines
	KindRail      = "rail"      // NIC i of every node on rail-i leaves, rails joined by spines
	KindFatTree   = "fattree"   // three-tier k-ary fat tree: edge, aggregation and core switches
)

// Spec declares a cluster. Zero fields take the defaults listed with them.
type Spec struct {
	Kind        string `yaml:"kind"`          // single | leafspine | rail | fattree
	Nodes       int    `yaml:"nodes"`         // nodes (servers); required
	GPUsPerNode int    `yaml:"gpus_per_node"` // default 8 (HGX H100)
	NICsPerGPU  int    `yaml:"nics_per_gpu"`  // default 1 (one 400G ConnectX-7 per GPU)

	// LinkGbps is every link's rate per direction; default 400.
	LinkGbps int64 `yaml:"link_gbps"`
	// HostPropNs is the NIC-to-leaf cable delay; default 10 (2 m copper).
	HostPropNs int64 `yaml:"host_prop_ns"`
	// FabricPropNs is the switch-to-switch delay; default 100 (20 m fibre).
	FabricPropNs int64 `yaml:"fabric_prop_ns"`
	// IPv6 frames RoCEv2 over IPv6.
	IPv6 bool `yaml:"ipv6"`

	// Leaves is the number of leaf switches (leafspine); the NIC ports are
	// spread over them in node order and must divide evenly.
	Leaves int `yaml:"leaves"`
	// NodesPerLeaf is how many nodes share one rail leaf (rail); default
	// all nodes, i.e. one switch per rail.
	NodesPerLeaf int `yaml:"nodes_per_leaf"`
	// K is the fat tree's switch radix (fattree): k pods of k/2 edge and
	// k/2 aggregation switches, (k/2)² core switches, k³/4 host ports,
	// every switch with k ports. It must be even; 0 takes the smallest
	// even k whose k³/4 ports hold every NIC port. NIC ports fill the
	// host ports in (node, nic) order, k/2 per edge switch; spare host
	// ports stay empty. HostPropNs is the host-to-edge delay and
	// FabricPropNs that of every switch-to-switch link.
	K int `yaml:"k"`
	// Spines is the number of spine switches (leafspine, rail); required.
	Spines int `yaml:"spines"`
	// Oversubscription is a leaf's host-facing to spine-facing bandwidth
	// ratio; default 1 (non-blocking). Each leaf gets hosts/oversubscription
	// uplinks spread evenly over the spines.
	Oversubscription int `yaml:"oversubscription"`

	Switch SwitchSpec `yaml:"switch"`

	// GPUsPerPCIeSwitch is how many GPUs, with their NICs, share a PCIe
	// switch; default 2, as on HGX-class boards where each Gen5 switch joins
	// two GPUs and their NICs to the host.
	GPUsPerPCIeSwitch int `yaml:"gpus_per_pcie_switch"`

	// PCIe and NVLink override the default bus models (programmatic only).
	PCIe   *pcie.Config   `yaml:"-"`
	NVLink *nvlink.Config `yaml:"-"`
}

// SwitchSpec declares the switches; zero fields take
// fabric.DefaultSwitchConfig's values.
type SwitchSpec struct {
	LatencyNs       int64   `yaml:"latency_ns"`        // default 300
	StoreAndForward bool    `yaml:"store_and_forward"` // default cut-through
	PortBufferKiB   int64   `yaml:"port_buffer_kib"`   // default 2048; negative: unbounded
	NoECN           bool    `yaml:"no_ecn"`            // default ECN marking on
	ECNKminKiB      int64   `yaml:"ecn_kmin_kib"`      // default 128
	ECNKmaxKiB      int64   `yaml:"ecn_kmax_kib"`      // default 1024
	ECNPmax         float64 `yaml:"ecn_pmax"`          // default 0.2
}

// maxK bounds a fat tree's radix: 128 gives 524 288 host ports.
const maxK = 128

// FatTreeHosts returns the host ports of a k-ary three-tier fat tree: k³/4.
func FatTreeHosts(k int) int { return k * k * k / 4 }

func fieldErr(field, format string, args ...any) error {
	return fmt.Errorf("topo: field %q: %s", field, fmt.Sprintf(format, args...))
}

// withDefaults returns s with zero fields filled in.
func (s Spec) withDefaults() Spec {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def64 := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	if s.Kind == "" {
		s.Kind = KindSingle
	}
	def(&s.GPUsPerNode, 8)
	def(&s.NICsPerGPU, 1)
	def64(&s.LinkGbps, 400)
	def64(&s.HostPropNs, 10)
	def64(&s.FabricPropNs, 100)
	def(&s.NodesPerLeaf, s.Nodes)
	def(&s.Oversubscription, 1)
	def(&s.GPUsPerPCIeSwitch, 2)
	if s.Kind == KindFatTree && s.K == 0 {
		eps := max(s.Nodes*s.GPUsPerNode*s.NICsPerGPU, 1)
		s.K = 2
		for FatTreeHosts(s.K) < eps && s.K < maxK {
			s.K += 2
		}
	}
	d := fabric.DefaultSwitchConfig()
	def64(&s.Switch.LatencyNs, int64(d.Latency/sim.Nanosecond))
	def64(&s.Switch.PortBufferKiB, int64(d.PortBuffer/sim.KiB))
	def64(&s.Switch.ECNKminKiB, int64(d.ECN.Kmin/sim.KiB))
	def64(&s.Switch.ECNKmaxKiB, int64(d.ECN.Kmax/sim.KiB))
	if s.Switch.ECNPmax == 0 {
		s.Switch.ECNPmax = d.ECN.Pmax
	}
	return s
}

// Lookahead returns the least delay between a packet leaving a port into
// a switch and its event at that switch (fabric.Network.Lookahead of the
// built network): the switch latency plus the shortest cable. It is the
// lookahead of a World to build s on with BuildWorld.
func (s Spec) Lookahead() sim.Duration {
	s = s.withDefaults()
	prop := s.HostPropNs
	if s.Kind != KindSingle {
		prop = min(prop, s.FabricPropNs)
	}
	return sim.Duration(prop+s.Switch.LatencyNs) * sim.Nanosecond
}

// Validate reports the first invalid field of s (after defaults).
func (s Spec) Validate() error {
	s = s.withDefaults()
	_, err := s.check()
	return err
}

// plan is the derived shape of a valid spec.
type plan struct {
	nics        int // per node
	eps         int
	leaves      int // total leaf switches
	hostsPerLf  int
	linksPerSpn int
}

func (s Spec) check() (plan, error) {
	var p plan
	switch {
	case s.Kind != KindSingle && s.Kind != KindLeafSpine && s.Kind != KindRail && s.Kind != KindFatTree:
		return p, fieldErr("kind", "%q is not one of single, leafspine, rail, fattree", s.Kind)
	case s.Nodes < 1:
		return p, fieldErr("nodes", "must be ≥ 1")
	case s.GPUsPerNode < 1:
		return p, fieldErr("gpus_per_node", "must be ≥ 1")
	case s.NICsPerGPU < 1:
		return p, fieldErr("nics_per_gpu", "must be ≥ 1")
	case s.LinkGbps < 1:
		return p, fieldErr("link_gbps", "must be ≥ 1")
	case s.HostPropNs < 0:
		return p, fieldErr("host_prop_ns", "must be ≥ 0")
	case s.FabricPropNs < 0:
		return p, fieldErr("fabric_prop_ns", "must be ≥ 0")
	case s.GPUsPerPCIeSwitch < 1:
		return p, fieldErr("gpus_per_pcie_switch", "must be ≥ 1")
	case s.Switch.LatencyNs < 0:
		return p, fieldErr("switch.latency_ns", "must be ≥ 0")
	case s.Switch.ECNKminKiB < 0 || s.Switch.ECNKmaxKiB < s.Switch.ECNKminKiB:
		return p, fieldErr("switch.ecn_kmax_kib", "must be ≥ ecn_kmin_kib ≥ 0")
	case s.Switch.ECNPmax < 0 || s.Switch.ECNPmax > 1:
		return p, fieldErr("switch.ecn_pmax", "must be in [0, 1]")
	case s.Oversubscription < 1:
		return p, fieldErr("oversubscription", "must be ≥ 1")
	}
	p.nics = s.GPUsPerNode * s.NICsPerGPU
	p.eps = s.Nodes * p.nics
	switch s.Kind {
	case KindSingle:
		return p, nil
	case KindFatTree:
		switch {
		case s.K < 2 || s.K%2 != 0:
			return p, fieldErr("k", "%d must be even and ≥ 2", s.K)
		case s.K > maxK:
			return p, fieldErr("k", "%d is more than %d", s.K, maxK)
		case p.eps > FatTreeHosts(s.K):
			return p, fieldErr("k", "a k=%d fat tree has %d host ports, fewer than the %d NIC ports", s.K, FatTreeHosts(s.K), p.eps)
		}
		return p, nil
	case KindLeafSpine:
		if s.Leaves < 1 {
			return p, fieldErr("leaves", "must be ≥ 1")
		}
		if p.eps%s.Leaves != 0 {
			return p, fieldErr("leaves", "%d NIC ports do not spread evenly over %d leaves", p.eps, s.Leaves)
		}
		p.leaves, p.hostsPerLf = s.Leaves, p.eps/s.Leaves
	case KindRail:
		if s.NodesPerLeaf < 1 || s.Nodes%s.NodesPerLeaf != 0 {
			return p, fieldErr("nodes_per_leaf", "must be ≥ 1 and divide nodes (%d)", s.Nodes)
		}
		p.leaves, p.hostsPerLf = p.nics*(s.Nodes/s.NodesPerLeaf), s.NodesPerLeaf
	}
	if s.Spines < 1 {
		return p, fieldErr("spines", "must be ≥ 1")
	}
	up := p.hostsPerLf / s.Oversubscription
	if p.hostsPerLf%s.Oversubscription != 0 || up%s.Spines != 0 || up == 0 {
		return p, fieldErr("spines", "%d hosts per leaf at oversubscription %d give %d uplinks, which must be a positive multiple of %d spines",
			p.hostsPerLf, s.Oversubscription, up, s.Spines)
	}
	p.linksPerSpn = up / s.Spines
	return p, nil
}

// Cluster is a built Spec: the network, and per node the PCIe tree and
// NVLink domain.
type Cluster struct {
	Spec Spec // with defaults filled in
	Net  *fabric.Network

	sims   []*sim.Sim // by node
	pcie   []*pcie.Tree
	nvl    []*nvlink.Domain
	gpuDev [][]pcie.DevID
	nicDev [][]pcie.DevID
	nics   int
	leaves []fabric.NodeID
	aggs   []fabric.NodeID
	spines []fabric.NodeID
}

// Build builds spec on s. Errors name the offending field.
func Build(s *sim.Sim, spec Spec) (*Cluster, error) { return build(s, nil, spec) }

// BuildWorld builds spec on the partitions of w, one node on each in turn:
// node n's NIC ports (endpoints), PCIe tree and NVLink domain are on
// w.Part(n % w.Parts()), and the network is fabric.NewPartitioned's.
// Errors name the offending field.
func BuildWorld(w *sim.World, spec Spec) (*Cluster, error) { return build(nil, w, spec) }

func build(s *sim.Sim, w *sim.World, spec Spec) (*Cluster, error) {
	spec = spec.withDefaults()
	p, err := spec.check()
	if err != nil {
		return nil, err
	}
	pc := pcie.DefaultConfig()
	if spec.PCIe != nil {
		pc = *spec.PCIe
	}
	if err := pc.Validate(); err != nil {
		return nil, fmt.Errorf("topo: %w", err)
	}
	nc := nvlink.DefaultConfig()
	if spec.NVLink != nil {
		nc = *spec.NVLink
	}
	if err := nc.Validate(); err != nil {
		return nil, fmt.Errorf("topo: %w", err)
	}
	c := &Cluster{Spec: spec, nics: p.nics}
	var n *fabric.Network
	if w != nil {
		n = fabric.NewPartitioned(w, fabric.Config{IPv6: spec.IPv6})
	} else {
		n = fabric.New(s, fabric.Config{IPv6: spec.IPv6})
	}
	c.Net = n
	for node := range spec.Nodes {
		if w != nil {
			s = w.Part(node % w.Parts())
		}
		c.sims = append(c.sims, s)
	}

	// Endpoints, in (node, nic) order, with deterministic addresses.
	for node := range spec.Nodes {
		for nic := range p.nics {
			ep := n.AddEndpoint("n" + strconv.Itoa(node) + "/nic" + strconv.Itoa(nic))
			n.SetAddr(ep, [4]byte{10, byte(node >> 8), byte(node), byte(nic + 1)},
				[6]byte{0x02, 0, 0, byte(node >> 8), byte(node), byte(nic)})
			if w != nil {
				n.Place(ep, node%w.Parts())
			}
		}
	}

	sc := fabric.SwitchConfig{
		Latency:    sim.Duration(spec.Switch.LatencyNs) * sim.Nanosecond,
		CutThrough: !spec.Switch.StoreAndForward,
		PortBuffer: sim.Bytes(max(spec.Switch.PortBufferKiB, 0)) * sim.KiB,
		ECN: fabric.ECNConfig{Enabled: !spec.Switch.NoECN,
			Kmin: sim.Bytes(spec.Switch.ECNKminKiB) * sim.KiB, Kmax: sim.Bytes(spec.Switch.ECNKmaxKiB) * sim.KiB,
			Pmax: spec.Switch.ECNPmax},
	}
	rate := sim.BitRate(spec.LinkGbps) * sim.Gbps
	host := fabric.LinkConfig{Rate: rate, Prop: sim.Duration(spec.HostPropNs) * sim.Nanosecond}
	core := fabric.LinkConfig{Rate: rate, Prop: sim.Duration(spec.FabricPropNs) * sim.Nanosecond}
	connect := func(a, b fabric.NodeID, lc fabric.LinkConfig) {
		if err == nil {
			_, err = n.Connect(a, b, lc)
		}
	}

	switch spec.Kind {
	case KindSingle:
		sw := n.AddSwitch("sw0", sc)
		c.leaves = append(c.leaves, sw)
		for ep := range p.eps {
			connect(n.Node(fabric.EndpointID(ep)), sw, host)
		}
	case KindLeafSpine:
		for l := range p.leaves {
			c.leaves = append(c.leaves, n.AddSwitch("leaf"+strconv.Itoa(l), sc))
		}
		for ep := range p.eps {
			connect(n.Node(fabric.EndpointID(ep)), c.leaves[ep/p.hostsPerLf], host)
		}
	case KindRail:
		per := spec.Nodes / spec.NodesPerLeaf
		for r := range p.nics {
			for g := range per {
				c.leaves = append(c.leaves, n.AddSwitch("rail"+strconv.Itoa(r)+"/leaf"+strconv.Itoa(g), sc))
			}
		}
		for node := range spec.Nodes {
			for nic := range p.nics {
				ep := fabric.EndpointID(node*p.nics + nic)
				connect(n.Node(ep), c.leaves[nic*per+node/spec.NodesPerLeaf], host)
			}
		}
	case KindFatTree:
		c.buildFatTree(spec.K, p.eps, sc, host, core, connect)
	}
	if spec.Kind != KindSingle && spec.Kind != KindFatTree {
		for sp := range spec.Spines {
			c.spines = append(c.spines, n.AddSwitch("spine"+strconv.Itoa(sp), sc))
		}
		for _, l := range c.leaves {
			for _, sp := range c.spines {
				for range p.linksPerSpn {
					connect(l, sp, core)
				}
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("topo: %w", err)
	}
	if err := n.Build(); err != nil {
		return nil, fmt.Errorf("topo: %w", err)
	}
	if w != nil && w.Parts() > 1 {
		if la, ok := n.Lookahead(); ok && la < w.Lookahead() {
			return nil, fmt.Errorf("topo: the world's lookahead %v is more than the network's %v (use Spec.Lookahead)", w.Lookahead(), la)
		}
	}

	// Per node: PCIe tree and NVLink domain.
	for node := range spec.Nodes {
		s := c.sims[node]
		t := pcie.NewTree(s, pc)
		gd := make([]pcie.DevID, spec.GPUsPerNode)
		nd := make([]pcie.DevID, p.nics)
		sw := -1
		for g := range spec.GPUsPerNode {
			if g%spec.GPUsPerPCIeSwitch == 0 {
				sw = t.AddSwitch("n" + strconv.Itoa(node) + "/pcie" + strconv.Itoa(g/spec.GPUsPerPCIeSwitch))
			}
			gd[g] = t.AddDevice("n"+strconv.Itoa(node)+"/gpu"+strconv.Itoa(g), sw)
			for k := range spec.NICsPerGPU {
				nic := g*spec.NICsPerGPU + k
				nd[nic] = t.AddDevice("n"+strconv.Itoa(node)+"/nic"+strconv.Itoa(nic), sw)
			}
		}
		c.pcie = append(c.pcie, t)
		c.gpuDev = append(c.gpuDev, gd)
		c.nicDev = append(c.nicDev, nd)
		c.nvl = append(c.nvl, nvlink.NewDomain(s, nc, spec.GPUsPerNode))
	}
	return c, nil
}

// Nodes returns the number of nodes.
func (c *Cluster) Nodes() int { return c.Spec.Nodes }

// Sim returns the Sim node runs on: its partition of a World
// (BuildWorld), or the one Sim given to Build.
func (c *Cluster) Sim(node int) *sim.Sim { return c.sims[node] }

// NICsPerNode returns the number of NIC ports per node.
func (c *Cluster) NICsPerNode() int { return c.nics }

// Endpoint returns the network endpoint of NIC nic of node.
func (c *Cluster) Endpoint(node, nic int) fabric.EndpointID {
	return fabric.EndpointID(node*c.nics + nic)
}

// Locate returns the node and NIC index of endpoint ep.
func (c *Cluster) Locate(ep fabric.EndpointID) (node, nic int) {
	return int(ep) / c.nics, int(ep) % c.nics
}

// GPUOfNIC returns the GPU a NIC serves (NICs are numbered GPU-major).
func (c *Cluster) GPUOfNIC(nic int) int { return nic / c.Spec.NICsPerGPU }

// PCIe returns node's PCIe tree.
func (c *Cluster) PCIe(node int) *pcie.Tree { return c.pcie[node] }

// NVLink returns node's NVLink domain.
func (c *Cluster) NVLink(node int) *nvlink.Domain { return c.nvl[node] }

// GPUDev returns the PCIe device of a GPU.
func (c *Cluster) GPUDev(node, gpu int) pcie.DevID { return c.gpuDev[node][gpu] }

// NICDev returns the PCIe device of a NIC.
func (c *Cluster) NICDev(node, nic int) pcie.DevID { return c.nicDev[node][nic] }

// HostDev returns the PCIe device of node's root complex and host memory.
func (c *Cluster) HostDev(node int) pcie.DevID { return c.pcie[node].Host() }

// IP returns an endpoint's IPv4 address: 10.(node>>8).(node&255).(nic+1).
func (c *Cluster) IP(ep fabric.EndpointID) [4]byte { return c.Net.IPv4(ep) }

// MAC returns an endpoint's MAC: 02:00:00:(node>>8):(node&255):nic.
func (c *Cluster) MAC(ep fabric.EndpointID) [6]byte { return c.Net.MAC(ep) }

// Leaves returns the leaf switches (the single switch for KindSingle), in
// build order: for rail, rail-major.
func (c *Cluster) Leaves() []fabric.NodeID { return c.leaves }

// Spines returns the spine switches: for a fat tree, the core switches.
func (c *Cluster) Spines() []fabric.NodeID { return c.spines }

// Aggregation returns a fat tree's aggregation switches, pod-major (none
// for the other kinds).
func (c *Cluster) Aggregation() []fabric.NodeID { return c.aggs }

// buildFatTree adds the switches and links of a k-ary fat tree (Al-Fares
// et al., SIGCOMM 2008) and attaches eps endpoints: pod p holds edge
// switches p*k/2 .. p*k/2+k/2-1, each joined to every aggregation switch
// of its pod; aggregation switch j of every pod joins core switches
// j*k/2 .. j*k/2+k/2-1. Host port h is on edge switch h/(k/2). ECMP
// spreads the k/2 uplinks of every edge and aggregation switch.
func (c *Cluster) buildFatTree(k, eps int, sc fabric.SwitchConfig, host, core fabric.LinkConfig, connect func(a, b fabric.NodeID, lc fabric.LinkConfig)) {
	n, h := c.Net, k/2
	for pod := range k {
		for e := range h {
			c.leaves = append(c.leaves, n.AddSwitch("pod"+strconv.Itoa(pod)+"/edge"+strconv.Itoa(e), sc))
		}
		for a := range h {
			c.aggs = append(c.aggs, n.AddSwitch("pod"+strconv.Itoa(pod)+"/agg"+strconv.Itoa(a), sc))
		}
	}
	for i := range h * h {
		c.spines = append(c.spines, n.AddSwitch("core"+strconv.Itoa(i), sc))
	}
	for ep := range eps {
		connect(n.Node(fabric.EndpointID(ep)), c.leaves[ep/h], host)
	}
	for pod := range k {
		for e := range h {
			for a := range h {
				connect(c.leaves[pod*h+e], c.aggs[pod*h+a], core)
			}
		}
		for a := range h {
			for j := range h {
				connect(c.aggs[pod*h+a], c.spines[a*h+j], core)
			}
		}
	}
}

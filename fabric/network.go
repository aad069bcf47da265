package fabric

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// NodeID names a device of the network graph: an endpoint (NIC port) or a
// switch.
type NodeID int32

// LinkID names a full-duplex link, in the order links were connected.
type LinkID int32

// PortID names one direction of a link: the egress port of the device it
// leaves. Link l has ports 2l (from its first node to its second) and 2l+1.
type PortID int32

// Tap observes packets on a port; iface is the value given when the tap was
// installed (a pcap interface index). The packet must not be kept or
// modified.
type Tap func(iface int, at sim.Time, p *Packet)

// DropReason says why the network discarded a packet.
type DropReason uint8

// Reasons for drops.
const (
	DropBuffer   DropReason = iota + 1 // egress queue full (drop-tail)
	DropLoss                           // lost on the wire (fault injection)
	DropLinkDown                       // sent onto a link that is down
	DropUnbound                        // destination endpoint has no NIC bound
)

var dropNames = [...]string{"", "buffer", "loss", "link-down", "unbound"}

// String names the reason.
func (r DropReason) String() string {
	if int(r) < len(dropNames) && r != 0 {
		return dropNames[r]
	}
	return "drop(" + strconv.Itoa(int(r)) + ")"
}

// DropHook is told about every packet the network discards, just before
// the packet returns to the pool.
type DropHook func(port PortID, at sim.Time, p *Packet, why DropReason)

// PortStats counts what one port (link direction) carried.
type PortStats struct {
	Packets  uint64    // packets put on the wire
	Bytes    sim.Bytes // their wire bytes
	Drops    uint64    // packets dropped at this egress queue (buffer full)
	Lost     uint64    // packets lost on this link (loss fault or link down)
	ECNMarks uint64    // packets marked CE at this egress queue
	MaxQueue sim.Bytes // largest egress backlog seen, counting the arriving packet
	// Busy is the serialisation time of the packets put on the wire.
	Busy sim.Duration
	// Wait sums the time packets queued at this egress before their
	// first bit left (switch egress ports only; a NIC paces itself to
	// its port, so its own transmit queue is not the port's); MaxWait is
	// the largest backlog seen, in time, counting the arriving packet.
	Wait, MaxWait sim.Duration
}

// Network is the packet-switched fabric between NIC ports: a graph of
// endpoints and switches joined by full-duplex links. Switches are output
// queued with finite drop-tail buffers, forward along shortest paths with
// ECMP over equal-cost next hops (a salted hash of the RoCEv2 5-tuple) and
// mark ECN. Links serialise packets at their rate, add propagation delay
// and may carry seeded faults. One event fires per packet per hop; the
// event argument is the packet's pool index.
//
// Build a network with New, AddEndpoint, AddSwitch, Connect and Build (or
// use NewSingleSwitch or fabric/topo). It owns the packet pool.
//
// A network built with NewPartitioned runs on the partitions of a
// sim.World: every endpoint is placed on one (Place), and every port is
// owned by one, whose events alone touch it (see the package's Partitions
// section). Otherwise it is not safe for concurrent use.
type Network struct {
	parts []*netPart // one per partition; a lone network has one
	w     *sim.World // nil: a lone network on one Sim
	ipv6  bool
	eps   []endpoint
	nodes []node
	sws   []swtch
	ports []port
	built bool

	// route[sw*len(eps)+dst] is the egress port when there is one next
	// hop, else -(off+1) for an offset into hops: hops[off] is the number
	// of equal-cost egress ports, followed by the ports.
	route []int32
	hops  []int32
	drop  DropHook
}

// netPart is the state of one partition: its Sim, its packet pool and its
// observer. Only events of the partition touch it, except that another
// partition reads (never writes) the pool's directory and the packets a
// packet index names once the packet has reached it.
type netPart struct {
	s   *sim.Sim
	idx int32
	// dir holds the pool's chunks; a partitioned network allocates it at
	// its final length (dirBudget), so that another partition reading a chunk
	// pointer never races with a growing slice header.
	dir    []*pchunk
	chunks int32 // chunks in use
	used   int32 // packets handed out from dir[chunks-1]
	free   []int32
	// ret[q] holds partition q's packets freed here; they go back to q's
	// free list at the end of the window. retTo lists the q whose ret[q]
	// is not empty, and from the partitions with packets for this one.
	ret   [][]int32
	retTo []int32
	from  []int32
	ids   uint64
	obs   *obs.Bus // nil: not observed
	_     [64]byte // keep partitions' hot fields on separate cache lines
}

// pchunk is a chunk of the packet pool: packets and their per-hop state
// under the same index.
type pchunk struct {
	pkt [chunkSize]Packet
	hot [chunkSize]hot
}

type endpoint struct {
	ep    Endpoint
	node  NodeID
	part  int32  // partition (Place)
	up    PortID // the NIC port's transmit direction; -1 until connected
	rxTap Tap
	rxIf  int
	ip    [4]byte
	mac   [6]byte
}

type node struct {
	name  string
	ep    int32 // endpoint ID or -1
	sw    int32 // switch index or -1
	ports []PortID
}

type swtch struct {
	cfg  SwitchConfig
	node NodeID
	salt uint64
	rnd  *rand.Rand // ECN marking decisions
}

type port struct {
	// Fields read on every hop come first.
	freeAt    sim.Time
	psPerByte sim.Duration // exact serialisation time per byte, or 0: use rate.TxTime
	prop      sim.Duration
	nextLat   sim.Duration // forwarding latency of the device at the far end, when it is a switch
	// Set when the port is a switch egress.
	bufTime  sim.Duration // time to drain a full buffer; 0: unbounded
	maxWait  sim.Duration // largest backlog seen, in time, counting the arriving packet
	kminTime sim.Duration // time to drain Kmin bytes
	kmaxTime sim.Duration // time to drain Kmax bytes: backlog ≥ Kmax ⟺ wait ≥ kmaxTime
	to       NodeID
	toEp     int32 // endpoint at the far end, or -1
	toSw     int32 // switch index of the far end, or -1
	part     int32 // partition owning the port (own)
	fromSw   bool
	ecn      bool
	nextCut  bool
	down     bool
	fault    *faultState
	tap      Tap
	stats    PortStats

	// Cold fields.
	from   NodeID
	tapIf  int
	rate   sim.BitRate
	kmin   sim.Bytes
	kmax   sim.Bytes
	pmax   float64
	ecnRnd *rand.Rand
}

// txTime returns the serialisation time of wire bytes on the port.
func (pt *port) txTime(wire sim.Bytes) sim.Duration {
	if pt.psPerByte > 0 {
		return sim.Duration(wire) * pt.psPerByte
	}
	return pt.rate.TxTime(wire)
}

type faultState struct {
	f   Faults
	rnd *rand.Rand
}

const (
	chunkShift = 8
	chunkSize  = 1 << chunkShift
	// dirBudget bounds the pool directories of a partitioned network,
	// which are allocated at their final length: 2^20 chunk pointers
	// (8 MiB) shared out, each partition getting between 2^10 and 2^16
	// (256 Ki to 16 Mi packets alive at once).
	dirBudget = 1 << 20
)

// New returns an empty network on a lone Sim.
func New(s *sim.Sim, cfg Config) *Network {
	return &Network{parts: []*netPart{{s: s}}, ipv6: cfg.IPv6}
}

// NewPartitioned returns an empty network on the partitions of w. Every
// endpoint starts on partition 0; Place moves it before Build (see the
// package's Partitions section for who owns what).
func NewPartitioned(w *sim.World, cfg Config) *Network {
	n := &Network{w: w, ipv6: cfg.IPv6}
	for i := range w.Parts() {
		p := &netPart{s: w.Part(i), idx: int32(i)}
		if w.Parts() > 1 {
			p.dir = make([]*pchunk, min(max(dirBudget/w.Parts(), 1<<10), 1<<16))
			p.ret = make([][]int32, w.Parts())
		}
		n.parts = append(n.parts, p)
	}
	if w.Parts() > 1 {
		w.OnWindow(n.reclaim)
	}
	return n
}

// Place puts endpoint id on partition part of the network's World (before
// Build): its NIC must run on w.Part(part).
func (n *Network) Place(id EndpointID, part int) {
	n.mustNotBeBuilt("Place")
	if part < 0 || part >= len(n.parts) {
		panic(fmt.Sprintf("fabric: Place endpoint %d on partition %d of %d", id, part, len(n.parts)))
	}
	n.eps[id].part = int32(part)
}

// reclaim returns the packets freed by a partition other than their own to
// their own free lists, in partition order (a World's window hook).
func (n *Network) reclaim(sim.Time) {
	// In (owner, freeing partition) order, touching only the lists in use.
	for _, r := range n.parts {
		for _, q := range r.retTo {
			n.parts[q].from = append(n.parts[q].from, r.idx)
		}
		r.retTo = r.retTo[:0]
	}
	for _, q := range n.parts {
		for _, r := range q.from {
			b := n.parts[r].ret[q.idx]
			q.free = append(q.free, b...)
			n.parts[r].ret[q.idx] = b[:0]
		}
		q.from = q.from[:0]
	}
}

// NewSingleSwitch builds a network of n endpoints, each attached to one
// switch by a link of the given rate and propagation delay. The switch is
// store-and-forward with no forwarding latency, unbounded buffers and no
// ECN: an ideal non-blocking switch.
func NewSingleSwitch(s *sim.Sim, n int, rate sim.BitRate, prop sim.Duration) *Network {
	if rate <= 0 {
		panic(fmt.Sprintf("fabric: link rate %v must be positive", rate))
	}
	nw := New(s, Config{})
	sw := nw.AddSwitch("sw0", SwitchConfig{})
	for i := range n {
		ep := nw.AddEndpoint("ep" + strconv.Itoa(i))
		if _, err := nw.Connect(nw.Node(ep), sw, LinkConfig{Rate: rate, Prop: prop}); err != nil {
			panic(err)
		}
	}
	if err := nw.Build(); err != nil {
		panic(err)
	}
	return nw
}

// AddEndpoint adds a NIC port and returns its ID (dense, from 0). Its
// default addresses are IPv4 10.x.y.z with x.y.z = ID+1 and a locally
// administered MAC 02:00:xx:xx:xx:xx; SetAddr overrides them.
func (n *Network) AddEndpoint(name string) EndpointID {
	n.mustNotBeBuilt("AddEndpoint")
	id := EndpointID(len(n.eps))
	nid := NodeID(len(n.nodes))
	n.nodes = append(n.nodes, node{name: name, ep: int32(id), sw: -1})
	v := uint32(id) + 1
	n.eps = append(n.eps, endpoint{
		node: nid, up: -1,
		ip:  [4]byte{10, byte(v >> 16), byte(v >> 8), byte(v)},
		mac: [6]byte{0x02, 0, byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)},
	})
	return id
}

// AddSwitch adds a switch and returns its node. It panics on an invalid
// configuration (validate user input with SwitchConfig.Validate).
func (n *Network) AddSwitch(name string, cfg SwitchConfig) NodeID {
	n.mustNotBeBuilt("AddSwitch")
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("fabric: switch %q: %v", name, err))
	}
	nid := NodeID(len(n.nodes))
	n.nodes = append(n.nodes, node{name: name, ep: -1, sw: int32(len(n.sws))})
	s := n.parts[0].s
	sw := swtch{cfg: cfg, node: nid, salt: s.Rand("fabric/switch/" + name + "/ecmp").Uint64()}
	if cfg.ECN.Enabled {
		sw.rnd = s.Rand("fabric/switch/" + name + "/ecn")
	}
	n.sws = append(n.sws, sw)
	return nid
}

// Connect joins a and b with a full-duplex link. An endpoint takes exactly
// one link.
func (n *Network) Connect(a, b NodeID, cfg LinkConfig) (LinkID, error) {
	n.mustNotBeBuilt("Connect")
	if err := cfg.Validate(); err != nil {
		return -1, err
	}
	if a < 0 || int(a) >= len(n.nodes) || b < 0 || int(b) >= len(n.nodes) || a == b {
		return -1, fmt.Errorf("fabric: cannot connect nodes %d and %d (%d nodes)", a, b, len(n.nodes))
	}
	for _, x := range [2]NodeID{a, b} {
		if e := n.nodes[x].ep; e >= 0 && n.eps[e].up >= 0 {
			return -1, fmt.Errorf("fabric: endpoint %q already has a link", n.nodes[x].name)
		}
	}
	l := LinkID(len(n.ports) / 2)
	n.addPort(a, b, cfg)
	n.addPort(b, a, cfg)
	return l, nil
}

func (n *Network) addPort(from, to NodeID, cfg LinkConfig) {
	id := PortID(len(n.ports))
	p := port{from: from, to: to, toEp: n.nodes[to].ep, toSw: n.nodes[to].sw, rate: cfg.Rate, prop: cfg.Prop}
	if perByte := 8 * int64(sim.Second); perByte%int64(cfg.Rate) == 0 {
		p.psPerByte = sim.Duration(perByte / int64(cfg.Rate)) // 20 ps at 400 Gb/s
	}
	if s := n.nodes[from].sw; s >= 0 {
		sw := &n.sws[s]
		p.fromSw = true
		p.bufTime = cfg.Rate.TxTime(sw.cfg.PortBuffer)
		if sw.cfg.ECN.Enabled {
			p.ecn, p.kmin, p.kmax, p.pmax, p.ecnRnd = true, sw.cfg.ECN.Kmin, sw.cfg.ECN.Kmax, sw.cfg.ECN.Pmax, sw.rnd
			p.kminTime = cfg.Rate.TxTime(sw.cfg.ECN.Kmin)
			p.kmaxTime = cfg.Rate.TxTime(sw.cfg.ECN.Kmax)
		}
	}
	if s := n.nodes[to].sw; s >= 0 {
		p.nextLat = n.sws[s].cfg.Latency
		p.nextCut = n.sws[s].cfg.CutThrough
	}
	n.ports = append(n.ports, p)
	n.nodes[from].ports = append(n.nodes[from].ports, id)
	if e := n.nodes[from].ep; e >= 0 {
		n.eps[e].up = id
	}
}

func (n *Network) mustNotBeBuilt(what string) {
	if n.built {
		panic("fabric: " + what + " after Build")
	}
}

// Build checks the graph and computes the routes: from every switch to
// every endpoint, the egress ports on shortest paths (ECMP groups). Packets
// never transit an endpoint.
func (n *Network) Build() error {
	if n.built {
		return nil
	}
	for i := range n.eps {
		if n.eps[i].up < 0 {
			return fmt.Errorf("fabric: endpoint %q has no link", n.nodes[n.eps[i].node].name)
		}
	}
	ne := len(n.eps)
	n.route = make([]int32, len(n.sws)*ne)
	groups := map[string]int32{}
	dist := make([]int32, len(n.nodes))
	queue := make([]NodeID, 0, len(n.nodes))
	var set []int32
	var key []byte
	for d := range n.eps {
		for i := range dist {
			dist[i] = -1
		}
		src := n.eps[d].node
		dist[src] = 0
		queue = append(queue[:0], src)
		for k := 0; k < len(queue); k++ {
			x := queue[k]
			if x != src && n.nodes[x].ep >= 0 {
				continue // endpoints do not forward
			}
			for _, pi := range n.nodes[x].ports {
				y := n.ports[pi].to
				if dist[y] < 0 {
					dist[y] = dist[x] + 1
					queue = append(queue, y)
				}
			}
		}
		for si := range n.sws {
			x := n.sws[si].node
			if dist[x] < 0 {
				n.route[si*ne+d] = math.MinInt32 // unreachable: never looked up
				continue
			}
			set = set[:0]
			for _, pi := range n.nodes[x].ports {
				y := n.ports[pi].to
				if dist[y] == dist[x]-1 && (n.nodes[y].ep < 0 || y == src) {
					set = append(set, int32(pi))
				}
			}
			if len(set) == 1 {
				n.route[si*ne+d] = set[0]
				continue
			}
			key = key[:0]
			for _, v := range set {
				key = strconv.AppendInt(key, int64(v), 10)
				key = append(key, ',')
			}
			off, ok := groups[string(key)]
			if !ok {
				off = int32(len(n.hops))
				n.hops = append(n.hops, int32(len(set)))
				n.hops = append(n.hops, set...)
				groups[string(key)] = off
			}
			n.route[si*ne+d] = -(off + 1)
		}
		// Every other endpoint must reach d.
		for e := range n.eps {
			if dist[n.eps[e].node] < 0 {
				return fmt.Errorf("fabric: endpoint %q cannot reach %q", n.nodes[n.eps[e].node].name, n.nodes[src].name)
			}
		}
	}
	if err := n.own(); err != nil {
		return err
	}
	n.built = true
	return nil
}

// own assigns every port its partition (doc.go, Partitions) and, on several
// partitions, gives every ECN-marking port its own random stream.
func (n *Network) own() error {
	k := 0
	for i := range n.ports {
		pt := &n.ports[i]
		switch {
		case !pt.fromSw:
			pt.part = n.eps[n.nodes[pt.from].ep].part
			if pt.toEp >= 0 && n.eps[pt.toEp].part != pt.part {
				return fmt.Errorf("fabric: endpoints %q and %q share a link but not a partition",
					n.nodes[pt.from].name, n.nodes[pt.to].name)
			}
		case pt.toEp >= 0:
			pt.part = n.eps[pt.toEp].part
		default:
			pt.part = int32(k % len(n.parts))
			k++
		}
		if len(n.parts) > 1 && pt.ecn {
			pt.ecnRnd = n.parts[0].s.Rand("fabric/port/" + n.PortName(PortID(i)) + "/ecn")
		}
	}
	return nil
}

// Sim returns the simulation a lone network runs on; for a partitioned
// one, partition 0.
func (n *Network) Sim() *sim.Sim { return n.parts[0].s }

// World returns the World of a partitioned network, or nil.
func (n *Network) World() *sim.World { return n.w }

// Parts returns the number of partitions (1 for a lone network).
func (n *Network) Parts() int { return len(n.parts) }

// SimOf returns the Sim endpoint id runs on: its partition's, or the lone
// network's Sim.
func (n *Network) SimOf(id EndpointID) *sim.Sim { return n.parts[n.eps[id].part].s }

// PartOf returns endpoint id's partition (0 for a lone network).
func (n *Network) PartOf(id EndpointID) int { return int(n.eps[id].part) }

// PortPart returns the partition owning port p (0 for a lone network): its
// taps, statistics and drops happen there. Valid after Build.
func (n *Network) PortPart(p PortID) int { return int(n.ports[p].part) }

// IPv6 reports whether packets are framed over IPv6.
func (n *Network) IPv6() bool { return n.ipv6 }

// Endpoints returns the number of endpoints.
func (n *Network) Endpoints() int { return len(n.eps) }

// Switches returns the number of switches.
func (n *Network) Switches() int { return len(n.sws) }

// Links returns the number of links.
func (n *Network) Links() int { return len(n.ports) / 2 }

// Nodes returns the number of nodes (endpoints and switches).
func (n *Network) Nodes() int { return len(n.nodes) }

// Node returns the graph node of endpoint id.
func (n *Network) Node(id EndpointID) NodeID { return n.eps[id].node }

// NodeName returns the name given to a node.
func (n *Network) NodeName(x NodeID) string { return n.nodes[x].name }

// Bind attaches the NIC port ep to endpoint id.
func (n *Network) Bind(id EndpointID, ep Endpoint) { n.eps[id].ep = ep }

// LinkRate returns the rate of endpoint id's link.
func (n *Network) LinkRate(id EndpointID) sim.BitRate { return n.ports[n.eps[id].up].rate }

// SetAddr sets endpoint id's IPv4 address and MAC (for ECMP hashing and
// captures). In IPv6 mode the IP is carried as fd00::a.b.c.d.
func (n *Network) SetAddr(id EndpointID, ip [4]byte, mac [6]byte) {
	n.eps[id].ip, n.eps[id].mac = ip, mac
}

// IPv4 returns endpoint id's IPv4 address.
func (n *Network) IPv4(id EndpointID) [4]byte { return n.eps[id].ip }

// IP returns endpoint id's address as 16 bytes: IPv4-mapped
// (::ffff:a.b.c.d) for IPv4 networks, fd00::a.b.c.d for IPv6 networks.
func (n *Network) IP(id EndpointID) [16]byte {
	var a [16]byte
	if n.ipv6 {
		a[0], a[1] = 0xfd, 0
	} else {
		a[10], a[11] = 0xff, 0xff
	}
	copy(a[12:], n.eps[id].ip[:])
	return a
}

// MAC returns endpoint id's MAC address.
func (n *Network) MAC(id EndpointID) [6]byte { return n.eps[id].mac }

// LinkPorts returns the two directions of link l: from its first node to
// its second and back.
func (n *Network) LinkPorts(l LinkID) (ab, ba PortID) { return PortID(2 * l), PortID(2*l + 1) }

// EndpointPort returns the transmit port of endpoint id's NIC port.
func (n *Network) EndpointPort(id EndpointID) PortID { return n.eps[id].up }

// PortEnds returns the nodes a port leaves and enters.
func (n *Network) PortEnds(p PortID) (from, to NodeID) { return n.ports[p].from, n.ports[p].to }

// PortName returns "from->to" with the node names.
func (n *Network) PortName(p PortID) string {
	return n.nodes[n.ports[p].from].name + "->" + n.nodes[n.ports[p].to].name
}

// Ports returns the number of ports (twice the links).
func (n *Network) Ports() int { return len(n.ports) }

// PortStats returns port p's counters.
func (n *Network) PortStats(p PortID) PortStats {
	pt := &n.ports[p]
	st := pt.stats
	st.MaxQueue = pt.rate.BytesIn(pt.maxWait)
	st.MaxWait = pt.maxWait
	return st
}

// PortRate returns port p's line rate.
func (n *Network) PortRate(p PortID) sim.BitRate { return n.ports[p].rate }

// Backlog returns the bytes queued at port p's transmitter at the current
// time: rate × (freeAt − now).
func (n *Network) Backlog(p PortID) sim.Bytes {
	pt := &n.ports[p]
	now := n.parts[pt.part].s.Now()
	if pt.freeAt <= now {
		return 0
	}
	return pt.rate.BytesIn(pt.freeAt.Sub(now))
}

// SetTap installs fn on port p (nil removes it): it sees every packet put
// on the link, at the time its first bit leaves, including packets the
// link then loses.
func (n *Network) SetTap(p PortID, iface int, fn Tap) {
	n.ports[p].tap, n.ports[p].tapIf = fn, iface
}

// TapEndpoint taps both directions of endpoint id's NIC port with fn: its
// transmissions when their first bit leaves the NIC, and its receptions
// when their last bit has arrived (just before Endpoint.Receive). nil
// removes the taps.
func (n *Network) TapEndpoint(id EndpointID, iface int, fn Tap) {
	n.SetTap(n.eps[id].up, iface, fn)
	n.eps[id].rxTap, n.eps[id].rxIf = fn, iface
}

// SetObserver makes the network emit obs.Hop, obs.Dropped and
// obs.Received events into b (nil: off), on every partition: on a
// partitioned network run by more than one worker, give each partition its
// own bus with SetPartObserver instead.
func (n *Network) SetObserver(b *obs.Bus) {
	for _, p := range n.parts {
		p.obs = b
	}
}

// SetPartObserver makes partition part emit its packet events (those of
// the ports it owns and the endpoints on it) into b (nil: off).
func (n *Network) SetPartObserver(part int, b *obs.Bus) { n.parts[part].obs = b }

// SetDropHook installs a hook told about every dropped packet (nil removes
// it). On a partitioned network it runs in the partition that drops the
// packet (PortPart, or the endpoint's for an unbound endpoint), possibly
// at the same time as in another: it must touch only that partition's
// state.
func (n *Network) SetDropHook(h DropHook) { n.drop = h }

// SetFaults sets the impairments of port p; the zero Faults removes them.
// The random stream is named after the port, so results do not depend on
// the order faults are installed.
func (n *Network) SetFaults(p PortID, f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if !f.Active() {
		n.ports[p].fault = nil
		return nil
	}
	n.ports[p].fault = &faultState{f: f, rnd: n.parts[0].s.Rand("fabric/port/" + n.PortName(p) + "/faults")}
	return nil
}

// SetLinkFaults sets the impairments of both directions of link l.
func (n *Network) SetLinkFaults(l LinkID, f Faults) error {
	ab, ba := n.LinkPorts(l)
	if err := n.SetFaults(ab, f); err != nil {
		return err
	}
	return n.SetFaults(ba, f)
}

// SetGlobalFaults sets the same impairments on every port.
func (n *Network) SetGlobalFaults(f Faults) error {
	for p := range n.ports {
		if err := n.SetFaults(PortID(p), f); err != nil {
			return err
		}
	}
	return nil
}

// SetLinkDown takes link l down at time at (both directions) and, if up is
// after at, brings it back at up; pass sim.MaxTime to leave it down.
// Packets put on a down link are dropped; packets already on the wire
// arrive. Routes do not change: ECMP keeps hashing flows onto the dead link,
// as before a routing protocol reconverges.
func (n *Network) SetLinkDown(l LinkID, at, up sim.Time) {
	ab, ba := n.LinkPorts(l)
	// Each direction changes on the partition owning it: one event when
	// both are on one (always on a lone network).
	for _, ps := range [][]PortID{{ab, ba}, {ba}} {
		if len(ps) == 1 && n.ports[ab].part == n.ports[ba].part {
			break
		}
		if len(ps) == 2 && n.ports[ab].part != n.ports[ba].part {
			ps = ps[:1]
		}
		s := n.parts[n.ports[ps[0]].part].s
		set := func(v bool) func() {
			return func() {
				for _, p := range ps {
					n.ports[p].down = v
				}
			}
		}
		if at <= s.Now() {
			set(true)()
		} else {
			s.At(at, set(true))
		}
		if up > at && up != sim.MaxTime {
			s.At(up, set(false))
		}
	}
}

// SetLinkRate changes the rate of both directions of link l: a degraded
// link (a port that trained at a lower speed or lost lanes). Call it
// before traffic: packets already queued keep the times they were given.
// A switch egress's buffer and ECN thresholds keep their sizes in bytes.
func (n *Network) SetLinkRate(l LinkID, r sim.BitRate) error {
	if r <= 0 {
		return fmt.Errorf("fabric: link rate %v must be positive", r)
	}
	ab, ba := n.LinkPorts(l)
	for _, pi := range []PortID{ab, ba} {
		pt := &n.ports[pi]
		pt.psPerByte = 0
		if perByte := 8 * int64(sim.Second); perByte%int64(r) == 0 {
			pt.psPerByte = sim.Duration(perByte / int64(r))
		}
		if sw := n.nodes[pt.from].sw; sw >= 0 {
			pt.bufTime = r.TxTime(n.sws[sw].cfg.PortBuffer)
			if pt.ecn {
				pt.kminTime, pt.kmaxTime = r.TxTime(pt.kmin), r.TxTime(pt.kmax)
			}
		}
		pt.rate = r
	}
	return nil
}

// LinkUp reports whether link l is up now.
func (n *Network) LinkUp(l LinkID) bool { return !n.ports[2*l].down }

// NewPacket returns a zeroed packet from the pool with a fresh ID. If
// payload > 0 and withData, p.Payload is a slice of payload bytes owned by the
// packet (contents undefined). On a partitioned network it takes partition
// 0's pool: use NewPacketAt.
func (n *Network) NewPacket(payload uint32, withData bool) *Packet {
	return n.parts[0].newPacket(len(n.parts), payload, withData)
}

// NewPacketAt is NewPacket from the pool of endpoint src's partition, for
// the endpoint's own events. Packet IDs count per partition: the k-th
// packet (from 1) of partition q of P has ID (k-1)×P + q + 1, so a lone
// network numbers its packets 1, 2, 3, ...
func (n *Network) NewPacketAt(src EndpointID, payload uint32, withData bool) *Packet {
	return n.parts[n.eps[src].part].newPacket(len(n.parts), payload, withData)
}

func (q *netPart) newPacket(parts int, payload uint32, withData bool) *Packet {
	var p *Packet
	if k := len(q.free); k > 0 {
		i := q.free[k-1]
		q.free = q.free[:k-1]
		p = &q.dir[i>>chunkShift].pkt[i&(chunkSize-1)]
	} else {
		if q.chunks == 0 || q.used == chunkSize {
			if int(q.chunks) == len(q.dir) {
				if q.ret != nil {
					panic(fmt.Sprintf("fabric: partition %d has %d packets alive, the most a partition may hold", q.idx, len(q.dir)*chunkSize))
				}
				q.dir = append(q.dir, nil)
			}
			q.dir[q.chunks] = new(pchunk)
			q.chunks++
			q.used = 0
		}
		i := (q.chunks-1)<<chunkShift | q.used
		q.used++
		p = &q.dir[i>>chunkShift].pkt[i&(chunkSize-1)]
		p.idx, p.home = i, uint16(q.idx)
	}
	idx, home, buf := p.idx, p.home, p.buf
	*p = Packet{idx: idx, home: home, held: uint16(q.idx), buf: buf}
	q.ids++
	p.ID = (q.ids-1)*uint64(parts) + uint64(q.idx) + 1
	p.PayloadLen = payload
	if withData && payload > 0 {
		if cap(p.buf) < int(payload) {
			p.buf = make([]byte, payload)
		}
		p.Payload = p.buf[:payload]
	}
	return p
}

// Free returns p to the pool. On a partitioned network only the partition
// holding the packet may free it: its creator's until it is sent, then the
// one that received or dropped it.
func (n *Network) Free(p *Packet) {
	p.Payload = nil
	q := n.parts[p.held]
	if p.home == p.held {
		q.free = append(q.free, p.idx)
	} else {
		if len(q.ret[p.home]) == 0 {
			q.retTo = append(q.retTo, int32(p.home))
		}
		q.ret[p.home] = append(q.ret[p.home], p.idx)
	}
}

// ref is a packet's event argument: its partition in the high 32 bits,
// its index in the partition's pool in the low.
func ref(home uint16, i int32) uint64 { return uint64(home)<<32 | uint64(uint32(i)) }

func (n *Network) pkt(r uint64) *Packet {
	i := uint32(r)
	return &n.parts[r>>32].dir[i>>chunkShift].pkt[i&(chunkSize-1)]
}

func (n *Network) hot(r uint64) *hot {
	i := uint32(r)
	return &n.parts[r>>32].dir[i>>chunkShift].hot[i&(chunkSize-1)]
}

// Lookahead returns the least delay between a packet starting to leave a
// port that leads into a switch and the packet's event at that switch:
// the link's propagation delay plus the switch's forwarding latency (a
// store-and-forward switch adds the serialisation time on top, so this
// bounds it too). A parallel kernel whose partitions each own some
// endpoints and the switch ports that feed them exchanges packets only
// through such hops, so it is how far one partition may run ahead of the
// others. ok is false when no link leads into a switch. Call it after
// Build.
func (n *Network) Lookahead() (d sim.Duration, ok bool) {
	for i := range n.ports {
		pt := &n.ports[i]
		if pt.toEp >= 0 {
			continue
		}
		if l := pt.prop + pt.nextLat; !ok || l < d {
			d, ok = l, true
		}
	}
	return d, ok
}

// PortFreeAt returns when endpoint id's transmitter finishes the packets
// already handed to it.
func (n *Network) PortFreeAt(id EndpointID) sim.Time {
	return max(n.ports[n.eps[id].up].freeAt, n.parts[n.eps[id].part].s.Now())
}

// Send hands p to its source port for transmission and returns the time its
// last bit leaves the port; a NIC pacing itself sends the next packet then.
// The NIC's transmitter has no buffer limit: a NIC paces with PortFreeAt.
func (n *Network) Send(p *Packet) sim.Time {
	if !n.built {
		panic("fabric: Send before Build")
	}
	now := n.parts[n.eps[p.Src].part].s.Now()
	p.Born = now
	p.hops = 0
	r := ref(p.home, p.idx)
	*n.hot(r) = hot{tin: now, flow: n.flowHash(p), dst: p.Dst, wire: int32(p.WireLen(n.ipv6)), ecn: p.ECN}
	return n.transmit(r, n.eps[p.Src].up, now, false)
}

// flowHash hashes the RoCEv2 5-tuple: source and destination IP, UDP
// source port, UDP destination port 4791, protocol 17.
func (n *Network) flowHash(p *Packet) uint64 {
	s, d := n.eps[p.Src].ip, n.eps[p.Dst].ip
	h := uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32 |
		uint64(d[0])<<24 | uint64(d[1])<<16 | uint64(d[2])<<8 | uint64(d[3])
	h = mix64(h ^ (uint64(p.SrcPort)<<32|4791<<8|17)*0x9e3779b97f4a7c15)
	return h
}

// mix64 is the SplitMix64 finaliser.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// transmit queues packet r on port pi at time now (on the partition owning
// pi) and schedules its arrival at the far end: at an endpoint, on the same
// partition; at a switch, on the partition owning the egress port it will
// leave the switch by, chosen here (routing is a pure function of the
// tables, the flow hash and the switch's salt). It returns when the last
// bit leaves the port (or now if the packet was dropped at the queue). It
// touches the Packet itself only to mark ECN, tap, apply faults or drop.
func (n *Network) transmit(r uint64, pi PortID, now sim.Time, isCopy bool) sim.Time {
	pt := &n.ports[pi]
	h := n.hot(r)
	wire := sim.Bytes(h.wire)
	tx := pt.txTime(wire)
	if pt.fromSw {
		// The backlog is rate × (freeAt − now); compare in time to
		// avoid a division per hop, convert to bytes only to mark ECN.
		wait := max(pt.freeAt.Sub(now), 0)
		if pt.bufTime > 0 && wait+tx > pt.bufTime {
			pt.stats.Drops++
			n.discard(pi, now, r, DropBuffer)
			return now
		}
		if q := wait + tx; q > pt.maxWait {
			pt.maxWait = q
		}
		pt.stats.Wait += wait
		if pt.ecn && wait > pt.kminTime && (h.ecn == 1 || h.ecn == 2) {
			// Above Kmax (compared in time, exactly: TxTime rounds up,
			// BytesIn down) every packet is marked without a division.
			if wait >= pt.kmaxTime {
				h.ecn = 3
				pt.stats.ECNMarks++
			} else if backlog := pt.rate.BytesIn(wait); pt.ecnRnd.Float64() < pt.pmax*float64(backlog-pt.kmin)/float64(pt.kmax-pt.kmin) {
				h.ecn = 3
				pt.stats.ECNMarks++
			}
		}
	}
	start := max(now, pt.freeAt)
	end := max(start.Add(tx), h.tin)
	pt.freeAt = end
	pt.stats.Packets++
	pt.stats.Bytes += wire
	pt.stats.Busy += tx
	if pt.tap != nil {
		p := n.pkt(r)
		p.hops, p.ECN = h.hops, h.ecn
		pt.tap(pt.tapIf, start, p)
	}
	q := n.parts[pt.part]
	if q.obs != nil {
		n.emitPkt(q, obs.Hop, start, end, n.pkt(r), pt.from, int64(pi))
	}
	if pt.down {
		pt.stats.Lost++
		n.discard(pi, start, r, DropLinkDown)
		return end
	}
	head, last := start.Add(pt.prop), end.Add(pt.prop)
	if f := pt.fault; f != nil {
		if f.f.Loss > 0 && f.rnd.Float64() < f.f.Loss {
			pt.stats.Lost++
			n.discard(pi, start, r, DropLoss)
			return end
		}
		if f.f.Corrupt > 0 && f.rnd.Float64() < f.f.Corrupt {
			n.pkt(r).Corrupt = true
		}
		if f.f.Jitter > 0 {
			j := sim.Duration(f.rnd.Int64N(int64(f.f.Jitter) + 1))
			head, last = head.Add(j), last.Add(j)
		}
		if !isCopy && f.f.Duplicate > 0 && f.rnd.Float64() < f.f.Duplicate {
			defer n.duplicate(r, pi, now)
		}
	}
	h.hops++
	if pt.toEp >= 0 {
		h.next = -(pt.toEp + 1)
		h.tin = last
		q.s.Post(last, n, r)
		return end
	}
	h.next = n.egress(pt.toSw, h)
	at := last.Add(pt.nextLat)
	h.tin = at
	if pt.nextCut {
		at = head.Add(pt.nextLat)
	}
	q.s.Send(n.parts[n.ports[h.next].part].s, at, n, r)
	return end
}

// egress returns the port a packet leaves switch sw by towards h.dst: the
// one shortest-path next hop, or among several the one its salted flow
// hash picks.
func (n *Network) egress(sw int32, h *hot) int32 {
	pi := n.route[int(sw)*len(n.eps)+int(h.dst)]
	if pi < 0 {
		off := -pi - 1
		k := uint64(n.hops[off])
		x := mix64(h.flow ^ n.sws[sw].salt)
		pi = n.hops[off+1+int32((x>>32)*k>>32)]
	}
	return pi
}

// duplicate sends a copy of packet r (as it was when it left port pi)
// right behind it on the same port.
func (n *Network) duplicate(r uint64, pi PortID, now sim.Time) {
	p := n.pkt(r)
	p.ECN = n.hot(r).ecn
	c := n.parts[n.ports[pi].part].newPacket(len(n.parts), p.PayloadLen, p.Payload != nil)
	idx, home, held, buf, id, payload := c.idx, c.home, c.held, c.buf, c.ID, c.Payload
	*c = *p
	c.idx, c.home, c.held, c.buf, c.ID, c.Payload = idx, home, held, buf, id, payload
	copy(c.Payload, p.Payload)
	h := *n.hot(r)
	h.hops--
	h.tin = now
	cr := ref(home, idx)
	*n.hot(cr) = h
	n.transmit(cr, pi, now, true)
}

// discard drops packet r at port pi (or, pi < 0, at its unbound
// destination endpoint) on the partition owning it.
func (n *Network) discard(pi PortID, at sim.Time, r uint64, why DropReason) {
	p := n.pkt(r)
	h := n.hot(r)
	p.hops, p.ECN = h.hops, h.ecn
	var q *netPart
	var who NodeID
	if pi >= 0 {
		q, who = n.parts[n.ports[pi].part], n.ports[pi].from
	} else {
		e := &n.eps[p.Dst]
		q, who = n.parts[e.part], e.node
	}
	p.held = uint16(q.idx)
	if n.drop != nil {
		n.drop(pi, at, p, why)
	}
	if q.obs != nil {
		e := n.pktEvent(obs.Dropped, at, at, p, who, int64(pi))
		e.Code = uint32(why)
		q.obs.Emit(e)
	}
	n.Free(p)
}

// Handle moves a packet one hop: a switch queues it on the egress port
// chosen when it was sent there; the destination endpoint receives it.
func (n *Network) Handle(s *sim.Sim, arg uint64) {
	h := n.hot(arg)
	if h.next >= 0 {
		n.transmit(arg, PortID(h.next), s.Now(), false)
		return
	}
	p := n.pkt(arg)
	ep := -h.next - 1
	if EndpointID(ep) != h.dst {
		panic(fmt.Sprintf("fabric: t=%v: packet %d for endpoint %d arrived at %q", s.Now(), p.ID, h.dst, n.nodes[n.eps[ep].node].name))
	}
	p.hops, p.ECN = h.hops, h.ecn
	e := &n.eps[ep]
	p.held = uint16(e.part)
	if e.rxTap != nil {
		e.rxTap(e.rxIf, s.Now(), p)
	}
	if q := n.parts[e.part]; q.obs != nil {
		n.emitPkt(q, obs.Received, s.Now(), s.Now(), p, e.node, int64(ep))
	}
	if e.ep == nil {
		n.discard(-1, s.Now(), arg, DropUnbound)
		return
	}
	e.ep.Receive(p)
}

// pktEvent builds a packet event at node who: Index is the packet id,
// Value the port or endpoint (-1: none), Then a second instant.
func (n *Network) pktEvent(k obs.Kind, at, then sim.Time, p *Packet, who NodeID, where int64) obs.Event {
	return obs.Event{Kind: k, At: at, Then: then, Op: p.Op, Who: n.nodes[who].name, QP: p.Hdr.DestQP,
		PSN: p.Hdr.PSN, Code: uint32(p.Hdr.Opcode), Index: p.ID, Bytes: uint64(p.PayloadLen), Value: uint64(where)}
}

// emitPkt emits a packet event (out of line: the hop path stays small).
//
//go:noinline
func (n *Network) emitPkt(q *netPart, k obs.Kind, at, then sim.Time, p *Packet, who NodeID, where int64) {
	q.obs.Emit(n.pktEvent(k, at, then, p, who, where))
}

// EventName names a packet event for traces.
func (n *Network) EventName(arg uint64) string {
	p, h := n.pkt(arg), n.hot(arg)
	at := n.eps[-h.next-1].node
	if h.next >= 0 {
		at = n.ports[h.next].from
	}
	return "fabric:pkt" + strconv.FormatUint(p.ID, 10) + "@" + n.nodes[at].name
}

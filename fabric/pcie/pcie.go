package pcie

import (
	"fmt"

	"github.com/ginsim/ginsim/fabric/link"
	"github.com/ginsim/ginsim/sim"
)

// DevID names a PCIe function in a Tree: the host (root complex and host
// memory) is 0, devices follow in the order they were added.
type DevID int32

// Config holds the PCIe timing parameters. DefaultConfig is a PCIe Gen5 x16
// fabric as in an HGX H100 node.
type Config struct {
	// LinkRate is the data rate of one link direction after 128b/130b
	// encoding: Gen5 x16 is 32 GT/s × 16 lanes × 128/130 ≈ 504.1 Gb/s.
	LinkRate sim.BitRate
	// MaxPayload is the Max_Payload_Size of write and completion TLPs:
	// 256 B, what GPUs, ConnectX NICs and Gen5 switches negotiate.
	MaxPayload sim.Bytes
	// MaxReadRequest is the Max_Read_Request_Size: 512 B is the Linux
	// default for most endpoints.
	MaxReadRequest sim.Bytes
	// TLPOverhead is the link bytes of one TLP beyond its payload: 4 B
	// Gen3+ STP framing token with sequence number, 16 B 4DW header, 4 B
	// LCRC. DLLP (ACK/flow-control) traffic is folded in as zero.
	TLPOverhead sim.Bytes
	// LinkLatency is one link traversal: transmit and receive PHY plus the
	// data-link layer and flight, about 30 ns at Gen5 without retimers.
	LinkLatency sim.Duration
	// SwitchLatency is one PCIe switch traversal, port to port, cut-through:
	// about 115 ns for Broadcom PEX89000 Gen5 switches.
	SwitchLatency sim.Duration
	// RootComplexLatency is the root complex's traversal: forwarding a TLP
	// between root ports or to the memory controller, or issuing a CPU
	// store (MMIO) onto a root port; about 100 ns on current server CPUs.
	RootComplexLatency sim.Duration
	// HostMemReadLatency is the completer latency of a read of host DRAM:
	// from the request reaching the root complex to the first completion
	// leaving it, including the coherence snoop: about 200 ns.
	HostMemReadLatency sim.Duration
	// DevMemReadLatency is the completer latency of a peer read of device
	// memory through a BAR (a NIC reading GPU HBM for GPUDirect RDMA): the
	// GPU's BAR1 path to HBM, about 400 ns.
	DevMemReadLatency sim.Duration
}

// DefaultConfig returns a PCIe Gen5 x16 configuration.
func DefaultConfig() Config {
	return Config{
		LinkRate:           504_123_076_923 * sim.BitPerSecond,
		MaxPayload:         256,
		MaxReadRequest:     512,
		TLPOverhead:        24,
		LinkLatency:        30 * sim.Nanosecond,
		SwitchLatency:      115 * sim.Nanosecond,
		RootComplexLatency: 100 * sim.Nanosecond,
		HostMemReadLatency: 200 * sim.Nanosecond,
		DevMemReadLatency:  400 * sim.Nanosecond,
	}
}

// Validate reports the first invalid parameter.
func (c Config) Validate() error {
	switch {
	case c.LinkRate <= 0:
		return fmt.Errorf("pcie: LinkRate %v must be positive", c.LinkRate)
	case c.MaxPayload <= 0:
		return fmt.Errorf("pcie: MaxPayload %d must be positive", c.MaxPayload)
	case c.MaxReadRequest <= 0:
		return fmt.Errorf("pcie: MaxReadRequest %d must be positive", c.MaxReadRequest)
	case c.TLPOverhead < 0:
		return fmt.Errorf("pcie: TLPOverhead %d must not be negative", c.TLPOverhead)
	case c.LinkLatency < 0 || c.SwitchLatency < 0 || c.RootComplexLatency < 0 ||
		c.HostMemReadLatency < 0 || c.DevMemReadLatency < 0:
		return fmt.Errorf("pcie: latencies must not be negative")
	}
	return nil
}

// Tree is one node's PCIe topology: the root complex (with host memory and
// the CPUs behind it), switches on its root ports, devices under the
// switches. Every link is a pair of link.Pipes, one per direction.
type Tree struct {
	s    *sim.Sim
	cfg  Config
	sws  []node // switches; parent is the root complex
	devs []node // devs[0] is the host; others have parent = switch index
}

type node struct {
	name     string
	parent   int32 // switch index for devices; -1 for the host and switches
	up, dn   link.Pipe
	readLat  sim.Duration // completer latency of reads of this device's memory
	writeLat sim.Duration // from a posted write's arrival to it being visible in the device's memory
}

// NewTree returns a tree with only the root complex. It panics on an invalid
// configuration (validate user input with Config.Validate first).
func NewTree(s *sim.Sim, cfg Config) *Tree {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	t := &Tree{s: s, cfg: cfg}
	t.devs = append(t.devs, node{name: "host", parent: -1, readLat: cfg.HostMemReadLatency})
	return t
}

// Config returns the tree's parameters.
func (t *Tree) Config() Config { return t.cfg }

// AddSwitch adds a PCIe switch on a root port and returns its index.
func (t *Tree) AddSwitch(name string) int {
	n := node{name: name, parent: -1}
	n.up = link.Pipe{Name: "pcie/" + name + "/up", Rate: t.cfg.LinkRate, Latency: t.cfg.LinkLatency, Backfill: true}
	n.dn = link.Pipe{Name: "pcie/" + name + "/down", Rate: t.cfg.LinkRate, Latency: t.cfg.LinkLatency, Backfill: true}
	t.sws = append(t.sws, n)
	return len(t.sws) - 1
}

// AddDevice adds a device (a GPU or NIC function) under switch sw and returns
// its DevID. It panics if sw does not exist.
func (t *Tree) AddDevice(name string, sw int) DevID {
	if sw < 0 || sw >= len(t.sws) {
		panic(fmt.Sprintf("pcie: AddDevice %q under switch %d: tree has %d switches", name, sw, len(t.sws)))
	}
	n := node{name: name, parent: int32(sw), readLat: t.cfg.DevMemReadLatency}
	n.up = link.Pipe{Name: "pcie/" + name + "/up", Rate: t.cfg.LinkRate, Latency: t.cfg.LinkLatency, Backfill: true}
	n.dn = link.Pipe{Name: "pcie/" + name + "/down", Rate: t.cfg.LinkRate, Latency: t.cfg.LinkLatency, Backfill: true}
	t.devs = append(t.devs, n)
	return DevID(len(t.devs) - 1)
}

// SetMemReadLatency overrides the completer read latency of dev's memory.
func (t *Tree) SetMemReadLatency(dev DevID, d sim.Duration) { t.dev(dev).readLat = d }

// SetMemWriteLatency sets how long a posted write to dev takes from its
// last byte arriving at dev's port to being visible in dev's memory (0 by
// default): a GPU's hub path from its PCIe port to its L2.
func (t *Tree) SetMemWriteLatency(dev DevID, d sim.Duration) { t.dev(dev).writeLat = d }

// Host returns the DevID of the root complex and host memory; CPU stores
// to device BARs (MMIO) originate here too.
func (t *Tree) Host() DevID { return 0 }

// Devices returns the number of DevIDs, the host included.
func (t *Tree) Devices() int { return len(t.devs) }

// Name returns dev's name.
func (t *Tree) Name(dev DevID) string { return t.dev(dev).name }

// Switch returns the switch index dev hangs under, or -1 for the host.
func (t *Tree) Switch(dev DevID) int { return int(t.dev(dev).parent) }

func (t *Tree) dev(d DevID) *node {
	if d < 0 || int(d) >= len(t.devs) {
		panic(fmt.Sprintf("pcie: t=%v: no device %d (tree has %d)", t.s.Now(), d, len(t.devs)))
	}
	return &t.devs[d]
}

// hop is one link direction of a path and the latency after it: the link
// itself plus the node it enters (a switch or the root complex).
type hop struct {
	p     *link.Pipe
	after sim.Duration
}

// path fills hs with the hops from a to b and returns how many there are
// and the latency before the first hop (the root complex issuing a CPU
// store).
func (t *Tree) path(hs *[4]hop, a, b DevID) int {
	na, nb := t.dev(a), t.dev(b)
	c := &t.cfg
	toSw := c.LinkLatency + c.SwitchLatency
	toRC := c.LinkLatency + c.RootComplexLatency
	toDev := c.LinkLatency
	switch {
	case a == b:
		return 0
	case a == 0: // host -> device
		sw := &t.sws[nb.parent]
		hs[0] = hop{&sw.dn, toSw}
		hs[1] = hop{&nb.dn, toDev}
		return 2
	case b == 0: // device -> host
		sw := &t.sws[na.parent]
		hs[0] = hop{&na.up, toSw}
		hs[1] = hop{&sw.up, toRC}
		return 2
	case na.parent == nb.parent: // peer to peer under one switch
		hs[0] = hop{&na.up, toSw}
		hs[1] = hop{&nb.dn, toDev}
		return 2
	default: // peer to peer through the root complex
		hs[0] = hop{&na.up, toSw}
		hs[1] = hop{&t.sws[na.parent].up, toRC}
		hs[2] = hop{&t.sws[nb.parent].dn, toSw}
		hs[3] = hop{&nb.dn, toDev}
		return 4
	}
}

// Hops returns the number of links between a and b.
func (t *Tree) Hops(a, b DevID) int {
	var hs [4]hop
	return t.path(&hs, a, b)
}

// tlps describes n payload bytes cut into TLPs of at most mps bytes: the
// wire bytes of the first TLP, of all TLPs and of the last TLP, and the count.
func (t *Tree) tlps(n, mps sim.Bytes) (first, total, last sim.Bytes, count int64) {
	o := t.cfg.TLPOverhead
	if n <= 0 {
		return o, o, o, 1
	}
	count = int64((n + mps - 1) / mps)
	first = min(n, mps) + o
	last = n - sim.Bytes(count-1)*mps + o
	return first, n + sim.Bytes(count)*o, last, count
}

// stream moves a train of TLPs along hs. The first TLP is ready at the
// source at `at`, the last at lastReady (never earlier than at). Each switch
// forwards a TLP once it has received it whole (cut-through at TLP
// granularity). It returns when the first and the last TLP have been
// received, and processed, at the destination.
//
// src and posted give the train's ordering: a posted train (writes) is
// never passed by a later train of the same source on any link; reads and
// completions may be passed by that source's later writes.
func stream(hs []hop, now sim.Time, src DevID, posted bool, at, lastReady sim.Time, first, total, last sim.Bytes) (firstIn, lastIn sim.Time) {
	ready := at
	for i := range hs {
		p := hs[i].p
		p.Forget(now)
		start, end := p.ReserveOrdered(int32(src), posted, ready, total, lastReady.Add(p.Rate.TxTime(last)))
		ready = start.Add(p.Rate.TxTime(first) + hs[i].after)
		lastReady = end.Add(hs[i].after)
	}
	return ready, lastReady
}

func (t *Tree) check(at sim.Time, what string) {
	if at < t.s.Now() {
		panic(fmt.Sprintf("pcie: t=%v: %s issued in the past (at=%v)", t.s.Now(), what, at))
	}
}

// Write issues a posted write of n bytes from `from` to `to`'s memory or
// registers at time at (>= now): a DMA write, an MMIO doorbell, a
// write-through store. It reserves each link direction of the path and
// returns when the last byte has landed at `to` (visible in its memory:
// see SetMemWriteLatency). A write from the host is a CPU store and pays
// the root complex latency first.
func (t *Tree) Write(at sim.Time, from, to DevID, n sim.Bytes) sim.Time {
	t.check(at, "write")
	var hs [4]hop
	k := t.path(&hs, from, to)
	if k == 0 {
		return at
	}
	if from == 0 {
		at = at.Add(t.cfg.RootComplexLatency)
	}
	first, total, last, _ := t.tlps(n, t.cfg.MaxPayload)
	_, done := stream(hs[:k], t.s.Now(), from, true, at, at, first, total, last)
	return done.Add(t.dev(to).writeLat)
}

// Read issues a non-posted read by requester of n bytes of target's memory
// at time at (>= now): read requests of MaxReadRequest bytes go to the
// target, which answers each after its memory read latency with completion
// TLPs of MaxPayload bytes. It returns when the last byte has arrived at the
// requester.
func (t *Tree) Read(at sim.Time, requester, target DevID, n sim.Bytes) sim.Time {
	t.check(at, "read")
	var hs [4]hop
	k := t.path(&hs, requester, target)
	if k == 0 {
		return at
	}
	if requester == 0 {
		at = at.Add(t.cfg.RootComplexLatency)
	}
	o := t.cfg.TLPOverhead
	_, _, _, nreq := t.tlps(n, t.cfg.MaxReadRequest)
	reqFirst, reqLast := stream(hs[:k], t.s.Now(), requester, false, at, at, o, sim.Bytes(nreq)*o, o)

	mem := t.dev(target).readLat
	var back [4]hop
	t.path(&back, target, requester)
	// Completions: each request is answered in MaxPayload pieces; only the
	// last request may be short.
	cFirst, _, _, _ := t.tlps(min(n, t.cfg.MaxReadRequest), t.cfg.MaxPayload)
	lastReq := n - sim.Bytes(nreq-1)*t.cfg.MaxReadRequest
	_, _, cLast, cLastN := t.tlps(lastReq, t.cfg.MaxPayload)
	_, _, _, cFullN := t.tlps(t.cfg.MaxReadRequest, t.cfg.MaxPayload)
	count := cLastN + (nreq-1)*cFullN
	total := max(n, 0) + sim.Bytes(count)*o
	_, done := stream(back[:k], t.s.Now(), target, false, reqFirst.Add(mem), reqLast.Add(mem), cFirst, total, cLast)
	return done
}

// Atomic issues an 8-byte AtomicOp (FetchAdd or CompareSwap) by requester on
// target's memory at time at (>= now). It returns when the operation is
// applied at the target (the request has arrived and the read-modify-write
// has taken the target's memory read latency and its write has reached the
// memory, see SetMemWriteLatency) and when the completion with the
// original value is back at the requester.
func (t *Tree) Atomic(at sim.Time, requester, target DevID) (applied, done sim.Time) {
	t.check(at, "atomic")
	var hs [4]hop
	k := t.path(&hs, requester, target)
	if k == 0 {
		return at, at
	}
	if requester == 0 {
		at = at.Add(t.cfg.RootComplexLatency)
	}
	req := 8 + t.cfg.TLPOverhead
	_, arrive := stream(hs[:k], t.s.Now(), requester, false, at, at, req, req, req)
	applied = arrive.Add(t.dev(target).readLat + t.dev(target).writeLat)
	var back [4]hop
	t.path(&back, target, requester)
	_, done = stream(back[:k], t.s.Now(), target, false, applied, applied, req, req, req)
	return applied, done
}

// Switches returns the number of PCIe switches.
func (t *Tree) Switches() int { return len(t.sws) }

// SwitchName returns switch sw's name.
func (t *Tree) SwitchName(sw int) string { return t.sws[sw].name }

// SwitchLink returns the accounting of switch sw's uplink to the root
// complex: up (towards the root) and down.
func (t *Tree) SwitchLink(sw int) (up, down link.Stats) {
	return t.sws[sw].up.Stats(), t.sws[sw].dn.Stats()
}

// Link returns the accounting of device dev's link to its switch: up (from
// the device) and down (to it). The host has no link of its own.
func (t *Tree) Link(dev DevID) (up, down link.Stats) {
	n := t.dev(dev)
	return n.up.Stats(), n.dn.Stats()
}

// Stats returns the accounting of every link direction: for each switch its
// uplink up and down, then for each device its link up and down, in the
// order they were added.
func (t *Tree) Stats() []link.Stats {
	out := make([]link.Stats, 0, 2*(len(t.sws)+len(t.devs)))
	for i := range t.sws {
		out = append(out, t.sws[i].up.Stats(), t.sws[i].dn.Stats())
	}
	for i := 1; i < len(t.devs); i++ {
		out = append(out, t.devs[i].up.Stats(), t.devs[i].dn.Stats())
	}
	return out
}

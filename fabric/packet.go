package fabric

import (
	"github.com/ginsim/ginsim/fabric/roce"
	"github.com/ginsim/ginsim/sim"
	"github.com/ginsim/ginsim/sim/obs"
)

// EndpointID names a NIC port attached to the network (dense, from 0).
type EndpointID int32

// Endpoint is a NIC port. The network calls Receive when the last bit of a
// packet addressed to it has arrived. The endpoint then owns the packet and
// must give it back with Network.Free when done.
type Endpoint interface {
	Receive(p *Packet)
}

// Packet is one RoCEv2 packet in flight. It carries the real transport header
// fields (roce.Header) and, when the model carries data, the payload bytes.
// Packets live in the Network's pool: get one with Network.NewPacket and
// return it with Free; never keep a pointer after freeing it.
type Packet struct {
	ID      uint64     // unique within a run, in creation order
	Src     EndpointID // sending NIC port
	Dst     EndpointID // destination NIC port
	SrcPort uint16     // UDP source port: the ECMP entropy of the flow
	ECN     uint8      // IP ECN bits: 0 not-ECT, 2 ECT(0), 1 ECT(1), 3 CE
	Corrupt bool       // bits flipped in flight: the receiver's ICRC check fails
	Hdr     roce.Header
	// PayloadLen is the payload size in bytes (excluding headers and pad).
	PayloadLen uint32
	// Payload holds PayloadLen bytes when the sender carries data, else nil.
	// The slice belongs to the packet (see Network.NewPacket).
	Payload []byte
	// Tag is opaque to the network: the sender's own reference (a WQE index
	// for tracing and pcap comments).
	Tag  uint64
	Born sim.Time // when the sender handed it to the network
	// Op is the GIN operation the packet belongs to (0: none), for the
	// observer; the network copies it and never reads it.
	Op obs.OpID

	// Network bookkeeping; the per-hop state lives in Network.hot.
	idx  int32  // index in its partition's pool
	home uint16 // partition whose pool holds it
	held uint16 // partition holding it now: its creator's, then the one that received or dropped it
	hops uint8  // links crossed, updated when the packet is delivered, tapped or dropped
	buf  []byte // owned payload buffer, reused across pool lifetimes
}

// Hops returns the number of links the packet has crossed.
func (p *Packet) Hops() int { return int(p.hops) }

// WireLen returns the bytes p occupies on an Ethernet link: the frame
// (headers, payload, pad, ICRC, FCS, padded to the minimum frame) plus
// preamble, start-of-frame delimiter and inter-frame gap.
func (p *Packet) WireLen(ipv6 bool) sim.Bytes {
	return sim.Bytes(roce.WireLen(ipv6, &p.Hdr, int(p.PayloadLen)))
}

// hot is the per-hop state of a packet in flight, kept apart from Packet
// (same pool index) so that forwarding touches one aligned 32-byte record,
// never the Packet with its header: two records share a cache line and none
// straddles two.
type hot struct {
	tin  sim.Time // earliest instant its last bit can leave the device it is at
	flow uint64   // unsalted 5-tuple hash, fixed at Send
	// next is, while the packet heads to a switch, the egress port it will
	// leave the switch by (routed by the sender of the hop); while it
	// heads to an endpoint, -(endpoint+1).
	next int32
	dst  EndpointID
	wire int32 // WireLen, fixed at Send
	hops uint8 // links crossed
	// ecn mirrors Packet.ECN while the packet is in flight; it is copied
	// back to the Packet whenever a tap, drop hook or endpoint sees it.
	ecn uint8
}

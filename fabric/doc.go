// Package fabric models the packet-switched network between NIC ports and
// the buses inside a node: links (rate, propagation delay, per-packet
// serialisation), output-queued switches, routing, faults and taps, plus
// PCIe (fabric/pcie) and NVLink (fabric/nvlink) as serialising pipes (Pipe).
// fabric/topo builds whole clusters from a declarative spec.
//
// A NIC port is an Endpoint: it hands packets to the network with Send and
// receives them through Receive. Packets carry real RoCEv2 header fields
// (fabric/roce) so that captures and checkers see what a wire would carry.
//
// # Network model
//
// The Network is a graph of endpoints and switches joined by full-duplex
// links. Each link direction (a PortID) serialises packets FIFO at its rate
// (Packet.WireLen bytes, preamble and inter-frame gap included) and adds its
// propagation delay. Switches are output queued: a packet arriving at a
// switch is routed and placed on an egress port at once, so one event fires
// per packet per hop and no dequeue events exist; the egress backlog is
// derived from the port's busy-until time (bytes = rate × (freeAt − now)).
// Switches forward after their latency, cut-through (from the packet's head,
// never letting its tail leave before it arrived) or store-and-forward.
//
// Routing is shortest-path, computed once by Build; among equal-cost next
// hops a switch picks by a hash of the RoCEv2 5-tuple (source and
// destination IP, UDP source port, UDP destination port 4791, protocol 17)
// mixed with a per-switch salt drawn from s.Rand("fabric/switch/NAME/ecmp"),
// so a flow (a QP's UDP source port) keeps its path and different seeds
// give different placements.
//
// Egress queues have a finite buffer per port (drop-tail) and mark CE on
// ECN-capable packets RED-style between Kmin and Kmax with probability up
// to Pmax, drawn from s.Rand("fabric/switch/NAME/ecn") (DCQCN's marking).
//
// Faults per port or link (Faults: loss, corruption, duplication, jitter)
// draw from s.Rand("fabric/port/FROM->TO/faults"); links go down and up at
// given times (SetLinkDown) and drop what is sent onto them meanwhile.
// Corrupted packets are delivered with Packet.Corrupt set: the receiving
// NIC's ICRC check discards them. Taps (SetTap, TapEndpoint) and a drop
// hook observe packets at no cost when not installed, as does the run's
// observer (SetObserver: obs.Hop, Dropped, Received events carrying the
// packet's GIN operation id, Packet.Op); PortStats counts
// packets, bytes, drops, losses, ECN marks and the largest queue per port.
//
// # Partitions
//
// A network made by NewPartitioned runs on the partitions of a sim.World
// (the parallel kernel; fabric/topo's BuildWorld places node n on
// partition n % parts). Every endpoint is on one partition (Place), where
// its NIC runs. Every port (link direction) is owned by one: a NIC's
// transmit port by the NIC's partition; a switch port towards an endpoint
// by that endpoint's partition, so that the last hop, with only the
// cable's delay, stays inside it; every other switch port (uplinks, spine
// downlinks) by partition k % parts for the k-th such port in port order,
// which spreads them evenly. The owner of a port runs everything that
// happens on it: queueing, ECN marking, faults, taps, drops, statistics.
//
// A packet's event at a switch therefore runs on the partition owning the
// egress port it will leave the switch by, and that port is chosen by the
// sender of the hop: routing is a pure function of the tables, the flow
// hash and the switch's salt, so it is computed when the packet is put on
// the link into the switch, and the hop is sent (sim.Sim.Send) to the
// port's owner, at least Lookahead (cable plus switch latency) later.
//
// Each partition has its own packet pool and its own packet counter: the
// k-th packet (from 1) made on partition q of P has ID (k-1)×P + q + 1 (a
// lone network numbers packets 1, 2, 3, ...). A packet freed by a partition
// other than its own returns to its pool at the end of the window. With
// several partitions every ECN-marking port draws from its own stream,
// s.Rand("fabric/port/FROM->TO/ecn"), instead of its switch's, since the
// switch's ports run on different partitions. A World of one partition
// gives a lone network's results exactly.
//
// # Not modelled
//
//   - PFC (IEEE 802.1Qbb priority flow control) is not implemented:
//     queues never pause upstream senders and a full buffer drops.
//     Lossless RoCE (and InfiniBand credit flow control) must be
//     approximated with unbounded buffers (PortBuffer 0), which loses no
//     packets but lets congestion build one queue instead of spreading
//     back hop by hop: no pause propagation, no head-of-line blocking of
//     victim flows, and a NIC's PortFreeAt never moves out for a pause.
//   - Switch buffers are per port, not a shared pool with dynamic
//     thresholds.
//   - Routes are static: after a link goes down ECMP keeps hashing flows
//     onto it (as before a routing protocol reconverges).
//   - NIC transmit queues are unbounded: a NIC paces itself with
//     PortFreeAt.
//
// Not safe for concurrent use, except by the partitions of a World as
// above.
package fabric

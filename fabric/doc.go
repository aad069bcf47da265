// Package fabric models the packet-switched network between NIC ports and
// the buses inside a node: links (rate, propagation delay, per-packet
// serialisation), output-queued switches, routing, faults and taps, plus
// PCIe and NVLink as serialising pipes.
//
// A NIC port is an Endpoint: it hands packets to the network with Send and
// receives them through Receive. Packets carry real RoCEv2 header fields
// (nic/roce) so that captures and checkers see what a wire would carry.
//
// Not safe for concurrent use.
package fabric

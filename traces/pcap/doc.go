// Package pcap writes simulated RoCEv2 traffic as pcapng files that
// Wireshark and tshark open directly: one interface (IDB) per tapped port or
// link, one Enhanced Packet Block per frame with an optional comment (for
// example "qp=12 psn=5 wqe=3"), timestamps taken from simulated time.
//
// Frames are Ethernet II as built by fabric/roce (AppendFrame): Wireshark
// dissects UDP port 4791 as RRoCE (InfiniBand BTH and extension headers)
// with no "Decode As" step. The package is the only one in ginsim that
// imports gopacket, and it uses only pcapgo (and layers for the link type).
//
// Output is deterministic: the section header names the application
// "ginsim" and records no host, OS or wall-clock time, so the same packets
// always give the same bytes.
package pcap

// Package roce holds the RoCEv2 wire formats that ginsim puts on its
// simulated links: the InfiniBand RC transport headers (BTH and the
// extension headers RETH, AETH, AtomicETH, AtomicAckETH and ImmDt), whole
// Ethernet/IPv4-or-IPv6/UDP frames with their invariant CRC (ICRC), and the
// per-packet byte counts the fabric model needs to charge link time.
//
// Two representations are offered. Header is a small value type with no
// pointers that the NIC and fabric models carry inside every simulated
// packet; Encode and DecodeHeader convert it to and from bytes without
// allocating. BTH, RETH, AETH, AtomicETH, AtomicAckETH and ImmDt are
// byte-slice views in the gVisor header style: accessors and setters over a
// caller-owned buffer that must be at least the view's length constant long
// (the views do no bounds checks of their own beyond Go's).
//
// Frames are built by AppendFrame and parsed by ParseFrame. FrameLen,
// WireOverhead, WireLen and PreambleIFGLen give exact sizes; see WireLen for
// which bytes are which.
//
// The package imports only the standard library and is safe to use from the
// single-threaded model; no function keeps a reference to its arguments
// except where documented (Frame.Payload aliases the parsed buffer).
package roce

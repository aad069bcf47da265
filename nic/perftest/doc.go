// Package perftest runs ib_write_lat and ib_write_bw style measurements on
// two simulated nodes joined by a fabric/topo cluster, driving the nic
// model the way the perftest tools drive a real HCA from a CPU: WQEs in a
// host-memory send queue, a doorbell MMIO over PCIe, completions polled
// from a CQ, and (for latency) a poll of the last byte of the peer's write.
//
// Not safe for concurrent use; each call builds and runs its own simulation.
package perftest

// Package mem models the memories that GPUs, NICs and CPUs read and write:
// GPU HBM and host DRAM, as regions of bytes.
//
// A Region is one allocation (a registered window, a send queue, a signal
// table, a GFD ring). Its bytes are either backed (a []byte, so that the
// model carries real data and a checker can compare memory with an oracle)
// or unbacked (only sizes move; the bulk payload of a large replay), in which
// case 8-byte words written by stores and atomics are still kept, so that
// signals, counters, flags and indices work in every mode.
//
// Every change happens at the simulated instant of the event that calls the
// method: the caller (a NIC's DMA engine, a GPU thread, a CPU proxy) decides
// when a write lands, and this package records it. Two hooks observe changes:
// watchers on a word (a GPU thread polling a signal is woken when the word
// changes) and one Observer per System that sees every effect (the protocol
// checker, a timeline writer). Both cost nothing when not installed.
//
// Not safe for concurrent use.
package mem

// Package nic models a ConnectX-7-class RDMA NIC running the InfiniBand
// Reliable Connection (RC) transport over RoCEv2, with a verbs-shaped API.
//
// Every step is a timed event driven by a mechanism, never a bandwidth
// formula: a doorbell arrives (MMIO, or a BlueFlame write that carries the
// WQE), the NIC fetches WQEs from the send queue ring by DMA read over PCIe
// (batched), reads each WQE's payload by DMA read per MTU chunk (a bounded
// prefetch window per QP), segments the message into MTU packets with real
// BTH/RETH/AtomicETH/ImmDt fields and PSNs, and hands them to the fabric
// paced by the port, arbitrating between QPs round-robin. The responder
// checks PSNs (duplicate: re-ACK; gap: one PSN-sequence NAK per gap), R_Keys,
// bounds and access rights, DMA-writes payload into the target region over
// PCIe (Region.Write at the landed time), executes atomics as a PCIe
// read-modify-write at the target (FetchAdd64/CompareSwap64 at the applied
// time), streams READ responses and coalesces ACKs. The requester completes
// WQEs in order on ACKs and responses, retransmits go-back-N from a NAKed or
// timed-out PSN, honours RNR NAKs, limits outstanding READs/atomics and
// writes 64-byte CQEs into a CQ ring by DMA write, so that pollers watching
// the ring's words wake when a CQE has landed.
//
// DCQCN congestion control (dcqcn.go): data packets are ECN-capable; a NIC
// receiving a CE-marked packet sends a CNP to the sending QP at most once
// per CNPInterval (notification point); a QP that receives a CNP engages a
// per-QP rate limiter that paces its requests and READ responses, cuts its
// rate by alpha/2, and recovers by timer and byte-counter events (fast
// recovery, additive and hyper increase) until it is back at line rate
// (reaction point). The switch marks (fabric.ECNConfig). The alpha and
// rate-increase timers cost no event per period: a QP applies the periods
// that elapsed when it next tries to send or gets a CNP, with the rates
// the timer events would have given at the same instants (they run as
// events only while an observer (NIC.SetObserver) is set, so that its
// obs.Rate events come at their instants).
//
// Two producers drive a QP: a GPU (GDAKI) writes WQEs with WriteWQE and rings
// Doorbell when its MMIO arrives; a CPU proxy uses PostSend. Errors a user
// can cause (bad keys, bounds, states) complete with typed Status values and
// move the QP to the error state; nothing panics on a bad work request.
//
// Robustness: inline payloads up to MaxInlineData (28 B, one WQEBB) travel
// in the WQE; a responder starts at most MaxDestRdAtomic READs/atomics and
// holds further ones in order until earlier ones are answered; a CQ that
// overruns goes to the error state (AsyncCQErr) and the QPs completing
// into it to the error state (AsyncQPFatal) instead of failing the run;
// packets whose ICRC fails (fabric.Packet.Corrupt) are dropped and counted
// (Stats).
//
// Approximations: a WRITE/SEND payload and a READ response payload are
// sampled from memory when the packet is built, which is after their DMA
// read completed (by at most the transmit wait), not when the read reached
// memory: they differ only if the buffer changes while the WQE is in
// flight, which verbs forbid. A responder that receives duplicate READs
// queues a re-execution for each (it does not cancel responses queued
// behind the duplicate's PSN).
//
// Observation: with SetObserver the NIC reports obs.DMARead (its PCIe
// reads of WQEs and payload), Fetched, Sent, Landed, Atomic, Acked and CQE
// events, each stamped with the OpID of the WR it serves (WR.OpID, copied
// to the WR's packets, to the responses and landings they cause and to
// the CQE), and obs.Rate when a QP's DCQCN rate limiter changes; off, each
// emit point costs one nil test. The packet tap (SetTap) stays for what
// needs the packet itself (pcap frames, test logs of headers).
//
// Not modelled: SRQs,
// UD/UC/XRC transports, memory windows, on-NIC address translation misses
// and the RQ WQE fetch (receive WQEs are visible to the NIC when posted).
//
// Not safe for concurrent use.
package nic

// Package proxy is the Proxy backend of GIN (NCCL_GIN_TYPE=2): GPU threads
// write GPU function descriptors (GFDs) into per-(context, peer) rings in
// host pinned memory and a CPU progress thread posts the RDMA work through
// ordinary verbs.
//
// GPU side (coop thread 0): a system-scope release fence when givenRelease
// > system (always under the default scopes); a system-scope fetch_add on
// pis[peer] in GPU memory to claim a slot; the credit wait on cis[peer]
// (written by the CPU into GPU memory through GDRCopy) while the ring holds
// Config.QueueSize unconsumed GFDs; then the GFD (64 B in NCCL 2.28, 128 B
// in 2.30, bit 0 of every qword a valid flag, see GFD) as 16-byte
// write-through stores that cross PCIe one TLP each. The path is one state
// machine (issuer, issue.go) that a process runs blocking (Issue, Wait) and
// a process-free group runs with a continuation (IssueThen, FlushThen).
//
// CPU side: one progress thread per GPU process (Proxy), a single server
// that runs NCCL's loop over every device communicator and context: a
// retire pass over the peers (ibv_poll_cq of up to 4 completions per
// outstanding request, counters bumped by a CPU read-modify-write of GPU
// memory through GDRCopy once the CQE is seen, ci advanced over
// contiguously completed slots and stored into GPU memory), then a post
// pass taking at most one GFD per peer (check the slot's first flag, spin
// for every qword flag, copy, zero the slot, post the WRITE(+ATOMIC) chain
// with only the last WR signalled: the CPU builds the WQEs in a host-memory
// send queue and rings the NIC's doorbell by MMIO), then a yield. Every CPU
// step's cost is a Config field. A pass that finds nothing to do is
// repeated, unchanged, until something lands: the model parks the thread
// and resumes it at the pass boundary where the busy loop would have seen
// the change, so time and results equal a busy poll with no event per
// idle pass. Stats report the thread's work time against its running time.
//
// A 2.30 wait or flush that covers gets not yet made visible writes one
// more GFD, a Flush on the rank's own queue, which the CPU posts as an
// 8-byte READ on the loop-back connection, and waits for it
// (gin_proxy.h@230 L328, gin_host_proxy.cc@230 L266-277).
//
// Not modelled: the CPU_PROXY doorbell mode of GDAKI.
//
// Not safe for concurrent use.
package proxy

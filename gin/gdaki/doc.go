// Package gdaki is the GDAKI backend of GIN (NCCL_GIN_TYPE=3): GPU threads
// drive a ConnectX NIC directly, as DOCA GPUNetIO's device verbs do.
//
// Per (rank, context, peer) there is one RC "main" QP whose send queue
// (Config.QueueDepth 64-byte WQEs, Requirements.GinQueueDepth overrides)
// and completion queue live in the rank's GPU memory; with counters, a
// companion loopback QP pair per peer carries WAIT + ATOMIC_FETCH_ADD to the
// local counter table. A put runs, on the issuing coop's thread 0:
// an optional fence.release.sys (requiredRelease == system && given >
// required); a reservation atomicAdd on sq_rsvd_index (scope from the
// resource-sharing mode); the credit wait, polling the CQE of index
// i-depth in GPU memory unless OptMaySkipCreditCheck; one 64-byte WQE store
// per WQE (ceil(bytes/1 GiB) RDMA WRITEs, then an ATOMIC_FETCH_ADD into the
// peer's strictly-ordered signal table for a signal); a GPU-scope release
// fence; the in-order publication CAS spin on sq_ready_index; and, unless
// OptAggregateRequests, the doorbell: sq_lock, atomicMax on sq_wqe_pi, two
// MMIO stores to the NIC's UAR and a doorbell-record store. The NIC model
// (package nic) then fetches the WQEs from GPU memory by DMA, reads the
// payload, sends the packets and DMA-writes one CQE per WQE into the GPU's
// CQ ring, where flush and the credit check poll for it.
//
// Costs that are GPU instructions come from gpu.Config (atomics, fences,
// stores, MMIO, polling); the rest are named in Config.
//
// Not safe for concurrent use.
package gdaki

// Package pcie models the PCIe topology inside one node: devices (GPUs, NICs)
// under PCIe switches under the host root complex, joined by full-duplex
// links. It is a timing model of transaction-layer traffic: posted writes
// (DMA writes, MMIO doorbells), non-posted reads (request TLPs up, completion
// TLPs back) and AtomicOps, split into TLPs of MaxPayload / MaxReadRequest
// bytes with a per-TLP overhead, serialised FIFO on each link direction and
// cut through switches one TLP at a time.
//
// The tree holds no events: Write, Read and Atomic reserve link time and
// return the instants at which the bytes land; callers schedule their own
// events there. A call with at in the future is allowed; link directions
// backfill (link.Pipe.Backfill), so a transfer ready while a link idles
// ahead of a later reservation uses the gap instead of queueing behind it.
//
// Approximations: one transfer occupies each link direction contiguously
// (TLPs of concurrent transfers are not interleaved, so a small transfer
// issued after a large one waits for all of it; callers that care issue large
// DMAs in chunks); TLPs are not split at 4 KiB or Read Completion Boundary
// alignment; flow-control credits, outstanding-read tags and DLLP ACK traffic
// are not modelled beyond the per-TLP overhead.
//
// Not safe for concurrent use.
package pcie

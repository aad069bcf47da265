// Package moe replays Mixture-of-Experts dispatch and combine traffic from a
// traces.Trace on a simulated cluster (gin/machine), with every library's
// communication pattern written as GIN device programs running on the GPU
// model: DeepEP V1 low latency (PR #521's GIN mapping), DeepEP V1 high
// throughput (rail-aligned chunked puts with tail signals, head credits and
// NVLink forwarding), V2 / NCCL EP style puts with aggregated requests, and a
// host-initiated NCCL all-to-all-v baseline. Times come out of the model's
// mechanisms (issue costs, doorbells, PCIe, packets, queues, ACKs); the
// package only decides which operations each warp issues and when it waits.
//
// Replay builds one fresh machine per (iteration, layer), runs dispatch on
// every rank, then combine, and reports per layer the kernel-only times
// (first issue on any rank to the last receiver done), DeepEP-defined
// bandwidths (spec moe-traffic 1.9) and a critical-path breakdown.
package moe

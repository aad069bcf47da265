// Package ht is DeepEP V1's normal (high-throughput) internode dispatch and
// combine as ported to GIN (PR #521): per channel, RDMA senders
// deduplicate tokens by node into per-(channel, node) rings, a coordinator
// puts chunks to the rail peer and signals the tail, forwarders copy
// records over NVLink into per-peer rings and return head credits; combine
// reduces in the forwarder and sends one record per (token, source node).
//
// Every warp exists twice: as a process (the reference, Config.NoThen) and
// as a Then state machine (then.go) that the backends issue without a
// process.
package ht

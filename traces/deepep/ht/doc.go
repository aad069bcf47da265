// Package ht is DeepEP V1's normal (high-throughput) internode dispatch and
// combine as ported to GIN (PR #521): per channel, RDMA senders
// deduplicate tokens by node into per-(channel, node) rings, a coordinator
// puts chunks to the rail peer and signals the tail, forwarders copy
// records over NVLink into per-peer rings and return head credits; combine
// reduces in the forwarder and sends one record per (token, source node).
//
// Every warp is written once, as a state machine over its group's Then
// operations that runs without a process (warp.go): the dispatch warps in
// dispatch.go, the combine warps in combine.go, each with its program as
// pseudo-code in its doc comment. testdata/golden.txt pins their runs.
package ht

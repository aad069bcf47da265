// Package ll is DeepEP V1's low-latency dispatch and combine as GIN device
// programs (PR #521's GIN mapping): one put per (token, expert) selection
// into per-(expert, source) receive slots, a count signal per (expert,
// source) and spinning receiver warps. With aggregation it is NCCL EP's
// low-latency kernels: the same pattern with OptAggregateRequests on every
// data put.
package ll

// Package bench is the harness of GIN micro-benchmarks mirroring
// nccl-tests' device API GIN perf tests (src/device_api/gin): put,
// put_signal, put_counter, signal, put_value and get, in ping (issue then
// flush or counter wait), pingpong (put+signal handing the turn over;
// one-way = RTT/2) and bw (CTAs × threads issuers, optional aggregation and
// skipped credit checks) patterns, on two ranks of a built machine (one GPU
// on each of two nodes for GDAKI and proxy). It also builds the two-rank
// environment and the merged event timeline (Log) that the backends'
// golden tests use.
package bench

// Package traces is ginsim's data layer for Mixture-of-Experts traffic: the
// versioned "moe-trace" JSON Lines format (header, placement, route, counts
// and measure records, optionally gzip-compressed), a streaming Reader and a
// canonical, byte-deterministic Writer, the in-memory Trace with the routing
// matrices that workloads replay (selections and distinct tokens per source
// rank and destination rank or node), seeded synthetic routing generators
// (uniform, group-limited, hot rank, power law, balanced), model presets,
// DeepEP message-size formulas, routing statistics (Inspect) and a few small
// embedded example traces.
//
// Which records a workload needs: route records are exact per-token routing.
// They are required by workloads that depend on token order or on the
// per-token expert set: DeepEP low-latency slot order and per-token
// timing, high-throughput chunk composition (which tokens share a chunk to
// a node) and weighted combine reductions. Counts records are the compact
// form and suffice for every byte or message matrix: expert_tokens gives the
// low-latency and NCCL all-to-all-v selection matrices (one message per
// selection), rank_tokens the per-rank deduplicated traffic of DeepEP V2
// direct mode, node_tokens the per-node deduplicated traffic of
// high-throughput and hybrid modes. Trace.Step answers both forms with the
// same StepMatrix and says which one it used.
//
// Expert ids in a trace index physical expert slots: [0, num_experts +
// redundant_experts). -1 marks a masked selection. The package does no I/O
// other than through the io.Reader and io.Writer it is given (and the
// convenience file helpers), reads no clock and uses only seeded randomness.
package traces

// Package sweep runs what-if studies: a grid (or list) of points over
// replay's settings (backend, mode, EP, tokens, routing, model, seed) and
// cluster fields (nics_per_gpu, link_rate, topology, faults, ...), each
// point one replay.Replay. A study is a YAML file (ParseSpec, errors with
// file:line: field); Run executes its points on all cores, resumes from an
// earlier output and writes one row per point, with the full configuration
// and ginsim's version, as CSV and JSON Lines, each file written whole.
// Points can be split into shards (Shard, from Slurm job arrays or
// Kubernetes Indexed Jobs), whose outputs Merge joins, checking that every
// point is present exactly once; Plot draws a metric against one axis with
// one line per value of another. Examples are studies built into the
// binary.
package sweep

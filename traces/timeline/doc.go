// Package timeline writes simulation timelines in the Chrome trace event
// JSON format ("traceEvents"), which Perfetto (ui.perfetto.dev) and
// chrome://tracing open: complete slices on per-(process, thread) tracks,
// instants, counters and flow arrows between slices. Times are simulation
// times, written in microseconds with picosecond precision, so the output is
// byte-deterministic.
package timeline

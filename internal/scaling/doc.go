// Package scaling reports how a run speeds up with workers: the rows of
// one measurement per worker count, the speed-up and parallel efficiency
// against one worker, as a table for people, JSON for machines and a plot.
// It is shared by the benchmarks that run the parallel kernel (bench
// phold, bench alltoall, the replay benchmarks).
package scaling

// Package memsample measures the peak memory of a benchmark: it samples
// the Go heap in use and the goroutine stacks in use on a timer, in a
// goroutine of its own, while the benchmark runs. It is harness code, not
// model code; the models stay single-threaded.
package memsample

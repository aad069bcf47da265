// Package phold is PHOLD, the standard synthetic benchmark of parallel
// discrete-event kernels (Fujimoto, 1990), on a sim.World: logical
// processes spread over the World's partitions pass a fixed population of
// events among themselves, each event rescheduling one more after the
// lookahead plus an exponential delay, to a random process (in another
// partition with probability Remote). An event can also burn a fixed
// amount of CPU, standing in for the work a real model's event does.
//
// It measures what the kernel adds (windows, cross-partition delivery,
// barriers) and how the speed-up grows with workers, apart from any model;
// its Digest (a hash of every process's sequence of events) shows that the
// run does not depend on the worker count.
package phold

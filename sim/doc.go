// Package sim is ginsim's discrete-event kernel: integer picosecond time,
// an event queue ordered by (time, sequence), seeded random streams, an
// event-trace hook, a watchdog, and two ways to write behaviour.
//
// Hot state machines (NIC pipelines, switch ports, links) implement Handler
// and are scheduled with Schedule(at, h, arg): one interface call per event
// and no allocation. Sequential behaviour that reads best as straight-line
// code (workload scripts, GPU thread groups, a CPU proxy loop) runs as a
// process (Spawn): a coroutine built on iter.Pull that yields to the kernel
// whenever it sleeps or waits, and is resumed by an ordinary event.
//
// Determinism: every event carries a sequence number assigned when it is
// scheduled; ties in time resolve in scheduling order, unless SetTies asks
// a Chooser (a seeded one, SeededTies, or an enumerator) to order the
// events due at the same instant, keeping each handler's own order
// (PerHandler) or not (AnyOrder). All randomness comes
// from streams derived from one seed and a component name (Rand). There are
// no goroutines inside the model except the coroutines of processes, which
// never run concurrently with the kernel.
//
// A Sim is not safe for concurrent use. Run independent simulations (seeds,
// sweep points) in parallel, never one simulation on several goroutines.
//
// A World is one simulation split into partitions, each a Sim, that reach
// each other only through Send, at least the World's lookahead ahead. Run
// advances it in lookahead windows whose partitions run concurrently on
// an Exec (the parallel kernel); with SetSequential it fires one event at
// a time in (time, partition) order (the sequential kernel, the
// reference). A partition fires the events due at one instant in a fixed
// order (those received from other partitions first, by sending partition
// and send order, then its own in scheduling order), so both kernels, any
// worker count and any window length give the same run.
package sim

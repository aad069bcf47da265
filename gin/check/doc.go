// Package check is a semantic checker of GIN runs: an obs.Observer that
// reads the event stream of a simulation (sim/obs) as it happens and
// reports every place where the run did something gin.md (spec 2.2-2.4)
// does not allow. It is what `ginsim bench --check` attaches, and any
// driver can attach it to a machine's bus with Attach.
//
// What it checks, and from which events:
//
//   - Exactly once. Every put, put_value and get lands its bytes once:
//     the bytes of an op's Landed events never exceed what it Issued, and
//     a retired op never lands again (DoubleLanding). Every signal and
//     counter word is updated at most once per op (Atomic, Counter:
//     DoubleUpdate). A fabric that loses or duplicates packets makes the
//     NIC retransmit; a retransmission must never look like a second
//     application. At End, an op of a run that did not fail must have
//     landed all its bytes and applied its signal and counter (Lost).
//   - Per-(context, peer) order (spec 2.4 item 1). When the atomic of a
//     signal lands, its own put has landed; a strong signal also needs
//     every put and signal posted before it on the same (rank, context,
//     peer) channel to be applied (SignalBeforePayload). A weak signal
//     covers only its own put. Nothing is checked across contexts or
//     peers: GIN promises no order there.
//   - Local completion (spec 2.4 items 3, 4). A counter update follows a
//     CQE of its op (CounterEarly). A flush returns only after every op
//     the flushing coop issued before it on that context has a CQE, and
//     its gets have landed (FlushEarly); a flushAsync wait likewise for its
//     peer.
//   - Memory oracle. A waiter's signal or counter (SignalSeen, Completed
//     "counter") and a device read of such a word (Read) see a value the
//     word held: 0 (initial or reset) or a value an atomic wrote
//     (UnwrittenValue). An atomic's old value is the word's last value or
//     0 (LostUpdate).
//   - Data races in user programs. A device read of window bytes (Read
//     "window", gin.Gin.ReadWindow) that a GIN put or get landed must be
//     covered by something the reading rank observed before it: a signal
//     value that includes a strong signal posted at or after the put on
//     its channel (or the put's own weak signal), a GIN barrier with the
//     Put fence on its context, or for a get a flush, flushAsync wait or
//     Get-fenced barrier on its context (Race). Coverage is per rank, not
//     per thread: the checker does not see a kernel's own __syncthreads,
//     so a read by one coop after another coop of the same rank observed
//     the signal passes.
//
// State is bounded by what is in flight: an op is dropped once all its
// effects are observed (a bitset of issued ids remembers it, one bit per
// op, to catch late duplicates), a word keeps its last few values, a rank
// its last MaxSpans uncovered landings. Values older than the history are
// not judged (Report.Undecided).
//
// # Wiring
//
// The checker needs the events of the GIN front end (gin.Comm: op ids,
// Issued, waits, reads, flushes, barriers), of the backends (Posted) and
// of the NICs (Landed, Atomic, CQE); the fabric's packet events are not
// needed. One bus must serve every communicator that shares a machine's
// NICs. bench.Env.Observe does this; another driver calls, before its
// kernels run,
//
//	chk, bus := check.Wire(comm, backend) // a gin.Comm and its backends
//	for _, n := range m.NICs {            // every NIC of the machine
//		n.SetObserver(bus)
//	}
//	// later communicators and backends: x.SetObserver(bus)
//
// (or check.Wire(machine, comm, backend) to take the fabric too), runs,
// then chk.End(runErr != nil) (chk.Cut() when the driver stopped the
// simulation with work in flight, chk.Drained() when the run deadlocked
// with nothing in flight) and chk.Report(); Report.Add sums the
// reports of several machines.
//
// On a sim.World the bus is split per partition (obs.Split). The checker
// reads nothing but its events, so it may observe an obs.SplitOverlapped
// bus (replay --check does), whose merge and subscribers run beside the
// next window: its report is complete when the World's Run returns.
//
// The package is pure: no goroutines, no I/O; it never changes the run.
package check

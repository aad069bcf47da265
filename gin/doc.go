// Package gin is the NCCL GIN protocol core: the host API (communicators
// over ranks, symmetric windows, device communicators with their resource
// layout, teams, GIN type selection and the 2.28/2.30 version profiles),
// the device API front end (put, putValue, signal, get, flush,
// flushAsync/wait, signal and counter reads, waits and resets, shadows,
// GIN barriers) with NCCL's coop semantics, and the Backend interface that
// carries operations out through a real mechanism: gin/gdaki (WQEs and
// doorbells), gin/proxy (GFD rings and a CPU thread), gin/lsa (NVLink
// stores inside the LSA team).
//
// The front end validates every call and reports a user's mistake as a
// typed *Error through sim.Fail, naming rank, context, coop, operation and
// simulated time: an access outside a window, an unregistered window, a
// peer outside the team, an out-of-range signal or counter, SignalInc mixed
// with SignalAdd on a signal between resets, a reset racing an update, and
// calls that the version profile lacks. At quiescence, Comm.CheckDeadlock
// names every coop still waiting and what for.
//
// Coop semantics (spec 2.1): every issue call is Sync, thread 0 issues
// through the backend, Sync; flush spreads peers over the coop's threads;
// waits poll on thread 0, then Sync.
//
// A group without a process (gpu.GPU.LaunchHandler) issues puts and
// signals with PutThen and SignalThen, and flushes with FlushThen, on a
// backend that implements ThenBackend (GDAKI, Proxy): the same checks, hook
// records, costs and events as Put, Signal and Flush, then a
// continuation.
//
// Deliberate differences from NCCL (gin-semantics-review): in 2.28 NCCL's
// GIN contexts (QPs, GFD rings, credits) belong to the communicator and
// are shared by all its device communicators (dev_runtime.cc@228
// L849-859), so one devComm's flush also waits for another's operations
// on the same context index; here each DevComm builds its own (M6: no
// credit, order or flush coupling between devComms of a 2.28
// communicator; programs with one DevComm are unaffected).
//
// Observation (Comm.SetObserver): every put, putValue, signal and get gets
// an operation id (Op.ID) from the run's obs.Bus, reported as obs.Issued
// and carried by the backend into its WQEs or GFDs; signal and counter
// waits and flushes report what they saw (obs.SignalSeen, obs.Completed)
// stamped with the op whose atomic last changed the word.
//
// On a sim.World (gin/machine.BuildWorld) each rank lives on its node's
// partition (Rank.Sim): its front-end bookkeeping, its backend state
// (GDAKI and proxy lanes) and its events stay there, ids come from its
// partition's bus (obs.Split), and resources a lone Sim creates on first
// use (GDAKI contexts past the first, self-loops) are built at Connect.
// An update of a signal on another node reaches the signal's partition
// as a note a lookahead after its issue, where the Inc/Add and reset-race
// rules check it (DevComm).
//
// Nothing here is safe for concurrent use: one sim.Sim drives it all, or
// on a World one partition drives each rank.
package gin

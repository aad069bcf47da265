// Package verify is ginsim's GIN conformance suite: one litmus program
// per guarantee, usage rule and non-guarantee of the GIN semantics
// reference (shared/spec/gin.md), written as gin/prog programs so that the
// hardware backend can run the same files, each with the spec section it
// checks and the outcomes that section allows.
//
// A Runner runs every test on the GDAKI, Proxy and (where it applies) LSA
// backends, under NCCL 2.28 and 2.30, over a set of explored schedules:
// seeded perturbations of poll phases, GPU and NIC latencies, proxy
// progress-thread costs (stalls), packet reordering (fabric jitter), the
// fabric's loss, duplication and corruption, and a seeded order of the
// events of different components due at the same instant (ties=N). With
// Options.Exhaustive the seeded schedules give way to a depth-first
// enumeration of every same-instant order that departs from the scheduling
// order at most K times, each replayable as choices=I.J...; the result
// counts the schedules and distinct outcomes it saw. A guarantee passes
// when every outcome under every schedule is allowed; a usage rule passes
// when every schedule reports the violation; a non-guarantee passes only
// when some schedule actually produces the surprising outcome. A failure is shrunk
// to the smallest schedule (fewest perturbations) that still fails and
// carries the one command that replays it.
//
// Mutants are deliberately broken variants of gin, both backends, the NIC
// and the GPU model, each switched on through the models' own Config
// values (no global state); the suite must catch every one.
package verify

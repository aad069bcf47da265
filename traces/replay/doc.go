// Package replay replays Mixture-of-Experts dispatch and combine traffic
// from a traces.Trace on a simulated cluster (gin/machine). It is the
// driver: it resolves each (iteration, layer) step, builds one fresh
// machine per step, hands a workload.Env to the workload of the chosen mode
// (traces/deepep/ll, traces/deepep/ht, traces/deepep/v2, traces/ncclbase),
// runs dispatch on every rank, then combine, and reports per layer the
// kernel-only times (first issue on any rank to the last receiver done),
// DeepEP-defined bandwidths (spec moe-traffic 1.9) and a critical-path
// breakdown. It also sweeps seeds, writes timelines and plots.
//
// A step's machine runs on a sim.World of one partition per node
// (machine.BuildWorld), its windows on Options.Workers goroutines: the
// outputs are the same for every worker count and equal to the sequential
// kernel's (Options.Sequential: one event at a time in time order, the
// reference the golden tests pin), byte for byte
// (TestWorkersDoNotChangeTheRun). A phase ends at the end of the window in
// which its last rank finished (at most the fabric's lookahead later);
// the next phase starts there.
//
// Each step runs with one obs.Bus (on a World, split per partition and
// merged, with its subscribers, beside the next window:
// obs.SplitOverlapped) on the fabric, the NICs and every
// communicator and backend; a critpath.Tracker on it follows the operations
// that update signals, and the breakdown of a phase is the path of the
// operation whose signal released its slowest receiver (critical.go),
// with the busiest resource of each part named from the phase's resources
// (resources.go).
//
// Times come out of the model's mechanisms (issue costs, doorbells, PCIe,
// packets, queues, ACKs); the workloads only decide which operations each
// warp issues and when it waits.
package replay

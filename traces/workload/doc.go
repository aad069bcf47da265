// Package workload is the contract between the replay driver
// (traces/replay) and the workloads it runs (traces/deepep/..., traces/ncclbase):
// the Env one step of a replay gives a workload (the simulator, the machine,
// the resolved routing Step, the Params and the Config), the accounting of
// the running phase (receivers done, signal paths for the critical path)
// and the PhaseReport it turns into.
//
// A workload builds its device programs on Env.M in Setup, launches them in
// Dispatch and Combine, and calls Env.ReceiverDone when a receiver group
// finishes; it imports this package and the model, never the driver.
package workload

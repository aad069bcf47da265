// Package workload is the contract between the replay driver
// (traces/replay) and the workloads it runs (traces/deepep/..., traces/ncclbase):
// the Env one step of a replay gives a workload (the simulator, the machine,
// the resolved routing Step, the Params and the Config), the accounting of
// the running phase (receivers done, what each saw last) and the
// PhaseReport it turns into.
//
// A workload builds its device programs on Env.M in Setup, launches them in
// Dispatch and Combine, and calls Env.ReceiverDone when a receiver group
// finishes, with what its last wait saw (Env.Saw: the signal word's sender
// and the GIN operation that last changed it, read from the step's obs.Bus,
// Env.Obs). It gives no timings and no paths: the driver computes the
// critical path of that operation from the bus's events (traces/critpath).
// It imports this package and the model, never the driver.
package workload

// Package gpu models the GPUs of a node as ginsim sees them: SMs that run
// device code as cooperative thread groups (a thread, a warp or a CTA, as
// NCCL's ncclCoopThread/Warp/Cta), HBM, and the GPU's two ways out: PCIe
// (host pinned memory, MMIO doorbells, system-scope atomics, write-through
// stores) through a fabric/pcie.Tree, and NVLink stores and loads to the
// other GPUs of the node through a fabric/nvlink.Domain.
//
// A Group is one sim process. Device code calls its methods, which charge
// SM time (Cycles, Sync, Fence, issue costs) and move data through the
// mechanisms above. Memory is visible in time: a store, DMA or NVLink write
// changes its mem.Region only when it has landed, so every observer (an SM
// polling, a NIC reading, a CPU thread) sees it from that instant on.
// WaitWord models a spin loop without simulating each iteration: it reads
// the word at its poll instants, and while the predicate fails it parks on
// a mem watcher; after a change the next poll reads the word a seeded,
// uniformly drawn phase of the poll period later (a loop's phase against
// another agent's store is not fixed on real hardware).
//
// Device code can also run without a process: a group launched with
// LaunchHandler is driven by a sim.Handler (a state machine) through the
// Then twins of the operations (CyclesThen, AtomicAdd64Then,
// WaitWordThen, ..., ParallelThen for a Parallel section whose items are
// state machines too), which cost the same and schedule the same events
// as the blocking operations but continue at a handler instead of
// resuming a coroutine. Short-lived senders that run by the hundred thousand (DeepEP
// LL's warps at EP256) then need no goroutine stack.
//
// Every cost is a field of Config with an H100 SXM default and the hardware
// fact it stands for. Groups run independently: SM contention between
// groups on the same SM is not modelled (issue rates are per group).
//
// A GPU and its groups are not safe for concurrent use; they run on one
// sim.Sim.
package gpu

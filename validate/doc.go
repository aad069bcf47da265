// Package validate holds what compares the simulator with real hardware:
// programs that run the same measurements on a GPU machine and on the
// model, the measurements taken, and the comparison.
//
// validate/gpumicro measures the unloaded GPU latencies gpu.Config and
// pcie.Config stand for (loads, atomics, fences, polling, flag hand-offs,
// the GPU <-> CPU round trip through pinned host memory) and, on two GPUs,
// what nvlink.Config stands for (peer loads, atomics, fences, hand-offs,
// bandwidths) with a CUDA program and computes the same quantities on the
// model.
//
// validate/hw runs gin/prog programs through real NCCL 2.28.9 on a GPU
// (with ginsim's own GIN plugin as the network) and on the model, and
// compares outcomes and timings (`ginsim validate gin`).
package validate

// Package gpumicro compares the GPU model with a real GPU on unloaded
// latencies: a CUDA program (gpumicro.cu, built with nvcc and run on the
// GPU) prints one JSON line per measurement; Parse reads them, Model runs
// the same measurements on the simulator's devices, and Compare lines the
// two up. The measurements this package's defaults were set from are in
// measured/.
package gpumicro

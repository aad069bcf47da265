// micro.cuh: what gpumicro.cu and ncclbar.cu share: the CUDA error check,
// the global timer and the SM clock measurement.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

__device__ __forceinline__ uint64_t gtimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// kClock: SM cycles and globaltimer ns over a ~20 ms spin.
__global__ void kClock(uint64_t* out) {
  uint64_t c0 = clock64(), t0 = gtimer();
  while (gtimer() - t0 < 20000000ull) {
  }
  out[0] = clock64() - c0;
  out[1] = gtimer() - t0;
}

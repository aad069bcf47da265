// eventtime measures what ep_bench's way of timing a phase adds to the
// kernels' own time on one GPU: ep_bench (NVIDIA/nccl contrib/nccl_ep/
// ep_bench.cu:1841-1851) records a CUDA event right after a
// cudaStreamSynchronize, launches the phase's kernel and ncclEpComplete's,
// and records a second event; the kernels here spin for a set time.
//
//	nvcc -O2 -arch=sm_90 -o eventtime validate/gpumicro/eventtime.cu && ./eventtime
//
// One H200 (CUDA 13.0, 2026-12-02), median of 200 (p90): one empty kernel
// 6.75 us (8.10), two 11.30 (13.50); a 20-us kernel 26.40 (27.71), with a
// second, empty kernel 27.78 (29.15); a 50-us kernel 56.54 (57.60), 57.76
// (59.01): the event interval adds 6.4-7.8 us to the kernels, before any
// wait for other ranks.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

__global__ void spin(long long ns) {
  long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  long long t = t0;
  while (t - t0 < ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
}

int main() {
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (long long ns : {0LL, 20000LL, 50000LL}) {
    for (int kernels : {1, 2}) {
      std::vector<float> v;
      for (int i = 0; i < 200; i++) {
        cudaStreamSynchronize(s);
        cudaEventRecord(a, s);
        spin<<<1, 32, 0, s>>>(ns);
        if (kernels == 2) spin<<<1, 32, 0, s>>>(0);
        cudaEventRecord(b, s);
        cudaStreamSynchronize(s);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        v.push_back(ms * 1000);
      }
      std::sort(v.begin(), v.end());
      printf(
          "{\"name\":\"event_%dk_%lldus\",\"us_median\":%.2f,\"us_p90\":%.2f,\"note\":\"cudaEventRecord, %d kernel(s) "
          "(first spins %lld us), cudaEventRecord, right after cudaStreamSynchronize\"}\n",
          kernels, ns / 1000, v[100], v[180], kernels, ns / 1000);
    }
  }
}

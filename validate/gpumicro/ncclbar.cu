// ncclbar measures NCCL's own device API on two GPUs of one node (NCCL
// 2.28+, nccl_device.h): the time of one ncclLsaBarrierSession::sync
// between the two GPUs, relaxed and acquire-release, for a warp-sized and
// a larger CTA, and an LSA hand-off (a CTA stores a message into the peer's
// window through ncclGetLsaPointer, then both sync the barrier with
// acquire-release). Its lines have gpumicro's format (without a device
// line) and are appended to gpumicro's output:
//
//	nvcc -O2 -std=c++17 -arch=sm_90 -o ncclbar validate/gpumicro/ncclbar.cu -lnccl
//	NCCL_NVLS_ENABLE=0 ./ncclbar >> results.jsonl
//
// One process drives both GPUs (ncclCommInitAll); the kernels run at the
// same time, one per GPU, and GPU 0's CTA times the loop with clock64.
#include <nccl.h>
#include <nccl_device.h>

#include "micro.cuh"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define NK(x)                                                                          \
  do {                                                                                 \
    ncclResult_t r_ = (x);                                                             \
    if (r_ != ncclSuccess) {                                                           \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_)); \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

// kBarrier: iters barrier syncs (after warm syncs) by one CTA; mode 0:
// relaxed, 1: acquire-release; msg > 0: before each sync the CTA stores
// msg bytes into the peer's window (16 B per thread per store).
__global__ void kBarrier(ncclDevComm dc, ncclWindow_t win, int iters, int mode, size_t msg, uint64_t* out) {
  ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), dc, ncclTeamTagLsa(), 0);
  cuda::memory_order ord = mode == 0 ? cuda::memory_order_relaxed : cuda::memory_order_acq_rel;
  int peer = 1 - dc.lsaRank;
  int4* dst = (int4*)ncclGetLsaPointer(win, 0, peer);
  for (int i = 0; i < 16; i++) bar.sync(ncclCoopCta(), ord);
  uint64_t c0 = clock64();
  for (int i = 0; i < iters; i++) {
    for (size_t k = threadIdx.x; k < msg / 16; k += blockDim.x) dst[k] = make_int4(i, int(k), 0, 0);
    bar.sync(ncclCoopCta(), ord);
  }
  if (threadIdx.x == 0) out[0] = clock64() - c0;
}

int main() {
  const int reps = 7, iters = 5000;
  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev));
  if (ndev < 2) {
    fprintf(stderr, "ncclbar: needs two GPUs, found %d\n", ndev);
    return 1;
  }
  int devs[2] = {0, 1};
  ncclComm_t comms[2];
  NK(ncclCommInitAll(comms, 2, devs));
  int version = 0;
  NK(ncclGetVersion(&version));
  const size_t winBytes = 1 << 20;
  void* buf[2];
  ncclWindow_t win[2];
  ncclDevComm dc[2];
  cudaStream_t st[2];
  uint64_t* out[2];
  for (int i = 0; i < 2; i++) {
    CK(cudaSetDevice(i));
    NK(ncclMemAlloc(&buf[i], winBytes));
    CK(cudaStreamCreate(&st[i]));
    CK(cudaMalloc(&out[i], 64));
  }
  NK(ncclGroupStart());
  for (int i = 0; i < 2; i++) NK(ncclCommWindowRegister(comms[i], buf[i], winBytes, &win[i], NCCL_WIN_COLL_SYMMETRIC));
  NK(ncclGroupEnd());
  ncclDevCommRequirements reqs;
  memset(&reqs, 0, sizeof reqs);
  reqs.lsaBarrierCount = 1;
  NK(ncclGroupStart());
  for (int i = 0; i < 2; i++) NK(ncclDevCommCreate(comms[i], &reqs, &dc[i]));
  NK(ncclGroupEnd());
  CK(cudaSetDevice(0));
  kClock<<<1, 1>>>(out[0]);
  CK(cudaGetLastError());
  uint64_t h[8];
  CK(cudaMemcpy(h, out[0], 16, cudaMemcpyDeviceToHost));
  const double cyclesPerNs = double(h[0]) / double(h[1]);
  fprintf(stderr, "ncclbar: NCCL %d, GPU 0 at %.3f GHz\n", version, cyclesPerNs);
  struct Case {
    const char* name;
    int threads, mode;
    size_t msg;
    const char* note;
  } cases[] = {
      {"nccl_lsa_barrier_relaxed", 32, 0, 0, "ncclLsaBarrierSession<ncclCoopCta>::sync(relaxed), 2 GPUs, 32-thread CTA"},
      {"nccl_lsa_barrier", 32, 1, 0, "ncclLsaBarrierSession<ncclCoopCta>::sync(acq_rel), 2 GPUs, 32-thread CTA"},
      {"nccl_lsa_barrier_cta512", 512, 1, 0, "the same, 512-thread CTA"},
      {"nccl_lsa_put_7k_barrier", 32, 1, 7168, "32-thread CTA stores 7168 B into the peer (ncclGetLsaPointer), then sync(acq_rel)"},
      {"nccl_lsa_put_64k_barrier", 512, 1, 65536, "512-thread CTA stores 65536 B into the peer, then sync(acq_rel)"},
  };
  for (const Case& c : cases) {
    std::vector<double> v;
    for (int r = 0; r < reps; r++) {
      for (int i = 0; i < 2; i++) {
        CK(cudaSetDevice(i));
        kBarrier<<<1, c.threads, 0, st[i]>>>(dc[i], win[i], iters, c.mode, c.msg, out[i]);
        CK(cudaGetLastError());
      }
      for (int i = 0; i < 2; i++) {
        CK(cudaSetDevice(i));
        CK(cudaStreamSynchronize(st[i]));
      }
      CK(cudaMemcpy(h, out[0], 8, cudaMemcpyDeviceToHost));
      v.push_back(double(h[0]));
    }
    std::sort(v.begin(), v.end());
    double med = v[v.size() / 2] / iters;
    printf("{\"name\":\"%s\",\"ns\":%.1f,\"cycles\":%.1f,\"reps\":%d,\"note\":\"%s (NCCL %d)\"}\n", c.name, med / cyclesPerNs,
           med, reps, c.note, version);
    fflush(stdout);
  }
  NK(ncclGroupStart());
  for (int i = 0; i < 2; i++) NK(ncclDevCommDestroy(comms[i], &dc[i]));
  NK(ncclGroupEnd());
  for (int i = 0; i < 2; i++) NK(ncclCommDestroy(comms[i]));
  return 0;
}

// warpcopy measures how fast one warp, and many warps at once, copy
// token-sized messages from local HBM into a peer GPU's memory with the two
// idioms the EP libraries use over NVLink:
//
//   - "lsu": DeepEP's UNROLLED_WARP_COPY(8, ...) with ld.global.nc.v4 and
//     st.global.v4 (V1 LL dispatch to NVLink peers, NCCL EP LL dispatch's
//     LSA path), 7408-B FP8 messages;
//   - "tma": NCCL EP's LL combine pipeline (low_latency.cu,
//     processAndSendToken): per warp 3 shared-memory stages of 2 KiB
//     (kNumSendUnrolls 4 for H 7168), one bulk load prefetched, a bulk
//     store per stage, cp.async.bulk.wait_group.read 1 before reusing a
//     stage; 14336-B BF16 messages.
//
// Each row is one JSON line in gpumicro's format: ns per message per warp
// for one warp, and GB/s over the grid for many. Two GPUs with P2P are
// needed for the peer rows ("local" rows copy within GPU 0).
//
//	nvcc -O2 -std=c++17 -arch=sm_90 -o warpcopy validate/gpumicro/warpcopy.cu
//	./warpcopy > warpcopy.jsonl
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

__device__ __forceinline__ int4 ldnc(const int4* p) {
  int4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.s32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ void stna(int4* p, int4 v) {
  asm volatile("st.global.L1::no_allocate.v4.s32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w));
}

// kLSU: every warp copies msgs messages of n16 int4 from src to dst (its
// own slots), UNROLLED_WARP_COPY(8).
__global__ void kLSU(const int4* src, int4* dst, int n16, int msgs, int wrap, uint64_t* out) {
  const int lane = threadIdx.x % 32, warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  uint64_t c0 = clock64();
  for (int m = 0; m < msgs; m++) {
    const int4* s = src + ((size_t(warp) * msgs + m) % wrap) * n16;
    int4* d = dst + (size_t(warp) * msgs + m) * n16;
    constexpr int U = 8, S = 32 * U;
    int4 v[U];
    for (int i = lane; i < (n16 / S) * S; i += S) {
#pragma unroll
      for (int j = 0; j < U; j++) v[j] = ldnc(s + i + j * 32);
#pragma unroll
      for (int j = 0; j < U; j++) stna(d + i + j * 32, v[j]);
    }
    int i = (n16 / S) * S + lane;
#pragma unroll
    for (int j = 0; j < U; j++)
      if (i + j * 32 < n16) v[j] = ldnc(s + i + j * 32);
#pragma unroll
    for (int j = 0; j < U; j++)
      if (i + j * 32 < n16) stna(d + i + j * 32, v[j]);
    __syncwarp();
  }
  if (lane == 0 && warp == 0) out[0] = clock64() - c0;
}

__device__ __forceinline__ uint32_t smem(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// kTMA: NCCL EP's combine copy, per warp, 3 stages of 2 KiB, prefetch 1.
constexpr int kStages = 3, kChunk = 2048;
__global__ void kTMA(const int4* src, int4* dst, int nbytes, int msgs, int wrap, uint64_t* out) {
  extern __shared__ __align__(128) uint8_t sm[];
  const int lane = threadIdx.x % 32, wib = threadIdx.x / 32, warp = blockIdx.x * (blockDim.x / 32) + wib;
  uint8_t* buf = sm + wib * kStages * (kChunk + 16);
  auto stage = [&](int i) { return buf + i * (kChunk + 16); };
  auto bar = [&](int i) { return smem(stage(i) + kChunk); };
  if (lane < kStages) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar(lane)));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncwarp();
  uint32_t phase = 0;
  auto load = [&](int st, const uint8_t* g, int n) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar(st)), "r"(n) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem(stage(st))),
                 "l"(g), "r"(n), "r"(bar(st))
                 : "memory");
  };
  uint64_t c0 = clock64();
  const int iters = (nbytes + kChunk - 1) / kChunk;
  for (int m = 0; m < msgs; m++) {
    const uint8_t* s = (const uint8_t*)src + ((size_t(warp) * msgs + m) % wrap) * nbytes;
    uint8_t* d = (uint8_t*)dst + (size_t(warp) * msgs + m) * nbytes;
    int it0 = m * iters;  // global iteration index keeps the stage ring going
    if (lane == 0) load(it0 % kStages, s, min(kChunk, nbytes));
    __syncwarp();
    for (int k = 0; k < iters; k++) {
      int it = it0 + k, st = it % kStages, nx = (it + 1) % kStages;
      if (k + 1 < iters && lane == 0) {
        asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
        load(nx, s + (k + 1) * kChunk, min(kChunk, nbytes - (k + 1) * kChunk));
      }
      __syncwarp();
      uint32_t ok = 0;
      while (!ok) {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
            : "=r"(ok)
            : "r"(bar(st)), "r"((phase >> st) & 1)
            : "memory");
      }
      phase ^= 1u << st;
      if (lane == 0) {
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(d + k * kChunk),
                     "r"(smem(stage(st))), "r"(min(kChunk, nbytes - k * kChunk))
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      }
      __syncwarp();
    }
    if (lane == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    __syncwarp();
  }
  if (lane == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  if (lane == 0 && warp == 0) out[0] = clock64() - c0;
}

static double cyclesPerNs;

static void emit(const char* name, double ns, const char* note) {
  printf("{\"name\":\"%s\",\"ns\":%.1f,\"cycles\":%.1f,\"reps\":5,\"note\":\"%s\"}\n", name, ns, ns * cyclesPerNs, note);
  fflush(stdout);
}

int main() {
  int clk;
  CK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));
  cyclesPerNs = clk / 1e6;
  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev));
  int can = 0;
  if (ndev > 1) CK(cudaDeviceCanAccessPeer(&can, 0, 1));
  const size_t bytes = size_t(1) << 30;
  int4 *src, *dstl, *dstp = nullptr;
  uint64_t* out;
  CK(cudaSetDevice(0));
  CK(cudaMalloc(&src, bytes));
  CK(cudaMalloc(&dstl, bytes));
  CK(cudaMemset(src, 1, bytes));
  CK(cudaMallocManaged(&out, 64));
  if (can) {
    CK(cudaDeviceEnablePeerAccess(1, 0));
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&dstp, bytes));
    CK(cudaSetDevice(0));
  }
  const int smemPerWarp = kStages * (kChunk + 16);
  CK(cudaFuncSetAttribute(kTMA, cudaFuncAttributeMaxDynamicSharedMemorySize, 32 * smemPerWarp));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  struct Target {
    const char* name;
    int4* dst;
  } targets[] = {{"local", dstl}, {"peer", dstp}};
  for (auto& tg : targets) {
    if (!tg.dst) continue;
    for (int tma = 0; tma < 2; tma++) {
      const int msgBytes = tma ? 14336 : 7408;
      // One warp: per message, from the clock of warp 0; the source
      // streams from HBM (cold) or cycles over 64 messages (L2-resident,
      // as a send buffer the warps just wrote).
      for (int l2 = 0; l2 < 2; l2++) {
        const int msgs = 2000, wrap = l2 ? 64 : 1 << 30;
        std::vector<double> v;
        for (int r = 0; r < 5; r++) {
          if (tma)
            kTMA<<<1, 32, smemPerWarp>>>(src, tg.dst, msgBytes, msgs, wrap, out);
          else
            kLSU<<<1, 32>>>(src, tg.dst, msgBytes / 16, msgs, wrap, out);
          CK(cudaGetLastError());
          CK(cudaDeviceSynchronize());
          v.push_back(double(out[0]) / cyclesPerNs / msgs);
        }
        std::sort(v.begin(), v.end());
        char name[64], note[256];
        snprintf(name, sizeof name, "%s_%s_warp%s_msg", tma ? "tma" : "lsu", tg.name, l2 ? "_l2" : "");
        snprintf(note, sizeof note, "one warp copies %d-B messages from local %s to %s memory (%s), ns per message: %.1f GB/s",
                 msgBytes, l2 ? "L2 (64 messages reused)" : "HBM", tg.name,
                 tma ? "NCCL EP combine TMA pipeline" : "UNROLLED_WARP_COPY(8) ld.nc/st", msgBytes / v[2]);
        emit(name, v[2], note);
      }
      // Many warps: grid of sms CTAs x warps, GB/s over the grid (events).
      for (int sms : {8, 32, 132}) {
        for (int warps : {8, 32}) {
          const int nw = sms * warps;
          const int msgs = int(std::min<size_t>(64, bytes / (size_t(nw) * msgBytes)));
          std::vector<double> v;
          for (int r = 0; r < 5; r++) {
            CK(cudaEventRecord(e0));
            if (tma)
              kTMA<<<sms, warps * 32, warps * smemPerWarp>>>(src, tg.dst, msgBytes, msgs, 1 << 30, out);
            else
              kLSU<<<sms, warps * 32>>>(src, tg.dst, msgBytes / 16, msgs, 1 << 30, out);
            CK(cudaEventRecord(e1));
            CK(cudaGetLastError());
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            v.push_back(ms * 1e6 / (double(nw) * msgs));
          }
          std::sort(v.begin(), v.end());
          char name[64], note[256];
          snprintf(name, sizeof name, "%s_%s_sms%d_w%d_msg", tma ? "tma" : "lsu", tg.name, sms, warps);
          snprintf(note, sizeof note, "%d CTAs x %d warps, %d messages of %d B each, to %s memory: ns per message over the grid, %.1f GB/s",
                   sms, warps, msgs, msgBytes, tg.name, msgBytes / v[2]);
          emit(name, v[2], note);
        }
      }
    }
  }
  return 0;
}

// gpumicro measures, on a real GPU, the unloaded latencies that gpu.Config
// and pcie.Config give the simulator: L2 and HBM load latency, device and
// block atomics, fences, the period of a polling loop, the store-to-poll
// latency between two SMs, and the GPU <-> CPU flag round trip through
// pinned host memory (the Proxy backend's path). With a second GPU it
// can reach peer to peer (NVLink), it measures what nvlink.Config stands
// for too (the peer_ lines): loads, atomics and fences on the peer's
// memory, flag and message hand-offs between the two GPUs, one SM's and
// every SM's rates to and from the peer.
//
// Build and run (CUDA 12+, one or two GPUs):
//
//	nvcc -O2 -std=c++17 -arch=sm_90 -o gpumicro validate/gpumicro/gpumicro.cu -lpthread
//	./gpumicro > results.jsonl
//
// Every line of output is one JSON object {"name","ns","cycles","reps","note"}:
// the median over reps runs of the per-operation time. Single-thread
// kernels, dependent chains: latency, not throughput; the _kib and _mib
// lines are streaming rates, per KiB or MiB moved.
#include "micro.cuh"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

__device__ __forceinline__ uint64_t ld_cg(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t ld_cv(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.global.cv.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t ld_acq_gpu(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t ld_acq_sys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_rel_gpu(uint64_t* p, uint64_t v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void st_rel_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// kChase follows n links of a pointer chain with load flavour f
// (0: ld.cg = L2, 1: ld.cv = uncached/volatile).
__global__ void kChase(const uint64_t* buf, uint64_t n, int f, uint64_t start, uint64_t* out) {
  uint64_t i = start;
  for (uint64_t k = 0; k < 64; k++) i = f == 0 ? ld_cg(buf + i) : ld_cv(buf + i);  // warm the code path
  uint64_t c0 = clock64();
  for (uint64_t k = 0; k < n; k++) i = f == 0 ? ld_cg(buf + i) : ld_cv(buf + i);
  out[0] = clock64() - c0;
  out[1] = i;
}

// kAtomicChase follows n links of a pointer chain with atomicAdd(p, 0):
// dependent device-scope atomics on words spread over the L2 (both of its
// partitions), where kAtomic hits one word.
__global__ void kAtomicChase(unsigned long long* buf, uint64_t n, uint64_t* out) {
  unsigned long long i = 0;
  for (uint64_t k = 0; k < 64; k++) i = atomicAdd(buf + i, 0ull);
  uint64_t c0 = clock64();
  for (uint64_t k = 0; k < n; k++) i = atomicAdd(buf + i, 0ull);
  out[0] = clock64() - c0;
  out[1] = i;
}

// kAtomic: n dependent atomicAdds on one word (the returned value feeds the
// next address). scope 0: device, 1: block, 2: system.
__global__ void kAtomic(unsigned long long* w, uint64_t n, int scope, unsigned long long zero, uint64_t* out) {
  unsigned long long x = 0;
  uint64_t c0 = clock64();
  for (uint64_t k = 0; k < n; k++) {
    unsigned long long* p = w + (x & zero);  // the next address waits for the returned value
    if (scope == 0) x = atomicAdd(p, 1ull);
    else if (scope == 1) x = atomicAdd_block(p, 1ull);
    else x = atomicAdd_system(p, 1ull);
  }
  out[0] = clock64() - c0;
  out[1] = x;
}

// kFence: n iterations of {store; fence}; kind 0: no fence, 1:
// __threadfence, 2: __threadfence_system, 3: fence only (no store).
__global__ void kFence(uint64_t* w, uint64_t n, int kind, uint64_t* out) {
  uint64_t c0 = clock64();
  for (uint64_t k = 0; k < n; k++) {
    if (kind != 3) ((volatile uint64_t*)w)[k & 63] = k;
    if (kind == 1 || kind == 3) __threadfence();
    else if (kind == 2) __threadfence_system();
  }
  out[0] = clock64() - c0;
}

// kRelStore: n release stores (st.release.gpu), kind 1: st.release.sys.
__global__ void kRelStore(uint64_t* w, uint64_t n, int kind, uint64_t* out) {
  uint64_t c0 = clock64();
  for (uint64_t k = 0; k < n; k++) {
    if (kind == 0) st_rel_gpu(w + (k & 63), k);
    else st_rel_sys(w + (k & 63), k);
  }
  out[0] = clock64() - c0;
}

// kPoll: n iterations of a spin loop body on a word that never matches:
// kind 0: ld.acquire.gpu, 1: ld.acquire.sys, 2: ld.cv (volatile).
__global__ void kPoll(const uint64_t* w, uint64_t n, int kind, uint64_t* out) {
  uint64_t c0 = clock64(), acc = 0;
  for (uint64_t k = 0; k < n; k++) {
    uint64_t v = kind == 0 ? ld_acq_gpu(w) : kind == 1 ? ld_acq_sys(w) : ld_cv(w);
    acc += v;
    if (v == ~0ull) break;
  }
  out[0] = clock64() - c0;
  out[1] = acc;
}

// kPingPong: blocks 0 and 1 (different SMs) bounce a counter through two
// flags in GPU memory, st.release.gpu / ld.acquire.gpu, n round trips.
__global__ void kPingPong(uint64_t* a, uint64_t* b, uint64_t n, int relaxed, uint64_t* out) {
  if (threadIdx.x != 0) return;
  unsigned sm;
  asm("mov.u32 %0, %%smid;" : "=r"(sm));
  out[2 + blockIdx.x] = sm;
  uint64_t c0 = clock64();
  for (uint64_t i = 1; i <= n; i++) {
    if (blockIdx.x == 0) {
      if (relaxed == 1) ((volatile uint64_t*)a)[0] = i;
      else if (relaxed == 2) st_rel_sys(a, i);
      else st_rel_gpu(a, i);
      if (relaxed == 2) {
        while (ld_acq_sys(b) != i) {
        }
      } else {
        while (ld_acq_gpu(b) != i) {
        }
      }
    } else {
      if (relaxed == 2) {
        while (ld_acq_sys(a) != i) {
        }
      } else {
        while (ld_acq_gpu(a) != i) {
        }
      }
      if (relaxed == 1) ((volatile uint64_t*)b)[0] = i;
      else if (relaxed == 2) st_rel_sys(b, i);
      else st_rel_gpu(b, i);
    }
  }
  if (blockIdx.x == 0) out[0] = clock64() - c0;
}

// kHostPingPong: the GPU stores i into host word g2c (st.release.sys), the
// CPU sees it and stores i into host word c2g, which the GPU polls
// (ld.acquire.sys over PCIe); n round trips.
__global__ void kHostPingPong(uint64_t* g2c, const uint64_t* c2g, uint64_t n, uint64_t* out) {
  uint64_t c0 = clock64();
  for (uint64_t i = 1; i <= n; i++) {
    st_rel_sys(g2c, i);
    while (ld_acq_sys(c2g) != i) {
    }
  }
  out[0] = clock64() - c0;
}

// kWT: n write-through 16-byte stores (st.global.wt.v2.u64) to host memory
// by one thread, then __threadfence_system: the Proxy GFD store issue rate.
__global__ void kWT(uint64_t* h, uint64_t n, uint64_t* out) {
  uint64_t c0 = clock64();
  for (uint64_t k = 0; k < n; k++) {
    uint64_t* p = h + 2 * (k & 255);
    asm volatile("st.global.wt.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(k), "l"(k) : "memory");
  }
  uint64_t c1 = clock64();
  __threadfence_system();
  out[0] = c1 - c0;
  out[1] = clock64() - c0;
}

// kBW: one CTA streams n16 int4 elements of local HBM: mode 0 reads (and
// folds them so the loads stay), 1 writes, 2 copies src to dst. Thread 0
// times from the first barrier to the last, after a fence that waits for
// the stores.
__global__ void kBW(const int4* src, int4* dst, size_t n16, int mode, uint64_t* out) {
  __shared__ uint64_t c0;
  __syncthreads();
  if (threadIdx.x == 0) c0 = clock64();
  __syncthreads();
  int acc = 0;
  for (size_t i = threadIdx.x; i < n16; i += blockDim.x) {
    if (mode == 0) {
      int4 v = src[i];
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    } else if (mode == 1) {
      dst[i] = make_int4(int(i), 0, 0, 0);
    } else {
      dst[i] = src[i];
    }
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) out[0] = clock64() - c0;
  if (acc == 0x7fffffff) out[1] = acc;
}

// --- Two GPUs over NVLink (run when a second GPU is P2P-reachable) ---

// kPeerPing: one thread on each GPU bounces a counter. Each side stores
// into the other GPU's word (remote) and polls its own (local) with
// ld.acquire.sys; side 0 stores first. kind 0: st.release.sys; 2:
// volatile store; 3: __threadfence_system + volatile store. (A
// ld.volatile / ld.cv poll of a word the peer writes over NVLink was
// seen to miss the store on an H200 pair, hanging the loop, so every poll
// here is an acquire.) out[1] counts poll iterations, out[2] the
// globaltimer ns of the whole run, out[3] is 1 when a poll gave up.
__device__ __forceinline__ bool peerPoll(const uint64_t* local, uint64_t i, uint64_t deadline, uint64_t* spins) {
  while (ld_acq_sys(local) != i) {
    if ((++*spins & 1023) == 0 && gtimer() > deadline) return false;
  }
  return true;
}
__global__ void kPeerPing(uint64_t* remote, const uint64_t* local, uint64_t n, int side, int kind, uint64_t* out) {
  uint64_t spins = 0, t0 = gtimer(), c0 = clock64(), deadline = t0 + 2000000000ull;
  bool ok = true;
  for (uint64_t i = 1; i <= n && ok; i++) {
    if (side == 1 && !(ok = peerPoll(local, i, deadline, &spins))) break;
    if (kind == 0) {
      st_rel_sys(remote, i);
    } else {
      if (kind == 3) __threadfence_system();
      ((volatile uint64_t*)remote)[0] = i;
    }
    if (side == 0) ok = peerPoll(local, i, deadline, &spins);
  }
  out[0] = clock64() - c0;
  out[1] = spins;
  out[2] = gtimer() - t0;
  out[3] = ok ? 0 : 1;
}

// kPeerPut: one warp on each GPU bounces a message of n16 16-byte words:
// the warp stores it into the other GPU's buffer, __syncwarp, lane 0
// fences (__threadfence_system) and stores the round number into the
// other GPU's flag; the other side polls its flag with ld.acquire.sys and
// answers the same way. Side 0 starts.
__global__ void kPeerPut(int4* rbuf, uint64_t* rflag, const uint64_t* lflag, size_t n16, uint64_t n, int side, uint64_t* out) {
  uint64_t c0 = clock64(), spins = 0, deadline = gtimer() + 2000000000ull;
  int ok = 1;
  for (uint64_t i = 1; i <= n; i++) {
    if (side == 1) {
      if (threadIdx.x == 0) ok = peerPoll(lflag, i, deadline, &spins);
      if (!__shfl_sync(0xffffffffu, ok, 0)) break;
    }
    for (size_t k = threadIdx.x; k < n16; k += 32) rbuf[k] = make_int4(int(i), int(k), 0, 0);
    __syncwarp();
    if (threadIdx.x == 0) {
      __threadfence_system();
      ((volatile uint64_t*)rflag)[0] = i;
    }
    if (side == 0) {
      if (threadIdx.x == 0) ok = peerPoll(lflag, i, deadline, &spins);
      if (!__shfl_sync(0xffffffffu, ok, 0)) break;
    }
  }
  if (threadIdx.x == 0) {
    out[0] = clock64() - c0;
    out[3] = ok ? 0 : 1;
  }
}

// kRed: n non-returning atomic adds (red.global.add, system scope) on one
// word, by one thread, then __threadfence_system: out[0] the issue time,
// out[1] the time including the fence.
__global__ void kRed(unsigned long long* w, uint64_t n, uint64_t* out) {
  uint64_t c0 = clock64();
  for (uint64_t k = 0; k < n; k++) atomicAdd_system(w + (k & 7), 1ull);
  uint64_t c1 = clock64();
  __threadfence_system();
  out[0] = c1 - c0;
  out[1] = clock64() - c0;
}

// kStream: every CTA of the grid streams its share of n16 16-byte words:
// mode 0 reads src, 1 writes dst (timed from the host with events).
__global__ void kStream(const int4* src, int4* dst, size_t n16, int mode, int* sink) {
  int acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n16; i += size_t(gridDim.x) * blockDim.x) {
    if (mode == 0) {
      int4 v = src[i];
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    } else {
      dst[i] = make_int4(int(i), 1, 2, 3);
    }
  }
  if (acc == 0x7fffffff) sink[0] = acc;
}

static double cyclesPerNs;
static int gRep;  // the repetition run() is on (chases start elsewhere each time)

static void emit(const char* name, std::vector<double> cyc, uint64_t per, const char* note) {
  std::sort(cyc.begin(), cyc.end());
  double med = cyc[cyc.size() / 2] / double(per);
  printf("{\"name\":\"%s\",\"ns\":%.1f,\"cycles\":%.1f,\"reps\":%zu,\"note\":\"%s\"}\n", name,
         med / cyclesPerNs, med, cyc.size(), note);
  fflush(stdout);
}

static std::vector<uint64_t> chain(size_t elems, size_t stride, uint64_t seed) {
  size_t n = elems / stride;
  std::vector<uint64_t> perm(n);
  for (size_t i = 0; i < n; i++) perm[i] = i;
  std::mt19937_64 rng(seed);
  for (size_t i = n - 1; i > 0; i--) {  // Sattolo: one cycle through every slot
    size_t j = rng() % i;
    std::swap(perm[i], perm[j]);
  }
  std::vector<uint64_t> buf(elems, 0);
  for (size_t i = 0; i < n; i++) buf[i * stride] = perm[i] * stride;
  return buf;
}

int main() {
  const int reps = 7;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  uint64_t *out, hout[8];
  CK(cudaMalloc(&out, 64));
  kClock<<<1, 1>>>(out);
  CK(cudaGetLastError());
  CK(cudaMemcpy(hout, out, 16, cudaMemcpyDeviceToHost));
  cyclesPerNs = double(hout[0]) / double(hout[1]);
  printf("{\"name\":\"device\",\"gpu\":\"%s\",\"sms\":%d,\"l2_bytes\":%d,\"sm_clock_ghz\":%.3f}\n", prop.name,
         prop.multiProcessorCount, prop.l2CacheSize, cyclesPerNs);
  auto run = [&](auto launch, int idx = 0) {
    std::vector<double> v;
    for (int r = 0; r < reps; r++) {
      gRep = r;
      launch();
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(hout, out, 64, cudaMemcpyDeviceToHost));
      v.push_back(double(hout[idx]));
    }
    return v;
  };
  // Pointer chases: L2 (8 MiB, 128-B lines), HBM (1 GiB, 4 KiB apart), host.
  const uint64_t N = 200000;
  {
    auto h = chain((8 << 20) / 8, 16, 1);
    uint64_t* d;
    CK(cudaMalloc(&d, h.size() * 8));
    CK(cudaMemcpy(d, h.data(), h.size() * 8, cudaMemcpyHostToDevice));
    emit("l2_load", run([&] { kChase<<<1, 1>>>(d, N, 0, 0, out); }), N, "ld.global.cg chase, 8 MiB, 128 B apart");
    CK(cudaFree(d));
  }
  {
    auto h = chain((size_t(256) << 20) / 8, 16, 4);
    uint64_t* d;
    CK(cudaMalloc(&d, h.size() * 8));
    CK(cudaMemcpy(d, h.data(), h.size() * 8, cudaMemcpyHostToDevice));
    emit("hbm_load_256m", run([&] { kChase<<<1, 1>>>(d, N / 4, 0, (uint64_t(gRep) * 300007 % (h.size() / 16)) * 16, out); }), N / 4,
         "ld.global.cg chase, 256 MiB random 128-B lines, cold (each rep starts elsewhere)");
    CK(cudaFree(d));
  }
  {
    auto h = chain((size_t(1) << 30) / 8, 16, 2);
    uint64_t* d;
    CK(cudaMalloc(&d, h.size() * 8));
    CK(cudaMemcpy(d, h.data(), h.size() * 8, cudaMemcpyHostToDevice));
    emit("hbm_load", run([&] { kChase<<<1, 1>>>(d, N / 4, 0, (uint64_t(gRep) * 1000003 % (h.size() / 16)) * 16, out); }), N / 4,
         "ld.global.cg chase, 1 GiB random 128-B lines, cold (each rep starts elsewhere)");
    CK(cudaFree(d));
  }
  {
    auto h = chain((4 << 20) / 8, 16, 3);
    uint64_t* hp;
    CK(cudaHostAlloc(&hp, h.size() * 8, cudaHostAllocMapped));
    std::copy(h.begin(), h.end(), hp);
    uint64_t* dp;
    CK(cudaHostGetDevicePointer(&dp, hp, 0));
    emit("host_load", run([&] { kChase<<<1, 1>>>(dp, N / 20, 1, 0, out); }), N / 20,
         "ld.global.cv chase in pinned host memory: one PCIe read round trip");
    CK(cudaFreeHost(hp));
  }
  unsigned long long* aw;
  CK(cudaMalloc(&aw, 4096));
  CK(cudaMemset(aw, 0, 4096));
  emit("atomic_gpu", run([&] { kAtomic<<<1, 1>>>(aw, N, 0, 0ull, out); }), N, "dependent atomicAdd, device scope, GPU memory");
  emit("atomic_block", run([&] { kAtomic<<<1, 1>>>(aw, N, 1, 0ull, out); }), N, "dependent atomicAdd_block");
  emit("atomic_sys", run([&] { kAtomic<<<1, 1>>>(aw, N, 2, 0ull, out); }), N, "dependent atomicAdd_system on GPU memory");
  {
    // The same atomics on words spread over 8 MiB (in the L2 after the
    // first pass): the L2's two partitions, near and far, in their mix.
    auto h = chain((8 << 20) / 8, 16, 7);
    unsigned long long* d;
    CK(cudaMalloc(&d, h.size() * 8));
    CK(cudaMemcpy(d, h.data(), h.size() * 8, cudaMemcpyHostToDevice));
    emit("atomic_gpu_spread", run([&] { kAtomicChase<<<1, 1>>>(d, N, out); }), N,
         "dependent atomicAdd(p, 0) chase, device scope, 8 MiB, 128 B apart");
    CK(cudaFree(d));
  }
  uint64_t* fw = (uint64_t*)aw;
  auto st = run([&] { kFence<<<1, 1>>>(fw, N, 0, out); });
  emit("store_issue", st, N, "volatile store to GPU memory, no fence");
  emit("store_fence_gpu", run([&] { kFence<<<1, 1>>>(fw, N, 1, out); }), N, "store + __threadfence");
  emit("fence_gpu_idle", run([&] { kFence<<<1, 1>>>(fw, N, 3, out); }), N, "__threadfence, nothing outstanding");
  emit("store_fence_sys", run([&] { kFence<<<1, 1>>>(fw, N / 10, 2, out); }), N / 10, "store + __threadfence_system");
  emit("store_release_gpu", run([&] { kRelStore<<<1, 1>>>(fw, N / 10, 0, out); }), N / 10, "st.release.gpu to GPU memory, back to back");
  emit("store_release_sys", run([&] { kRelStore<<<1, 1>>>(fw, N / 10, 1, out); }), N / 10, "st.release.sys to GPU memory, back to back");
  emit("poll_acquire_gpu", run([&] { kPoll<<<1, 1>>>(fw, N, 0, out); }), N, "spin iteration, ld.acquire.gpu");
  emit("poll_acquire_sys", run([&] { kPoll<<<1, 1>>>(fw, N, 1, out); }), N, "spin iteration, ld.acquire.sys on GPU memory");
  emit("poll_volatile", run([&] { kPoll<<<1, 1>>>(fw, N, 2, out); }), N, "spin iteration, ld.cv");
  {
    uint64_t *a, *b;
    CK(cudaMalloc(&a, 256));
    CK(cudaMalloc(&b, 256));
    const uint64_t R = 20000;
    for (int relaxed = 0; relaxed < 3; relaxed++) {
      auto v = run([&] {
        CK(cudaMemset(a, 0, 256));
        CK(cudaMemset(b, 0, 256));
        kPingPong<<<2, 32>>>(a, b, R, relaxed, out);
      });
      CK(cudaMemcpy(hout, out, 32, cudaMemcpyDeviceToHost));
      char note[200];
      snprintf(note, sizeof note, "half round trip, %s poll, SMs %llu and %llu",
               relaxed == 1 ? "volatile st -> ld.acquire.gpu" : relaxed == 2 ? "st.release.sys -> ld.acquire.sys" : "st.release.gpu -> ld.acquire.gpu",
               (unsigned long long)hout[2], (unsigned long long)hout[3]);
      emit(relaxed == 1 ? "sm_to_sm_flag_relaxed" : relaxed == 2 ? "sm_to_sm_flag_sys" : "sm_to_sm_flag", v, 2 * R, note);
    }
  }
  {
    uint64_t* h;
    CK(cudaHostAlloc(&h, 1 << 16, cudaHostAllocMapped));
    volatile uint64_t* g2c = h;
    volatile uint64_t* c2g = h + 64;
    uint64_t *dg2c, *dc2g;
    CK(cudaHostGetDevicePointer(&dg2c, (void*)g2c, 0));
    CK(cudaHostGetDevicePointer(&dc2g, (void*)c2g, 0));
    const uint64_t R = 20000;
    // flush 1: the CPU writes its reply back to memory (clflush) before
    // the GPU's poll can read it, so the GPU's read need not snoop a
    // modified line out of the CPU's cache.
    for (int flush = 0; flush < 2; flush++) {
      std::vector<double> v;
      for (int r = 0; r < reps; r++) {
        *g2c = 0;
        *c2g = 0;
        std::thread cpu([&] {
          for (uint64_t i = 1; i <= R; i++) {
            while (*g2c != i) {
            }
            *c2g = i;
            if (flush) {
              asm volatile("clflush (%0)\n\tmfence" ::"r"(c2g) : "memory");
            }
          }
        });
        kHostPingPong<<<1, 1>>>(dg2c, dc2g, R, out);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        cpu.join();
        CK(cudaMemcpy(hout, out, 8, cudaMemcpyDeviceToHost));
        v.push_back(double(hout[0]));
      }
      if (flush) {
        emit("gpu_cpu_roundtrip_flush", v, R, "the same with the CPU's reply flushed from its cache (clflush + mfence) after the store");
      } else {
        emit("gpu_cpu_roundtrip", v, R, "GPU st.release.sys to pinned host word, CPU spin sees it, stores back, GPU ld.acquire.sys poll sees it");
      }
    }
    {
      // The period of a GPU poll of a host word that does not change.
      emit("host_poll_acquire_sys", run([&] { kPoll<<<1, 1>>>(dc2g, N / 100, 1, out); }), N / 100,
           "spin iteration, ld.acquire.sys of a word in pinned host memory");
    }
    const uint64_t W = 100000;
    emit("wt_store_issue", run([&] { kWT<<<1, 1>>>(h + 512, W, out); }), W, "st.global.wt.v2 16 B to pinned host memory, issue");
    emit("wt_store_drain", run([&] { kWT<<<1, 1>>>(h + 512, W, out); }, 1), W, "same, including the final __threadfence_system");
    CK(cudaFreeHost(h));
  }
  {
    // One SM's streaming rates over local HBM (256 MiB, far past the L2):
    // time per KiB read, written, or read and written (copy).
    const size_t bytes = size_t(256) << 20;
    int4 *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 1, bytes));
    CK(cudaMemset(b, 2, bytes));
    const char* modes[] = {"read", "write", "copy"};
    for (int threads : {1024, 32}) {
      for (int mode = 0; mode < 3; mode++) {
        char name[64], note[200];
        snprintf(name, sizeof name, "%s_%s_kib", threads == 1024 ? "sm" : "warp", modes[mode]);
        snprintf(note, sizeof note, "one CTA of %d threads, 16-B %s of local HBM, ns per KiB%s", threads, modes[mode],
                 mode == 2 ? " copied (read and written)" : "");
        size_t n16 = (threads == 32 ? bytes / 16 : bytes) / 16;
        emit(name, run([&] { kBW<<<1, threads>>>(a, b, n16, mode, out); }), n16 * 16 / 1024, note);
      }
    }
    CK(cudaFree(a));
    CK(cudaFree(b));
  }
  {
    // The GPU's PCIe port: copy engines between pinned host memory and
    // HBM, one direction and both at once (the load a NIC puts on the
    // port when it reads and writes GPU memory together), ns per MiB.
    const size_t bytes = size_t(1) << 30;
    void *hs, *hd, *ds, *dd;
    CK(cudaHostAlloc(&hs, bytes, cudaHostAllocDefault));
    CK(cudaHostAlloc(&hd, bytes, cudaHostAllocDefault));
    CK(cudaMalloc(&ds, bytes));
    CK(cudaMalloc(&dd, bytes));
    memset(hs, 5, bytes);
    memset(hd, 6, bytes);
    CK(cudaMemset(ds, 7, bytes));
    cudaStream_t sa, sb;
    CK(cudaStreamCreate(&sa));
    CK(cudaStreamCreate(&sb));
    const char* names[] = {"pcie_h2d_mib", "pcie_d2h_mib", "pcie_bidir_mib"};
    const char* what[] = {"cudaMemcpyAsync 1 GiB pinned host -> HBM", "cudaMemcpyAsync 1 GiB HBM -> pinned host",
                          "both at once on two streams (host clock), per direction"};
    for (int k = 0; k < 3; k++) {
      std::vector<double> v;
      for (int r = 0; r < reps; r++) {
        CK(cudaDeviceSynchronize());
        auto t0 = std::chrono::steady_clock::now();
        if (k != 1) CK(cudaMemcpyAsync(dd, hs, bytes, cudaMemcpyHostToDevice, sa));
        if (k != 0) CK(cudaMemcpyAsync(hd, ds, bytes, cudaMemcpyDeviceToHost, sb));
        CK(cudaStreamSynchronize(sa));
        CK(cudaStreamSynchronize(sb));
        double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
        v.push_back(ns * cyclesPerNs);
      }
      std::vector<double> c = v;
      std::sort(c.begin(), c.end());
      char note[200];
      snprintf(note, sizeof note, "%s: %.1f GB/s", what[k], double(bytes) / (c[c.size() / 2] / cyclesPerNs));
      emit(names[k], v, bytes >> 20, note);
    }
    CK(cudaFreeHost(hs));
    CK(cudaFreeHost(hd));
    CK(cudaFree(ds));
    CK(cudaFree(dd));
  }
  // Two GPUs: GPU 0 acts, GPU 1 is the peer, over NVLink (P2P).
  int ndev = 0, can01 = 0, can10 = 0;
  CK(cudaGetDeviceCount(&ndev));
  if (ndev >= 2) {
    CK(cudaDeviceCanAccessPeer(&can01, 0, 1));
    CK(cudaDeviceCanAccessPeer(&can10, 1, 0));
  }
  if (!can01 || !can10) {
    fprintf(stderr, "gpumicro: %d GPU(s), no P2P pair: peer measurements skipped\n", ndev);
    return 0;
  }
  CK(cudaSetDevice(1));
  CK(cudaDeviceEnablePeerAccess(0, 0));
  uint64_t* out1;
  CK(cudaMalloc(&out1, 64));
  cudaStream_t s1;
  CK(cudaStreamCreate(&s1));
  // On GPU 1: pointer chains, an atomic word, flags, message buffers.
  auto hc = chain((4 << 20) / 8, 16, 5);
  auto hb = chain((size_t(1) << 30) / 8, 16, 6);
  uint64_t *pc, *pb, *pw, *f1;
  CK(cudaMalloc(&pc, hc.size() * 8));
  CK(cudaMalloc(&pb, hb.size() * 8));
  CK(cudaMalloc(&pw, 4096));
  CK(cudaMalloc(&f1, 256));
  CK(cudaMemcpy(pc, hc.data(), hc.size() * 8, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(pb, hb.data(), hb.size() * 8, cudaMemcpyHostToDevice));
  CK(cudaMemset(pw, 0, 4096));
  int4* m1;
  CK(cudaMalloc(&m1, 1 << 16));
  CK(cudaSetDevice(0));
  CK(cudaDeviceEnablePeerAccess(1, 0));
  cudaStream_t s0;
  CK(cudaStreamCreate(&s0));
  uint64_t* f0;
  int4* m0;
  CK(cudaMalloc(&f0, 256));
  CK(cudaMalloc(&m0, 1 << 16));
  emit("peer_load", run([&] { kChase<<<1, 1>>>(pc, N / 10, 0, 0, out); }), N / 10,
       "ld.global.cg chase in the peer GPU's memory, 4 MiB (its L2), 128 B apart");
  emit("peer_load_cv", run([&] { kChase<<<1, 1>>>(pc, N / 10, 1, 0, out); }), N / 10,
       "ld.global.cv chase in the peer GPU's memory, 4 MiB");
  emit("peer_load_hbm", run([&] { kChase<<<1, 1>>>(pb, N / 20, 0, (uint64_t(gRep) * 1000003 % (hb.size() / 16)) * 16, out); }),
       N / 20, "ld.global.cg chase in the peer GPU's memory, 1 GiB random 128-B lines, cold");
  unsigned long long* paw = (unsigned long long*)pw;
  emit("peer_atomic_gpu", run([&] { kAtomic<<<1, 1>>>(paw, N / 10, 0, 0ull, out); }), N / 10,
       "dependent atomicAdd, device scope, on a word in the peer GPU");
  emit("peer_atomic_sys", run([&] { kAtomic<<<1, 1>>>(paw, N / 10, 2, 0ull, out); }), N / 10,
       "dependent atomicAdd_system on a word in the peer GPU");
  emit("red_issue", run([&] { kRed<<<1, 1>>>(aw, N, out); }), N, "atomicAdd_system, result unused (RED), local word, issue");
  emit("peer_red_issue", run([&] { kRed<<<1, 1>>>(paw, N / 10, out); }), N / 10,
       "atomicAdd_system, result unused (RED), peer word, issue");
  emit("peer_red_drain", run([&] { kRed<<<1, 1>>>(paw, N / 10, out); }, 1), N / 10,
       "same, including the final __threadfence_system");
  emit("peer_store_issue", run([&] { kFence<<<1, 1>>>(pw, N, 0, out); }), N, "volatile store to the peer GPU, no fence");
  emit("peer_store_fence_gpu", run([&] { kFence<<<1, 1>>>(pw, N / 10, 1, out); }), N / 10,
       "volatile store to the peer GPU + __threadfence");
  emit("peer_store_fence_sys", run([&] { kFence<<<1, 1>>>(pw, N / 10, 2, out); }), N / 10,
       "volatile store to the peer GPU + __threadfence_system");
  emit("peer_store_release_sys", run([&] { kRelStore<<<1, 1>>>(pw, N / 10, 1, out); }), N / 10,
       "st.release.sys to the peer GPU, back to back");
  emit("peer_poll_acquire_sys", run([&] { kPoll<<<1, 1>>>(pw, N / 10, 1, out); }), N / 10,
       "spin iteration, ld.acquire.sys of a word in the peer GPU");
  // run2 launches on both GPUs and waits for both.
  auto run2 = [&](auto launch) {
    std::vector<double> v;
    for (int r = 0; r < reps; r++) {
      gRep = r;
      CK(cudaMemset(f0, 0, 256));
      CK(cudaSetDevice(1));
      CK(cudaMemset(f1, 0, 256));
      CK(cudaDeviceSynchronize());
      CK(cudaSetDevice(0));
      CK(cudaDeviceSynchronize());
      launch();
      CK(cudaGetLastError());
      CK(cudaStreamSynchronize(s0));
      CK(cudaStreamSynchronize(s1));
      CK(cudaMemcpy(hout, out, 64, cudaMemcpyDeviceToHost));
      v.push_back(double(hout[0]));
    }
    return v;
  };
  {
    const uint64_t R = 20000;
    const char* pingName[] = {"peer_flag", "", "peer_flag_relaxed", "peer_flag_fence"};
    const char* pingNote[] = {
        "half round trip between GPUs: st.release.sys into the peer's word, ld.acquire.sys poll of one's own",
        "",
        "half round trip between GPUs: volatile store into the peer's word, ld.acquire.sys poll of one's own",
        "half round trip between GPUs: __threadfence_system + volatile store into the peer's word, ld.acquire.sys poll"};
    for (int kind : {2, 3, 0}) {
      auto v = run2([&] {
        CK(cudaSetDevice(1));
        kPeerPing<<<1, 1, 0, s1>>>(f0, f1, R, 1, kind, out1);
        CK(cudaGetLastError());
        CK(cudaSetDevice(0));
        kPeerPing<<<1, 1, 0, s0>>>(f1, f0, R, 0, kind, out);
      });
      uint64_t h1[4];
      CK(cudaMemcpy(h1, out1, 32, cudaMemcpyDeviceToHost));
      fprintf(stderr, "%s: last rep: side 0 %llu cycles, %llu spins, %llu ns; side 1 %llu cycles, %llu spins, %llu ns\n",
              pingName[kind], (unsigned long long)hout[0], (unsigned long long)hout[1], (unsigned long long)hout[2],
              (unsigned long long)h1[0], (unsigned long long)h1[1], (unsigned long long)h1[2]);
      if (hout[3] || h1[3]) {
        fprintf(stderr, "%s: a poll gave up after 2 s: not emitted\n", pingName[kind]);
        continue;
      }
      emit(pingName[kind], v, 2 * R, pingNote[kind]);
    }
    const uint64_t P = 5000;
    for (size_t bytes : {size_t(1024), size_t(7168), size_t(14336), size_t(65536)}) {
      auto v = run2([&] {
        CK(cudaSetDevice(1));
        kPeerPut<<<1, 32, 0, s1>>>(m0, f0, f1, bytes / 16, P, 1, out1);
        CK(cudaGetLastError());
        CK(cudaSetDevice(0));
        kPeerPut<<<1, 32, 0, s0>>>(m1, f1, f0, bytes / 16, P, 0, out);
      });
      if (hout[3]) {
        fprintf(stderr, "peer_put %zu: a poll gave up after 2 s: not emitted\n", bytes);
        continue;
      }
      char name[64], note[240];
      snprintf(name, sizeof name, "peer_put_%zuk", bytes / 1024);
      snprintf(note, sizeof note,
               "half round trip: one warp stores %zu B into the peer GPU, __threadfence_system, flag store; the peer polls and answers",
               bytes);
      emit(name, v, 2 * P, note);
    }
  }
  {
    // One CTA streaming the peer GPU's memory (256 MiB on GPU 1).
    const size_t bytes = size_t(256) << 20;
    int4 *a1, *a0;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&a1, bytes));
    CK(cudaMemset(a1, 1, bytes));
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&a0, bytes));
    for (int threads : {1024, 32}) {
      for (int mode = 0; mode < 2; mode++) {
        char name[64], note[200];
        snprintf(name, sizeof name, "peer_%s_%s_kib", threads == 1024 ? "sm" : "warp", mode == 0 ? "read" : "write");
        snprintf(note, sizeof note, "one CTA of %d threads, 16-B %s of the peer GPU's memory, ns per KiB", threads,
                 mode == 0 ? "loads" : "stores");
        size_t n16 = (threads == 32 ? bytes / 16 : bytes) / 16;
        emit(name, run([&] { kBW<<<1, threads>>>(a1, a1, n16, mode, out); }), n16 * 16 / 1024, note);
      }
    }
    CK(cudaFree(a0));
    CK(cudaSetDevice(1));
    CK(cudaFree(a1));
    CK(cudaSetDevice(0));
  }
  {
    // Every SM streaming: 2 GiB, two CTAs of 1024 threads per SM; timed
    // with events (or the host clock when both GPUs run), ns per MiB.
    const size_t bytes = size_t(2) << 30;
    int4 *g0, *g1;
    int* sink;
    CK(cudaMalloc(&g0, bytes));
    CK(cudaMalloc(&sink, 64));
    CK(cudaMemset(g0, 3, bytes));
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&g1, bytes));
    CK(cudaMemset(g1, 4, bytes));
    CK(cudaDeviceSynchronize());
    CK(cudaSetDevice(0));
    CK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int grid = 2 * prop.multiProcessorCount;
    const size_t n16 = bytes / 16;
    auto timed = [&](auto launch) {
      std::vector<double> v;
      for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(e0, s0));
        launch();
        CK(cudaGetLastError());
        CK(cudaEventRecord(e1, s0));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        v.push_back(double(ms) * 1e6 * cyclesPerNs);
      }
      return v;
    };
    auto gbps = [&](const std::vector<double>& cyc) {
      std::vector<double> c = cyc;
      std::sort(c.begin(), c.end());
      return double(bytes) / (c[c.size() / 2] / cyclesPerNs);
    };
    const uint64_t mib = bytes >> 20;
    char note[240];
    auto all = [&](const char* name, const char* what, std::vector<double> v) {
      snprintf(note, sizeof note, "%s, 2 GiB, %d CTAs of 1024 threads: %.1f GB/s", what, grid, gbps(v));
      emit(name, v, mib, note);
    };
    all("all_write_mib", "every SM writing local HBM", timed([&] { kStream<<<grid, 1024, 0, s0>>>(g0, g0, n16, 1, sink); }));
    all("peer_all_write_mib", "every SM writing the peer GPU", timed([&] { kStream<<<grid, 1024, 0, s0>>>(g1, g1, n16, 1, sink); }));
    all("peer_all_read_mib", "every SM reading the peer GPU", timed([&] { kStream<<<grid, 1024, 0, s0>>>(g1, g1, n16, 0, sink); }));
    for (int sms : {1, 2, 4, 8, 16, 32}) {
      // k CTAs (one per SM) writing 256 MiB into the peer: where NVLink
      // saturates.
      const size_t part = bytes / 8;
      auto v = timed([&] { kStream<<<sms, 1024, 0, s0>>>(g1, g1, part / 16, 1, sink); });
      std::vector<double> c = v;
      std::sort(c.begin(), c.end());
      char nm[64];
      snprintf(nm, sizeof nm, "peer_sms%d_write_mib", sms);
      snprintf(note, sizeof note, "%d CTA(s) of 1024 threads writing 256 MiB into the peer GPU: %.1f GB/s", sms,
               double(part) / (c[c.size() / 2] / cyclesPerNs));
      emit(nm, v, part >> 20, note);
    }
    all("peer_copy_engine_mib", "cudaMemcpyPeerAsync GPU 0 -> GPU 1",
        timed([&] { CK(cudaMemcpyPeerAsync(g1, 1, g0, 0, bytes, s0)); }));
    std::vector<double> v;
    for (int r = 0; r < reps; r++) {
      auto t0 = std::chrono::steady_clock::now();
      kStream<<<grid, 1024, 0, s0>>>(g1, g1, n16, 1, sink);
      CK(cudaGetLastError());
      CK(cudaSetDevice(1));
      kStream<<<grid, 1024, 0, s1>>>(g0, g0, n16, 1, sink);
      CK(cudaGetLastError());
      CK(cudaStreamSynchronize(s1));
      CK(cudaSetDevice(0));
      CK(cudaStreamSynchronize(s0));
      double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
      v.push_back(ns * cyclesPerNs);
    }
    all("peer_all_write_bidir_mib", "both GPUs' SMs writing each other at once (host clock), per direction", v);
    CK(cudaFree(g0));
    CK(cudaSetDevice(1));
    CK(cudaFree(g1));
    CK(cudaSetDevice(0));
  }
  return 0;
}

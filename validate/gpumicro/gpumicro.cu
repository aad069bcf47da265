// gpumicro measures, on a real GPU, the unloaded latencies that gpu.Config
// and pcie.Config give the simulator: L2 and HBM load latency, device and
// block atomics, fences, the period of a polling loop, the store-to-poll
// latency between two SMs, and the GPU <-> CPU flag round trip through
// pinned host memory (the Proxy backend's path).
//
// Build and run (CUDA 12+, one GPU):
//
//	nvcc -O2 -std=c++17 -arch=sm_90 -o gpumicro validate/gpumicro/gpumicro.cu -lpthread
//	./gpumicro > results.jsonl
//
// Every line of output is one JSON object {"name","ns","cycles","reps","note"}:
// the median over reps runs of the per-operation time. Single-thread
// kernels, dependent chains: latency, not throughput.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

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

// clockRate: SM cycles and globaltimer ns over a ~20 ms spin.
__global__ void kClock(uint64_t* out) {
  uint64_t c0 = clock64(), t0 = gtimer();
  while (gtimer() - t0 < 20000000ull) {
  }
  out[0] = clock64() - c0;
  out[1] = gtimer() - t0;
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
      if (relaxed) ((volatile uint64_t*)a)[0] = i;
      else st_rel_gpu(a, i);
      while (ld_acq_gpu(b) != i) {
      }
    } else {
      while (ld_acq_gpu(a) != i) {
      }
      if (relaxed) ((volatile uint64_t*)b)[0] = i;
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
    for (int relaxed = 0; relaxed < 2; relaxed++) {
      auto v = run([&] {
        CK(cudaMemset(a, 0, 256));
        CK(cudaMemset(b, 0, 256));
        kPingPong<<<2, 32>>>(a, b, R, relaxed, out);
      });
      CK(cudaMemcpy(hout, out, 32, cudaMemcpyDeviceToHost));
      char note[200];
      snprintf(note, sizeof note, "half round trip, %s -> ld.acquire.gpu poll, SMs %llu and %llu",
               relaxed ? "volatile st" : "st.release.gpu", (unsigned long long)hout[2], (unsigned long long)hout[3]);
      emit(relaxed ? "sm_to_sm_flag_relaxed" : "sm_to_sm_flag", v, 2 * R, note);
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
    std::vector<double> v;
    for (int r = 0; r < reps; r++) {
      *g2c = 0;
      *c2g = 0;
      std::thread cpu([&] {
        for (uint64_t i = 1; i <= R; i++) {
          while (*g2c != i) {
          }
          *c2g = i;
        }
      });
      kHostPingPong<<<1, 1>>>(dg2c, dc2g, R, out);
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      cpu.join();
      CK(cudaMemcpy(hout, out, 8, cudaMemcpyDeviceToHost));
      v.push_back(double(hout[0]));
    }
    emit("gpu_cpu_roundtrip", v, R, "GPU st.release.sys to pinned host word, CPU spin sees it, stores back, GPU ld.acquire.sys poll sees it");
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
  return 0;
}

// ginexec: runs one rank of a GIN program (lowered by `ginsim validate gin`
// to a line-based op list) through NCCL's real device API, and writes each
// op's outcome and %globaltimer stamps plus the final signals, counters and
// window checksums.
//
// Usage: ginexec RANK NRANKS IDFILE OPS RESULT
//   Ranks rendezvous through IDFILE (rank 0 writes NCCL's unique id there;
//   IDFILE.<tag>.<rank> files are the host-side barriers). Run each rank as
//   its own process; on one GPU give them different NCCL_HOSTIDs.
//
// Every wait is bounded: a wait_signal/wait_counter gives up after
// GINHW_WAIT_MS (default 5000) and records "timeout"; the host gives the
// kernel GINHW_KERNEL_S (default 60) seconds and otherwise aborts the
// communicator and reports it; the host-side rendezvous wait
// GINHW_BARRIER_S (default 60) seconds for the other ranks.
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

static int gRank = -1;
#define LOG(...)                                                \
  do {                                                          \
    fprintf(stderr, "[ginexec rank %d] ", gRank);               \
    fprintf(stderr, __VA_ARGS__);                               \
    fputc('\n', stderr);                                        \
    fflush(stderr);                                             \
  } while (0)

static FILE* gRes;  // result file
static void finish(int code, const char* fmt, ...) __attribute__((noreturn));
static void finish(int code, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  LOG("%s", msg);
  if (gRes) {
    fprintf(gRes, "done %s %s\n", code == 0 ? "ok" : "fail", msg);
    fclose(gRes);
  }
  _exit(code);
}

#define CUCK(x)                                                                                 \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) finish(1, "%s:%d: %s: %s", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
  } while (0)
#define NCK(x)                                                                                             \
  do {                                                                                                     \
    ncclResult_t r_ = (x);                                                                                 \
    if (r_ != ncclSuccess)                                                                                 \
      finish(1, "%s:%d: %s: %s (%s)", __FILE__, __LINE__, #x, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
  } while (0)

static double nowS() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static long long wallNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// ------------------------------------------------------------------ ops
enum Kind {
  K_PUT, K_PUT_VALUE, K_SIGNAL, K_FLUSH, K_READ_SIGNAL, K_WAIT_SIGNAL, K_RESET_SIGNAL, K_READ_COUNTER, K_WAIT_COUNTER,
  K_RESET_COUNTER, K_SLEEP, K_BARRIER_RAIL, K_READ, K_LSA_STORE, K_NKINDS
};
static const char* kindNames[K_NKINDS] = {"put", "put_value", "signal", "flush", "read_signal", "wait_signal",
                                          "reset_signal", "read_counter", "wait_counter", "reset_counter", "sleep",
                                          "barrier_rail", "read", "lsa_store"};
enum Status { S_OK = 0, S_TIMEOUT = 1, S_NOT_BUILT = 2 };

struct Op {
  int kind, peer, dstWin, srcWin, rkind, rid, counter, id, bits, size;
  unsigned long long dstOff, srcOff, bytes, rvalue, least, value, ns;
};
struct Rec {
  unsigned long long t0, t1, value;
  int status;
};

#define MAX_WINS 8
struct Args {
  ncclDevComm dc;
  ncclWindow_t win[MAX_WINS];
  const Op* ops;
  int nops;
  unsigned char* base[MAX_WINS];  // this rank's windows (read, lsa_store)
  unsigned char* reads;           // what read ops read, at each op's value
  Rec* rec;  // mapped host memory
  volatile int* progress;
  unsigned long long waitNs;
};

__device__ __forceinline__ unsigned long long gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

template <typename R>
__device__ void putWith(ncclGin& gin, ncclTeam team, const Args& a, const Op& o, R remote) {
  if (o.counter >= 0)
    gin.put(team, o.peer, a.win[o.dstWin], o.dstOff, a.win[o.srcWin], o.srcOff, o.bytes, remote,
            ncclGin_CounterInc{(ncclGinCounter_t)o.counter});
  else
    gin.put(team, o.peer, a.win[o.dstWin], o.dstOff, a.win[o.srcWin], o.srcOff, o.bytes, remote);
}

template <typename T, typename R>
__device__ void putValueWith(ncclGin& gin, ncclTeam team, const Args& a, const Op& o, R remote) {
  gin.putValue(team, o.peer, a.win[o.dstWin], o.dstOff, (T)o.value, remote);
}

template <typename R>
__device__ void putValueSized(ncclGin& gin, ncclTeam team, const Args& a, const Op& o, R remote) {
  switch (o.size) {
    case 1: putValueWith<uint8_t>(gin, team, a, o, remote); break;
    case 2: putValueWith<uint16_t>(gin, team, a, o, remote); break;
    case 4: putValueWith<uint32_t>(gin, team, a, o, remote); break;
    default: putValueWith<uint64_t>(gin, team, a, o, remote); break;
  }
}

// rollingLE is NCCL's rollingLessEq: a <= b modulo 2^bits, so a wait is
// met by a value that wrapped past its threshold.
__device__ __forceinline__ bool rollingLE(unsigned long long a, unsigned long long b, int bits) {
  unsigned long long m = bits >= 64 ? ~0ULL : ((1ULL << bits) - 1);
  return ((b - a) & m) <= (m >> 1);
}

__global__ void interp(Args a) {
  ncclGin gin{a.dc, 0};
  ncclTeam world = ncclTeamWorld(a.dc);
  for (int i = 0; i < a.nops; i++) {
    const Op o = a.ops[i];
    Rec r = {gtime(), 0, 0, S_OK};
    switch (o.kind) {
      case K_PUT:
        if (o.rkind == 1) putWith(gin, world, a, o, ncclGin_SignalInc{(ncclGinSignal_t)o.rid});
        else if (o.rkind == 2) putWith(gin, world, a, o, ncclGin_SignalAdd{(ncclGinSignal_t)o.rid, o.rvalue});
        else putWith(gin, world, a, o, ncclGin_None{});
        break;
      case K_PUT_VALUE:
        if (o.rkind == 1) putValueSized(gin, world, a, o, ncclGin_SignalInc{(ncclGinSignal_t)o.rid});
        else if (o.rkind == 2) putValueSized(gin, world, a, o, ncclGin_SignalAdd{(ncclGinSignal_t)o.rid, o.rvalue});
        else putValueSized(gin, world, a, o, ncclGin_None{});
        break;
      case K_SIGNAL:
        if (o.rkind == 1) gin.signal(world, o.peer, ncclGin_SignalInc{(ncclGinSignal_t)o.rid});
        else gin.signal(world, o.peer, ncclGin_SignalAdd{(ncclGinSignal_t)o.rid, o.rvalue});
        break;
      case K_FLUSH:
        gin.flush(ncclCoopThread());
        break;
      case K_READ_SIGNAL:
        r.value = gin.readSignal((ncclGinSignal_t)o.id, o.bits);
        break;
      case K_WAIT_SIGNAL: {
        // NCCL's waitSignal polls readSignal with acquire until it reaches
        // least; the same loop, bounded.
        unsigned long long v;
        while (!rollingLE(o.least, v = gin.readSignal((ncclGinSignal_t)o.id, o.bits), o.bits)) {
          if (gtime() - r.t0 > a.waitNs) { r.status = S_TIMEOUT; break; }
        }
        r.value = v;
        break;
      }
      case K_RESET_SIGNAL:
        gin.resetSignal((ncclGinSignal_t)o.id);
        break;
      case K_READ_COUNTER:
        r.value = gin.readCounter((ncclGinCounter_t)o.id, o.bits);
        break;
      case K_WAIT_COUNTER: {
        unsigned long long v;
        while (!rollingLE(o.least, v = gin.readCounter((ncclGinCounter_t)o.id, o.bits), o.bits)) {
          if (gtime() - r.t0 > a.waitNs) { r.status = S_TIMEOUT; break; }
        }
        r.value = v;
        break;
      }
      case K_RESET_COUNTER:
        gin.resetCounter((ncclGinCounter_t)o.id);
        break;
      case K_SLEEP:
        while (gtime() - r.t0 < o.ns) {
        }
        break;
      case K_READ: {
        // The rank's own window bytes, as a thread loads them now (not
        // through L1: the plugin's copies wrote them behind its back).
        const unsigned char* p = a.base[o.srcWin] + o.srcOff;
        unsigned char* q = a.reads + o.value;
        if (((o.srcOff | o.bytes) & 7) == 0) {
          for (unsigned long long j = 0; j < o.bytes; j += 8)
            *(unsigned long long*)(q + j) = __ldcv((const unsigned long long*)(p + j));
        } else {
          for (unsigned long long j = 0; j < o.bytes; j++) q[j] = ((volatile const unsigned char*)p)[j];
        }
        break;
      }
      case K_LSA_STORE: {
        // A store into the rank's own window (peer 0 of its one-rank LSA team).
        unsigned char* p = a.base[o.dstWin] + o.dstOff;
        switch (o.size) {
          case 1: *(volatile uint8_t*)p = (uint8_t)o.value; break;
          case 2: *(volatile uint16_t*)p = (uint16_t)o.value; break;
          case 4: *(volatile uint32_t*)p = (uint32_t)o.value; break;
          default: *(volatile unsigned long long*)p = o.value; break;
        }
        break;
      }
      case K_BARRIER_RAIL: {
#ifdef GINHW_BARRIER
        // NCCL's rail GIN barrier (signals to every rail peer, then waits);
        // 2.28 defines only the relaxed fence level. Unbounded inside NCCL:
        // the host's kernel bound catches a hang.
        ncclGinBarrierSession<ncclCoopCta> bar(ncclCoopCta(), gin, ncclTeamTagRail(), (uint32_t)o.id);
        cuda::memory_order ord = o.least == 0   ? cuda::memory_order_relaxed
                                 : o.least == 1 ? cuda::memory_order_acquire
                                 : o.least == 2 ? cuda::memory_order_release
                                                : cuda::memory_order_acq_rel;
        bar.sync(ncclCoopCta(), ord, ncclGinFenceLevel::Relaxed);
#else
        r.status = S_NOT_BUILT;
#endif
        break;
      }
    }
    r.t1 = gtime();
    a.rec[i] = r;
    __threadfence_system();
    *a.progress = i + 1;
  }
  // Implicit final flush: every put of this rank is complete at its target
  // before the host reads the final state.
  gin.flush(ncclCoopThread());
  __threadfence_system();
  *a.progress = a.nops + 1;
}

__global__ void readout(ncclDevComm dc, int nsig, int ncnt, unsigned long long* out) {
  ncclGin gin{dc, 0};
  for (int i = 0; i < nsig; i++) out[i] = gin.readSignal((ncclGinSignal_t)i);
  for (int i = 0; i < ncnt; i++) out[nsig + i] = gin.readCounter((ncclGinCounter_t)i);
  __threadfence_system();
}

// clockProbe answers n host requests with a %globaltimer stamp each: the
// host writes go = i+1 and waits for stamp i.
__global__ void clockProbe(volatile int* go, volatile unsigned long long* out, int n) {
  for (int i = 0; i < n; i++) {
    while (*go != i + 1) {
    }
    out[i] = gtime();
    __threadfence_system();
  }
}

// ------------------------------------------------------------------ host
struct Win { unsigned long long bytes; std::string name; };

static void fileBarrier(const char* idfile, const char* tag, int rank, int nranks, double limitS) {
  char mine[600];
  snprintf(mine, sizeof mine, "%s.%s.%d", idfile, tag, rank);
  FILE* f = fopen(mine, "w");
  if (!f) finish(1, "barrier %s: cannot create %s", tag, mine);
  fclose(f);
  double t = nowS();
  for (int r = 0; r < nranks; r++) {
    char other[600];
    snprintf(other, sizeof other, "%s.%s.%d", idfile, tag, r);
    while (access(other, F_OK) != 0) {
      if (nowS() - t > limitS) finish(1, "barrier %s: rank %d did not arrive within %.0f s", tag, r, limitS);
      usleep(1000);
    }
  }
}

static unsigned long long fnv64(const unsigned char* p, size_t n) {
  unsigned long long h = 14695981039346656037ULL;  // FNV-1a, 64 bits
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

// calibrate pairs a %globaltimer stamp with the CLOCK_REALTIME interval
// it was taken in: the tightest of many tries (the other rank's process
// time-slices the GPU, which stretches some), written as a "clock" line.
static void calibrate(int* scratch, cudaStream_t s) {
  const int n = 64;
  volatile int* go = scratch + 4;
  unsigned long long* g = nullptr;
  CUCK(cudaHostAlloc((void**)&g, sizeof(unsigned long long) * n, cudaHostAllocMapped));
  memset(g, 0, sizeof(unsigned long long) * n);
  *go = 0;
  clockProbe<<<1, 1, 0, s>>>(go, g, n);
  CUCK(cudaGetLastError());
  long long best = -1, bg = 0, blo = 0, bhi = 0;
  double t = nowS();
  for (int i = 0; i < n; i++) {
    long long h0 = wallNs();
    *go = i + 1;
    while (((volatile unsigned long long*)g)[i] == 0) {
      if (nowS() - t > 10) finish(1, "clock calibration: the GPU did not answer in 10 s");
    }
    long long h1 = wallNs();
    if (best < 0 || h1 - h0 < best) best = h1 - h0, bg = (long long)g[i], blo = h0, bhi = h1;
    usleep(100);
  }
  CUCK(cudaStreamSynchronize(s));
  CUCK(cudaFreeHost(g));
  fprintf(gRes, "clock %lld %lld %lld\n", bg, blo, bhi);
  fflush(gRes);
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: ginexec RANK NRANKS IDFILE OPS RESULT\n");
    return 2;
  }
  gRank = atoi(argv[1]);
  int nranks = atoi(argv[2]);
  const char *idfile = argv[3], *opsPath = argv[4], *resPath = argv[5];
  int rank = gRank;
  gRes = fopen(resPath, "w");
  if (!gRes) {
    LOG("cannot create %s", resPath);
    return 1;
  }
  unsigned long long waitNs = 5000ULL * 1000000ULL;
  if (getenv("GINHW_WAIT_MS")) waitNs = strtoull(getenv("GINHW_WAIT_MS"), NULL, 10) * 1000000ULL;
  double kernelS = getenv("GINHW_KERNEL_S") ? atof(getenv("GINHW_KERNEL_S")) : 60;
  double barrierS = getenv("GINHW_BARRIER_S") ? atof(getenv("GINHW_BARRIER_S")) : 60;

  // ---- the op list
  FILE* in = fopen(opsPath, "r");
  if (!in) finish(2, "cannot open %s", opsPath);
  std::vector<Win> wins;
  std::vector<Op> ops;
  int nsig = 0, ncnt = 0, nbar = 0, version = 0, line = 0, mine = 0, fill = 0;
  unsigned long long nreads = 0;  // bytes the read ops read, 8-aligned each
  char buf[1024];
  while (fgets(buf, sizeof buf, in)) {
    line++;
    char word[32] = "";
    if (sscanf(buf, "%31s", word) != 1 || word[0] == '#') continue;
    if (!strcmp(word, "ginhw-ops")) {
      if (sscanf(buf, "%*s %d", &version) != 1 || version != 1) finish(2, "%s:%d: want format 1", opsPath, line);
    } else if (!strcmp(word, "win")) {
      int idx;
      unsigned long long bytes;
      char name[256];
      if (sscanf(buf, "%*s %d %llu %255s", &idx, &bytes, name) != 3 || idx != (int)wins.size() || idx >= MAX_WINS)
        finish(2, "%s:%d: bad win line", opsPath, line);
      wins.push_back({bytes, name});
    } else if (!strcmp(word, "fill")) {
      // "fill verify": gin/verify's pattern, byte i of rank r's windows is
      // i*7 + r*101 + 13 + i/2048 (mod 256); otherwise rank*31 + w*7 + i.
      char how[32];
      if (sscanf(buf, "%*s %31s", how) != 1 || strcmp(how, "verify")) finish(2, "%s:%d: want fill verify", opsPath, line);
      fill = 1;
    } else if (!strcmp(word, "signals")) {
      sscanf(buf, "%*s %d", &nsig);
    } else if (!strcmp(word, "counters")) {
      sscanf(buf, "%*s %d", &ncnt);
    } else if (!strcmp(word, "barriers")) {
      sscanf(buf, "%*s %d", &nbar);
    } else if (!strcmp(word, "program")) {
      int r;
      if (sscanf(buf, "%*s %d", &r) != 1) finish(2, "%s:%d: bad program line", opsPath, line);
      mine = r == rank;
    } else if (!strcmp(word, "op")) {
      if (!mine) continue;
      Op o;
      memset(&o, 0, sizeof o);
      char kind[32];
      int n = sscanf(buf, "%*s %31s %d %d %llu %d %llu %llu %d %d %llu %d %d %llu %d %d %llu %llu", kind, &o.peer, &o.dstWin,
                     &o.dstOff, &o.srcWin, &o.srcOff, &o.bytes, &o.rkind, &o.rid, &o.rvalue, &o.counter, &o.id, &o.least,
                     &o.bits, &o.size, &o.value, &o.ns);
      if (n != 17) finish(2, "%s:%d: op line has %d of 17 fields", opsPath, line, n);
      o.kind = -1;
      for (int k = 0; k < K_NKINDS; k++)
        if (!strcmp(kind, kindNames[k])) o.kind = k;
      if (o.kind < 0) finish(2, "%s:%d: unknown op %s", opsPath, line, kind);
      if (o.peer < 0 || o.peer >= nranks) finish(2, "%s:%d: peer %d of %d ranks", opsPath, line, o.peer, nranks);
      if ((o.kind == K_PUT || o.kind == K_PUT_VALUE) && (o.dstWin < 0 || o.dstWin >= (int)wins.size()))
        finish(2, "%s:%d: window %d", opsPath, line, o.dstWin);
      if (o.kind == K_PUT && (o.srcWin < 0 || o.srcWin >= (int)wins.size()))
        finish(2, "%s:%d: window %d", opsPath, line, o.srcWin);
      if (o.kind == K_READ && (o.srcWin < 0 || o.srcWin >= (int)wins.size() || o.srcOff + o.bytes > wins[o.srcWin].bytes))
        finish(2, "%s:%d: read outside window %d", opsPath, line, o.srcWin);
      if (o.kind == K_LSA_STORE && (o.dstWin < 0 || o.dstWin >= (int)wins.size() || o.dstOff + 8 > wins[o.dstWin].bytes))
        finish(2, "%s:%d: lsa_store outside window %d", opsPath, line, o.dstWin);
      if (o.kind == K_READ) {
        o.value = nreads;
        nreads += (o.bytes + 7) & ~7ULL;
      }
      if (o.bits == 0) o.bits = (o.kind == K_READ_COUNTER || o.kind == K_WAIT_COUNTER) ? 56 : 64;
      ops.push_back(o);
    } else if (!strcmp(word, "end")) {
      break;
    } else {
      finish(2, "%s:%d: unknown line %s", opsPath, line, word);
    }
  }
  fclose(in);
  if (version != 1) finish(2, "%s: no 'ginhw-ops 1' header", opsPath);

  // ---- communicator
  ncclUniqueId id;
  if (rank == 0) {
    NCK(ncclGetUniqueId(&id));
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", idfile);
    FILE* o = fopen(tmp, "wb");
    if (!o || fwrite(&id, sizeof id, 1, o) != 1) finish(1, "cannot write %s", tmp);
    fclose(o);
    rename(tmp, idfile);
  } else {
    bool ok = false;
    double t = nowS();
    while (!ok) {
      FILE* f = fopen(idfile, "rb");
      if (f) {
        ok = fread(&id, sizeof id, 1, f) == 1;
        fclose(f);
      }
      if (!ok && nowS() - t > 30) finish(1, "no NCCL unique id in %s after 30 s", idfile);
      if (!ok) usleep(10000);
    }
  }
  CUCK(cudaSetDevice(0));
  int ver = 0;
  ncclGetVersion(&ver);
  cudaDeviceProp prop;
  CUCK(cudaGetDeviceProperties(&prop, 0));
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  fprintf(gRes, "ginhw-result 1\ninfo rank %d nranks %d nccl %d cuda_driver %d cuda_runtime %d gpu %s\n", rank, nranks, ver,
          drv, rt, prop.name);
  fflush(gRes);
  ncclComm_t comm;
  NCK(ncclCommInitRank(&comm, nranks, id, rank));

  std::vector<void*> bufs(wins.size());
  std::vector<ncclWindow_t> hwins(wins.size());
  for (size_t w = 0; w < wins.size(); w++) {
    NCK(ncclMemAlloc(&bufs[w], wins[w].bytes));
    std::vector<unsigned char> init(wins[w].bytes);
    for (size_t i = 0; i < init.size(); i++)
      init[i] = fill ? (unsigned char)(i * 7 + rank * 101 + 13 + (i >> 11)) : (unsigned char)(rank * 31 + w * 7 + i);
    CUCK(cudaMemcpy(bufs[w], init.data(), init.size(), cudaMemcpyHostToDevice));
    NCK(ncclCommWindowRegister(comm, bufs[w], wins[w].bytes, &hwins[w], NCCL_WIN_COLL_SYMMETRIC));
  }
  ncclDevCommRequirements reqs;
  memset(&reqs, 0, sizeof reqs);
  reqs.ginContextCount = 1;
  reqs.ginSignalCount = nsig > 0 ? nsig : 1;
  reqs.ginCounterCount = ncnt > 0 ? ncnt : 1;
  reqs.railGinBarrierCount = nbar;
  ncclDevComm dc;
  memset(&dc, 0, sizeof dc);
  double t = nowS();
  NCK(ncclDevCommCreate(comm, &reqs, &dc));
  LOG("devComm in %.3f s: rank %d of %d, lsaSize %d, gin contexts %d, signals %d, counters %d", nowS() - t, dc.rank,
      dc.nRanks, dc.lsaSize, (int)dc.ginContextCount, dc.ginSignalCount, dc.ginCounterCount);

  // ---- kernel inputs
  Op* dops = nullptr;
  CUCK(cudaMalloc(&dops, sizeof(Op) * (ops.size() + 1)));
  if (!ops.empty()) CUCK(cudaMemcpy(dops, ops.data(), sizeof(Op) * ops.size(), cudaMemcpyHostToDevice));
  Rec* rec = nullptr;
  CUCK(cudaHostAlloc((void**)&rec, sizeof(Rec) * (ops.size() + 1), cudaHostAllocMapped));
  memset(rec, 0, sizeof(Rec) * (ops.size() + 1));
  int* progress = nullptr;
  CUCK(cudaHostAlloc((void**)&progress, 64, cudaHostAllocMapped));
  memset(progress, 0, 64);
  Args a;
  memset(&a, 0, sizeof a);
  a.dc = dc;
  for (size_t w = 0; w < wins.size(); w++) a.win[w] = hwins[w];
  a.ops = dops;
  a.nops = (int)ops.size();
  for (size_t w = 0; w < wins.size(); w++) a.base[w] = (unsigned char*)bufs[w];
  CUCK(cudaMalloc((void**)&a.reads, nreads + 8));
  a.rec = rec;
  a.progress = progress;
  a.waitNs = waitNs;
  cudaStream_t s;
  CUCK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  // ---- clock calibration: %globaltimer against CLOCK_REALTIME
  calibrate(progress, s);

  fileBarrier(idfile, "launch", rank, nranks, barrierS);
  t = nowS();
  interp<<<1, 1, 0, s>>>(a);
  CUCK(cudaGetLastError());
  cudaError_t q;
  while ((q = cudaStreamQuery(s)) == cudaErrorNotReady && nowS() - t < kernelS) usleep(200);
  int reached = *(volatile int*)progress;
  for (int i = 0; i < (int)ops.size() && i < reached; i++)
    fprintf(gRes, "op %d %s %d %llu %llu %llu\n", i, kindNames[ops[i].kind], rec[i].status, rec[i].value, rec[i].t0,
            rec[i].t1);
  if (q != cudaSuccess) {
    ncclResult_t ae = ncclSuccess;
    ncclCommGetAsyncError(comm, &ae);
    fprintf(gRes, "stuck %d %s\n", reached, reached < (int)ops.size() ? kindNames[ops[reached].kind] : "final_flush");
    fflush(gRes);
    ncclCommAbort(comm);
    finish(1, "kernel did not finish in %.0f s (%s): stopped in op %d of %d; NCCL async error: %s", kernelS,
           cudaGetErrorString(q), reached, (int)ops.size(), ncclGetErrorString(ae));
  }
  LOG("program of %d ops done in %.3f s", (int)ops.size(), nowS() - t);
  if (nreads > 0) {
    // The read ops' bytes, in op order, beside the result file.
    std::vector<unsigned char> h(nreads);
    CUCK(cudaMemcpy(h.data(), a.reads, nreads, cudaMemcpyDeviceToHost));
    std::string rp = std::string(resPath) + ".reads";
    FILE* rf = fopen(rp.c_str(), "wb");
    if (!rf || fwrite(h.data(), 1, h.size(), rf) != h.size()) finish(1, "cannot write %s", rp.c_str());
    fclose(rf);
    fprintf(gRes, "reads %llu\n", nreads);
  }

  calibrate(progress, s);

  // Every rank's puts are complete at their targets once all flushed.
  fileBarrier(idfile, "flushed", rank, nranks, barrierS);
  unsigned long long* out = nullptr;
  int nout = (nsig > 0 ? nsig : 0) + (ncnt > 0 ? ncnt : 0);
  CUCK(cudaHostAlloc((void**)&out, sizeof(unsigned long long) * (nout + 1), cudaHostAllocMapped));
  readout<<<1, 1, 0, s>>>(dc, nsig, ncnt, out);
  CUCK(cudaGetLastError());
  CUCK(cudaStreamSynchronize(s));
  for (int i = 0; i < nsig; i++) fprintf(gRes, "signal %d %llu\n", i, out[i]);
  for (int i = 0; i < ncnt; i++) fprintf(gRes, "counter %d %llu\n", i, out[nsig + i]);
  for (size_t w = 0; w < wins.size(); w++) {
    std::vector<unsigned char> h(wins[w].bytes);
    CUCK(cudaMemcpy(h.data(), bufs[w], h.size(), cudaMemcpyDeviceToHost));
    fprintf(gRes, "win %zu %016llx\n", w, fnv64(h.data(), h.size()));
  }
  ncclResult_t ae = ncclSuccess;
  ncclCommGetAsyncError(comm, &ae);
  fprintf(gRes, "async %d\n", (int)ae);
  fflush(gRes);

  fileBarrier(idfile, "teardown", rank, nranks, barrierS);
  NCK(ncclDevCommDestroy(comm, &dc));
  for (size_t w = 0; w < wins.size(); w++) NCK(ncclCommWindowDeregister(comm, hwins[w]));
  for (size_t w = 0; w < wins.size(); w++) NCK(ncclMemFree(bufs[w]));
  NCK(ncclCommFinalize(comm));
  NCK(ncclCommDestroy(comm));
  finish(0, "ok");
}

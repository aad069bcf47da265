// ginhw: ginsim's NET + proxy-type GIN plugin for NCCL 2.28.9 (one shared
// library, libnccl-net-ginhw.so, exporting ncclNetPlugin_v11 and
// ncclGinPlugin_v11).
//
// The NET part is a host-type stub that reports one device, so that NCCL
// assigns this library to the communicator and takes its GIN table from it;
// NET connect/accept fail with a message (GIN needs none of them).
//
// The GIN part is an emulated network between processes of one machine
// (NCCL_HOSTID tells NCCL they are different hosts). Each collComm maps one
// shared-memory segment holding, for every ordered rank pair, a ring of
// message slots with a payload area: the "wire". A put is carried as its two
// DMAs would be on a NIC: the sender copies the source bytes GPU -> slot on a
// non-blocking stream and publishes the slot once the copy is done; the
// target's own plugin instance, from NCCL's progress thread, copies slot ->
// its registered GPU memory on a non-blocking stream and, on the same stream
// after that copy, applies the remote signal with a one-thread atomic-add
// kernel, then acknowledges. test() reports a request done once every slot of
// it is acknowledged (remote completion, like an IB CQE after the ACK).
// Optionally every message is delayed by an emulated link (latency plus
// serialisation at a bit rate), or timed by ginsim's NIC and network models
// run by `ginsim validate fabric-serve` (GINHW_FABRIC="model:SOCKET"): each
// message becomes a request on that unix datagram socket, sent without
// waiting; the slot is published "pending" and the sender's progress calls
// store the model's delivery instant into it when the reply comes; the
// target delivers at that instant (or when the reply arrives, if later).
//
// Environment:
//   GINHW_FABRIC   "zero" (default), "lat_ns=N,gbps=G[,name=S]" or
//                  "model:SOCKET"
//   GINHW_TRACE    file prefix: each process appends its trace to PREFIX.<pid>
//   GINHW_SHM_DIR  directory of the segments (default /dev/shm)
//   GINHW_TIMEOUT_S bound of every wait in the plugin (default 30)
//   GINHW_INLINE   "recover" (default) or "error": what to do with NCCL
//                  2.28.9's putValue inline source that lies outside the
//                  registered inline buffer (NCCL's bug, see the doc)
//
// The ABI declarations below are ours, written from the documented v11
// layout (field order and types as NCCL 2.28.9 reads them).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

// ------------------------------------------------------------------ ABI (v11)
typedef int gh_res;  // ncclResult_t
enum { GH_OK = 0, GH_SYSTEM = 2, GH_INTERNAL = 3, GH_INVALID_ARG = 4, GH_INVALID_USAGE = 5, GH_REMOTE = 6 };
enum { GH_PTR_HOST = 1, GH_PTR_CUDA = 2 };
enum { GH_DEV_HOST = 0, GH_DEV_GIN_PROXY = 2 };
enum { GH_SIG_INC = 1, GH_SIG_ADD = 2 };
#define GH_HANDLE_BYTES 128

typedef void (*gh_logger)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);
typedef gh_res (*gh_profiler)(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData);

typedef struct { int count; int devs[4]; } gh_vprops;
typedef struct { int trafficClass; } gh_commcfg;

typedef struct {  // network device properties, 112 bytes
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speedMbps;
  int port;
  float latencyUs;
  int maxComms;
  int maxRecvs;
  int deviceType;
  int deviceVersion;
  gh_vprops vprops;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
} gh_props;

typedef struct {
  int deviceType;
  int deviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} gh_devhandle;

typedef struct {  // NET table, 176 bytes
  const char* name;
  gh_res (*init)(void** ctx, uint64_t commId, gh_commcfg* cfg, gh_logger log, gh_profiler prof);
  gh_res (*devices)(int* n);
  gh_res (*getProperties)(int dev, gh_props* p);
  gh_res (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  gh_res (*connect)(void* ctx, int dev, void* handle, void** sendComm, gh_devhandle** devComm);
  gh_res (*accept)(void* listenComm, void** recvComm, gh_devhandle** devComm);
  gh_res (*regMr)(void* comm, void* data, size_t size, int type, void** mh);
  gh_res (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t off, int fd, void** mh);
  gh_res (*deregMr)(void* comm, void* mh);
  gh_res (*isend)(void* c, void* data, size_t size, int tag, void* mh, void* ph, void** req);
  gh_res (*irecv)(void* c, int n, void** data, size_t* sizes, int* tags, void** mh, void** ph, void** req);
  gh_res (*iflush)(void* c, int n, void** data, int* sizes, void** mh, void** req);
  gh_res (*test)(void* req, int* done, int* sizes);
  gh_res (*closeSend)(void* c);
  gh_res (*closeRecv)(void* c);
  gh_res (*closeListen)(void* c);
  gh_res (*getDeviceMr)(void* c, void* mh, void** dmh);
  gh_res (*irecvConsumed)(void* c, int n, void* req);
  gh_res (*makeVDevice)(int* d, gh_vprops* p);
  gh_res (*finalize)(void* ctx);
  gh_res (*setNetAttr)(void* ctx, void* attr);
} gh_net;

typedef struct {  // GIN table, 152 bytes
  const char* name;
  gh_res (*init)(void** ctx, uint64_t commId, gh_logger log);
  gh_res (*devices)(int* n);
  gh_res (*getProperties)(int dev, gh_props* p);
  gh_res (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  gh_res (*connect)(void* ctx, void* handles[], int nranks, int rank, void* listenComm, void** collComm);
  gh_res (*createContext)(void* coll, int nSignals, int nCounters, void** ginCtx, gh_devhandle** dh);
  gh_res (*regMrSym)(void* coll, void* data, size_t size, int type, uint64_t flags, void** mh, void** gh);
  gh_res (*regMrSymDmaBuf)(void* coll, void* data, size_t size, int type, uint64_t off, int fd, uint64_t flags, void** mh,
                           void** gh);
  gh_res (*deregMrSym)(void* coll, void* mh);
  gh_res (*destroyContext)(void* ginCtx);
  gh_res (*closeColl)(void* coll);
  gh_res (*closeListen)(void* listenComm);
  gh_res (*iput)(void* coll, uint64_t srcOff, void* srcMh, size_t size, uint64_t dstOff, void* dstMh, uint32_t rank,
                 void** req);
  gh_res (*iputSignal)(void* coll, uint64_t srcOff, void* srcMh, size_t size, uint64_t dstOff, void* dstMh, uint32_t rank,
                       uint64_t sigOff, void* sigMh, uint64_t sigVal, uint32_t sigOp, void** req);
  gh_res (*test)(void* coll, void* req, int* done);
  gh_res (*ginProgress)(void* coll);
  gh_res (*queryLastError)(void* ginCtx, bool* hasError);
  gh_res (*finalize)(void* ctx);
} gh_gin;

_Static_assert(sizeof(gh_props) == 112, "properties layout");
_Static_assert(sizeof(gh_net) == 176, "NET table layout");
_Static_assert(sizeof(gh_gin) == 152, "GIN table layout");

// ------------------------------------------------------------------ logging, clocks
static int64_t nowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);  // comparable with the GPU's %globaltimer after calibration
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static pthread_mutex_t logMu = PTHREAD_MUTEX_INITIALIZER;
static void say(const char* fmt, ...) {
  pthread_mutex_lock(&logMu);
  fprintf(stderr, "[ginhw pid %d] ", (int)getpid());
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stderr);
  pthread_mutex_unlock(&logMu);
}

static FILE* traceF;
static void trace(const char* fmt, ...) {
  if (!traceF) return;
  pthread_mutex_lock(&logMu);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(traceF, fmt, ap);
  va_end(ap);
  fputc('\n', traceF);
  pthread_mutex_unlock(&logMu);
}

// ------------------------------------------------------------------ configuration
static struct {
  int64_t latNs;
  double gbps;  // 0: infinite
  char name[64];
  int model;             // GINHW_FABRIC=model:SOCKET
  char sockPath[108];    // the fabric server's socket (sun_path)
  int timeoutS;
  int inlineRecover;
  char shmDir[256];
} cfg;

static pthread_once_t cfgOnce = PTHREAD_ONCE_INIT;
static void loadConfig(void) {
  cfg.timeoutS = 30;
  cfg.inlineRecover = 1;
  snprintf(cfg.name, sizeof cfg.name, "zero");
  snprintf(cfg.shmDir, sizeof cfg.shmDir, "/dev/shm");
  const char* e;
  if ((e = getenv("GINHW_TIMEOUT_S")) && atoi(e) > 0) cfg.timeoutS = atoi(e);
  if ((e = getenv("GINHW_INLINE")) && strcmp(e, "error") == 0) cfg.inlineRecover = 0;
  if ((e = getenv("GINHW_SHM_DIR")) && *e) snprintf(cfg.shmDir, sizeof cfg.shmDir, "%s", e);
  if ((e = getenv("GINHW_FABRIC")) && strncmp(e, "model:", 6) == 0) {
    cfg.model = 1;
    snprintf(cfg.name, sizeof cfg.name, "model");
    if (strlen(e + 6) == 0 || strlen(e + 6) >= sizeof cfg.sockPath) {
      say("GINHW_FABRIC: model socket path '%s' empty or longer than %zu bytes", e + 6, sizeof cfg.sockPath - 1);
      cfg.sockPath[0] = 0;
    } else {
      snprintf(cfg.sockPath, sizeof cfg.sockPath, "%s", e + 6);
    }
  } else if ((e = getenv("GINHW_FABRIC")) && *e && strcmp(e, "zero") != 0) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", e);
    char* save = NULL;
    for (char* kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
      if (strncmp(kv, "lat_ns=", 7) == 0) cfg.latNs = atoll(kv + 7);
      else if (strncmp(kv, "gbps=", 5) == 0) cfg.gbps = atof(kv + 5);
      else if (strncmp(kv, "name=", 5) == 0) snprintf(cfg.name, sizeof cfg.name, "%s", kv + 5);
      else say("GINHW_FABRIC: unknown item '%s' ignored (want lat_ns=N,gbps=G,name=S)", kv);
    }
    if (cfg.latNs < 0 || cfg.gbps < 0) {
      say("GINHW_FABRIC: negative latency or rate; using zero delay");
      cfg.latNs = 0, cfg.gbps = 0;
    }
    if (strcmp(cfg.name, "zero") == 0) snprintf(cfg.name, sizeof cfg.name, "custom");
  }
  if ((e = getenv("GINHW_TRACE")) && *e) {
    char path[512];
    snprintf(path, sizeof path, "%s.%d", e, (int)getpid());
    traceF = fopen(path, "a");
    if (!traceF) say("GINHW_TRACE: cannot open %s: %s", path, strerror(errno));
  }
  if (cfg.model)
    say("fabric model: every message timed by the fabric server at %s, waits bounded by %d s", cfg.sockPath, cfg.timeoutS);
  else
    say("fabric %s: latency %lld ns, rate %.3f Gbit/s (0: unlimited), waits bounded by %d s", cfg.name,
        (long long)cfg.latNs, cfg.gbps, cfg.timeoutS);
  trace("fabric %s %lld %.6f", cfg.name, (long long)cfg.latNs, cfg.gbps);
}

// ------------------------------------------------------------------ CUDA driver API, loaded at run time
typedef int cu_res;
typedef unsigned long long cu_ptr;
typedef void* cu_obj;
static struct {
  cu_res (*init)(unsigned);
  cu_res (*getErrorString)(cu_res, const char**);
  cu_res (*ptrAttr)(void*, int, cu_ptr);
  cu_res (*devGet)(int*, int);
  cu_res (*primaryRetain)(cu_obj*, int);
  cu_res (*ctxSetCurrent)(cu_obj);
  cu_res (*streamCreate)(cu_obj*, unsigned);
  cu_res (*eventCreate)(cu_obj*, unsigned);
  cu_res (*eventRecord)(cu_obj, cu_obj);
  cu_res (*eventQuery)(cu_obj);
  cu_res (*dtoh)(void*, cu_ptr, size_t, cu_obj);
  cu_res (*htod)(cu_ptr, const void*, size_t, cu_obj);
  cu_res (*hostRegister)(void*, size_t, unsigned);
  cu_res (*hostUnregister)(void*);
  cu_res (*moduleLoadData)(cu_obj*, const void*);
  cu_res (*moduleGetFunction)(cu_obj*, cu_obj, const char*);
  cu_res (*launch)(cu_obj, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, cu_obj, void**, void**);
} cu;
enum { CU_NOT_READY = 600, CU_PTR_ATTR_DEVICE_ORDINAL = 9, CU_STREAM_NON_BLOCKING = 1, CU_EVENT_DISABLE_TIMING = 2,
       CU_HOSTREG_PORTABLE = 1 };

static int cuLoaded = -1;  // -1 not tried, 0 failed, 1 loaded
static char cuLoadErr[256];
static pthread_mutex_t cuMu = PTHREAD_MUTEX_INITIALIZER;

static int loadCuda(void) {
  pthread_mutex_lock(&cuMu);
  if (cuLoaded < 0) {
    cuLoaded = 0;
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      snprintf(cuLoadErr, sizeof cuLoadErr, "dlopen libcuda.so.1: %s", dlerror());
    } else {
      struct { void** slot; const char* sym; } syms[] = {
        {(void**)&cu.init, "cuInit"}, {(void**)&cu.getErrorString, "cuGetErrorString"},
        {(void**)&cu.ptrAttr, "cuPointerGetAttribute"}, {(void**)&cu.devGet, "cuDeviceGet"},
        {(void**)&cu.primaryRetain, "cuDevicePrimaryCtxRetain"}, {(void**)&cu.ctxSetCurrent, "cuCtxSetCurrent"},
        {(void**)&cu.streamCreate, "cuStreamCreate"}, {(void**)&cu.eventCreate, "cuEventCreate"},
        {(void**)&cu.eventRecord, "cuEventRecord"}, {(void**)&cu.eventQuery, "cuEventQuery"},
        {(void**)&cu.dtoh, "cuMemcpyDtoHAsync_v2"}, {(void**)&cu.htod, "cuMemcpyHtoDAsync_v2"},
        {(void**)&cu.hostRegister, "cuMemHostRegister_v2"}, {(void**)&cu.hostUnregister, "cuMemHostUnregister"},
        {(void**)&cu.moduleLoadData, "cuModuleLoadData"}, {(void**)&cu.moduleGetFunction, "cuModuleGetFunction"},
        {(void**)&cu.launch, "cuLaunchKernel"},
      };
      int ok = 1;
      for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(h, syms[i].sym);
        if (!*syms[i].slot) {
          snprintf(cuLoadErr, sizeof cuLoadErr, "libcuda.so.1 has no %s", syms[i].sym);
          ok = 0;
          break;
        }
      }
      if (ok) {
        cu_res r = cu.init(0);
        if (r != 0) snprintf(cuLoadErr, sizeof cuLoadErr, "cuInit: error %d", r);
        else cuLoaded = 1;
      }
    }
    if (!cuLoaded) say("CUDA driver API unavailable: %s", cuLoadErr);
  }
  int ok = cuLoaded;
  pthread_mutex_unlock(&cuMu);
  return ok;
}

static const char* cuErr(cu_res r) {
  const char* s = NULL;
  if (cu.getErrorString && cu.getErrorString(r, &s) == 0 && s) return s;
  return "unknown CUDA error";
}

// CK checks a driver call; on failure it logs and returns the given result.
#define CK(call, ret)                                                                      \
  do {                                                                                     \
    cu_res r_ = (call);                                                                    \
    if (r_ != 0) {                                                                         \
      say("%s:%d: %s failed: %d (%s)", __func__, __LINE__, #call, r_, cuErr(r_));          \
      return ret;                                                                          \
    }                                                                                      \
  } while (0)

// The signal kernel: one thread adds a value to a 64-bit word in GPU memory.
static const char sigaddPTX[] =
    ".version 7.8\n"
    ".target sm_70\n"
    ".address_size 64\n"
    ".visible .entry ginhw_sigadd(.param .u64 p, .param .u64 v)\n"
    "{\n"
    "  .reg .b64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [p];\n"
    "  ld.param.u64 %rd2, [v];\n"
    "  cvta.to.global.u64 %rd1, %rd1;\n"
    "  atom.global.sys.add.u64 %rd3, [%rd1], %rd2;\n"
    "  ret;\n"
    "}\n";

static struct {
  int dev;  // -1 until the first CUDA registration names it
  cu_obj ctx;
  cu_obj sigadd;
} gpu = {.dev = -1};
static __thread cu_obj curCtx;

// useGPU makes the device's primary context current on the calling thread
// (NCCL's progress thread has none). Returns 0 on success.
static int useGPU(void) {
  if (gpu.dev < 0) return -1;
  if (curCtx != gpu.ctx) {
    CK(cu.ctxSetCurrent(gpu.ctx), -1);
    curCtx = gpu.ctx;
  }
  return 0;
}

static int setupGPU(void* devPtr) {
  if (!loadCuda()) return -1;
  pthread_mutex_lock(&cuMu);
  int rc = 0;
  if (gpu.dev < 0) {
    int ord = -1;
    cu_res r = cu.ptrAttr(&ord, CU_PTR_ATTR_DEVICE_ORDINAL, (cu_ptr)(uintptr_t)devPtr);
    cu_obj dev = 0, ctx = 0, mod = 0, fn = 0;
    int d = 0;
    if (r == 0) r = cu.devGet(&d, ord);
    if (r == 0) r = cu.primaryRetain(&ctx, d);
    if (r == 0) r = cu.ctxSetCurrent(ctx);
    if (r == 0) r = cu.moduleLoadData(&mod, sigaddPTX);
    if (r == 0) r = cu.moduleGetFunction(&fn, mod, "ginhw_sigadd");
    (void)dev;
    if (r != 0) {
      say("setting up the GPU of registered pointer %p failed: %d (%s)", devPtr, r, cuErr(r));
      rc = -1;
    } else {
      gpu.ctx = ctx, gpu.sigadd = fn, gpu.dev = ord;
      curCtx = ctx;
      say("using GPU %d (primary context), signal kernel loaded", ord);
    }
  }
  pthread_mutex_unlock(&cuMu);
  return rc;
}

// ------------------------------------------------------------------ the wire (shared memory)
#define GH_MAX_RANKS 8
#define GH_SLOTS 32
#define GH_SLOT_BYTES (64 << 10)
#define GH_MAGIC 0x67696e6877697265ull  // "ginhwire"

enum { MSG_DATA = 1, MSG_SIGNAL = 2 };

typedef struct {
  _Atomic uint64_t pub;  // sequence number published by the sender
  uint32_t flags;        // MSG_*
  uint32_t dstMr;        // registration sequence number (symmetric) of the destination
  uint32_t sigMr;
  uint32_t sigOp;
  uint64_t size, dstOff, sigOff, sigVal;
  int64_t postedAt, deliverAt;  // deliverAt: GH_PENDING until the fabric server's reply (model mode)
  uint64_t reqId;
} gh_slot;

#define GH_PENDING INT64_MAX

typedef struct {
  gh_slot slot[GH_SLOTS];
  _Atomic uint64_t acked;  // messages acknowledged by the target, in order
  _Atomic uint32_t error;  // target's delivery error (an errno-like code), 0: none
  char errMsg[200];
} gh_ring;

typedef struct {
  _Atomic uint64_t magic;  // written last by the creator
  int32_t nranks;
  _Atomic int32_t pid[GH_MAX_RANKS];  // 0 until the rank attached
} gh_seghdr;

static size_t ringsOff(void) { return (sizeof(gh_seghdr) + 4095) & ~(size_t)4095; }
static size_t dataOff(int n) { return (ringsOff() + (size_t)n * n * sizeof(gh_ring) + 4095) & ~(size_t)4095; }
static size_t segBytes(int n) { return dataOff(n) + (size_t)n * n * GH_SLOTS * GH_SLOT_BYTES; }

// ------------------------------------------------------------------ plugin objects
#define MAGIC_INST 0x494e5354u
#define MAGIC_LISTEN 0x4c53544eu
#define MAGIC_COLL 0x434f4c4cu
#define MAGIC_MR 0x4d524547u
#define MAGIC_REQ 0x52455155u

typedef struct {
  uint32_t magic;
  int32_t pid;
  uint32_t listenId;
  uint32_t nonce;
  char host[32];
} gh_handle;  // what listen() writes into NCCL's 128-byte handle

typedef struct { uint32_t magic; int id; } gh_inst;
typedef struct { uint32_t magic; gh_handle h; } gh_listen;

#define GH_MAX_MRS 64

typedef struct gh_mr {
  uint32_t magic;
  uint32_t seq;
  struct gh_coll* coll;
  char* base;
  size_t size;
  int type;
  int live;
} gh_mr;

typedef struct gh_req {
  uint32_t magic;
  uint64_t id;
  int peer;
  uint64_t lastSeq;  // done once the ring to peer acknowledged it
  int staged;        // chunks still to reserve (0 once all are in the ring)
  // what is left to send
  uint64_t srcOff, dstOff, left;
  gh_mr *src, *dst, *sig;
  uint64_t sigOff, sigVal;
  uint32_t sigOp;
  int hasSig;
  int64_t postedAt;
  struct gh_req* next;  // pending-reservation queue per peer
} gh_req;

typedef struct {
  // sender side, toward one peer
  uint64_t nextSeq;     // next sequence to reserve (starts at 1)
  uint64_t pubSeq;      // last published
  int64_t linkBusy;     // emulated link's serialisation horizon
  uint64_t sentSeq;     // model mode: last sequence sent to the fabric server
  int64_t modelAt[GH_SLOTS];  // model mode: a reply that came before its slot was published
  cu_obj stream;        // staging copies GPU -> slot
  cu_obj ev[GH_SLOTS];  // staging copy done
  int needEv[GH_SLOTS];
  gh_slot stage[GH_SLOTS];  // headers being staged (published once the copy is done)
  gh_req *qHead, *qTail;    // requests waiting for slots
  // receiver side, from that peer
  uint64_t rxNext;  // next sequence to start delivering
  uint64_t rxDone;  // last acknowledged
  cu_obj rxStream;
  cu_obj rxEv[GH_SLOTS];
} gh_peer;

typedef struct gh_coll {
  uint32_t magic;
  int id, rank, nranks;
  char path[300];
  char* seg;
  size_t segSize;
  int registered;  // segment pinned for CUDA copies
  gh_mr* mrs[GH_MAX_MRS];
  uint32_t nMrs;
  gh_peer peer[GH_MAX_RANKS];
  int error;  // sticky: the next iput reports it
  char errMsg[256];
  int64_t lastLiveCheck;
  uint64_t posts, deliveries;
} gh_coll;

static _Atomic int instCount, listenCount, collCount;
static _Atomic uint64_t reqCount;

static gh_ring* ringOf(gh_coll* c, int from, int to) {
  return (gh_ring*)(c->seg + ringsOff() + ((size_t)from * c->nranks + to) * sizeof(gh_ring));
}
static char* dataOf(gh_coll* c, int from, int to, int slot) {
  return c->seg + dataOff(c->nranks) + (((size_t)from * c->nranks + to) * GH_SLOTS + slot) * GH_SLOT_BYTES;
}
static gh_seghdr* hdrOf(gh_coll* c) { return (gh_seghdr*)c->seg; }

static gh_res fail(gh_coll* c, gh_res code, const char* fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  say("error: %s", msg);
  trace("error %s", msg);
  if (c && !c->error) {
    c->error = code;
    snprintf(c->errMsg, sizeof c->errMsg, "%s", msg);
  }
  return code;
}

// ------------------------------------------------------------------ model fabric (GINHW_FABRIC=model:SOCKET)
// One unix datagram socket per process, connected to the fabric server
// (`ginsim validate fabric-serve`); the wire format is the server's
// (validate/hw/netemu/wire.go): fixed-size little-endian datagrams. A
// request names its message by the collComm's id (top 16 bits) and the
// ring sequence; the reply carries the model's delivery instant in this
// plugin's clock (nowNs), which every process of the machine shares.
#define FAB_REQ_BYTES 40
#define FAB_REP_BYTES 32
#define FAB_REQ_MAGIC 0x51524647u  // "GFRQ"
#define FAB_REP_MAGIC 0x50524647u  // "GFRP"
#define FAB_MAX_COLLS 256
static pthread_mutex_t fabMu = PTHREAD_MUTEX_INITIALIZER;  // the socket's reader, publish vs. replies
static int fabFd = -1;
static struct gh_coll* fabColls[FAB_MAX_COLLS];

static void le16(uint8_t* b, uint16_t v) { b[0] = (uint8_t)v, b[1] = (uint8_t)(v >> 8); }
static void le32(uint8_t* b, uint32_t v) { for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i)); }
static void le64(uint8_t* b, uint64_t v) { for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i)); }
static uint16_t rd16(const uint8_t* b) { return (uint16_t)(b[0] | b[1] << 8); }
static uint32_t rd32(const uint8_t* b) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | b[i];
  return v;
}
static uint64_t rd64(const uint8_t* b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
  return v;
}

// fabOpen connects this process to the fabric server (once) and records c
// so that replies find it.
static gh_res fabOpen(struct gh_coll* c, int id) {
  if (!cfg.sockPath[0]) return fail(NULL, GH_INVALID_ARG, "GINHW_FABRIC=model: needs the fabric server's socket path");
  if (id < 0 || id >= FAB_MAX_COLLS) return fail(NULL, GH_INTERNAL, "model fabric: more than %d collComms", FAB_MAX_COLLS);
  pthread_mutex_lock(&fabMu);
  if (fabFd < 0) {
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr*)&a, sizeof(sa_family_t)) != 0) {  // autobind: an abstract name to reply to
      int e = errno;
      if (fd >= 0) close(fd);
      pthread_mutex_unlock(&fabMu);
      return fail(NULL, GH_SYSTEM, "model fabric: socket: %s", strerror(e));
    }
    snprintf(a.sun_path, sizeof a.sun_path, "%s", cfg.sockPath);
    if (connect(fd, (struct sockaddr*)&a, sizeof a) != 0) {
      int e = errno;
      close(fd);
      pthread_mutex_unlock(&fabMu);
      return fail(NULL, GH_SYSTEM,
                  "model fabric: connect to the fabric server at %s: %s (is `ginsim validate fabric-serve --socket %s` running?)",
                  cfg.sockPath, strerror(e), cfg.sockPath);
    }
    fabFd = fd;
  }
  fabColls[id] = c;
  pthread_mutex_unlock(&fabMu);
  return GH_OK;
}

static gh_coll* asColl(void* p) {
  gh_coll* c = (gh_coll*)p;
  return (c && c->magic == MAGIC_COLL) ? c : NULL;
}
static gh_mr* asMr(gh_coll* c, void* p) {
  gh_mr* m = (gh_mr*)p;
  return (m && m->magic == MAGIC_MR && m->coll == c && m->live) ? m : NULL;
}

// ------------------------------------------------------------------ NET stub
static int netCtx, netListen;
static gh_res netInit(void** ctx, uint64_t commId, gh_commcfg* c, gh_logger l, gh_profiler p) {
  (void)commId, (void)c, (void)l, (void)p;
  pthread_once(&cfgOnce, loadConfig);
  *ctx = &netCtx;
  return GH_OK;
}
static gh_res netDevices(int* n) {
  *n = 1;
  return GH_OK;
}
static void fillProps(gh_props* p, int dev, int type, int maxRecvs, const char* name) {
  memset(p, 0, sizeof *p);
  p->name = (char*)name;
  p->pciPath = NULL;  // NCCL attaches the device under the CPU
  p->guid = 0x67696e6877ull + (uint64_t)dev;
  p->ptrSupport = GH_PTR_HOST | GH_PTR_CUDA;  // no DMA-BUF: regMrSymDmaBuf is never called
  p->speedMbps = cfg.gbps > 0 ? (int)(cfg.gbps * 1000) : 400000;
  p->port = 1;
  p->latencyUs = (float)cfg.latNs / 1000.0f;
  p->maxComms = 65536;
  p->maxRecvs = maxRecvs;
  p->deviceType = type;
  p->vprops.count = 1;
  p->vprops.devs[0] = dev;
  p->maxP2pBytes = 1ull << 30;
  p->maxCollBytes = 1ull << 30;
  p->maxMultiRequestSize = 1;
}
static gh_res netGetProperties(int dev, gh_props* p) {
  pthread_once(&cfgOnce, loadConfig);
  fillProps(p, dev, GH_DEV_HOST, 1, "ginhw0");
  return GH_OK;
}
static gh_res netListenFn(void* ctx, int dev, void* handle, void** lc) {
  (void)ctx, (void)dev;
  memset(handle, 0, GH_HANDLE_BYTES);
  *lc = &netListen;
  return GH_OK;
}
static gh_res netConnect(void* ctx, int dev, void* handle, void** sc, gh_devhandle** dc) {
  (void)ctx, (void)dev, (void)handle, (void)dc;
  *sc = NULL;
  say("NET connect: ginhw carries GIN only; host-side collectives and P2P between NCCL_HOSTID hosts are not supported");
  return GH_INTERNAL;
}
static gh_res netAccept(void* lc, void** rc, gh_devhandle** dc) {
  (void)lc, (void)dc;
  *rc = NULL;
  say("NET accept: ginhw carries GIN only; host-side collectives and P2P between NCCL_HOSTID hosts are not supported");
  return GH_INTERNAL;
}
static gh_res netRegMr(void* c, void* d, size_t s, int t, void** mh) {
  (void)c, (void)d, (void)s, (void)t;
  *mh = NULL;
  return GH_INTERNAL;
}
static gh_res netDeregMr(void* c, void* mh) {
  (void)c, (void)mh;
  return GH_OK;
}
static gh_res netIsend(void* c, void* d, size_t s, int tag, void* mh, void* ph, void** req) {
  (void)c, (void)d, (void)s, (void)tag, (void)mh, (void)ph;
  *req = NULL;
  return GH_INTERNAL;
}
static gh_res netIrecv(void* c, int n, void** d, size_t* s, int* t, void** mh, void** ph, void** req) {
  (void)c, (void)n, (void)d, (void)s, (void)t, (void)mh, (void)ph;
  *req = NULL;
  return GH_INTERNAL;
}
static gh_res netTest(void* req, int* done, int* sizes) {
  (void)req, (void)sizes;
  *done = 0;
  return GH_INTERNAL;
}
static gh_res netClose(void* c) {
  (void)c;
  return GH_OK;
}
static gh_res netFinalize(void* ctx) {
  (void)ctx;
  return GH_OK;
}

__attribute__((visibility("default"))) const gh_net ncclNetPlugin_v11 = {
    .name = "ginhw",
    .init = netInit,
    .devices = netDevices,
    .getProperties = netGetProperties,
    .listen = netListenFn,
    .connect = netConnect,
    .accept = netAccept,
    .regMr = netRegMr,
    .deregMr = netDeregMr,
    .isend = netIsend,
    .irecv = netIrecv,
    .test = netTest,
    .closeSend = netClose,
    .closeRecv = netClose,
    .closeListen = netClose,
    .finalize = netFinalize,
};

// ------------------------------------------------------------------ GIN: setup
static gh_res ginInit(void** ctx, uint64_t commId, gh_logger log) {
  (void)commId, (void)log;
  pthread_once(&cfgOnce, loadConfig);
  gh_inst* g = calloc(1, sizeof *g);
  if (!g) return GH_SYSTEM;
  g->magic = MAGIC_INST;
  g->id = atomic_fetch_add(&instCount, 1);
  *ctx = g;
  return GH_OK;
}
static gh_res ginDevices(int* n) {
  *n = 1;
  return GH_OK;
}
static gh_res ginGetProperties(int dev, gh_props* p) {
  pthread_once(&cfgOnce, loadConfig);
  // dev is NCCL's topology id of the NET device; the GIN device is the same one.
  fillProps(p, dev & 0xff, GH_DEV_GIN_PROXY, 8, "ginhw-gin");
  return GH_OK;
}
static gh_res ginListen(void* ctx, int dev, void* handle, void** lc) {
  (void)ctx, (void)dev;
  gh_listen* l = calloc(1, sizeof *l);
  if (!l) return GH_SYSTEM;
  l->magic = MAGIC_LISTEN;
  l->h.magic = MAGIC_LISTEN;
  l->h.pid = getpid();
  l->h.listenId = (uint32_t)atomic_fetch_add(&listenCount, 1);
  l->h.nonce = (uint32_t)(nowNs() ^ ((int64_t)getpid() << 16));
  const char* host = getenv("NCCL_HOSTID");
  snprintf(l->h.host, sizeof l->h.host, "%s", host ? host : "-");
  memset(handle, 0, GH_HANDLE_BYTES);
  memcpy(handle, &l->h, sizeof l->h);
  *lc = l;
  return GH_OK;
}

// pidAlive says whether a peer process still runs: it exists and is not a
// zombie (a killed peer whose parent has not reaped it yet).
static int pidAlive(int pid) {
  if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH)) return 0;
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (!f) return 1;  // no /proc: trust kill()
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char* st = strrchr(buf, ')');  // the state follows the command name
  return !(st && st[1] == ' ' && (st[2] == 'Z' || st[2] == 'X'));
}

// ginConnect maps the collComm's segment (rank 0 creates it, named after rank
// 0's listen handle) and waits, bounded, until every rank attached.
static gh_res ginConnect(void* ctx, void* handles[], int nranks, int rank, void* lc, void** collComm) {
  (void)ctx, (void)lc;  // ctx may be NULL for a second communicator (2.28.9)
  *collComm = NULL;
  if (nranks < 1 || nranks > GH_MAX_RANKS || rank < 0 || rank >= nranks)
    return fail(NULL, GH_INVALID_ARG, "connect: rank %d of %d (ginhw supports up to %d ranks)", rank, nranks, GH_MAX_RANKS);
  for (int r = 0; r < nranks; r++) {
    gh_handle* h = (gh_handle*)handles[r];
    if (!h || h->magic != MAGIC_LISTEN)
      return fail(NULL, GH_INVALID_ARG, "connect: rank %d's connection handle is not a ginhw handle", r);
  }
  gh_handle* h0 = (gh_handle*)handles[0];
  gh_coll* c = calloc(1, sizeof *c);
  if (!c) return GH_SYSTEM;
  c->magic = MAGIC_COLL;
  c->id = atomic_fetch_add(&collCount, 1);
  c->rank = rank, c->nranks = nranks;
  snprintf(c->path, sizeof c->path, "%s/ginhw-%d-%u-%u", cfg.shmDir, (int)h0->pid, h0->nonce, h0->listenId);
  c->segSize = segBytes(nranks);
  int fd = -1;
  int64_t deadline = nowNs() + (int64_t)cfg.timeoutS * 1000000000;
  if (rank == 0) {
    fd = open(c->path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) return fail(NULL, GH_SYSTEM, "connect: create %s: %s", c->path, strerror(errno));
    if (ftruncate(fd, (off_t)c->segSize) != 0) {
      close(fd);
      return fail(NULL, GH_SYSTEM, "connect: size %s to %zu bytes: %s (is %s large enough?)", c->path, c->segSize,
                  strerror(errno), cfg.shmDir);
    }
  } else {
    while ((fd = open(c->path, O_RDWR)) < 0) {
      if (nowNs() > deadline)
        return fail(NULL, GH_REMOTE, "connect: rank 0 (pid %d) did not create %s within %d s", (int)h0->pid, c->path,
                    cfg.timeoutS);
      if (!pidAlive(h0->pid)) return fail(NULL, GH_REMOTE, "connect: rank 0 (pid %d) is gone", (int)h0->pid);
      usleep(1000);
    }
    struct stat st;
    while (fstat(fd, &st) == 0 && (size_t)st.st_size < c->segSize) {
      if (nowNs() > deadline) {
        close(fd);
        return fail(NULL, GH_REMOTE, "connect: %s never reached %zu bytes", c->path, c->segSize);
      }
      usleep(1000);
    }
  }
  c->seg = mmap(NULL, c->segSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (c->seg == MAP_FAILED) return fail(NULL, GH_SYSTEM, "connect: map %s: %s", c->path, strerror(errno));
  gh_seghdr* sh = hdrOf(c);
  if (rank == 0) {
    sh->nranks = nranks;
    atomic_store(&sh->magic, GH_MAGIC);
  } else {
    while (atomic_load(&sh->magic) != GH_MAGIC) {
      if (nowNs() > deadline) return fail(NULL, GH_REMOTE, "connect: %s was never initialised by rank 0", c->path);
      usleep(1000);
    }
    if (sh->nranks != nranks) return fail(NULL, GH_INVALID_ARG, "connect: segment for %d ranks, %d expected", sh->nranks, nranks);
  }
  atomic_store(&sh->pid[rank], (int32_t)getpid());
  for (int r = 0; r < nranks; r++) {
    while (atomic_load(&sh->pid[r]) == 0) {
      if (nowNs() > deadline)
        return fail(NULL, GH_REMOTE, "connect: rank %d (pid %d, host %s) did not attach within %d s", r,
                    (int)((gh_handle*)handles[r])->pid, ((gh_handle*)handles[r])->host, cfg.timeoutS);
      usleep(1000);
    }
  }
  for (int p = 0; p < nranks; p++) c->peer[p].nextSeq = 1, c->peer[p].rxNext = 1;
  if (cfg.model) {
    gh_res fr = fabOpen(c, c->id);
    if (fr != GH_OK) return fr;
  }
  say("connect: coll %d rank %d of %d over %s (%zu bytes)", c->id, rank, nranks, c->path, c->segSize);
  trace("connect %d %d %d", c->id, rank, nranks);
  *collComm = c;
  return GH_OK;
}

static gh_res ginCreateContext(void* coll, int ns, int nc, void** gc, gh_devhandle** dh) {
  (void)coll, (void)ns, (void)nc;
  *gc = NULL, *dh = NULL;
  say("createContext: not used by a proxy-type plugin");
  return GH_INTERNAL;
}

// pinSegment registers the segment with CUDA, once the GPU is known.
static gh_res pinSegment(gh_coll* c) {
  if (c->registered) return GH_OK;
  if (useGPU() != 0) return fail(c, GH_INTERNAL, "no GPU set up before the first copy");
  CK(cu.hostRegister(c->seg, c->segSize, CU_HOSTREG_PORTABLE), fail(c, GH_INTERNAL, "cannot pin %s", c->path));
  for (int p = 0; p < c->nranks; p++) {
    gh_peer* pr = &c->peer[p];
    CK(cu.streamCreate(&pr->stream, CU_STREAM_NON_BLOCKING), GH_INTERNAL);
    CK(cu.streamCreate(&pr->rxStream, CU_STREAM_NON_BLOCKING), GH_INTERNAL);
    for (int s = 0; s < GH_SLOTS; s++) {
      CK(cu.eventCreate(&pr->ev[s], CU_EVENT_DISABLE_TIMING), GH_INTERNAL);
      CK(cu.eventCreate(&pr->rxEv[s], CU_EVENT_DISABLE_TIMING), GH_INTERNAL);
    }
  }
  c->registered = 1;
  return GH_OK;
}

static gh_res ginRegMrSym(void* coll, void* data, size_t size, int type, uint64_t flags, void** mh, void** gh) {
  gh_coll* c = asColl(coll);
  *mh = NULL, *gh = NULL;
  if (!c) return fail(NULL, GH_INVALID_ARG, "regMrSym: unknown collComm %p", coll);
  if (c->nMrs >= GH_MAX_MRS) return fail(c, GH_INVALID_USAGE, "regMrSym: more than %d registrations", GH_MAX_MRS);
  if (type != GH_PTR_CUDA && type != GH_PTR_HOST) return fail(c, GH_INVALID_ARG, "regMrSym: pointer type %d", type);
  if (type == GH_PTR_CUDA) {
    if (setupGPU(data) != 0) return fail(c, GH_INTERNAL, "regMrSym: cannot use the GPU of %p", data);
    gh_res r = pinSegment(c);
    if (r != GH_OK) return r;
  }
  gh_mr* m = calloc(1, sizeof *m);
  if (!m) return GH_SYSTEM;
  m->magic = MAGIC_MR, m->seq = c->nMrs, m->coll = c, m->base = data, m->size = size, m->type = type, m->live = 1;
  c->mrs[c->nMrs++] = m;
  trace("reg %d %u %s %zu %llu", c->id, m->seq, type == GH_PTR_CUDA ? "cuda" : "host", size, (unsigned long long)flags);
  *mh = m, *gh = m;  // NCCL passes either back; both are this pointer
  return GH_OK;
}
static gh_res ginRegMrSymDmaBuf(void* coll, void* data, size_t size, int type, uint64_t off, int fd, uint64_t flags,
                                void** mh, void** gh) {
  (void)off, (void)fd;
  return ginRegMrSym(coll, data, size, type, flags, mh, gh);
}
static gh_res ginDeregMrSym(void* coll, void* mh) {
  gh_coll* c = asColl(coll);
  gh_mr* m = asMr(c, mh);
  if (!c || !m) return fail(c, GH_INVALID_ARG, "deregMrSym: unknown registration %p", mh);
  m->live = 0;  // kept: sequence numbers stay symmetric
  return GH_OK;
}
static gh_res ginDestroyContext(void* g) {
  (void)g;
  return GH_OK;
}
static gh_res ginCloseListen(void* lc) {
  gh_listen* l = (gh_listen*)lc;
  if (!l || l->magic != MAGIC_LISTEN) return fail(NULL, GH_INVALID_ARG, "closeListen: unknown listen comm %p", lc);
  l->magic = 0;
  free(l);
  return GH_OK;
}

// ------------------------------------------------------------------ GIN: data path
// fabSend asks the fabric server to time every reserved message of peer
// not yet asked about, in order; a full socket queue leaves the rest for
// the next progress call (iput never waits).
static gh_res fabSend(gh_coll* c, int peer) {
  gh_peer* p = &c->peer[peer];
  if (peer == c->rank) {  // a put to oneself crosses no network: not timed
    p->sentSeq = p->nextSeq - 1;
    return GH_OK;
  }
  while (p->sentSeq + 1 < p->nextSeq) {
    uint64_t seq = p->sentSeq + 1;
    gh_slot* h = &p->stage[(seq - 1) % GH_SLOTS];
    uint8_t b[FAB_REQ_BYTES];
    le32(b, FAB_REQ_MAGIC), le16(b + 4, 1), le16(b + 6, 1);
    le32(b + 8, (uint32_t)c->rank), le32(b + 12, (uint32_t)peer);
    le64(b + 16, (uint64_t)c->id << 48 | seq);
    le64(b + 24, h->size ? h->size : 8);  // a signal alone: an 8-byte write
    le64(b + 32, (uint64_t)h->postedAt);
    if (send(fabFd, b, sizeof b, MSG_DONTWAIT) != (ssize_t)sizeof b) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ENOBUFS) return GH_OK;
      return fail(c, GH_SYSTEM, "model fabric: send to the fabric server at %s: %s", cfg.sockPath, strerror(errno));
    }
    p->sentSeq = seq;
  }
  return GH_OK;
}

// fabPoll reads every reply queued on this process's socket and stores
// each delivery instant into its ring slot (or keeps it for publish, if
// the slot is not published yet). It never waits; another thread already
// reading makes it return at once.
static gh_res fabPoll(gh_coll* c) {
  if (pthread_mutex_trylock(&fabMu) != 0) return GH_OK;
  gh_res res = GH_OK;
  uint8_t b[64];
  for (;;) {
    ssize_t n = recv(fabFd, b, sizeof b, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      res = fail(c, GH_SYSTEM, "model fabric: the fabric server at %s: %s", cfg.sockPath, strerror(errno));
      break;
    }
    if (n != FAB_REP_BYTES || rd32(b) != FAB_REP_MAGIC || rd16(b + 4) != 1) {
      res = fail(c, GH_INTERNAL, "model fabric: a datagram of %zd bytes from %s is not a fabric reply", n, cfg.sockPath);
      break;
    }
    uint16_t status = rd16(b + 6);
    uint32_t src = rd32(b + 8), dst = rd32(b + 12);
    uint64_t wseq = rd64(b + 16);
    int64_t at = (int64_t)rd64(b + 24);
    uint64_t id = wseq >> 48, seq = wseq & ((1ull << 48) - 1);
    gh_coll* o = id < FAB_MAX_COLLS ? fabColls[id] : NULL;
    if (o && o->magic != MAGIC_COLL) continue;  // closed since
    if (!o || src != (uint32_t)o->rank || dst >= (uint32_t)o->nranks || seq == 0 || seq >= o->peer[dst].nextSeq) {
      res = fail(c, GH_INTERNAL, "model fabric: reply from %s for an unknown message (coll %llu, %u -> %u, seq %llu)",
                 cfg.sockPath, (unsigned long long)id, src, dst, (unsigned long long)seq);
      break;
    }
    if (status != 0 || at <= 0) {
      res = fail(o, GH_INTERNAL, "model fabric: the fabric server at %s refused message %llu to rank %u (status %u)",
                 cfg.sockPath, (unsigned long long)seq, dst, status);
      break;
    }
    gh_peer* p = &o->peer[dst];
    int s = (int)((seq - 1) % GH_SLOTS);
    if (seq > p->pubSeq) p->modelAt[s] = at;
    else __atomic_store_n(&ringOf(o, o->rank, (int)dst)->slot[s].deliverAt, at, __ATOMIC_RELEASE);
    trace("fab %d %u %llu %lld %lld", o->id, dst, (unsigned long long)seq, (long long)at, (long long)nowNs());
  }
  pthread_mutex_unlock(&fabMu);
  return res;
}

static void enqueue(gh_peer* p, gh_req* q) {
  q->next = NULL;
  if (p->qTail) p->qTail->next = q;
  else p->qHead = q;
  p->qTail = q;
}

// reserve moves as many chunks of p's queued requests into ring slots as
// the ring has room for: starts their staging copies (GPU sources) or
// fills them (host sources, signal-only). It never waits.
static gh_res reserve(gh_coll* c, int peer) {
  gh_peer* p = &c->peer[peer];
  gh_ring* ring = ringOf(c, c->rank, peer);
  while (p->qHead) {
    gh_req* q = p->qHead;
    uint64_t seq = p->nextSeq;
    if (seq > atomic_load_explicit(&ring->acked, memory_order_acquire) + GH_SLOTS) return GH_OK;  // ring full
    int s = (int)((seq - 1) % GH_SLOTS);
    uint64_t n = q->left < GH_SLOT_BYTES ? q->left : GH_SLOT_BYTES;
    gh_slot* h = &p->stage[s];
    memset(h, 0, sizeof *h);
    h->reqId = q->id;
    h->postedAt = q->postedAt;
    if (n > 0) {
      h->flags |= MSG_DATA;
      h->size = n, h->dstOff = q->dstOff, h->dstMr = q->dst->seq;
      char* slotData = dataOf(c, c->rank, peer, s);
      if (q->src->type == GH_PTR_HOST) {
        memcpy(slotData, q->src->base + q->srcOff, n);
        p->needEv[s] = 0;
      } else {
        if (useGPU() != 0) return fail(c, GH_INTERNAL, "no GPU for a staging copy");
        CK(cu.dtoh(slotData, (cu_ptr)(uintptr_t)(q->src->base + q->srcOff), n, p->stream),
           fail(c, GH_INTERNAL, "staging copy of request %llu", (unsigned long long)q->id));
        CK(cu.eventRecord(p->ev[s], p->stream), fail(c, GH_INTERNAL, "staging event"));
        p->needEv[s] = 1;
      }
      q->srcOff += n, q->dstOff += n, q->left -= n;
    } else {
      p->needEv[s] = 0;
    }
    if (q->left == 0 && q->hasSig) {  // the signal rides on the last chunk
      h->flags |= MSG_SIGNAL;
      h->sigMr = q->sig->seq, h->sigOff = q->sigOff, h->sigVal = q->sigOp == GH_SIG_INC ? 1 : q->sigVal, h->sigOp = q->sigOp;
    }
    p->nextSeq = seq + 1;
    q->lastSeq = seq;
    if (q->left == 0) {
      q->staged = 0;
      p->qHead = q->next;
      if (!p->qHead) p->qTail = NULL;
    }
  }
  return GH_OK;
}

// publish hands staged slots to the target in order, once their staging
// copies are done, stamping each with its emulated delivery time.
static gh_res publish(gh_coll* c, int peer) {
  gh_peer* p = &c->peer[peer];
  gh_ring* ring = ringOf(c, c->rank, peer);
  while (p->pubSeq + 1 < p->nextSeq) {
    uint64_t seq = p->pubSeq + 1;
    int s = (int)((seq - 1) % GH_SLOTS);
    if (p->needEv[s]) {
      if (useGPU() != 0) return GH_INTERNAL;
      cu_res r = cu.eventQuery(p->ev[s]);
      if (r == CU_NOT_READY) return GH_OK;
      if (r != 0) return fail(c, GH_INTERNAL, "staging copy to rank %d failed: %d (%s)", peer, r, cuErr(r));
    }
    gh_slot* h = &p->stage[s];
    int64_t now = nowNs();
    if (cfg.model) {  // the model's instant if its reply came already, else pending (fabPoll fills it in)
      pthread_mutex_lock(&fabMu);
      h->deliverAt = peer == c->rank ? 0 : p->modelAt[s] ? p->modelAt[s] : GH_PENDING;
      p->modelAt[s] = 0;
    } else {
      int64_t start = now > p->linkBusy ? now : p->linkBusy;
      uint64_t wireBytes = h->size + 64;  // payload plus a header's worth
      int64_t ser = cfg.gbps > 0 ? (int64_t)((double)wireBytes * 8.0 / cfg.gbps) : 0;
      p->linkBusy = start + ser;
      h->deliverAt = (cfg.gbps > 0 || cfg.latNs > 0) ? p->linkBusy + cfg.latNs : 0;
    }
    gh_slot* w = &ring->slot[s];
    w->flags = h->flags, w->dstMr = h->dstMr, w->sigMr = h->sigMr, w->sigOp = h->sigOp;
    w->size = h->size, w->dstOff = h->dstOff, w->sigOff = h->sigOff, w->sigVal = h->sigVal;
    w->postedAt = h->postedAt, w->reqId = h->reqId;
    __atomic_store_n(&w->deliverAt, h->deliverAt, __ATOMIC_RELAXED);
    atomic_store_explicit(&w->pub, seq, memory_order_release);
    p->pubSeq = seq;
    if (cfg.model) pthread_mutex_unlock(&fabMu);
    trace("pub %d %d %llu %llu %llu %lld %lld", c->id, peer, (unsigned long long)h->reqId, (unsigned long long)seq,
          (unsigned long long)h->size, (long long)now, (long long)h->deliverAt);
  }
  return GH_OK;
}

static void remoteError(gh_coll* c, gh_ring* ring, int from, const char* fmt, ...) {
  char msg[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(ring->errMsg, sizeof ring->errMsg, "%s", msg);
  atomic_store(&ring->error, 1);
  fail(c, GH_REMOTE, "delivery from rank %d: %s", from, msg);
}

// deliver applies the messages from peer `from` in order: copy into the
// local registration, then (same stream, so strictly after the data) the
// signal add; and acknowledges those whose stream work is done.
static gh_res deliver(gh_coll* c, int from) {
  gh_peer* p = &c->peer[from];
  gh_ring* ring = ringOf(c, from, c->rank);
  if (atomic_load(&ring->error)) return GH_OK;
  int64_t now = 0;
  for (;;) {
    int s = (int)((p->rxNext - 1) % GH_SLOTS);
    gh_slot* w = &ring->slot[s];
    if (atomic_load_explicit(&w->pub, memory_order_acquire) != p->rxNext) break;
    int64_t at = __atomic_load_n(&w->deliverAt, __ATOMIC_ACQUIRE);
    if (at) {
      if (!now) now = nowNs();
      if (at == GH_PENDING) {  // model fabric: the sender has no reply from the server yet
        if (now - w->postedAt > (int64_t)cfg.timeoutS * 1000000000) {
          remoteError(c, ring, from, "message %llu has no delivery time from the fabric server after %d s (is the server at %s alive?)",
                      (unsigned long long)p->rxNext, cfg.timeoutS, cfg.sockPath);
          return GH_OK;
        }
        break;
      }
      if (now < at) break;
    }
    if (!c->registered || useGPU() != 0) {
      remoteError(c, ring, from, "rank %d has no GPU registration to deliver into", c->rank);
      return GH_OK;
    }
    if (w->flags & MSG_DATA) {
      gh_mr* d = w->dstMr < c->nMrs ? c->mrs[w->dstMr] : NULL;
      if (!d || !d->live || d->type != GH_PTR_CUDA || w->dstOff > d->size || w->size > d->size - w->dstOff) {
        remoteError(c, ring, from, "put of %llu bytes at offset %llu of registration #%u outside it (size %zu)",
                    (unsigned long long)w->size, (unsigned long long)w->dstOff, w->dstMr, d ? d->size : (size_t)0);
        return GH_OK;
      }
      CK(cu.htod((cu_ptr)(uintptr_t)(d->base + w->dstOff), dataOf(c, from, c->rank, s), w->size, p->rxStream),
         fail(c, GH_INTERNAL, "delivery copy"));
    }
    if (w->flags & MSG_SIGNAL) {
      gh_mr* g = w->sigMr < c->nMrs ? c->mrs[w->sigMr] : NULL;
      if (!g || !g->live || g->type != GH_PTR_CUDA || w->sigOff % 8 || w->sigOff + 8 > g->size) {
        remoteError(c, ring, from, "signal at offset %llu of registration #%u outside it", (unsigned long long)w->sigOff,
                    w->sigMr);
        return GH_OK;
      }
      cu_ptr addr = (cu_ptr)(uintptr_t)(g->base + w->sigOff);
      uint64_t val = w->sigVal;
      void* args[] = {&addr, &val};
      CK(cu.launch(gpu.sigadd, 1, 1, 1, 1, 1, 1, 0, p->rxStream, args, NULL), fail(c, GH_INTERNAL, "signal kernel"));
    }
    CK(cu.eventRecord(p->rxEv[s], p->rxStream), fail(c, GH_INTERNAL, "delivery event"));
    p->rxNext++;
  }
  while (p->rxDone + 1 < p->rxNext) {
    uint64_t seq = p->rxDone + 1;
    int s = (int)((seq - 1) % GH_SLOTS);
    cu_res r = cu.eventQuery(p->rxEv[s]);
    if (r == CU_NOT_READY) break;
    if (r != 0) return fail(c, GH_INTERNAL, "delivery from rank %d failed: %d (%s)", from, r, cuErr(r));
    gh_slot* w = &ring->slot[s];
    trace("dlv %d %d %llu %llu %llu %u %llu %lld %lld", c->id, from, (unsigned long long)w->reqId, (unsigned long long)seq,
          (unsigned long long)w->size, w->flags, (unsigned long long)(w->sigOff / 8), (long long)w->postedAt,
          (long long)nowNs());
    p->rxDone = seq;
    c->deliveries++;
    atomic_store_explicit(&ring->acked, seq, memory_order_release);
  }
  return GH_OK;
}

static gh_res checkPeers(gh_coll* c) {
  if (c->error) return GH_OK;  // reported once
  int64_t now = nowNs();
  if (now - c->lastLiveCheck < 50000000) return GH_OK;  // every 50 ms
  c->lastLiveCheck = now;
  gh_seghdr* sh = hdrOf(c);
  for (int r = 0; r < c->nranks; r++) {
    int pid = atomic_load(&sh->pid[r]);
    if (r != c->rank && !pidAlive(pid)) return fail(c, GH_REMOTE, "peer rank %d (pid %d) is gone", r, pid);
  }
  return GH_OK;
}

static gh_res progress(gh_coll* c) {
  if (cfg.model) {
    gh_res r = fabPoll(c);
    if (r != GH_OK) return r;
  }
  for (int p = 0; p < c->nranks; p++) {
    gh_res r;
    if ((r = reserve(c, p)) != GH_OK) return r;
    if (cfg.model && (r = fabSend(c, p)) != GH_OK) return r;
    if ((r = publish(c, p)) != GH_OK) return r;
    if ((r = deliver(c, p)) != GH_OK) return r;
  }
  return checkPeers(c);
}

static gh_res post(void* coll, uint64_t srcOff, void* srcMh, size_t size, uint64_t dstOff, void* dstMh, uint32_t rank,
                   int hasSig, uint64_t sigOff, void* sigMh, uint64_t sigVal, uint32_t sigOp, void** request) {
  *request = NULL;
  gh_coll* c = asColl(coll);
  if (!c) return fail(NULL, GH_INVALID_ARG, "iput: unknown collComm %p", coll);
  if (c->error) return fail(c, c->error, "iput after an earlier error: %s", c->errMsg);
  if (rank >= (uint32_t)c->nranks) return fail(c, GH_INVALID_ARG, "iput: rank %u of %d", rank, c->nranks);
  gh_ring* ring = ringOf(c, c->rank, (int)rank);
  if (atomic_load(&ring->error)) return fail(c, GH_REMOTE, "rank %u rejected an earlier message: %s", rank, ring->errMsg);
  gh_mr *src = NULL, *dst = NULL, *sig = NULL;
  if (size > 0) {
    src = asMr(c, srcMh), dst = asMr(c, dstMh);
    if (!src) return fail(c, GH_INVALID_ARG, "iput: unknown source registration %p", srcMh);
    if (!dst) return fail(c, GH_INVALID_ARG, "iput: unknown destination registration %p", dstMh);
    if (dstOff > dst->size || size > dst->size - dstOff)
      return fail(c, GH_INVALID_ARG, "iput: %zu bytes at offset %llu outside destination registration #%u (%zu bytes)", size,
                  (unsigned long long)dstOff, dst->seq, dst->size);
    if (dst->type != GH_PTR_CUDA) return fail(c, GH_INVALID_ARG, "iput: destination registration #%u is host memory", dst->seq);
    if (srcOff > src->size || size > src->size - srcOff) {
      if (src->type == GH_PTR_HOST && size <= 8 && cfg.inlineRecover) {
        // NCCL 2.28.9 writes a putValue's inline value at an address
        // computed from a stack copy of the descriptor; it lies outside the
        // inline buffer but NCCL has just written it there.
        say("NCCL 2.28.9 putValue bug: inline source offset %lld outside the inline buffer (%zu bytes); value read "
            "where NCCL wrote it; any signal of this putValue was dropped by NCCL",
            (long long)srcOff, src->size);
        trace("nccl-bug inline %lld", (long long)srcOff);
        gh_mr* tmp = calloc(1, sizeof *tmp);
        if (!tmp) return GH_SYSTEM;
        *tmp = *src;
        tmp->base = src->base + srcOff, tmp->size = size;
        src = tmp;  // leaked on purpose: one small object per buggy putValue
        srcOff = 0;
      } else {
        return fail(c, GH_INVALID_ARG, "iput: %zu bytes at offset %lld outside source registration #%u (%zu bytes)%s", size,
                    (long long)srcOff, src->seq, src->size,
                    src->type == GH_PTR_HOST ? " (NCCL 2.28.9's putValue inline bug; GINHW_INLINE=recover reads it)" : "");
      }
    }
  }
  if (hasSig) {
    sig = asMr(c, sigMh);
    if (!sig) return fail(c, GH_INVALID_ARG, "iputSignal: unknown signal registration %p", sigMh);
    if (sigOp != GH_SIG_INC && sigOp != GH_SIG_ADD) return fail(c, GH_INVALID_ARG, "iputSignal: signal op %u", sigOp);
    if (sigOff % 8 || sigOff + 8 > sig->size)
      return fail(c, GH_INVALID_ARG, "iputSignal: signal offset %llu outside registration #%u (%zu bytes)",
                  (unsigned long long)sigOff, sig->seq, sig->size);
  }
  gh_req* q = calloc(1, sizeof *q);
  if (!q) return GH_SYSTEM;
  q->magic = MAGIC_REQ;
  q->id = atomic_fetch_add(&reqCount, 1) + 1;
  q->peer = (int)rank;
  q->srcOff = srcOff, q->dstOff = dstOff, q->left = size;
  q->src = src, q->dst = dst, q->sig = sig;
  q->hasSig = hasSig, q->sigOff = sigOff, q->sigVal = sigVal, q->sigOp = sigOp;
  q->staged = 1;
  q->postedAt = nowNs();
  trace("post %d %d %llu %zu %d %llu %llu %lld", c->id, (int)rank, (unsigned long long)q->id, size, hasSig,
        (unsigned long long)(sigOff / 8), (unsigned long long)(sigOp == GH_SIG_INC ? 1 : sigVal), (long long)q->postedAt);
  c->posts++;
  enqueue(&c->peer[rank], q);
  gh_res r = reserve(c, (int)rank);
  if (r == GH_OK && cfg.model) r = fabSend(c, (int)rank);
  if (r == GH_OK) r = publish(c, (int)rank);
  if (r != GH_OK) return r;
  *request = q;
  return GH_OK;
}

static gh_res ginIput(void* coll, uint64_t srcOff, void* srcMh, size_t size, uint64_t dstOff, void* dstMh, uint32_t rank,
                      void** req) {
  return post(coll, srcOff, srcMh, size, dstOff, dstMh, rank, 0, 0, NULL, 0, 0, req);
}
static gh_res ginIputSignal(void* coll, uint64_t srcOff, void* srcMh, size_t size, uint64_t dstOff, void* dstMh,
                            uint32_t rank, uint64_t sigOff, void* sigMh, uint64_t sigVal, uint32_t sigOp, void** req) {
  return post(coll, srcOff, srcMh, size, dstOff, dstMh, rank, 1, sigOff, sigMh, sigVal, sigOp, req);
}

static gh_res ginTest(void* coll, void* request, int* done) {
  *done = 0;
  gh_coll* c = asColl(coll);
  if (!c) return fail(NULL, GH_INVALID_ARG, "test: unknown collComm %p", coll);
  gh_req* q = (gh_req*)request;
  if (!q) {  // NCCL passes a NULL request through as is
    *done = 1;
    return GH_OK;
  }
  if (q->magic != MAGIC_REQ) return fail(c, GH_INVALID_ARG, "test: unknown request %p", request);
  // No progress here: NCCL tests every outstanding request on each pass
  // and calls ginProgress after each peer; work here would be repeated
  // per request and slow NCCL's proxy loop down.
  gh_ring* ring = ringOf(c, c->rank, q->peer);
  if (!q->staged && atomic_load_explicit(&ring->acked, memory_order_acquire) >= q->lastSeq) {
    *done = 1;
    q->magic = 0;
    free(q);
  }
  return GH_OK;
}

static gh_res ginProgressFn(void* coll) {
  gh_coll* c = asColl(coll);
  if (!c) return GH_INVALID_ARG;
  return progress(c);
}

static gh_res ginQueryLastError(void* g, bool* hasError) {
  (void)g;
  *hasError = false;
  return GH_OK;
}

static gh_res ginCloseColl(void* coll) {
  gh_coll* c = asColl(coll);
  if (!c) return fail(NULL, GH_INVALID_ARG, "closeColl: unknown collComm %p", coll);
  say("close: coll %d rank %d: %llu posts, %llu deliveries%s%s", c->id, c->rank, (unsigned long long)c->posts,
      (unsigned long long)c->deliveries, c->error ? ", error: " : "", c->error ? c->errMsg : "");
  trace("close %d %llu %llu", c->id, (unsigned long long)c->posts, (unsigned long long)c->deliveries);
  if (c->registered && useGPU() == 0) cu.hostUnregister(c->seg);
  munmap(c->seg, c->segSize);
  if (c->rank == 0) unlink(c->path);
  c->magic = 0;
  if (traceF) fflush(traceF);
  return GH_OK;  // c and its registrations are leaked: NCCL may still deregister after close
}

static gh_res ginFinalize(void* ctx) {
  gh_inst* g = (gh_inst*)ctx;
  if (g && g->magic == MAGIC_INST) g->magic = 0;
  if (traceF) fflush(traceF);
  return GH_OK;
}

__attribute__((visibility("default"))) const gh_gin ncclGinPlugin_v11 = {
    .name = "ginhw-gin",
    .init = ginInit,
    .devices = ginDevices,
    .getProperties = ginGetProperties,
    .listen = ginListen,
    .connect = ginConnect,
    .createContext = ginCreateContext,
    .regMrSym = ginRegMrSym,
    .regMrSymDmaBuf = ginRegMrSymDmaBuf,
    .deregMrSym = ginDeregMrSym,
    .destroyContext = ginDestroyContext,
    .closeColl = ginCloseColl,
    .closeListen = ginCloseListen,
    .iput = ginIput,
    .iputSignal = ginIputSignal,
    .test = ginTest,
    .ginProgress = ginProgressFn,
    .queryLastError = ginQueryLastError,
    .finalize = ginFinalize,
};

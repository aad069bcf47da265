// ginhw_test: bad input to the plugin's GIN table gives a clear error and no
// hang. Needs no GPU: it uses host registrations and signal-only messages.
// Usage: ginhw_test PATH/libnccl-net-ginhw.so   (exit 0: all checks passed)
// (ginhw_test PLUGIN model-dead SOCKET is the child it runs for the model
// fabric's check: GINHW_FABRIC must be set before the plugin reads it.)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int res_t;
typedef struct {
  const char* name;
  res_t (*init)(void**, uint64_t, void*);
  res_t (*devices)(int*);
  res_t (*getProperties)(int, void*);
  res_t (*listen)(void*, int, void*, void**);
  res_t (*connect)(void*, void* [], int, int, void*, void**);
  res_t (*createContext)(void*, int, int, void**, void**);
  res_t (*regMrSym)(void*, void*, size_t, int, uint64_t, void**, void**);
  res_t (*regMrSymDmaBuf)(void*, void*, size_t, int, uint64_t, int, uint64_t, void**, void**);
  res_t (*deregMrSym)(void*, void*);
  res_t (*destroyContext)(void*);
  res_t (*closeColl)(void*);
  res_t (*closeListen)(void*);
  res_t (*iput)(void*, uint64_t, void*, size_t, uint64_t, void*, uint32_t, void**);
  res_t (*iputSignal)(void*, uint64_t, void*, size_t, uint64_t, void*, uint32_t, uint64_t, void*, uint64_t, uint32_t, void**);
  res_t (*test)(void*, void*, int*);
  res_t (*ginProgress)(void*);
  res_t (*queryLastError)(void*, bool*);
  res_t (*finalize)(void*);
} gin_t;

static const gin_t* G;
static int failures;
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static void check(const char* what, int ok) {
  printf("%s %s\n", ok ? "PASS" : "FAIL", what);
  fflush(stdout);
  if (!ok) failures++;
}

// selfColl connects a one-rank collComm and registers a 4 KiB host buffer.
static void* selfColl(void** mr, char* buf) {
  void *ctx, *lc, *coll = NULL;
  char h[128];
  G->init(&ctx, 1, NULL);
  G->listen(ctx, 0, h, &lc);
  void* hs[1] = {h};
  if (G->connect(ctx, hs, 1, 0, lc, &coll) != 0) return NULL;
  G->closeListen(lc);
  void* gh;
  if (G->regMrSym(coll, buf, 4096, 1 /*HOST*/, 0, mr, &gh) != 0) return NULL;
  return coll;
}

// modelDead: with GINHW_FABRIC=model:SOCKET and no server there, connect
// fails at once (the plugin's message names the socket). Exit 0 if so.
static int modelDead(const char* plugin, const char* sock) {
  char env[200];
  snprintf(env, sizeof env, "model:%s", sock);
  setenv("GINHW_FABRIC", env, 1);
  void* lib = dlopen(plugin, RTLD_NOW);
  if (!lib) return 2;
  G = (const gin_t*)dlsym(lib, "ncclGinPlugin_v11");
  if (!G) return 2;
  static char buf[4096];
  void* mr = NULL;
  double t = now();
  void* c = selfColl(&mr, buf);
  return c == NULL && now() - t < 1 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[2], "model-dead") == 0) return modelDead(argv[1], argv[3]);
  if (argc != 2) {
    fprintf(stderr, "usage: ginhw_test PLUGIN.so\n");
    return 2;
  }
  setenv("GINHW_TIMEOUT_S", "2", 1);
  void* lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 2;
  }
  G = (const gin_t*)dlsym(lib, "ncclGinPlugin_v11");
  check("exports ncclGinPlugin_v11", G != NULL);
  check("exports ncclNetPlugin_v11", dlsym(lib, "ncclNetPlugin_v11") != NULL);
  if (!G) return 1;
  static char buf[4096];
  void* mr = NULL;
  void* req = NULL;
  double t0 = now();

  void* c = selfColl(&mr, buf);
  check("one-rank connect and host registration", c != NULL);
  if (!c) return 1;
  int bogus[16] = {0};
  check("iput with an unknown source handle fails", G->iput(c, 0, bogus, 8, 0, mr, 0, &req) != 0 && req == NULL);

  c = selfColl(&mr, buf);
  check("iput past the end of the window fails", G->iput(c, 0, mr, 64, 4090, mr, 0, &req) != 0 && req == NULL);
  c = selfColl(&mr, buf);
  check("iput to a rank outside the communicator fails", G->iput(c, 0, mr, 8, 0, mr, 5, &req) != 0);
  c = selfColl(&mr, buf);
  check("iputSignal with a signal offset outside its registration fails",
        G->iputSignal(c, 0, NULL, 0, 0, NULL, 0, 8192, mr, 1, 1, &req) != 0);
  c = selfColl(&mr, buf);
  check("iputSignal with an unknown signal op fails", G->iputSignal(c, 0, NULL, 0, 0, NULL, 0, 0, mr, 1, 9, &req) != 0);
  c = selfColl(&mr, buf);
  int done = 0;
  check("test of an unknown request fails", G->test(c, bogus, &done) != 0 && done == 0);
  check("an unknown collComm is refused", G->iput(bogus, 0, mr, 8, 0, mr, 0, &req) != 0);
  c = selfColl(&mr, buf);
  check("iput after an error keeps failing (sticky)",
        G->iput(c, 0, mr, 64, 4090, mr, 0, &req) != 0 && G->iputSignal(c, 0, NULL, 0, 0, NULL, 0, 0, mr, 1, 1, &req) != 0);

  // A rank whose rank 0 is gone: connect gives up with a message.
  {
    void *ctx, *lc, *coll = NULL;
    char h0[128], h1[128];
    G->init(&ctx, 1, NULL);
    G->listen(ctx, 0, h1, &lc);
    memcpy(h0, h1, sizeof h0);
    int32_t deadPid = 999999;  // beyond the usual pid_max
    memcpy(h0 + 4, &deadPid, 4);
    void* hs[2] = {h0, h1};
    double t = now();
    check("connect to a dead rank 0 fails", G->connect(ctx, hs, 2, 1, lc, &coll) != 0 && coll == NULL);
    check("... within the bound", now() - t < 3);
  }

  // A peer process that connects and then dies: the next iput says so.
  {
    int toChild[2], toParent[2];
    if (pipe(toChild) || pipe(toParent)) return 2;
    pid_t pid = fork();
    if (pid == 0) {
      void *ctx, *lc, *coll = NULL;
      char mine[128], other[128];
      G->init(&ctx, 1, NULL);
      G->listen(ctx, 0, mine, &lc);
      if (write(toParent[1], mine, 128) != 128 || read(toChild[0], other, 128) != 128) _exit(3);
      void* hs[2] = {other, mine};
      _exit(G->connect(ctx, hs, 2, 1, lc, &coll) == 0 ? 0 : 4);  // exits right after connecting
    }
    void *ctx, *lc, *coll = NULL, *pmr = NULL, *gh;
    char mine[128], other[128];
    G->init(&ctx, 1, NULL);
    G->listen(ctx, 0, mine, &lc);
    if (read(toParent[0], other, 128) != 128 || write(toChild[1], mine, 128) != 128) return 2;
    void* hs[2] = {mine, other};
    check("two-process connect", G->connect(ctx, hs, 2, 0, lc, &coll) == 0);
    G->regMrSym(coll, buf, 4096, 1, 0, &pmr, &gh);
    usleep(200000);  // the child has exited: a zombie until reaped
    G->ginProgress(coll);
    double tz = now();
    check("iputSignal to a dead, unreaped peer fails",
          G->iputSignal(coll, 0, NULL, 0, 0, NULL, 1, 0, pmr, 1, 1, &req) != 0 && now() - tz < 0.5);
    int st = 0;
    waitpid(pid, &st, 0);
    check("peer exited after connecting", WIFEXITED(st) && WEXITSTATUS(st) == 0);
    G->ginProgress(coll);
    double t = now();
    int rc = G->iputSignal(coll, 0, NULL, 0, 0, NULL, 1, 0, pmr, 1, 1, &req);
    check("iputSignal to a dead peer fails", rc != 0);
    check("... at once", now() - t < 0.5);
    G->closeColl(coll);
  }
  // The model fabric with no server: connect fails, naming the socket.
  {
    pid_t pid = fork();
    if (pid == 0) {
      execl("/proc/self/exe", argv[0], argv[1], "model-dead", "/nonexistent/ginhw-fabric.sock", (char*)NULL);
      _exit(5);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    check("model fabric without a server: connect fails at once", WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  check("all checks took less than 10 s", now() - t0 < 10);
  printf("%d failure(s)\n", failures);
  return failures ? 1 : 0;
}

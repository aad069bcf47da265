// lagbench: one client of `ginsim validate fabric-serve`: N requests of B
// bytes, one at a time, GAP_US apart; prints the medians and p99 of the
// model's latency (deliver - post) and of the reply's lateness (arrival -
// deliver), CLOCK_REALTIME ns as the plugin uses.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
static int64_t now(void) { struct timespec t; clock_gettime(CLOCK_REALTIME, &t); return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }
static int cmp(const void* a, const void* b) { int64_t x = *(const int64_t*)a, y = *(const int64_t*)b; return x < y ? -1 : x > y; }
int main(int argc, char** argv) {
  const char* sock = argv[1]; int n = atoi(argv[2]); uint64_t bytes = strtoull(argv[3], 0, 10); int gap = atoi(argv[4]);
  int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
  struct sockaddr_un a; memset(&a, 0, sizeof a); a.sun_family = AF_UNIX;
  bind(fd, (struct sockaddr*)&a, sizeof(sa_family_t));
  snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
  if (connect(fd, (struct sockaddr*)&a, sizeof a)) { perror("connect"); return 1; }
  int64_t* lat = calloc(n, 8); int64_t* lag = calloc(n, 8);
  for (int i = 0; i < n; i++) {
    uint8_t b[40] = {0}; int64_t post = now();
    uint32_t m = 0x51524647u; memcpy(b, &m, 4); b[4] = 1; b[6] = 1; b[12] = 1;
    uint64_t seq = i + 1; memcpy(b + 16, &seq, 8); memcpy(b + 24, &bytes, 8); memcpy(b + 32, &post, 8);
    send(fd, b, 40, 0);
    uint8_t r[32]; if (recv(fd, r, 32, 0) != 32) { perror("recv"); return 1; }
    int64_t t = now(), d; memcpy(&d, r + 24, 8);
    lat[i] = d - post, lag[i] = t - d;
    while (now() < t + gap * 1000) ;
  }
  qsort(lat, n, 8, cmp); qsort(lag, n, 8, cmp);
  printf("%d requests of %llu bytes, %d us apart: model latency median %.2f us p99 %.2f us; reply after the model's instant: median %.2f us p99 %.2f us max %.2f us\n",
         n, (unsigned long long)bytes, gap, lat[n / 2] / 1e3, lat[n * 99 / 100] / 1e3, lag[n / 2] / 1e3, lag[n * 99 / 100] / 1e3, lag[n - 1] / 1e3);
  return 0;
}

/* One client of `compare.py cache`: one connection, pipelined batches of
 * 90% GET of a Zipf-distributed key id / 10% SET, plus a SET of every key a
 * GET missed. Runs until `end_s` seconds (CLOCK_MONOTONIC) and prints
 * "commands gets hits" counted from `measure_s` on. Compiled by compare.py
 * so that the client, not Python, keeps up with the server.
 *
 * usage: cache_driver PORT KEYS ZIPF_S BATCH SEED MEASURE_S END_S */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng;
static double uniform(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (rng >> 11) * (1.0 / 9007199254740992.0);
}
static double mono(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static char *in; static size_t in_len, in_cap, in_pos;
static int fd;
static void fill(void) {
    if (in_pos > 0 && in_pos == in_len) { in_pos = in_len = 0; }
    if (in_cap - in_len < 65536) {
        memmove(in, in + in_pos, in_len - in_pos); in_len -= in_pos; in_pos = 0;
        if (in_cap - in_len < 65536) { in_cap = in_cap * 2 + 65536; in = realloc(in, in_cap); }
    }
    ssize_t n = read(fd, in + in_len, in_cap - in_len);
    if (n <= 0) { perror("read"); exit(1); }
    in_len += n;
}
/* Reads one reply; returns 1 for a bulk hit, 0 for a null bulk, 2 otherwise. */
static int reply(void) {
    char *e;
    while (!(e = memchr(in + in_pos, '\n', in_len - in_pos))) fill();
    char kind = in[in_pos];
    if (kind == '-') { fprintf(stderr, "error reply: %.*s\n", (int)(e - in - in_pos), in + in_pos); exit(1); }
    if (kind == '$') {
        long n = strtol(in + in_pos + 1, NULL, 10);
        size_t start = e - in + 1;
        if (n < 0) { in_pos = start; return 0; }
        while (in_len < start + n + 2) fill();
        in_pos = start + n + 2;
        return 1;
    }
    in_pos = e - in + 1;
    return 2;
}

int main(int argc, char **argv) {
    if (argc != 8) { fprintf(stderr, "usage: cache_driver PORT KEYS ZIPF_S BATCH SEED MEASURE_S END_S\n"); return 2; }
    int port = atoi(argv[1]); long keys = atol(argv[2]); double s = atof(argv[3]);
    int batch = atoi(argv[4]); rng = strtoull(argv[5], NULL, 10) * 2654435761u + 88172645463325252ull;
    double measure_at = atof(argv[6]), end = atof(argv[7]);
    double *cum = malloc(sizeof(double) * keys), acc = 0;
    for (long k = 0; k < keys; k++) { acc += pow(k + 1, -s); cum[k] = acc; }
    fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) { perror("connect"); return 1; }
    int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char value[101]; memset(value, 'v', 100); value[100] = 0;
    size_t out_cap = (size_t)batch * 2 * 200 + 65536; char *out = malloc(out_cap);
    in_cap = 1 << 20; in = malloc(in_cap);
    long *ids = malloc(sizeof(long) * batch * 2), *miss = malloc(sizeof(long) * batch * 2);
    char *is_get = malloc(batch * 2);
    int nmiss = 0; long cmds = 0, gets = 0, hits = 0; int measuring = 0;
    for (;;) {
        double now = mono();
        if (now >= end) break;
        if (!measuring && now >= measure_at) { measuring = 1; cmds = gets = hits = 0; }
        size_t o = 0; int n = 0;
        for (int i = 0; i < nmiss; i++, n++) {
            char k[32]; int kl = snprintf(k, sizeof k, "key:%ld", miss[i]);
            o += sprintf(out + o, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$100\r\n%s\r\n", kl, k, value);
            ids[n] = miss[i]; is_get[n] = 0;
        }
        nmiss = 0;
        for (int i = 0; i < batch; i++, n++) {
            double x = uniform() * acc; long lo = 0, hi = keys - 1;
            while (lo < hi) { long mid = (lo + hi) / 2; if (cum[mid] < x) lo = mid + 1; else hi = mid; }
            char k[32]; int kl = snprintf(k, sizeof k, "key:%ld", lo);
            ids[n] = lo;
            if (uniform() < 0.9) {
                o += sprintf(out + o, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", kl, k); is_get[n] = 1;
            } else {
                o += sprintf(out + o, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$100\r\n%s\r\n", kl, k, value); is_get[n] = 0;
            }
        }
        for (size_t w = 0; w < o;) { ssize_t m = write(fd, out + w, o - w); if (m <= 0) { perror("write"); return 1; } w += m; }
        for (int i = 0; i < n; i++) {
            int r = reply();
            if (is_get[i]) { gets++; if (r == 1) hits++; else miss[nmiss++] = ids[i]; }
        }
        cmds += n;
    }
    printf("%ld %ld %ld\n", cmds, gets, hits);
    return 0;
}

/* bench_core.c — the codec's core rates, without JSON or files:
 *   encode: FEE events already in memory (grouped and sorted, as the agent has them at
 *           stop) → .cvf bytes through cvf_writer into a memory sink;
 *   decode: those bytes → events through cvf_read.
 * Prints events/s and MB/s (best of several runs).  Usage: bench_core [EVENTS] [GROUPS]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cvf.h"
#include "cvf_reader.h"

typedef struct membuf {
    unsigned char *data;
    size_t len, cap;
} membuf;

static int mem_sink(void *ctx, const void *d, size_t n)
{
    membuf *m = ctx;
    if (m->len + n > m->cap)
        return -1;
    memcpy(m->data + m->len, d, n);
    m->len += n;
    return 0;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static size_t decoded;
static int on_fee(void *ctx, const cvf_fee_group *g)
{
    decoded += g->count;
    return 0;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000;
    size_t groups = argc > 2 ? strtoul(argv[2], NULL, 10) : 200;
    cvf_fee_event *ev = malloc(n * sizeof *ev);
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    /* VizTracer-like: short calls (0.1-50 µs), gaps of a few µs, timestamps ~1e10 µs */
    int64_t ts = 1000000000000LL;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ts += 10 + (int64_t)(x % 800);
        ev[i].ts = ts;
        ev[i].dur = 10 + (x >> 32) % 5000;
    }
    membuf m = {malloc(n * 20 + (1 << 20)), 0, n * 20 + (1 << 20)};
    char name[64];
    double best = 1e9;
    for (int run = 0; run < 7; run++) {
        m.len = 0;
        double t0 = now();
        cvf_writer *w = cvf_writer_new(mem_sink, &m);
        cvf_write_process_name(w, 1, 1, "MainProcess");
        size_t per = (n + groups - 1) / groups;
        for (size_t g = 0; g < groups; g++) {
            size_t lo = g * per, hi = lo + per > n ? n : lo + per;
            if (lo >= hi)
                break;
            snprintf(name, sizeof name, "function_%zu (/srv/app/module.py:%zu)", g, g * 7);
            if (cvf_write_fee_group(w, 1, 1 + g % 4, name, ev + lo, hi - lo, NULL, 0)) {
                fprintf(stderr, "%s\n", cvf_writer_error(w)->msg);
                return 1;
            }
        }
        cvf_writer_finish(w);
        cvf_writer_free(w);
        double dt = now() - t0;
        if (dt < best)
            best = dt;
    }
    printf("encoder core: %zu events in %zu groups -> %zu bytes (%.2f B/event): %.1f M events/s, "
           "%.0f MB/s out\n", n, groups, m.len, (double)m.len / (double)n, (double)n / best / 1e6,
           (double)m.len / best / 1e6);
    best = 1e9;
    static const cvf_visitor v = {.fee_group = on_fee};
    for (int run = 0; run < 7; run++) {
        cvf_error err;
        decoded = 0;
        double t0 = now();
        if (cvf_read(m.data, m.len, &v, NULL, 0, &err) != 0) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        double dt = now() - t0;
        if (dt < best)
            best = dt;
    }
    printf("decoder core: %zu events: %.1f M events/s, %.0f MB/s in\n", decoded,
           (double)decoded / best / 1e6, (double)m.len / best / 1e6);
    free(ev);
    free(m.data);
    return 0;
}

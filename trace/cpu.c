/* cpu.c — a trace's per-thread CPU clock samples and the on-CPU time of a span (cpu.h).
 *
 * Apart from model.c because it is one mechanism with one definition (linear interpolation
 * between samples) that the summary and the requests breakdown share; load.c calls
 * vct_cpu_finish once the model is finished.  The samples come from a file that may be hostile: counter values that are
 * not finite, negative, or that make the clock go back are dropped, never trusted.
 */
#include "cpu.h"
#include "cvf_reader.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int vct_cpu_add(vct_thread *th, int64_t ts, int64_t cpu)
{
    return vct_samples_add(&th->cpu, ts, cpu);
}

int vct_samples_add(vct_cpu_samples *c, int64_t ts, int64_t cpu)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        int64_t *a = realloc(c->ts, cap * sizeof *a);
        if (!a)
            return -1;
        c->ts = a;
        int64_t *b = realloc(c->cpu, cap * sizeof *b);
        if (!b)
            return -1;
        c->cpu = b;
        c->cap = cap;
    }
    c->ts[c->n] = ts;
    c->cpu[c->n] = cpu;
    c->n++;
    return 0;
}

int vct_cpu_add_group(vct_trace *t, const struct cvf_counter_group *g)
{
    size_t plen = strlen(VCT_CPU_COUNTER_PREFIX);
    if (strncmp(g->name, VCT_CPU_COUNTER_PREFIX, plen) != 0 || g->nkeys != 1 ||
        strcmp(g->keys[0], "ms") != 0)
        return 0;
    char *endp;
    unsigned long long tid = strtoull(g->name + plen, &endp, 10);
    if (*endp || endp == g->name + plen || tid != g->tid)
        return 0; /* someone else's counter that happens to start with "cpu " */
    vct_thread *th = vct_trace_thread(t, g->pid, g->tid);
    if (!th)
        return -1;
    double last = 0;
    for (size_t i = 0; i < g->nts; i++) {
        const cvf_counter_value *v = &g->values[i];
        double ms = v->tag == CVF_COUNTER_FLOAT ? v->v.f
                    : v->tag == CVF_COUNTER_LONG ? (double)v->v.i
                    : v->tag == CVF_COUNTER_SAME ? last
                                                 : NAN;
        if (!(ms >= 0 && ms < 9e12)) /* NaN, negative, or beyond int64 ticks */
            continue;
        last = ms;
        if (vct_cpu_add(th, g->ts_ns[i] / 10, (int64_t)llround(ms * 1e5)) < 0)
            return -1;
    }
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorts th's samples by time (pairs move together through an index), keeps one sample per
 * timestamp and only samples whose clock does not go back. */
static int finish_thread(vct_thread *th)
{
    vct_cpu_samples *c = &th->cpu;
    int sorted = 1;
    for (size_t i = 1; i < c->n && sorted; i++)
        sorted = c->ts[i] >= c->ts[i - 1];
    if (!sorted) {
        int64_t *pairs = malloc(c->n * 2 * sizeof *pairs);
        if (!pairs)
            return -1;
        for (size_t i = 0; i < c->n; i++)
            pairs[2 * i] = c->ts[i], pairs[2 * i + 1] = c->cpu[i];
        qsort(pairs, c->n, 2 * sizeof *pairs, cmp_i64); /* by ts: the first of each pair */
        for (size_t i = 0; i < c->n; i++)
            c->ts[i] = pairs[2 * i], c->cpu[i] = pairs[2 * i + 1];
        free(pairs);
    }
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (k > 0 && c->ts[i] == c->ts[k - 1]) {
            if (c->cpu[i] >= c->cpu[k - 1] && (k < 2 || c->cpu[i] >= c->cpu[k - 2]))
                c->cpu[k - 1] = c->cpu[i];
            continue;
        }
        if (k > 0 && c->cpu[i] < c->cpu[k - 1])
            continue; /* a CPU clock never goes back */
        c->ts[k] = c->ts[i];
        c->cpu[k] = c->cpu[i];
        k++;
    }
    c->n = k;
    return 0;
}

int vct_cpu_finish(vct_trace *t)
{
    t->has_cpu = 0;
    t->cpu_period = 0;
    size_t nint = 0;
    for (size_t i = 0; i < t->nthreads; i++) {
        if (finish_thread(&t->threads[i]) < 0)
            return -1;
        if (t->threads[i].cpu.n >= 2)
            t->has_cpu = 1;
        nint += t->threads[i].cpu.n ? t->threads[i].cpu.n - 1 : 0;
    }
    if (!nint)
        return 0;
    /* The period: the median interval between a thread's consecutive samples, leaving out
     * the idle stretches the agent sends as two samples (longer than its longest period). */
    int64_t *iv = malloc(nint * sizeof *iv);
    if (!iv)
        return -1;
    size_t m = 0;
    for (size_t i = 0; i < t->nthreads; i++) {
        const vct_cpu_samples *c = &t->threads[i].cpu;
        for (size_t k = 1; k < c->n; k++)
            if (c->ts[k] - c->ts[k - 1] <= 150 * 1000 * VCT_TICKS_PER_US)
                iv[m++] = c->ts[k] - c->ts[k - 1];
    }
    if (m) {
        qsort(iv, m, sizeof *iv, cmp_i64);
        t->cpu_period = iv[m / 2];
    }
    free(iv);
    return 0;
}

/* The thread's CPU clock at x (ticks), interpolated; x within [ts[0], ts[n-1]]. */
static double cpu_at(const vct_cpu_samples *c, int64_t x)
{
    size_t lo = 0, hi = c->n - 1; /* ts[lo] <= x <= ts[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->ts[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    if (c->ts[hi] == c->ts[lo])
        return (double)c->cpu[lo];
    double f = ((double)x - (double)c->ts[lo]) / ((double)c->ts[hi] - (double)c->ts[lo]);
    return (double)c->cpu[lo] + f * ((double)c->cpu[hi] - (double)c->cpu[lo]);
}

int64_t vct_cpu_span(const vct_thread *th, int64_t start, int64_t end, int64_t *covered)
{
    return vct_samples_span(&th->cpu, start, end, covered);
}

int64_t vct_samples_span(const vct_cpu_samples *c, int64_t start, int64_t end,
                         int64_t *covered)
{
    if (covered)
        *covered = 0;
    if (c->n < 2 || end <= start)
        return 0;
    int64_t a = start > c->ts[0] ? start : c->ts[0];
    int64_t b = end < c->ts[c->n - 1] ? end : c->ts[c->n - 1];
    if (b <= a)
        return 0;
    if (covered)
        *covered = b - a;
    double on = cpu_at(c, b) - cpu_at(c, a);
    int64_t r = on > 0 ? (int64_t)llround(on) : 0;
    return r > b - a ? b - a : r;
}

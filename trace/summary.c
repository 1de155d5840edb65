/* summary.c — the per-function statistics of a trace (see summary.h for the definitions).
 *
 * One pass over each thread's nesting walk; memory is three arrays indexed by function id,
 * reused across sections, so summarising a thousand threads allocates nothing per thread.
 */
#include "summary.h"

#include <stdlib.h>
#include <string.h>

int vct_summary_init(vct_summary *s, const vct_trace *t)
{
    memset(s, 0, sizeof *s);
    s->trace = t;
    size_t nf = t->nfuncs ? t->nfuncs : 1;
    s->stats = calloc(nf, sizeof *s->stats);
    s->active = calloc(nf, sizeof *s->active);
    s->touched = malloc(nf * sizeof *s->touched);
    if (!s->stats || !s->active || !s->touched) {
        vct_summary_free(s);
        return -1;
    }
    return 0;
}

void vct_summary_free(vct_summary *s)
{
    free(s->stats);
    free(s->active);
    free(s->touched);
    s->stats = NULL;
    s->active = NULL;
    s->touched = NULL;
    s->ntouched = 0;
}

static void on_open(void *ctx, const vct_event *ev, int64_t start, int64_t end, size_t depth)
{
    vct_summary *a = ctx;
    vct_func_stats *s = &a->stats[ev->func];
    int64_t dur = end - start;
    if (!s->calls++)
        a->touched[a->ntouched++] = ev->func;
    if (!a->active[ev->func]++)
        s->total = vct_sat_add(s->total, dur); /* outermost call of this function on the stack */
    s->sum_dur = vct_sat_add(s->sum_dur, dur);
    if (dur > s->max_dur)
        s->max_dur = dur;
    if (!depth)
        a->busy = vct_sat_add(a->busy, dur);
    a->calls++;
}

static void on_close(void *ctx, const vct_event *ev, int64_t start, int64_t end, int64_t self,
                     size_t depth)
{
    vct_summary *a = ctx;
    a->stats[ev->func].self = vct_sat_add(a->stats[ev->func].self, self);
    a->active[ev->func]--;
}

int vct_summary_add_thread(vct_summary *s, const vct_thread *th)
{
    static const vct_walk_ops ops = {on_open, on_close};
    return vct_thread_walk(th, &ops, s);
}

static int cmp_funcs(const void *x, const void *y, void *ctx)
{
    const vct_summary *a = ctx;
    uint32_t fx = *(const uint32_t *)x, fy = *(const uint32_t *)y;
    const vct_func_stats *p = &a->stats[fx], *q = &a->stats[fy];
    int64_t kp, kq;
    switch (a->sort) {
    case VCT_SORT_TOTAL: kp = p->total, kq = q->total; break;
    case VCT_SORT_CALLS: kp = (int64_t)p->calls, kq = (int64_t)q->calls; break;
    default: kp = p->self, kq = q->self; break;
    }
    if (kp != kq)
        return kp > kq ? -1 : 1;
    return strcmp(a->trace->funcs[fx], a->trace->funcs[fy]);
}

void vct_summary_sort(vct_summary *s, enum vct_sort_key key)
{
    s->sort = key;
    qsort_r(s->touched, s->ntouched, sizeof *s->touched, cmp_funcs, s);
}

void vct_summary_reset(vct_summary *s)
{
    for (size_t i = 0; i < s->ntouched; i++)
        memset(&s->stats[s->touched[i]], 0, sizeof(vct_func_stats));
    s->ntouched = 0;
    s->calls = 0;
    s->busy = 0;
}

static int cmp_busiest(const void *x, const void *y, void *ctx)
{
    const vct_trace *t = ctx;
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    size_t na = t->threads[a].nevents, nb = t->threads[b].nevents;
    if (na != nb)
        return na > nb ? -1 : 1;
    return a < b ? -1 : a > b;
}

unsigned char *vct_summary_busiest_threads(const vct_trace *t, size_t max_threads, int *failed)
{
    *failed = 0;
    if (t->nthreads <= max_threads)
        return NULL;
    size_t *order = malloc(t->nthreads * sizeof *order);
    unsigned char *shown = calloc(t->nthreads, 1);
    if (!order || !shown) {
        free(order);
        free(shown);
        *failed = 1;
        return NULL;
    }
    for (size_t i = 0; i < t->nthreads; i++)
        order[i] = i;
    qsort_r(order, t->nthreads, sizeof *order, cmp_busiest, (void *)t);
    for (size_t i = 0; i < max_threads; i++)
        shown[order[i]] = 1;
    free(order);
    return shown;
}

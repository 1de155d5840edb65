/* summary.c — the per-function statistics of a trace (see summary.h for the definitions).
 *
 * One pass over each thread's nesting walk; memory is a few arrays indexed by function id,
 * reused across sections, and one slot per open call, so summarising a thousand threads
 * allocates nothing per thread.  Waiting is tracked with a per-thread clock: the waiting
 * time seen so far; a call's working inclusive time is its duration minus what the clock
 * advanced while it was open.  Measured, each open call's slot also keeps its span's on-CPU
 * and sampled ticks and the sums of its direct children's, so a call's self on-CPU is one
 * subtraction at its close: one vct_cpu_span (a binary search) per call, nothing allocated.
 */
#include "summary.h"
#include "cpu.h"
#include "sched_split.h"

#include <stdlib.h>
#include <string.h>

int vct_summary_init(vct_summary *s, const vct_trace *t, int split)
{
    memset(s, 0, sizeof *s);
    s->trace = t;
    s->split = split;
    s->wait_depth = SIZE_MAX;
    size_t nf = t->nfuncs ? t->nfuncs : 1;
    s->stats = calloc(nf, sizeof *s->stats);
    s->active = calloc(nf, sizeof *s->active);
    s->kind = calloc(nf, 1);
    s->touched = malloc(nf * sizeof *s->touched);
    if (!s->stats || !s->active || !s->kind || !s->touched) {
        vct_summary_free(s);
        return -1;
    }
    for (size_t i = 0; split && i < t->nfuncs; i++)
        s->kind[i] = (unsigned char)vct_wait_kind_of(t->funcs[i]);
    return 0;
}

void vct_summary_free(vct_summary *s)
{
    for (size_t i = 0; s->stats && i < s->ntouched; i++)
        vct_hist_reset(&s->stats[s->touched[i]].durs);
    free(s->stats);
    free(s->active);
    free(s->kind);
    free(s->touched);
    free(s->slots);
    s->stats = NULL;
    s->active = NULL;
    s->kind = NULL;
    s->touched = NULL;
    s->slots = NULL;
    s->nslots = 0;
    s->ntouched = 0;
}

/* kind[] keeps the wait kind in its low bits and, in SEEN, whether the function is in
 * `touched` already. */
#define SEEN 0x80u
#define KIND(a, f) ((a)->kind[f] & ~SEEN)

static void touch(vct_summary *a, uint32_t func)
{
    if (!(a->kind[func] & SEEN)) {
        a->kind[func] |= SEEN;
        a->touched[a->ntouched++] = func;
    }
}

static void on_open(void *ctx, const vct_event *ev, int64_t start, int64_t end, size_t depth)
{
    vct_summary *a = ctx;
    if (a->failed)
        return;
    if (depth >= a->nslots) {
        size_t n = a->nslots ? a->nslots * 2 : 64;
        vct_walk_slot *slots = realloc(a->slots, n * sizeof *slots);
        if (!slots) {
            a->failed = 1;
            return;
        }
        a->slots = slots;
        a->nslots = n;
    }
    a->slots[depth] = (vct_walk_slot){a->wait_clock, -1, 0, 0, 0, 0, 0, 0};
    if (depth && a->slots[depth - 1].first_child < 0)
        a->slots[depth - 1].first_child = start;
    int64_t dur = vct_sat_diff(end, start); /* timestamps may span all of int64 */
    int64_t on_cpu = -1, seen = 0; /* measured, computed once for the figures that need it */
    if (a->measuring) { /* every call's span: its self on-CPU is known at its close */
        on_cpu = vct_cpu_span(a->walking, start, end, &seen);
        a->slots[depth].span_on = on_cpu;
        a->slots[depth].span_cov = seen;
        int64_t run = vct_sched_runnable(a->walking, start, end);
        a->slots[depth].span_run = run;
        if (depth) {
            a->slots[depth - 1].kids_on = vct_sat_add(a->slots[depth - 1].kids_on, on_cpu);
            a->slots[depth - 1].kids_cov = vct_sat_add(a->slots[depth - 1].kids_cov, seen);
            a->slots[depth - 1].kids_run = vct_sat_add(a->slots[depth - 1].kids_run, run);
        }
    }
    if (!depth) {
        a->busy = vct_sat_add(a->busy, dur);
        if (a->walking->cpu.n >= 2) {
            if (on_cpu < 0)
                on_cpu = vct_cpu_span(a->walking, start, end, &seen);
            a->busy_cpu = vct_sat_add(a->busy_cpu, on_cpu);
            a->busy_seen = vct_sat_add(a->busy_seen, seen);
        }
    }
    int resume = (ev->flags & VCT_EV_RESUME) != 0;
    if (!resume)
        a->calls++;
    if (a->wait_depth < depth && !a->measuring)
        return; /* inside a wait: waiting, already booked to the wait */
    vct_func_stats *s = &a->stats[ev->func];
    touch(a, ev->func);
    if (KIND(a, ev->func) != VCT_WAIT_NONE && a->wait_depth == SIZE_MAX) {
        a->wait_depth = depth;
        a->wait_func = ev->func;
        if (!a->measuring) { /* measured: booked at its close, by the samples */
            s->wait = vct_sat_add(s->wait, dur);
            a->waiting = vct_sat_add(a->waiting, dur);
        }
    }
    if (!resume)
        s->calls++;
    if (!a->active[ev->func]) { /* its outermost call on the stack: recursion counted once */
        if (on_cpu < 0 && a->walking->cpu.n >= 2)
            on_cpu = vct_cpu_span(a->walking, start, end, &seen);
        if (on_cpu >= 0) {
            s->on_cpu = vct_sat_add(s->on_cpu, on_cpu);
            s->incl = vct_sat_add(s->incl, seen);
        }
    }
    a->active[ev->func]++;
    s->sum_dur = vct_sat_add(s->sum_dur, dur);
    if (vct_hist_add(&s->durs, dur) < 0)
        a->failed = 1;
    if (dur > s->max_dur)
        s->max_dur = dur;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Books ticks of waiting to function f (the thread's waiting clock and the section's too). */
static void book_wait(vct_summary *a, uint32_t f, int64_t ticks)
{
    a->stats[f].wait = vct_sat_add(a->stats[f].wait, ticks);
    a->wait_clock = vct_sat_add(a->wait_clock, ticks);
    a->waiting = vct_sat_add(a->waiting, ticks);
}

/* A call's close on a thread split by its CPU samples (summary.h, "Waiting, measured"). */
static void close_measured(vct_summary *a, const vct_event *ev, int64_t start, int64_t end,
                           int64_t self, size_t depth)
{
    const vct_walk_slot *sl = &a->slots[depth];
    vct_func_stats *s = &a->stats[ev->func];
    if (self < 0)
        self = 0;
    /* children clipped to this call: their spans lie within its span, so the differences
     * are this call's own; the clamps only guard interpolation rounding */
    int64_t cov = clamp(vct_sat_diff(sl->span_cov, sl->kids_cov), 0, self);
    int64_t on = clamp(vct_sat_diff(sl->span_on, sl->kids_on), 0, cov);
    int64_t work = 0;
    /* in progress at attach: the gap before its first child apart, its off-CPU part "at
     * attach" (a listed call's is its own kind's, as without samples) */
    if ((ev->flags & VCT_EV_AT_ATTACH) && KIND(a, ev->func) == VCT_WAIT_NONE) {
        int64_t first = sl->first_child;
        int64_t gap = clamp(vct_sat_diff(first >= 0 ? first : end, start), 0, self);
        int64_t gap_cov;
        int64_t gap_on = vct_cpu_span(a->walking, start, vct_sat_add(start, gap), &gap_cov);
        gap_cov = clamp(gap_cov, 0, cov);
        gap_on = clamp(gap_on, 0, gap_cov < on ? gap_cov : on);
        int64_t gap_wait = gap - gap_on; /* off-CPU, and the unsampled part, as unmeasured */
        s->at_attach = vct_sat_add(s->at_attach, gap_wait);
        a->wait_clock = vct_sat_add(a->wait_clock, gap_wait);
        a->waiting = vct_sat_add(a->waiting, gap_wait);
        work = gap_on;
        self -= gap;
        cov = clamp(cov - gap_cov, 0, self);
        on = clamp(on - gap_on, 0, cov);
    }
    work = vct_sat_add(work, on);
    int64_t off = cov - on, unsampled = self - cov;
    /* exact: the runnable part of the off-CPU time is CPU starvation, not a wait */
    int64_t run = clamp(vct_sat_diff(sl->span_run, sl->kids_run), 0, off > 0 ? off : 0);
    if (run > 0) {
        s->runnable = vct_sat_add(s->runnable, run);
        a->runnable = vct_sat_add(a->runnable, run);
        a->wait_clock = vct_sat_add(a->wait_clock, run); /* not work: out of `total` too */
        off -= run;
    }
    if (off > 0)
        book_wait(a, ev->func, off);
    if (unsampled > 0) { /* no sample says: the names decide, as without samples */
        if (KIND(a, ev->func) != VCT_WAIT_NONE)
            book_wait(a, ev->func, unsampled);
        else if (a->wait_depth < depth)
            book_wait(a, a->wait_func, unsampled);
        else
            work = vct_sat_add(work, unsampled);
    }
    s->self = vct_sat_add(s->self, work);
    if (a->wait_depth == depth)
        a->wait_depth = SIZE_MAX;
    if (!--a->active[ev->func])
        s->total = vct_sat_add(s->total, vct_sat_diff(vct_sat_diff(end, start),
                                                      a->wait_clock - sl->wait_at_open));
}

static void on_close(void *ctx, const vct_event *ev, int64_t start, int64_t end, int64_t self,
                     size_t depth)
{
    vct_summary *a = ctx;
    if (a->failed)
        return;
    if (a->measuring) {
        close_measured(a, ev, start, end, self, depth);
        return;
    }
    if (a->wait_depth < depth)
        return;
    vct_func_stats *s = &a->stats[ev->func];
    if (a->wait_depth == depth) { /* the outermost wait ends: its time is on the clock */
        a->wait_depth = SIZE_MAX;
        a->wait_clock = vct_sat_add(a->wait_clock, vct_sat_diff(end, start));
        a->active[ev->func]--;
        return;
    }
    if (a->split && (ev->flags & VCT_EV_AT_ATTACH)) {
        int64_t first = a->slots[depth].first_child;
        int64_t gap = vct_sat_diff(first >= 0 ? first : end, start);
        if (gap > self) /* clipped children can make them disagree: never below zero */
            gap = self;
        s->at_attach = vct_sat_add(s->at_attach, gap);
        self -= gap;
        a->wait_clock = vct_sat_add(a->wait_clock, gap);
        a->waiting = vct_sat_add(a->waiting, gap);
    }
    s->self = vct_sat_add(s->self, self);
    if (!--a->active[ev->func]) /* outermost call of this function on the stack */
        s->total = vct_sat_add(s->total, vct_sat_diff(vct_sat_diff(end, start),
                                                      a->wait_clock - a->slots[depth].wait_at_open));
}

int vct_summary_add_thread(vct_summary *s, const vct_thread *th)
{
    static const vct_walk_ops ops = {on_open, on_close};
    s->walking = th;
    s->measuring = s->measure && s->split && th->cpu.n >= 2;
    s->wait_clock = 0;
    s->wait_depth = SIZE_MAX;
    s->failed = 0;
    if (vct_thread_walk(th, &ops, s) < 0 || s->failed)
        return -1;
    return 0;
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
    case VCT_SORT_WAIT: kp = p->wait + p->at_attach, kq = q->wait + q->at_attach; break;
    case VCT_SORT_CPU: kp = p->on_cpu, kq = q->on_cpu; break;
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

enum vct_wait_kind vct_summary_kind(const vct_summary *s, uint32_t func)
{
    return (enum vct_wait_kind)KIND(s, func);
}

void vct_summary_reset(vct_summary *s)
{
    for (size_t i = 0; i < s->ntouched; i++) {
        vct_hist_reset(&s->stats[s->touched[i]].durs);
        memset(&s->stats[s->touched[i]], 0, sizeof(vct_func_stats));
        s->kind[s->touched[i]] &= ~SEEN;
    }
    s->ntouched = 0;
    s->calls = 0;
    s->busy = 0;
    s->waiting = 0;
    s->runnable = 0;
    s->busy_cpu = 0;
    s->busy_seen = 0;
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

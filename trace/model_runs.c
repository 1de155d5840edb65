/* model_runs.c — a thread's calls in the compact form (model.h: VCT_LOAD_COMPACT), and their
 * merge back into walk order.
 *
 * Why: `summary` and the collapsed/SVG exports only walk each thread's calls once, in order.
 * Held as vct_events a call costs 24 bytes, so a 150 M-call trace needed 3.8 GB.  Here the
 * loader hands over slices of events already sorted (a .cvf group is one function; slices of
 * at most 2^18 events bound its scratch), each kept as a run: the first start as a zig-zag
 * varint, then per event the start's delta from the previous one and the duration as
 * varints — 2–5 bytes an event.  The walk merges a thread's runs with a binary heap keyed as
 * the array form's sort is (start, then the longer call first, then insertion order), so
 * both forms walk the same calls in the same order.
 */
#include "model_runs.h"

#include <stdlib.h>
#include <string.h>

static unsigned char *put_varint(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

/* Only bytes this file wrote are read: no bound check needed beyond the encoding's own. */
static const unsigned char *get_varint(const unsigned char *p, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0;; shift += 7) {
        unsigned char b = *p++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80) || shift >= 63)
            break;
    }
    *v = x;
    return p;
}

static int reserve(vct_thread *th, size_t more)
{
    if (th->packed_len + more <= th->packed_cap)
        return 0;
    size_t cap = th->packed_cap ? th->packed_cap + th->packed_cap / 2 : 256;
    if (cap < th->packed_len + more)
        cap = th->packed_len + more;
    unsigned char *p = realloc(th->packed, cap);
    if (!p)
        return -1;
    th->packed = p;
    th->packed_cap = cap;
    return 0;
}

static vct_run *new_run(vct_thread *th, uint32_t func, uint32_t flags)
{
    if (th->nruns == th->runs_cap) {
        size_t cap = th->runs_cap ? th->runs_cap * 2 : 4;
        vct_run *r = realloc(th->runs, cap * sizeof *r);
        if (!r)
            return NULL;
        th->runs = r;
        th->runs_cap = cap;
    }
    vct_run *r = &th->runs[th->nruns++];
    *r = (vct_run){th->packed_len, 0, func, flags};
    return r;
}

int vct_trace_add_sorted(vct_trace *t, vct_thread *th, const vct_event *ev, size_t n)
{
    vct_run *run = NULL;
    int64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        const vct_event *e = &ev[i];
        /* a new run where the function or the flags change, and before a count overflows */
        if (!run || run->func != e->func || run->flags != e->flags || run->count == UINT32_MAX) {
            if (!(run = new_run(th, e->func, e->flags)))
                return -1;
        }
        if (reserve(th, 20) < 0)
            return -1;
        unsigned char *p = th->packed + th->packed_len;
        if (run->count == 0) /* zig-zag: a start may be any int64 */
            p = put_varint(p, ((uint64_t)e->ts << 1) ^ (uint64_t)(e->ts >> 63));
        else /* sorted: never negative */
            p = put_varint(p, (uint64_t)e->ts - (uint64_t)prev);
        p = put_varint(p, (uint64_t)e->end - (uint64_t)e->ts); /* end >= ts: exact */
        th->packed_len = (size_t)(p - th->packed);
        run->count++;
        prev = e->ts;
        if (!t->nevents || e->ts < t->min_ts)
            t->min_ts = e->ts;
        if (!t->nevents || e->end > t->max_end)
            t->max_end = e->end;
        t->nevents++;
        th->nevents++;
    }
    return 0;
}

uint64_t vct_runs_calls(const vct_thread *th)
{
    uint64_t n = 0;
    for (size_t i = 0; i < th->nruns; i++)
        if (!(th->runs[i].flags & VCT_EV_RESUME))
            n += th->runs[i].count;
    return n;
}

void vct_runs_free(vct_thread *th)
{
    free(th->runs);
    free(th->packed);
    th->runs = NULL;
    th->packed = NULL;
    th->nruns = th->runs_cap = th->packed_len = th->packed_cap = 0;
}

/* ---- the merge ------------------------------------------------------------------------ */

/* Reads the cursor's next event; 0 when its run is done. */
static int advance(vct_run_cursor *c, const vct_run *run, int first)
{
    if (!first) {
        if (!c->left)
            return 0;
        c->left--;
    }
    uint64_t a, d;
    c->p = get_varint(c->p, &a);
    int64_t ts = first ? (int64_t)((a >> 1) ^ (0 - (a & 1))) : (int64_t)((uint64_t)c->ev.ts + a);
    c->p = get_varint(c->p, &d);
    c->ev.ts = ts;
    c->ev.end = (int64_t)((uint64_t)ts + d);
    c->ev.func = run->func;
    c->ev.flags = run->flags & 3u;
    c->ev.seq = 0;
    return 1;
}

static inline int before(const vct_run_cursor *x, const vct_run_cursor *y)
{
    if (x->ev.ts != y->ev.ts)
        return x->ev.ts < y->ev.ts;
    if (x->ev.end != y->ev.end)
        return x->ev.end > y->ev.end;
    return x->run < y->run;
}

static void sift_down(vct_merge *m, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, best = i;
        if (l < m->n && before(&m->cur[m->heap[l]], &m->cur[m->heap[best]]))
            best = l;
        if (l + 1 < m->n && before(&m->cur[m->heap[l + 1]], &m->cur[m->heap[best]]))
            best = l + 1;
        if (best == i)
            return;
        uint32_t tmp = m->heap[i];
        m->heap[i] = m->heap[best];
        m->heap[best] = tmp;
        i = best;
    }
}

int vct_merge_begin(vct_merge *m, const vct_thread *th)
{
    memset(m, 0, sizeof *m);
    if (!th->nruns)
        return 0;
    m->cur = malloc(th->nruns * sizeof *m->cur);
    m->heap = malloc(th->nruns * sizeof *m->heap);
    if (!m->cur || !m->heap) {
        vct_merge_end(m);
        return -1;
    }
    for (size_t i = 0; i < th->nruns; i++) {
        const vct_run *r = &th->runs[i];
        if (!r->count)
            continue;
        vct_run_cursor *c = &m->cur[i];
        c->p = th->packed + r->off;
        c->left = r->count - 1;
        c->run = (uint32_t)i;
        advance(c, r, 1);
        m->heap[m->n++] = (uint32_t)i;
    }
    for (size_t i = m->n / 2; i-- > 0;)
        sift_down(m, i);
    m->runs = th->runs;
    return 0;
}

int vct_merge_next(vct_merge *m, vct_event *ev)
{
    if (!m->n)
        return 0;
    vct_run_cursor *c = &m->cur[m->heap[0]];
    *ev = c->ev;
    if (!advance(c, &m->runs[c->run], 0))
        m->heap[0] = m->heap[--m->n];
    sift_down(m, 0);
    return 1;
}

void vct_merge_end(vct_merge *m)
{
    free(m->cur);
    free(m->heap);
    m->cur = NULL;
    m->heap = NULL;
    m->n = 0;
}

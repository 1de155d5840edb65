/* request_profile.c — one request's breakdown (request_profile.h).
 *
 * A slice's subtree is contiguous in its thread's sorted events (a parent comes first, its
 * descendants are the events after it that start before it ends), so each slice is walked
 * as a thread of its own: once through the summary's accumulator (self time, waiting), once
 * to build the merged call tree.  Cost: the request's events; the per-function arrays are
 * the trace's, allocated once for every request.
 */
#include "request_profile.h"

#include <stdlib.h>
#include <string.h>

typedef struct req_node {
    uint32_t func;
    size_t first_child, next_sibling; /* SIZE_MAX: none */
    int64_t incl;
} req_node;

int vct_req_profiler_init(vct_req_profiler *p, const vct_trace *t)
{
    memset(p, 0, sizeof *p);
    p->trace = t;
    return vct_summary_init(&p->acc, t, 1);
}

void vct_req_profiler_free(vct_req_profiler *p)
{
    vct_summary_free(&p->acc);
    free(p->nodes);
    free(p->stack);
    memset(p, 0, sizeof *p);
}

void vct_req_profile_free(vct_req_profile *prof)
{
    free(prof->path);
    free(prof->top);
    memset(prof, 0, sizeof *prof);
}

/* The view of slice event k of th: the event and its descendants, as a thread. */
static vct_thread slice_view(const vct_thread *th, size_t k)
{
    vct_thread v = *th;
    size_t n = k + 1;
    while (n < th->nevents && th->events[n].ts < th->events[k].end)
        n++;
    v.events = th->events + k;
    v.nevents = n - k;
    return v;
}

/* ---- the merged call tree ----------------------------------------------------------------- */

static size_t new_node(vct_req_profiler *p, uint32_t func)
{
    if (p->nnodes == p->nodes_cap) {
        size_t cap = p->nodes_cap ? p->nodes_cap * 2 : 256;
        req_node *bigger = realloc(p->nodes, cap * sizeof *bigger);
        if (!bigger)
            return SIZE_MAX;
        p->nodes = bigger;
        p->nodes_cap = cap;
    }
    p->nodes[p->nnodes] = (req_node){func, SIZE_MAX, SIZE_MAX, 0};
    return p->nnodes++;
}

/* The child of `parent` for func, created if new; SIZE_MAX on allocation failure. */
static size_t child_of(vct_req_profiler *p, size_t parent, uint32_t func)
{
    size_t c = p->nodes[parent].first_child;
    for (; c != SIZE_MAX; c = p->nodes[c].next_sibling)
        if (p->nodes[c].func == func)
            return c;
    c = new_node(p, func);
    if (c != SIZE_MAX) {
        p->nodes[c].next_sibling = p->nodes[parent].first_child;
        p->nodes[parent].first_child = c;
    }
    return c;
}

static void tree_open(void *ctx, const vct_event *ev, int64_t start, int64_t end, size_t depth)
{
    vct_req_profiler *p = ctx;
    if (p->failed)
        return;
    if (depth >= p->stack_cap) {
        size_t cap = p->stack_cap ? p->stack_cap * 2 : 64;
        size_t *bigger = realloc(p->stack, cap * sizeof *bigger);
        if (!bigger) {
            p->failed = 1;
            return;
        }
        p->stack = bigger;
        p->stack_cap = cap;
    }
    /* 0: the entry; a slice of another function (a task the request's task created, by
     * task markers) is a child of the entry */
    size_t node = depth                          ? child_of(p, p->stack[depth - 1], ev->func)
                  : ev->func == p->nodes[0].func ? 0
                                                 : child_of(p, 0, ev->func);
    if (node == SIZE_MAX) {
        p->failed = 1;
        return;
    }
    p->stack[depth] = node;
    int64_t incl = vct_sat_diff(end, start);
    if (p->chain_live && (depth == 0 || (depth == p->chain_depth + 1 &&
                                         (ev->flags & VCT_EV_RESUME)))) {
        incl = vct_sat_add(incl, p->gap); /* awaiting until this slice resumed it */
        p->chain_depth = depth;
    } else
        p->chain_live = 0;
    p->nodes[node].incl = vct_sat_add(p->nodes[node].incl, incl);
    if (!depth && node) /* the entry's time includes its child tasks' slices */
        p->nodes[0].incl = vct_sat_add(p->nodes[0].incl, incl);
}

/* The child of node c with the largest inclusive time (ties: the earlier function id), or
 * SIZE_MAX at a leaf or a wait (its callees are waiting, not a path of work). */
static size_t heaviest_child(const vct_req_profiler *p, size_t c)
{
    if (vct_summary_kind(&p->acc, p->nodes[c].func) != VCT_WAIT_NONE)
        return SIZE_MAX;
    size_t best = SIZE_MAX;
    for (size_t k = p->nodes[c].first_child; k != SIZE_MAX; k = p->nodes[k].next_sibling) {
        const req_node *x = &p->nodes[k];
        if (best == SIZE_MAX || x->incl > p->nodes[best].incl ||
            (x->incl == p->nodes[best].incl && x->func < p->nodes[best].func))
            best = k;
    }
    return best;
}

/* The heaviest path from the entry (node 0).  0, or -1 (memory). */
static int heaviest_path(const vct_req_profiler *p, vct_req_profile *out)
{
    size_t n = 0;
    for (size_t c = 0; c != SIZE_MAX; c = heaviest_child(p, c))
        n++;
    out->path = malloc(n * sizeof *out->path);
    if (!out->path)
        return -1;
    n = 0;
    for (size_t c = 0; c != SIZE_MAX; c = heaviest_child(p, c))
        out->path[n++] = (vct_req_step){p->nodes[c].func, p->nodes[c].incl};
    out->npath = n;
    return 0;
}

/* ---- self time and waiting ------------------------------------------------------------------ */

/* The top ntop working functions by self time, and waiting by kind, from the accumulator. */
static int self_and_waits(vct_req_profiler *p, size_t ntop, vct_req_profile *out)
{
    vct_summary *a = &p->acc;
    vct_summary_sort(a, VCT_SORT_SELF);
    out->top = malloc((ntop ? ntop : 1) * sizeof *out->top);
    if (!out->top)
        return -1;
    for (size_t i = 0; i < a->ntouched; i++) {
        uint32_t f = a->touched[i];
        const vct_func_stats *s = &a->stats[f];
        enum vct_wait_kind kind = vct_summary_kind(a, f);
        if (kind != VCT_WAIT_NONE)
            out->wait[kind] = vct_sat_add(out->wait[kind], s->wait);
        out->wait[VCT_WAIT_AT_ATTACH] = vct_sat_add(out->wait[VCT_WAIT_AT_ATTACH], s->at_attach);
        if (kind == VCT_WAIT_NONE && s->self > 0 && out->ntop < ntop)
            out->top[out->ntop++] = (vct_req_step){f, s->self};
    }
    out->waiting = a->waiting;
    return 0;
}

int vct_req_profile_compute(vct_req_profiler *p, const vct_requests *r, const vct_request *q,
                            size_t ntop, vct_req_profile *out)
{
    static const vct_walk_ops tree_ops = {tree_open, NULL};
    memset(out, 0, sizeof *out);
    const vct_thread *th = &p->trace->threads[q->thread];
    p->nnodes = 0;
    p->failed = 0;
    int rc = new_node(p, q->func) == SIZE_MAX ? -1 : 0;
    int64_t prev_end = q->ts;
    for (size_t s = q->first; !rc && s != SIZE_MAX; s = r->slices[s].next) {
        vct_thread view = slice_view(th, r->slices[s].event);
        p->gap = vct_sat_diff(view.events[0].ts, prev_end);
        p->chain_live = p->gap > 0;
        p->chain_depth = 0;
        if (view.events[0].end > prev_end)
            prev_end = view.events[0].end;
        if (vct_summary_add_thread(&p->acc, &view) < 0 ||
            vct_thread_walk(&view, &tree_ops, p) < 0 || p->failed)
            rc = -1;
    }
    out->busy = p->acc.busy;
    out->measured = p->trace->has_cpu;
    out->on_cpu = p->acc.busy_cpu;
    out->cpu_seen = p->acc.busy_seen;
    out->suspended = vct_sat_diff(vct_sat_diff(q->end, q->ts), out->busy);
    if (!rc)
        rc = heaviest_path(p, out) < 0 || self_and_waits(p, ntop, out) < 0 ? -1 : 0;
    vct_summary_reset(&p->acc);
    if (rc)
        vct_req_profile_free(out);
    return rc;
}

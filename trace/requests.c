/* requests.c — recognising the requests of a trace (requests.h).
 *
 * Entries are decided once per function name (requests.def, or a --entry glob), then each
 * thread's sorted events are scanned once: a call that starts inside the current request's
 * slice is nested (skipped), an entry call outside starts a request, an entry resume extends
 * the open request of the same function on that thread.  With asyncio task markers, the
 * tasks whose coroutine is an entry are requests first (scan_tasks), and the entry calls
 * inside their steps are skipped by the scan.  Memory: the request list and one event index
 * per slice (and the tasks' arrays).
 */
#include "requests.h"
#include "pyname.h"
#include "tasks.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

typedef struct req_rule {
    enum vct_req_kind kind;
    const char *qualname, *file, *server;
} req_rule;

static const req_rule rules[] = {
#define REQ(kind, qualname, file, server) {VCT_REQ_##kind, qualname, file, server},
#include "requests.def"
#undef REQ
};

/* The rule a Python name "qualname (path:line)" matches, or NULL (pyname.c's matching, the
 * same as waits.c's). */
static const req_rule *rule_of(const char *name)
{
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (vct_pyname_is(name, rules[i].qualname, rules[i].file))
            return &rules[i];
    return NULL;
}

unsigned char *vct_requests_entries(const vct_trace *t, const char *entry_glob)
{
    unsigned char *entries = calloc(t->nfuncs ? t->nfuncs : 1, 1);
    if (!entries)
        return NULL;
    char shortname[512];
    for (size_t f = 0; f < t->nfuncs; f++) {
        const char *name = t->funcs[f];
        if (entry_glob) {
            vct_pyname_short(name, shortname, sizeof shortname);
            if (!fnmatch(entry_glob, name, 0) || !fnmatch(entry_glob, shortname, 0))
                entries[f] = VCT_REQ_ENTRY + 1;
        } else {
            const req_rule *r = rule_of(name);
            if (r)
                entries[f] = (unsigned char)(r->kind + 1);
        }
    }
    return entries;
}

const char *vct_req_server_of(const char *name)
{
    const req_rule *r = rule_of(name);
    return r ? r->server : NULL;
}

const char *vct_req_kind_name(enum vct_req_kind kind)
{
    static const char *const names[VCT_REQ_NKINDS] = {"--entry", "WSGI", "ASGI", "Celery"};
    return (unsigned)kind < VCT_REQ_NKINDS ? names[kind] : "?";
}

void vct_requests_free(vct_requests *r)
{
    free(r->reqs);
    free(r->slices);
    memset(r, 0, sizeof *r);
}

/* Appends a slice (event k) to request q (SIZE_MAX: none yet).  0, or -1 (memory). */
static int push_slice(vct_requests *r, size_t q, size_t k)
{
    if (r->nslices == r->slices_cap) {
        size_t cap = r->slices_cap ? r->slices_cap * 2 : 256;
        vct_req_slice *bigger = realloc(r->slices, cap * sizeof *bigger);
        if (!bigger)
            return -1;
        r->slices = bigger;
        r->slices_cap = cap;
    }
    size_t s = r->nslices++;
    r->slices[s] = (vct_req_slice){k, SIZE_MAX};
    if (q != SIZE_MAX) {
        r->slices[r->reqs[q].last].next = s;
        r->reqs[q].last = s;
        r->reqs[q].nslices++;
    }
    return 0;
}

/* A new request whose first slice is event k of thread ti.  0, or -1 (memory). */
static int start_request(vct_requests *r, size_t ti, size_t k, const vct_event *ev)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        vct_request *bigger = realloc(r->reqs, cap * sizeof *bigger);
        if (!bigger)
            return -1;
        r->reqs = bigger;
        r->cap = cap;
    }
    if (push_slice(r, SIZE_MAX, k) < 0)
        return -1;
    unsigned cut = (ev->flags & (VCT_EV_AT_ATTACH | VCT_EV_RESUME)) ? VCT_REQ_CUT_START : 0;
    r->reqs[r->n++] = (vct_request){ti, r->nslices - 1, r->nslices - 1, 1, ev->ts, ev->end,
                                    ev->func, cut, 0, NULL, 0};
    return 0;
}

/* Per function, the latest request it started on the thread being scanned. */
typedef struct latest {
    size_t *req;    /* [nfuncs]: request index */
    size_t *thread; /* [nfuncs]: the thread it is on, SIZE_MAX: none */
} latest;

/* ---- requests by asyncio task (tasks.h) ------------------------------------------------- */

/* With task markers, a task whose coroutine is an entry is a request; its slices are its
 * steps and those of every task it created (transitively), in time order, a step nested in
 * one already taken (an eager child's first step) being part of it. */
typedef struct by_task {
    vct_tasks k;
    size_t *root; /* per task: the request task it belongs to (its outermost entry ancestor,
                     itself included), or SIZE_MAX */
    size_t *req;  /* per task: its request (index into vct_requests.reqs), or SIZE_MAX */
    size_t *members; /* per request task: how many tasks have it as root */
} by_task;

static int in_task_request(const by_task *bt, size_t ti, int64_t ts)
{
    size_t s = vct_tasks_step_at(&bt->k, ti, ts);
    return s != SIZE_MAX && bt->root[bt->k.steps[s].task] != SIZE_MAX;
}

/* 1: built (bt filled), 0: no task markers in scope, -1: memory. */
static int by_task_init(const vct_trace *t, const unsigned char *entries, uint64_t pid,
                        by_task *bt)
{
    memset(bt, 0, sizeof *bt);
    int any = 0;
    for (size_t i = 0; i < t->nthreads && !any; i++)
        any = t->threads[i].tasks.n && (!pid || t->threads[i].pid == pid);
    if (!any)
        return 0;
    if (vct_tasks_build(t, &bt->k) < 0)
        return -1;
    size_t n = bt->k.n ? bt->k.n : 1;
    bt->root = malloc(n * sizeof *bt->root);
    bt->req = malloc(n * sizeof *bt->req);
    bt->members = calloc(n, sizeof *bt->members);
    if (!bt->root || !bt->req || !bt->members)
        return -1;
    for (size_t i = 0; i < bt->k.n; i++) {
        bt->root[i] = bt->req[i] = SIZE_MAX;
        size_t cur = i;
        for (size_t hops = 0; cur != SIZE_MAX && hops <= bt->k.n; hops++) { /* no cycle */
            if (entries[bt->k.tasks[cur].func])
                bt->root[i] = cur;
            cur = bt->k.tasks[cur].parent;
        }
    }
    for (size_t i = 0; i < bt->k.n; i++)
        if (bt->root[i] != SIZE_MAX)
            bt->members[bt->root[i]]++;
    return 1;
}

static void by_task_free(by_task *bt)
{
    vct_tasks_free(&bt->k);
    free(bt->root);
    free(bt->req);
    free(bt->members);
}

/* The task requests of thread ti.  0, or -1 (memory). */
static int scan_tasks(const vct_trace *t, by_task *bt, size_t ti, vct_requests *r)
{
    const vct_thread *th = &t->threads[ti];
    const vct_tasks *k = &bt->k;
    size_t lo = 0, hi = k->nsteps; /* steps are by (thread, event): the first of ti */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (k->steps[mid].thread < ti)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t s = lo; s < k->nsteps && k->steps[s].thread == ti; s++) {
        size_t root = bt->root[k->steps[s].task];
        if (root == SIZE_MAX)
            continue;
        const vct_task *rt = &k->tasks[root];
        const vct_event *ev = &th->events[k->steps[s].event];
        if (s == rt->first_step) {
            if (start_request(r, ti, k->steps[s].event, ev) < 0) /* on rt->thread */
                return -1;
            bt->req[root] = r->n - 1;
            vct_request *q = &r->reqs[r->n - 1];
            q->end = rt->end;
            q->task_id = rt->id;
            q->task_name = rt->name;
            q->ntasks = bt->members[root];
            continue;
        }
        size_t q = bt->req[root];
        if (q == SIZE_MAX || r->reqs[q].thread != ti || ev->ts >= rt->end || ev->ts < rt->ts)
            continue; /* another thread's (a slice is an event of the request's thread),
                         before its request began (a broken trace), or after it ended */
        if (ev->ts < th->events[r->slices[r->reqs[q].last].event].end)
            continue; /* inside a slice already taken */
        if (push_slice(r, q, k->steps[s].event) < 0)
            return -1;
    }
    return 0;
}

/* The requests of one thread.  0, or -1 (memory). */
static int scan_thread(const vct_trace *t, const unsigned char *entries, size_t ti,
                       latest *lt, const by_task *bt, vct_requests *r)
{
    const vct_thread *th = &t->threads[ti];
    int64_t cover_end = INT64_MIN; /* end of the slice being covered */
    for (size_t k = 0; k < th->nevents; k++) {
        const vct_event *ev = &th->events[k];
        if (ev->ts < cover_end || !entries[ev->func])
            continue;
        if (bt && in_task_request(bt, ti, ev->ts))
            continue; /* a slice of a task's request (below) */
        cover_end = ev->end;
        if (!(ev->flags & VCT_EV_RESUME) || lt->thread[ev->func] != ti) {
            if (start_request(r, ti, k, ev) < 0)
                return -1;
            lt->req[ev->func] = r->n - 1;
            lt->thread[ev->func] = ti;
            continue;
        }
        size_t q = lt->req[ev->func]; /* a resume of the open coroutine request */
        if (push_slice(r, q, k) < 0)
            return -1;
        if (ev->end > r->reqs[q].end)
            r->reqs[q].end = ev->end;
    }
    return 0;
}

int vct_requests_find(const vct_trace *t, const unsigned char *entries, uint64_t pid,
                      vct_requests *out)
{
    memset(out, 0, sizeof *out);
    size_t nf = t->nfuncs ? t->nfuncs : 1;
    latest lt = {malloc(nf * sizeof *lt.req), malloc(nf * sizeof *lt.thread)};
    by_task bt;
    int tasks = by_task_init(t, entries, pid, &bt);
    int rc = lt.req && lt.thread && tasks >= 0 ? 0 : -1;
    for (size_t f = 0; !rc && f < nf; f++)
        lt.thread[f] = SIZE_MAX;
    for (size_t ti = 0; !rc && ti < t->nthreads; ti++)
        if (!pid || t->threads[ti].pid == pid) {
            if (tasks > 0)
                rc = scan_tasks(t, &bt, ti, out);
            if (!rc)
                rc = scan_thread(t, entries, ti, &lt, tasks > 0 ? &bt : NULL, out);
        }
    for (size_t i = 0; !rc && i < out->n; i++) {
        vct_request *q = &out->reqs[i];
        if (vct_trace_ends_at_detach(t, t->threads[q->thread].pid, q->end))
            q->cut |= VCT_REQ_CUT_END;
    }
    by_task_free(&bt);
    free(lt.req);
    free(lt.thread);
    if (rc)
        vct_requests_free(out);
    return rc;
}

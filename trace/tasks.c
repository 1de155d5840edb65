/* tasks.c — a trace's asyncio task markers and names, and the tasks built from them
 * (tasks.h).
 *
 * Apart from model.c because it is one mechanism (which task a coroutine step ran for) that
 * `convert --tasks`, `summary` and `requests` share; load.c calls vct_tasks_finish once the
 * model is finished.
 * The markers come from a file that may be hostile: an id out of range, a value that is not
 * an integer, a marker with no event, a name that is not a string are dropped, never
 * trusted.  Memory: arrays sized by the markers (and one flag per function), nothing per
 * event.
 */
#include "tasks.h"
#include "cvf_reader.h"
#include "pyname.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- loading ------------------------------------------------------------------------------ */

static int add_mark(vct_thread *th, int64_t ts, uint32_t id)
{
    vct_task_marks *k = &th->tasks;
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 64;
        vct_task_mark *bigger = realloc(k->m, cap * sizeof *bigger);
        if (!bigger)
            return -1;
        k->m = bigger;
        k->cap = cap;
    }
    k->m[k->n++] = (vct_task_mark){ts, id};
    return 0;
}

int vct_tasks_add_group(vct_trace *t, const struct cvf_counter_group *g)
{
    size_t plen = strlen(VCT_TASK_COUNTER_PREFIX);
    if (strncmp(g->name, VCT_TASK_COUNTER_PREFIX, plen) != 0 || g->nkeys != 1 ||
        strcmp(g->keys[0], "id") != 0)
        return 0;
    char *endp;
    unsigned long long tid = strtoull(g->name + plen, &endp, 10);
    if (*endp || endp == g->name + plen || tid != g->tid)
        return 0; /* someone else's counter that happens to start with "task " */
    vct_thread *th = vct_trace_thread(t, g->pid, g->tid);
    if (!th)
        return -1;
    double last = NAN;
    for (size_t i = 0; i < g->nts; i++) {
        const cvf_counter_value *v = &g->values[i];
        double id = v->tag == CVF_COUNTER_FLOAT ? v->v.f
                    : v->tag == CVF_COUNTER_LONG ? (double)v->v.i
                    : v->tag == CVF_COUNTER_SAME ? last
                                                 : NAN;
        last = id;
        if (!(id >= 1 && id <= VCT_TASK_ID_MAX) || id != floor(id))
            continue; /* not a task id: NaN, zero, negative, fractional or beyond the range */
        if (add_mark(th, g->ts_ns[i] / 10, (uint32_t)id) < 0)
            return -1;
    }
    return 0;
}

int vct_tasks_add_name(vct_trace *t, uint64_t pid, uint64_t id, const char *name)
{
    if (id < 1 || id > VCT_TASK_ID_MAX || !name || !*name)
        return 0;
    if (t->ntask_names == t->task_names_cap) {
        size_t cap = t->task_names_cap ? t->task_names_cap * 2 : 64;
        struct vct_task_name *bigger = realloc(t->task_names, cap * sizeof *bigger);
        if (!bigger)
            return -1;
        t->task_names = bigger;
        t->task_names_cap = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return -1;
    t->task_names[t->ntask_names++] = (struct vct_task_name){pid, (uint32_t)id, copy};
    return 0;
}

static int cmp_mark(const void *a, const void *b)
{
    const vct_task_mark *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* By (pid, id), then the order recorded (the first name wins). */
static int cmp_name(const void *a, const void *b)
{
    const struct vct_task_name *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x < y ? -1 : x > y; /* stable enough: only ties of one task, any is valid */
}

int vct_tasks_finish(vct_trace *t)
{
    for (size_t i = 0; i < t->nthreads; i++) {
        vct_task_marks *k = &t->threads[i].tasks;
        int sorted = 1;
        for (size_t j = 1; j < k->n && sorted; j++)
            sorted = cmp_mark(&k->m[j - 1], &k->m[j]) <= 0;
        if (!sorted)
            qsort(k->m, k->n, sizeof *k->m, cmp_mark);
    }
    if (t->ntask_names > 1)
        qsort(t->task_names, t->ntask_names, sizeof *t->task_names, cmp_name);
    return 0;
}

static int cmp_pair(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

int vct_tasks_count(const vct_trace *t, uint64_t pid, uint64_t *ntasks, uint64_t *nsteps)
{
    size_t n = 0;
    for (size_t i = 0; i < t->nthreads; i++)
        if (!pid || t->threads[i].pid == pid)
            n += t->threads[i].tasks.n;
    *ntasks = 0;
    *nsteps = n;
    if (!n)
        return 0;
    uint64_t *pairs = malloc(n * 2 * sizeof *pairs);
    if (!pairs)
        return -1;
    size_t m = 0;
    for (size_t i = 0; i < t->nthreads; i++) {
        const vct_thread *th = &t->threads[i];
        if (pid && th->pid != pid)
            continue;
        for (size_t j = 0; j < th->tasks.n; j++, m++)
            pairs[2 * m] = th->pid, pairs[2 * m + 1] = th->tasks.m[j].id;
    }
    qsort(pairs, n, 2 * sizeof *pairs, cmp_pair);
    for (size_t j = 0; j < n; j++)
        *ntasks += j == 0 || cmp_pair(&pairs[2 * j], &pairs[2 * (j - 1)]) != 0;
    free(pairs);
    return 0;
}

/* ---- building the tasks -------------------------------------------------------------------- */

/* The first event of th starting at or after ts. */
static size_t lower_bound(const vct_thread *th, int64_t ts)
{
    size_t lo = 0, hi = th->nevents;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (th->events[mid].ts < ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The event a marker at ts names: the outermost (first in walk order) starting exactly at
 * ts, else at ts ± 1 tick (rounding); SIZE_MAX: none. */
static size_t match_event(const vct_thread *th, int64_t ts)
{
    size_t k = lower_bound(th, ts > INT64_MIN ? ts - 1 : ts), near = SIZE_MAX;
    for (; k < th->nevents && th->events[k].ts <= (ts < INT64_MAX ? ts + 1 : ts); k++) {
        if (th->events[k].ts == ts)
            return k;
        if (near == SIZE_MAX)
            near = k;
    }
    return near;
}

typedef struct raw_step {
    size_t thread, event;
    uint64_t pid;
    uint32_t id;
    size_t order; /* the marker's rank on its thread: the first of two on one event wins */
} raw_step;

static int cmp_raw(const void *a, const void *b)
{
    const raw_step *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    if (x->event != y->event)
        return x->event < y->event ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

typedef struct task_key {
    uint64_t pid;
    uint32_t id;
} task_key;

static int cmp_key(const void *a, const void *b)
{
    const task_key *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static size_t find_task(const vct_tasks *k, uint64_t pid, uint32_t id)
{
    size_t lo = 0, hi = k->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const vct_task *x = &k->tasks[mid];
        if (x->pid < pid || (x->pid == pid && x->id < id))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < k->n && k->tasks[lo].pid == pid && k->tasks[lo].id == id ? lo : SIZE_MAX;
}

static const char *find_name(const vct_trace *t, uint64_t pid, uint32_t id)
{
    size_t lo = 0, hi = t->ntask_names;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct vct_task_name *x = &t->task_names[mid];
        if (x->pid < pid || (x->pid == pid && x->id < id))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->ntask_names && t->task_names[lo].pid == pid && t->task_names[lo].id == id
               ? t->task_names[lo].name
               : NULL;
}

/* The steps: every marker matched to its event; two markers on one event: the first. */
static int build_steps(const vct_trace *t, raw_step **rawp, size_t *nrawp)
{
    size_t nmarks = 0;
    for (size_t i = 0; i < t->nthreads; i++)
        if (t->threads[i].events)
            nmarks += t->threads[i].tasks.n;
    raw_step *raw = malloc((nmarks ? nmarks : 1) * sizeof *raw);
    if (!raw)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < t->nthreads; i++) {
        const vct_thread *th = &t->threads[i];
        if (!th->events)
            continue;
        for (size_t j = 0; j < th->tasks.n; j++) {
            size_t e = match_event(th, th->tasks.m[j].ts);
            if (e != SIZE_MAX)
                raw[n++] = (raw_step){i, e, th->pid, th->tasks.m[j].id, j};
        }
    }
    qsort(raw, n, sizeof *raw, cmp_raw);
    size_t m = 0;
    for (size_t j = 0; j < n; j++)
        if (!m || raw[j].thread != raw[m - 1].thread || raw[j].event != raw[m - 1].event)
            raw[m++] = raw[j];
    *rawp = raw;
    *nrawp = m;
    return 0;
}

/* The tasks of the steps, each with its first and last step, name and coroutine. */
static int build_tasks(const vct_trace *t, vct_tasks *k, const raw_step *raw, size_t n)
{
    task_key *keys = malloc((n ? n : 1) * sizeof *keys);
    k->steps = malloc((n ? n : 1) * sizeof *k->steps);
    if (!keys || !k->steps) {
        free(keys);
        return -1;
    }
    for (size_t j = 0; j < n; j++)
        keys[j] = (task_key){raw[j].pid, raw[j].id};
    qsort(keys, n, sizeof *keys, cmp_key);
    size_t ntasks = 0;
    for (size_t j = 0; j < n; j++)
        if (!ntasks || cmp_key(&keys[j], &keys[ntasks - 1]) != 0)
            keys[ntasks++] = keys[j];
    k->tasks = malloc((ntasks ? ntasks : 1) * sizeof *k->tasks);
    if (!k->tasks) {
        free(keys);
        return -1;
    }
    for (size_t j = 0; j < ntasks; j++)
        k->tasks[j] = (vct_task){keys[j].pid, keys[j].id, find_name(t, keys[j].pid, keys[j].id),
                                 SIZE_MAX, SIZE_MAX, INT64_MAX, INT64_MIN, 0, 0, SIZE_MAX, 0};
    k->n = ntasks;
    free(keys);
    for (size_t j = 0; j < n; j++) {
        size_t q = find_task(k, raw[j].pid, raw[j].id);
        const vct_event *ev = &t->threads[raw[j].thread].events[raw[j].event];
        vct_task *task = &k->tasks[q];
        k->steps[j] = (vct_task_step){raw[j].thread, raw[j].event, q};
        task->nsteps++;
        if (ev->ts < task->ts) {
            task->ts = ev->ts;
            task->first_step = j;
            task->thread = raw[j].thread;
            task->func = ev->func;
            task->started_before = (ev->flags & (VCT_EV_RESUME | VCT_EV_AT_ATTACH)) != 0;
        }
        if (ev->end > task->end)
            task->end = ev->end;
    }
    k->nsteps = n;
    return 0;
}

/* Appends a boundary (the array is sized for every one a thread can have). */
static void put_bound(vct_tasks *k, size_t *nb, int64_t ts, size_t step)
{
    k->bounds[(*nb)++] = (vct_task_bound){ts, step};
}

/* Each thread's ownership map: its steps are nested or apart (they are calls), so a stack
 * of the open ones gives, at every start and end, the innermost. */
static int build_bounds(const vct_trace *t, vct_tasks *k)
{
    k->bounds = malloc((2 * k->nsteps + 1) * sizeof *k->bounds);
    k->bound_first = calloc(t->nthreads + 1, sizeof *k->bound_first);
    size_t *stack = malloc((k->nsteps ? k->nsteps : 1) * sizeof *stack);
    int64_t *ends = malloc((k->nsteps ? k->nsteps : 1) * sizeof *ends);
    int rc = k->bounds && k->bound_first && stack && ends ? 0 : -1;
    size_t nb = 0, s = 0;
    for (size_t ti = 0; !rc && ti < t->nthreads; ti++) {
        k->bound_first[ti] = nb;
        const vct_thread *th = &t->threads[ti];
        size_t depth = 0;
        for (; s < k->nsteps && k->steps[s].thread == ti; s++) {
            const vct_event *ev = &th->events[k->steps[s].event];
            int64_t a = ev->ts, b = ev->end > a ? ev->end : vct_sat_add(a, 1);
            while (depth && ends[depth - 1] <= a) {
                depth--;
                put_bound(k, &nb, ends[depth], depth ? stack[depth - 1] : SIZE_MAX);
            }
            if (depth && b > ends[depth - 1])
                b = ends[depth - 1]; /* a broken trace: cut at the enclosing step's end */
            stack[depth] = s;
            ends[depth++] = b;
            put_bound(k, &nb, a, s);
        }
        while (depth) {
            depth--;
            put_bound(k, &nb, ends[depth], depth ? stack[depth - 1] : SIZE_MAX);
        }
    }
    if (!rc)
        k->bound_first[t->nthreads] = nb;
    free(stack);
    free(ends);
    return rc;
}

size_t vct_tasks_step_at(const vct_tasks *k, size_t ti, int64_t ts)
{
    if (!k->bound_first || ti >= k->trace->nthreads)
        return SIZE_MAX;
    size_t lo = k->bound_first[ti], hi = k->bound_first[ti + 1], first = lo;
    while (lo < hi) { /* the first boundary after ts */
        size_t mid = lo + (hi - lo) / 2;
        if (k->bounds[mid].ts <= ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == first ? SIZE_MAX : k->bounds[lo - 1].step;
}

/* Whether f is asyncio's BaseEventLoop.create_task. */
static int is_create_task(const char *name)
{
    return vct_pyname_is(name, "BaseEventLoop.create_task", "asyncio/base_events.py");
}

/* Parents of the tasks whose first step is on thread ti (see tasks.h).  pending: scratch of
 * th->nevents create_task calls at most, grown here. */
static int link_thread(const vct_trace *t, vct_tasks *k, size_t ti, const unsigned char *ct,
                       size_t **pending, size_t *pending_cap)
{
    const vct_thread *th = &t->threads[ti];
    size_t head = 0, tail = 0, s = 0;
    while (s < k->nsteps && k->steps[s].thread < ti)
        s++;
    for (size_t e = 0; e < th->nevents; e++) {
        for (; s < k->nsteps && k->steps[s].thread == ti && k->steps[s].event <= e; s++) {
            vct_task *task = &k->tasks[k->steps[s].task];
            if (k->steps[s].event != e || task->first_step != s || task->started_before)
                continue;
            /* eager: inside a create_task call still open (the latest such) */
            size_t c = SIZE_MAX;
            for (size_t j = tail; j > head && tail - j < 64; j--) {
                size_t cand = (*pending)[j - 1];
                if (cand != SIZE_MAX && th->events[cand].end > th->events[e].ts) {
                    c = cand;
                    (*pending)[j - 1] = SIZE_MAX;
                    break;
                }
            }
            while (c == SIZE_MAX && head < tail) /* else the oldest unmatched call */
                c = (*pending)[head++];
            if (c == SIZE_MAX)
                continue;
            size_t owner = vct_tasks_step_at(k, ti, th->events[c].ts);
            size_t parent = owner == SIZE_MAX ? SIZE_MAX : k->steps[owner].task;
            if (parent != k->steps[s].task)
                task->parent = parent;
        }
        if (!ct[th->events[e].func])
            continue;
        if (tail == *pending_cap) {
            size_t cap = *pending_cap ? *pending_cap * 2 : 64;
            size_t *bigger = realloc(*pending, cap * sizeof *bigger);
            if (!bigger)
                return -1;
            *pending = bigger;
            *pending_cap = cap;
        }
        (*pending)[tail++] = e;
    }
    return 0;
}

static int link_parents(const vct_trace *t, vct_tasks *k)
{
    unsigned char *ct = calloc(t->nfuncs ? t->nfuncs : 1, 1);
    if (!ct)
        return -1;
    int any = 0;
    for (size_t f = 0; f < t->nfuncs; f++)
        any |= ct[f] = (unsigned char)is_create_task(t->funcs[f]);
    size_t *pending = NULL, cap = 0;
    int rc = 0;
    for (size_t ti = 0; any && !rc && ti < t->nthreads; ti++)
        if (t->threads[ti].tasks.n && t->threads[ti].events)
            rc = link_thread(t, k, ti, ct, &pending, &cap);
    free(pending);
    free(ct);
    return rc;
}

int vct_tasks_build(const vct_trace *t, vct_tasks *out)
{
    memset(out, 0, sizeof *out);
    out->trace = t;
    raw_step *raw = NULL;
    size_t nraw = 0;
    int rc = build_steps(t, &raw, &nraw);
    if (!rc)
        rc = build_tasks(t, out, raw, nraw);
    free(raw);
    if (!rc)
        rc = build_bounds(t, out);
    if (!rc)
        rc = link_parents(t, out);
    if (rc)
        vct_tasks_free(out);
    return rc;
}

void vct_tasks_free(vct_tasks *k)
{
    free(k->tasks);
    free(k->steps);
    free(k->bounds);
    free(k->bound_first);
    memset(k, 0, sizeof *k);
}

const char *vct_task_label(const vct_task *task, char *buf, size_t len)
{
    if (task->name)
        return task->name;
    snprintf(buf, len, "Task-%u", (unsigned)task->id);
    return buf;
}

/* model.c — per-thread sorted events, interned names, and the nesting walk.
 *
 * Owns the in-memory shape every trace reader of the CLI (summary, speedscope and collapsed
 * export) works on; loading from a file lives in load.c, which also runs the finishing steps
 * of the analyses built on the model (cpu.c, tasks.c): nothing here calls them.  Memory is a
 * handful of flat arrays so a million-event trace costs ~24 MB and one qsort per thread.
 */
#include "model.h"
#include "model_runs.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vct_trace *vct_trace_new(void)
{
    return calloc(1, sizeof(vct_trace));
}

void vct_trace_free(vct_trace *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nfuncs; i++)
        free(t->funcs[i]);
    free(t->funcs);
    free(t->func_slots);
    for (size_t i = 0; i < t->nthreads; i++) {
        free(t->threads[i].name);
        free(t->threads[i].events);
        vct_runs_free(&t->threads[i]);
        free(t->threads[i].cpu.ts);
        free(t->threads[i].cpu.cpu);
        free(t->threads[i].sched.ts);
        free(t->threads[i].sched.state);
        free(t->threads[i].run.ts);
        free(t->threads[i].run.cpu);
        free(t->threads[i].tasks.m);
    }
    for (size_t i = 0; i < t->ntask_names; i++)
        free(t->task_names[i].name);
    free(t->task_names);
    free(t->threads);
    for (size_t i = 0; i < t->nprocs; i++)
        free(t->procs[i].name);
    free(t->procs);
    free(t->thread_slots);
    free(t->filters);
    free(t->sched_why);
    free(t->sessions);
    free(t);
}

int64_t vct_trace_span(const vct_trace *t)
{
    if (!t->nevents || t->max_end <= t->min_ts)
        return 0;
    uint64_t span = (uint64_t)t->max_end - (uint64_t)t->min_ts; /* exact: max_end > min_ts */
    return span > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)span;
}

uint64_t vct_thread_calls(const vct_thread *th)
{
    if (!th->events)
        return vct_runs_calls(th); /* compact, or no event */
    uint64_t n = 0;
    for (size_t k = 0; k < th->nevents; k++)
        n += !(th->events[k].flags & VCT_EV_RESUME);
    return n;
}

/* FNV-1a: names are short and interned once per .cvf group, so simplicity wins. */
static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static int grow_func_slots(vct_trace *t)
{
    size_t cap = t->func_slots_cap ? t->func_slots_cap * 2 : 256;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t id = 0; id < t->nfuncs; id++) {
        size_t i = hash_name(t->funcs[id]) & (cap - 1);
        while (slots[i])
            i = (i + 1) & (cap - 1);
        slots[i] = (uint32_t)id + 1;
    }
    free(t->func_slots);
    t->func_slots = slots;
    t->func_slots_cap = cap;
    return 0;
}

int vct_trace_intern(vct_trace *t, const char *name, uint32_t *id)
{
    /* keep the table at most half full */
    if ((t->nfuncs + 1) * 2 > t->func_slots_cap && grow_func_slots(t) < 0)
        return -1;
    size_t mask = t->func_slots_cap - 1;
    size_t i = hash_name(name) & mask;
    for (; t->func_slots[i]; i = (i + 1) & mask) {
        uint32_t cand = t->func_slots[i] - 1;
        if (!strcmp(t->funcs[cand], name)) {
            *id = cand;
            return 0;
        }
    }
    if (t->nfuncs >= UINT32_MAX - 1)
        return -1;
    if (t->nfuncs == t->funcs_cap) {
        size_t cap = t->funcs_cap ? t->funcs_cap * 2 : 256;
        char **funcs = realloc(t->funcs, cap * sizeof *funcs);
        if (!funcs)
            return -1;
        t->funcs = funcs;
        t->funcs_cap = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return -1;
    t->funcs[t->nfuncs] = copy;
    t->func_slots[i] = (uint32_t)t->nfuncs + 1;
    *id = (uint32_t)t->nfuncs++;
    return 0;
}

static size_t thread_hash(uint64_t pid, uint64_t tid)
{
    uint64_t h = (pid * 0x9E3779B97F4A7C15ULL) ^ (tid + 0x632BE59BD9B4E019ULL + (pid << 6));
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ULL;
    return (size_t)(h ^ (h >> 29));
}

/* Rebuilds the (pid, tid) index at twice the size (or at 64). */
static int grow_thread_slots(vct_trace *t)
{
    size_t cap = t->thread_slots_cap ? t->thread_slots_cap * 2 : 64;
    while (cap < (t->nthreads + 1) * 2)
        cap *= 2;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t k = 0; k < t->nthreads; k++) {
        size_t i = thread_hash(t->threads[k].pid, t->threads[k].tid) & (cap - 1);
        while (slots[i])
            i = (i + 1) & (cap - 1);
        slots[i] = (uint32_t)k + 1;
    }
    free(t->thread_slots);
    t->thread_slots = slots;
    t->thread_slots_cap = cap;
    return 0;
}

vct_thread *vct_trace_thread(vct_trace *t, uint64_t pid, uint64_t tid)
{
    if (t->last_thread < t->nthreads && t->threads[t->last_thread].pid == pid &&
        t->threads[t->last_thread].tid == tid)
        return &t->threads[t->last_thread];
    /* A hash, not a scan: a hostile or just large trace may hold 200k threads, and a scan per
     * new thread made loading quadratic (minutes).  Kept at most half full. */
    if (t->nthreads >= UINT32_MAX - 1 ||
        ((t->nthreads + 1) * 2 > t->thread_slots_cap && grow_thread_slots(t) < 0))
        return NULL;
    size_t mask = t->thread_slots_cap - 1;
    size_t i = thread_hash(pid, tid) & mask;
    for (; t->thread_slots[i]; i = (i + 1) & mask) {
        size_t k = t->thread_slots[i] - 1;
        if (t->threads[k].pid == pid && t->threads[k].tid == tid) {
            t->last_thread = k;
            return &t->threads[k];
        }
    }
    if (t->nthreads == t->threads_cap) {
        size_t cap = t->threads_cap ? t->threads_cap * 2 : 16;
        vct_thread *threads = realloc(t->threads, cap * sizeof *threads);
        if (!threads)
            return NULL;
        t->threads = threads;
        t->threads_cap = cap;
    }
    vct_thread *th = &t->threads[t->nthreads];
    memset(th, 0, sizeof *th);
    th->pid = pid;
    th->tid = tid;
    t->thread_slots[i] = (uint32_t)t->nthreads + 1;
    t->last_thread = t->nthreads++;
    return th;
}

int vct_trace_set_thread_name(vct_trace *t, uint64_t pid, uint64_t tid, const char *name)
{
    vct_thread *th = vct_trace_thread(t, pid, tid);
    if (!th)
        return -1;
    char *copy = strdup(name);
    if (!copy)
        return -1;
    free(th->name); /* the last name wins, as in VizTracer's reader */
    th->name = copy;
    return 0;
}

int vct_trace_set_process_name(vct_trace *t, uint64_t pid, const char *name)
{
    char *copy = strdup(name);
    if (!copy)
        return -1;
    for (size_t i = 0; i < t->nprocs; i++)
        if (t->procs[i].pid == pid) {
            free(t->procs[i].name);
            t->procs[i].name = copy;
            return 0;
        }
    if (t->nprocs == t->procs_cap) {
        size_t cap = t->procs_cap ? t->procs_cap * 2 : 8;
        struct vct_process *bigger = realloc(t->procs, cap * sizeof *bigger);
        if (!bigger) {
            free(copy);
            return -1;
        }
        t->procs = bigger;
        t->procs_cap = cap;
    }
    t->procs[t->nprocs].pid = pid;
    t->procs[t->nprocs++].name = copy;
    return 0;
}

const char *vct_trace_process_name(const vct_trace *t, uint64_t pid)
{
    for (size_t i = 0; i < t->nprocs; i++)
        if (t->procs[i].pid == pid)
            return t->procs[i].name;
    return NULL;
}

int vct_trace_has_pid(const vct_trace *t, uint64_t pid)
{
    if (vct_trace_process_name(t, pid))
        return 1;
    for (size_t i = 0; i < t->nthreads; i++)
        if (t->threads[i].pid == pid)
            return 1;
    return 0;
}

int vct_trace_add_event(vct_trace *t, vct_thread *th, int64_t ts, uint64_t dur, uint32_t func,
                        unsigned flags)
{
    if (th->nevents >= VCT_MAX_THREAD_EVENTS)
        return -1;
    if (th->nevents == th->cap) {
        /* small first: many threads of one call each must not cost 24 KB apiece */
        size_t cap = th->cap ? th->cap * 2 : 4;
        vct_event *events = realloc(th->events, cap * sizeof *events);
        if (!events)
            return -1;
        th->events = events;
        th->cap = cap;
    }
    vct_event *ev = &th->events[th->nevents++];
    ev->ts = ts;
    /* a corrupt dur must not wrap the end around to the past */
    ev->end = (ts >= 0 ? dur > (uint64_t)(INT64_MAX - ts) : dur > (uint64_t)INT64_MAX)
                  ? INT64_MAX
                  : ts + (int64_t)dur;
    ev->func = func;
    ev->seq = (uint32_t)th->nevents & VCT_MAX_THREAD_EVENTS;
    ev->flags = flags & 3u;
    if (!t->nevents || ts < t->min_ts)
        t->min_ts = ts;
    if (!t->nevents || ev->end > t->max_end)
        t->max_end = ev->end;
    t->nevents++;
    return 0;
}

/* The agent writes "vcattach":"resume" compactly; a JSON round trip may add spaces. */
static int has_mark(const char *json, size_t len, const char *value)
{
    static const char key[] = "\"" VCT_ARG_KEY "\"";
    const char *end = json + len;
    for (const char *p = json; (p = memmem(p, (size_t)(end - p), key, sizeof key - 1));) {
        p += sizeof key - 1;
        while (p < end && (*p == ' ' || *p == ':' || *p == '\t' || *p == '\n' || *p == '\r'))
            p++;
        size_t vl = strlen(value);
        if (p < end && *p == '"' && (size_t)(end - p) > vl + 1 && !memcmp(p + 1, value, vl) &&
            p[vl + 1] == '"')
            return 1;
    }
    return 0;
}

unsigned vct_args_flags(const char *json, size_t len)
{
    if (!memmem(json, len, VCT_ARG_KEY, sizeof VCT_ARG_KEY - 1))
        return 0;
    return (has_mark(json, len, VCT_ARG_RESUME) ? VCT_EV_RESUME : 0) |
           (has_mark(json, len, VCT_ARG_AT_ATTACH) ? VCT_EV_AT_ATTACH : 0);
}

void vct_trace_add_drops(vct_trace *t, uint64_t dropped)
{
    t->has_drops = 1;
    t->dropped = dropped > UINT64_MAX - t->dropped ? UINT64_MAX : t->dropped + dropped;
}

int vct_trace_note_session(vct_trace *t, uint64_t pid, int detach, int64_t ts)
{
    if (detach)
        for (size_t i = t->nsessions; i-- > 0;)
            if (t->sessions[i].pid == pid && t->sessions[i].detach < 0) {
                t->sessions[i].detach = ts;
                return 0;
            }
    if (t->nsessions == t->sessions_cap) {
        size_t cap = t->sessions_cap ? t->sessions_cap * 2 : 8;
        struct vct_session *bigger = realloc(t->sessions, cap * sizeof *bigger);
        if (!bigger)
            return -1;
        t->sessions = bigger;
        t->sessions_cap = cap;
    }
    t->sessions[t->nsessions++] = (struct vct_session){pid, detach ? -1 : ts, detach ? ts : -1};
    return 0;
}

int vct_trace_ends_at_detach(const vct_trace *t, uint64_t pid, int64_t end)
{
    for (size_t i = 0; i < t->nsessions; i++) {
        int64_t d = t->sessions[i].detach;
        if (t->sessions[i].pid == pid && d >= 0 && end >= d - 2 && end <= vct_sat_add(d, 2))
            return 1;
    }
    return 0;
}

/* Parents first: earlier start, and at the same start the longer call encloses the shorter. */
static inline int event_before(const vct_event *x, const vct_event *y)
{
    if (x->ts != y->ts)
        return x->ts < y->ts;
    if (x->end != y->end)
        return x->end > y->end;
    return x->seq < y->seq;
}

/* Natural merge sort.  A thread's events arrive as one sorted run per function (the .cvf
 * groups them by name, ts-sorted), so merging the runs costs O(n log runs) — several times
 * faster than qsort on a million events, with the comparison inlined.  Stable, and `seq`
 * breaks every tie anyway.  Returns -1 if the scratch buffer cannot be allocated. */
static int sort_events(vct_event *ev, size_t n)
{
    size_t nruns = 0, *runs = NULL; /* run i is [runs[i], runs[i + 1]) */
    vct_event *tmp = NULL;
    if (n < 2)
        return 0;
    runs = malloc((n + 1) * sizeof *runs);
    if (!runs)
        return -1;
    runs[nruns++] = 0;
    for (size_t i = 1; i < n; i++)
        if (event_before(&ev[i], &ev[i - 1]))
            runs[nruns++] = i;
    runs[nruns] = n;
    if (nruns == 1) {
        free(runs);
        return 0;
    }
    tmp = malloc(n * sizeof *tmp);
    if (!tmp) {
        free(runs);
        return -1;
    }
    vct_event *src = ev, *dst = tmp;
    while (nruns > 1) {
        size_t merged = 0;
        for (size_t r = 0; r < nruns; r += 2) {
            size_t lo = runs[r], mid = runs[r + 1], hi = r + 2 <= nruns ? runs[r + 2] : mid;
            size_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi)
                dst[o++] = event_before(&src[b], &src[a]) ? src[b++] : src[a++];
            memcpy(dst + o, src + a, (mid - a) * sizeof *dst);
            o += mid - a;
            memcpy(dst + o, src + b, (hi - b) * sizeof *dst);
            runs[merged++] = lo;
        }
        runs[merged] = n;
        nruns = merged;
        vct_event *swap = src;
        src = dst;
        dst = swap;
    }
    if (src != ev)
        memcpy(ev, src, n * sizeof *ev);
    free(tmp);
    free(runs);
    return 0;
}

/* Processes in pid order; in each, the main thread (tid == pid) first, then by tid. */
static int cmp_thread_key(uint64_t pid, uint64_t tid, const vct_thread *y)
{
    if (pid != y->pid)
        return pid < y->pid ? -1 : 1;
    int xmain = tid == pid, ymain = y->tid == y->pid;
    if (xmain != ymain)
        return ymain - xmain;
    return tid < y->tid ? -1 : tid > y->tid;
}

static int cmp_thread(const void *a, const void *b)
{
    const vct_thread *x = a;
    return cmp_thread_key(x->pid, x->tid, b);
}

size_t vct_trace_thread_index(const vct_trace *t, uint64_t pid, uint64_t tid)
{
    size_t lo = 0, hi = t->nthreads;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_thread_key(pid, tid, &t->threads[mid]);
        if (!c)
            return mid;
        if (c > 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return SIZE_MAX;
}

int vct_trace_finish(vct_trace *t)
{
    for (size_t i = 0; i < t->nthreads; i++) /* a compact thread's runs are sorted already */
        if (t->threads[i].events && sort_events(t->threads[i].events, t->threads[i].nevents) < 0)
            return -1;
    if (t->nthreads > 1)
        qsort(t->threads, t->nthreads, sizeof *t->threads, cmp_thread);
    /* the index names positions that the sort just changed: rebuilt if a thread is added */
    free(t->thread_slots);
    t->thread_slots = NULL;
    t->thread_slots_cap = 0;
    t->last_thread = 0;
    t->nprocesses = 0;
    for (size_t i = 0; i < t->nthreads; i++)
        if (i == 0 || t->threads[i].pid != t->threads[i - 1].pid)
            t->nprocesses++;
    return 0;
}

long vct_trace_find_thread(const vct_trace *t, const char *name_or_tid)
{
    for (size_t i = 0; i < t->nthreads; i++)
        if (t->threads[i].name && !strcmp(t->threads[i].name, name_or_tid))
            return (long)i;
    char *endp;
    unsigned long long tid = strtoull(name_or_tid, &endp, 10);
    if (*name_or_tid && !*endp)
        for (size_t i = 0; i < t->nthreads; i++)
            if (t->threads[i].tid == tid)
                return (long)i;
    return -1;
}

const char *vct_thread_label(const vct_thread *th, char *buf, size_t buflen)
{
    if (th->name && *th->name)
        snprintf(buf, buflen, "%s", th->name);
    else
        snprintf(buf, buflen, "thread %" PRIu64, th->tid);
    return buf;
}

/* ---- the nesting walk ------------------------------------------------------------------- */

typedef struct walk_frame {
    vct_event ev;        /* a copy: a compact thread's events exist only while merged */
    int64_t start, end;  /* clipped */
    int64_t child_ticks; /* sum of the direct children's clipped durations */
} walk_frame;

int vct_thread_walk(const vct_thread *th, const vct_walk_ops *ops, void *ctx)
{
    size_t cap = 64, depth = 0;
    vct_merge merge;
    int compact = th->events == NULL && th->nruns > 0;
    walk_frame *stack = malloc(cap * sizeof *stack);
    if (!stack || (compact && vct_merge_begin(&merge, th) < 0)) {
        free(stack);
        return -1;
    }
    size_t i = 0;
    for (;;) {
        vct_event cur;
        int have = compact ? vct_merge_next(&merge, &cur)
                           : (i < th->nevents ? (cur = th->events[i++], 1) : 0);
        /* close every call that ended before this one starts (all of them at the end) */
        while (depth && (!have || stack[depth - 1].end <= cur.ts)) {
            walk_frame *f = &stack[--depth];
            int64_t dur = f->end - f->start;
            if (ops->close)
                ops->close(ctx, &f->ev, f->start, f->end, dur - f->child_ticks, depth);
            if (depth)
                stack[depth - 1].child_ticks = vct_sat_add(stack[depth - 1].child_ticks, dur);
        }
        if (!have)
            break;
        int64_t end = cur.end;
        if (depth && end > stack[depth - 1].end)
            end = stack[depth - 1].end;
        if (depth == cap) {
            walk_frame *bigger = realloc(stack, cap * 2 * sizeof *stack);
            if (!bigger) {
                free(stack);
                if (compact)
                    vct_merge_end(&merge);
                return -1;
            }
            stack = bigger;
            cap *= 2;
        }
        stack[depth] = (walk_frame){cur, cur.ts, end, 0};
        if (ops->open)
            ops->open(ctx, &stack[depth].ev, cur.ts, end, depth);
        depth++;
    }
    free(stack);
    if (compact)
        vct_merge_end(&merge);
    return 0;
}

/* live.c — the live aggregation of `vcattach top`: frames in, per-second buckets of every
 * function and thread out (live.h says how and why; live_view.c makes rows of them).
 *
 * The frame parsers here are bounded and check every length before reading (the agent is
 * untrusted): a malformed frame is counted and left, never a crash.  Memory: two fixed tables
 * (functions, threads) sized from the budget at creation, then per function its buckets and
 * name, per thread its buckets and stack, each charged to the budget before it is allocated.
 */
#include "live.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"
#include "requests.h"
#include "waits.h"

#define MAX_THREADS 8192u  /* table slots (half used at most) */
#define FUNC_EST_BYTES 4096u

static uint64_t hash2(uint32_t a, uint32_t b)
{
    uint64_t h = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

static int charge(vct_live *lv, uint64_t bytes)
{
    if (lv->used + bytes > lv->budget)
        return -1;
    lv->used += bytes;
    return 0;
}

vct_live *vct_live_new(uint64_t budget, unsigned window_s, int64_t now_ms)
{
    if (window_s < 1 || window_s > LIVE_MAX_SECONDS)
        return NULL;
    vct_live *lv = calloc(1, sizeof *lv);
    if (!lv)
        return NULL;
    lv->budget = budget;
    lv->nsec = window_s + 1; /* the window's seconds and the one being filled */
    lv->t0_ms = lv->now_ms = now_ms;
    uint64_t per_func = sizeof(struct live_func) * 2 + (uint64_t)lv->nsec * sizeof(struct live_bucket) + 64;
    size_t fcap = 64;
    while (fcap < (1u << 22) && (uint64_t)fcap * per_func / 4 < budget) /* named-only keys are cheap */
        fcap *= 2;
    lv->fcap = fcap;
    lv->tcap = MAX_THREADS;
    uint64_t tables = fcap * sizeof(struct live_func) + lv->tcap * sizeof(struct live_thread);
    if (charge(lv, sizeof *lv + tables) < 0 ||
        !(lv->funcs = calloc(fcap, sizeof *lv->funcs)) ||
        !(lv->threads = calloc(lv->tcap, sizeof *lv->threads))) {
        vct_live_free(lv);
        return NULL;
    }
    return lv;
}

void vct_live_free(vct_live *lv)
{
    if (!lv)
        return;
    for (size_t i = 0; lv->funcs && i < lv->fcap; i++) {
        free(lv->funcs[i].name);
        free(lv->funcs[i].b);
    }
    for (size_t i = 0; lv->threads && i < lv->tcap; i++) {
        free(lv->threads[i].stack);
        free(lv->threads[i].b);
    }
    free(lv->funcs);
    free(lv->threads);
    free(lv);
}

void vct_live_now(vct_live *lv, int64_t now_ms)
{
    if (now_ms > lv->now_ms)
        lv->now_ms = now_ms;
}

static uint64_t second_of(const vct_live *lv)
{
    return (uint64_t)(lv->now_ms - lv->t0_ms) / 1000u + 1;
}

void live_window(const struct vct_live *lv, uint64_t *first, uint64_t *last, double *ms)
{
    uint64_t cur = second_of(lv);
    uint64_t w = lv->nsec - 1;
    *last = cur;
    *first = cur > w ? cur - w + 1 : 1;
    int64_t from = lv->t0_ms + (int64_t)(*first - 1) * 1000;
    *ms = (double)(lv->now_ms - from);
    if (*ms < 1)
        *ms = 1;
}

double live_rate(const struct vct_live *lv, uint32_t proc)
{
    if (proc < lv->nprocs && lv->procs[proc].ns_per_raw > 0)
        return lv->procs[proc].ns_per_raw;
    for (size_t i = 0; i < lv->nprocs; i++)
        if (lv->procs[i].ns_per_raw > 0)
            return lv->procs[i].ns_per_raw;
    return 1.0 / 2.5; /* before any CLOCK: the agent's own guess for an unmeasured TSC */
}

unsigned live_bin(uint64_t d)
{
    if (d < 4)
        return (unsigned)d;
    unsigned lg = 63u - (unsigned)__builtin_clzll(d);
    unsigned sub = (unsigned)((d >> (lg - 2)) & 3u);
    unsigned bin = lg * 4 + sub - 4;
    return bin < LIVE_HIST_BINS ? bin : LIVE_HIST_BINS - 1;
}

double live_bin_value(unsigned bin)
{
    if (bin < 4)
        return bin;
    unsigned lg = (bin + 4) / 4, sub = (bin + 4) % 4;
    return ldexp(1.0 + (sub + 0.5) / 4.0, (int)lg);
}

static struct live_proc *proc_of(vct_live *lv, unsigned proc, uint64_t pid)
{
    if (proc >= LIVE_MAX_PROCS)
        return NULL;
    while (lv->nprocs <= proc)
        lv->procs[lv->nprocs++].pid = 0;
    if (lv->procs[proc].pid == 0)
        lv->procs[proc].pid = pid;
    return &lv->procs[proc];
}

/* The function (proc, id), made if there is room; NULL when the table or the budget is
 * full.  calls: it is called (its buckets are needed), not only named. */
static struct live_func *func_of(vct_live *lv, uint32_t proc, uint32_t id, int calls)
{
    size_t mask = lv->fcap - 1;
    struct live_func *f = NULL;
    for (size_t i = hash2(proc, id) & mask, n = 0; n < lv->fcap; i = (i + 1) & mask, n++) {
        struct live_func *c = &lv->funcs[i];
        if (c->used && c->proc == proc && c->id == id) {
            f = c;
            break;
        }
        if (c->used)
            continue;
        if (lv->nfuncs * 2 >= lv->fcap)
            return NULL;
        c->used = 1;
        c->proc = proc;
        c->id = id;
        lv->nfuncs++;
        f = c;
        break;
    }
    if (!f || f->b || !calls)
        return f;
    uint64_t bytes = (uint64_t)lv->nsec * sizeof(struct live_bucket);
    if (charge(lv, bytes) < 0)
        return NULL;
    if (!(f->b = calloc(lv->nsec, sizeof *f->b))) {
        lv->used -= bytes;
        return NULL;
    }
    return f;
}

static struct live_thread *thread_of(vct_live *lv, uint32_t proc, uint32_t owner)
{
    size_t mask = lv->tcap - 1;
    for (size_t i = hash2(proc, owner) & mask, n = 0; n < lv->tcap; i = (i + 1) & mask, n++) {
        struct live_thread *t = &lv->threads[i];
        if (t->b && t->proc == proc && t->owner == owner)
            return t;
        if (t->b)
            continue;
        if (lv->nthreads * 2 >= lv->tcap)
            return NULL;
        uint64_t bytes = (uint64_t)lv->nsec * sizeof(struct live_tbucket);
        if (charge(lv, bytes) < 0)
            return NULL;
        if (!(t->b = calloc(lv->nsec, sizeof *t->b))) {
            lv->used -= bytes;
            return NULL;
        }
        t->proc = proc;
        t->owner = owner;
        t->tid = -1;
        lv->nthreads++;
        return t;
    }
    return NULL;
}

static void set_name(vct_live *lv, struct live_func *f, const char *s, size_t n)
{
    if (n > LIVE_NAME_MAX)
        n = LIVE_NAME_MAX;
    if (f->name || charge(lv, n + 1) < 0)
        return; /* a key is named once; a name without room stays unnamed */
    if (!(f->name = malloc(n + 1))) {
        lv->used -= n + 1;
        return;
    }
    memcpy(f->name, s, n);
    f->name[n] = '\0';
    f->wait_kind = (int)vct_wait_kind_of(f->name);
    f->request = vct_req_server_of(f->name) != NULL;
}

/* Self time of a call: its duration minus the calls it encloses, popped from the thread's
 * stack (sorted by start; cum: the sum of durations up to and including the entry). */
static uint64_t settle(vct_live *lv, struct live_thread *t, uint64_t start, uint64_t dur)
{
    uint64_t end = start + dur;
    size_t lo = 0, hi = t->depth; /* the first entry that starts at or after `start` */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->stack[mid].start < start)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t below = lo ? t->stack[lo - 1].cum : 0;
    uint64_t children = t->depth > lo ? t->stack[t->depth - 1].cum - below : 0;
    t->depth = lo;
    if (t->depth == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        if (cap > LIVE_STACK_MAX) { /* the oldest half goes: only long-running callers lose */
            size_t half = t->cap / 2;
            memmove(t->stack, t->stack + half, (t->cap - half) * sizeof *t->stack);
            t->depth -= half;
        } else if (charge(lv, (cap - t->cap) * sizeof *t->stack) == 0) {
            struct live_entry *s = realloc(t->stack, cap * sizeof *s);
            if (!s) {
                lv->used -= (cap - t->cap) * sizeof *t->stack;
                return children < dur ? dur - children : 0;
            }
            t->stack = s;
            t->cap = cap;
        } else {
            return children < dur ? dur - children : 0;
        }
    }
    uint64_t prev = t->depth ? t->stack[t->depth - 1].cum : 0;
    t->stack[t->depth++] = (struct live_entry){start, end, prev + dur};
    return children < dur ? dur - children : 0;
}

static void *bucket(void *base, size_t size, unsigned nsec, uint64_t sec)
{
    uint64_t *b = (uint64_t *)((char *)base + (sec % nsec) * size);
    if (*b != sec) {
        memset(b, 0, size);
        *b = sec;
    }
    return b;
}

/* One record; *last: the function of the record before (a thread calls the same function
 * again and again: the table is looked up only when the key changes). */
static void record(vct_live *lv, uint32_t proc, struct live_thread *t,
                   const struct vc_wire_record *r, uint64_t sec, struct live_func **last)
{
    if (r->id == VC_WIRE_DROPPED) {
        lv->dropped += r->flags;
        return;
    }
    if (r->id >= VC_WIRE_TASK_NAME_0 - (VC_WIRE_TASK_NAME_PARTS - 1))
        return; /* CPU samples, task marks: not calls */
    lv->records++;
    uint64_t *rs = &lv->rec_seconds[sec % lv->nsec];
    if (lv->rec_second_of[sec % lv->nsec] != sec) {
        lv->rec_second_of[sec % lv->nsec] = sec;
        *rs = 0;
    }
    (*rs)++;
    struct live_func *f = *last && (*last)->id == r->id ? *last : func_of(lv, proc, r->id, 1);
    *last = f;
    if (!t || !f) {
        lv->unfitted++;
        return;
    }
    uint64_t dur = r->dur > (UINT64_MAX >> 2) ? (UINT64_MAX >> 2) : r->dur;
    uint64_t self = settle(lv, t, r->start, dur);
    struct live_bucket *b = bucket(f->b, sizeof *b, lv->nsec, sec);
    b->self += self;
    b->total += dur;
    b->calls++;
    if (dur > b->max)
        b->max = dur;
    b->hist[live_bin(dur)]++;
    struct live_tbucket *tb = bucket(t->b, sizeof *tb, lv->nsec, sec);
    tb->calls++;
    if (f->wait_kind)
        tb->wait += self;
    else
        tb->work += self;
}

static void on_chunk(vct_live *lv, unsigned proc, const unsigned char *p, size_t len)
{
    uint32_t owner, count;
    if (len < 8) {
        lv->malformed++;
        return;
    }
    memcpy(&owner, p, 4);
    memcpy(&count, p + 4, 4);
    if ((len - 8) / sizeof(struct vc_wire_record) < count) {
        lv->malformed++;
        return;
    }
    struct live_thread *t = thread_of(lv, proc, owner);
    uint64_t sec = second_of(lv);
    struct live_func *last = NULL;
    for (uint32_t i = 0; i < count; i++) {
        struct vc_wire_record r;
        memcpy(&r, p + 8 + (size_t)i * sizeof r, sizeof r);
        record(lv, proc, t, &r, sec, &last);
    }
}

static void on_names(vct_live *lv, unsigned proc, const unsigned char *p, size_t len)
{
    size_t off = 0;
    while (len - off >= 8) {
        uint32_t id, n;
        memcpy(&id, p + off, 4);
        memcpy(&n, p + off + 4, 4);
        off += 8;
        if (n > len - off) {
            lv->malformed++;
            return;
        }
        struct live_func *f = func_of(lv, proc, id, 0);
        if (f)
            set_name(lv, f, (const char *)p + off, n);
        off += n;
    }
}

static void on_threads(vct_live *lv, unsigned proc, const unsigned char *p, size_t len)
{
    size_t off = 0;
    while (len - off >= 16) {
        uint32_t owner, nlen, blen;
        int32_t tid;
        memcpy(&owner, p + off, 4);
        memcpy(&tid, p + off + 4, 4);
        memcpy(&nlen, p + off + 8, 4);
        memcpy(&blen, p + off + 12, 4);
        off += 16;
        if (nlen > len - off || blen > len - off - nlen) {
            lv->malformed++;
            return;
        }
        struct live_thread *t = thread_of(lv, proc, owner);
        if (t) {
            t->tid = tid;
            size_t n = nlen < sizeof t->name - 1 ? nlen : sizeof t->name - 1;
            memcpy(t->name, p + off, n);
            t->name[n] = '\0';
        }
        off += (size_t)nlen + blen;
    }
}

void vct_live_frame(vct_live *lv, unsigned proc, uint64_t pid, uint32_t type, const void *buf,
                    size_t len, int64_t now_ms)
{
    if (!lv->started) {
        lv->started = 1;
        lv->t0_ms = lv->now_ms = now_ms;
    }
    vct_live_now(lv, now_ms);
    struct live_proc *pr = proc_of(lv, proc, pid);
    if (!pr) {
        lv->unfitted++;
        return;
    }
    const unsigned char *p = buf;
    switch (type) {
    case VC_MSG_CHUNK: on_chunk(lv, proc, p, len); break;
    case VC_MSG_NAMES: on_names(lv, proc, p, len); break;
    case VC_MSG_THREADS: on_threads(lv, proc, p, len); break;
    case VC_MSG_CLOCK: {
        struct vc_wire_clock c;
        if (len != sizeof c) {
            lv->malformed++;
            break;
        }
        memcpy(&c, p, sizeof c);
        if (c.ns_per_raw > 0 && c.ns_per_raw < 1e6)
            pr->ns_per_raw = c.ns_per_raw;
        break;
    }
    case VC_MSG_META:
        if (len >= 8) {
            size_t n = len - 8 < sizeof pr->name - 1 ? len - 8 : sizeof pr->name - 1;
            memcpy(pr->name, p + 8, n);
            pr->name[n] = '\0';
        }
        break;
    default: break;
    }
}

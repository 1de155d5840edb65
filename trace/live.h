/* live.h — the live aggregation behind `vcattach top` (live.c, live_view.c): what a streaming
 * session's frames (CHUNK, NAMES, THREADS, CLOCK, META; common/protocol.h) say about the last
 * few seconds, kept while vcattach receives them and never written anywhere.
 *
 * A record is a completed call (start, duration, key) in its thread's completion order, so a
 * call's children have all arrived when it does: each thread keeps the calls whose parent has
 * not come yet (a stack sorted by start, with running sums of their durations), and a call's
 * self time is its duration minus the sum of the entries it encloses, found by a binary search
 * and popped.  Every function (a key of one process) has one bucket per second of the window,
 * reused when its second comes round again: self and total time, calls, the longest call and a
 * histogram of durations (4 bins per power of two: p50/p99 within 19%).  Threads have the same
 * buckets (calls, working and waiting self time).  Times stay in the agent's raw ticks until a
 * view converts them with the process's latest CLOCK fit.
 *
 * Everything comes from the target and is untrusted: every frame is checked before use, and the
 * memory held (functions, names, threads and their stacks) is bounded by the budget given at
 * creation; what does not fit is counted (calls of a function or thread that found no room),
 * never kept.
 */
#ifndef VCT_LIVE_H
#define VCT_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "vctrace.h"

#define LIVE_HIST_BINS 168      /* 4 per power of two, durations up to 2^42 ticks */
#define LIVE_NAME_MAX 511       /* a name is cut here (what a .cvf keeps) */
#define LIVE_STACK_MAX 4096     /* calls of a thread waiting for their parent */
#define LIVE_MAX_SECONDS 60     /* the longest window */

struct live_bucket {
    uint64_t second;            /* which second it holds (+1: 0 is never used) */
    uint64_t self, total, max;  /* raw ticks */
    uint32_t calls;
    uint32_t hist[LIVE_HIST_BINS];
};

struct live_func {
    uint32_t proc, id;
    char *name;                 /* NULL until named */
    int wait_kind;              /* enum vct_wait_kind */
    int request;                /* an entry point of requests.def */
    int used;                   /* the table slot holds a function */
    struct live_bucket *b;      /* nsec buckets, from its first call (NULL: named only) */
};

struct live_tbucket {
    uint64_t second;
    uint64_t work, wait;        /* self time of working and waiting calls, raw ticks */
    uint32_t calls;
};

struct live_entry { uint64_t start, end, cum; };

struct live_thread {
    uint32_t proc, owner;
    int32_t tid;
    char name[64];
    struct live_entry *stack;
    size_t depth, cap;
    struct live_tbucket *b;
};

struct live_proc {
    uint64_t pid;
    double ns_per_raw;          /* 0: no CLOCK yet */
    char name[64];
};

#define LIVE_MAX_PROCS 4096

struct vct_live {
    uint64_t budget, used;      /* bytes */
    unsigned nsec;              /* seconds in the window */
    int64_t t0_ms, now_ms;      /* t0: the first frame (the window never covers the attach) */
    int started;
    struct live_func *funcs;    /* open addressing on (proc, id) */
    size_t fcap, nfuncs;
    struct live_thread *threads; /* open addressing on (proc, owner) */
    size_t tcap, nthreads;
    struct live_proc procs[LIVE_MAX_PROCS];
    size_t nprocs;
    uint64_t records, dropped, unfitted, malformed;
    uint64_t rec_seconds[LIVE_MAX_SECONDS + 1]; /* records per second, by second % n */
    uint64_t rec_second_of[LIVE_MAX_SECONDS + 1];
};

/* The seconds of the window [first, last] and its length in ms (the current second counts as
 * far as it has gone). */
void live_window(const struct vct_live *lv, uint64_t *first, uint64_t *last, double *ms);
/* A process's ns per raw tick (its own fit, another process's, or a guess before any). */
double live_rate(const struct vct_live *lv, uint32_t proc);
/* The bin of a duration and a bin's representative duration (raw ticks). */
unsigned live_bin(uint64_t d);
double live_bin_value(unsigned bin);

#endif /* VCT_LIVE_H */

/* summary.h — where the time of a trace went: per-function self time, inclusive time, calls,
 * mean and max duration, over one thread or several merged (what `vcattach summary` prints),
 * with the time spent waiting kept apart from the time spent working.
 *
 * Times come from one nesting walk per thread (model.h):
 *   self  = a call's duration minus its direct children's (clipped) durations;
 *   total = inclusive time, counting recursion once: only calls with no active call of the
 *           same function below them on the stack add their duration, so f→g→f is not
 *           counted twice for f;
 *   mean, max over every call (recursive ones included);
 *   p50, p99 the same durations' nearest-rank percentiles, from a log-bucketed histogram per
 *           function (histogram.h: at most 0.99 % relative error, memory bounded by the
 *           spread of the durations, not their number);
 *   calls count calls: a coroutine's resume slices (VCT_EV_RESUME) add their time, not a
 *           call, and the time it spends suspended is in no slice, so it is nobody's self time.
 * Waiting (when split, the default): a call of a blocking function (waits.def) that is not
 * inside another one is a wait: its whole inclusive time is waiting, booked to that function
 * in the `wait` figure, and the calls under it are not work.  A call already running when the
 * trace began (VCT_EV_AT_ATTACH) spent the time before its first traced child in something
 * the trace did not see: that gap is waiting too ("at attach"), not its self time.  Working
 * figures (self, total) leave all waiting out.
 * A section's `busy` time is the sum of its root calls' durations, `waiting` the part of it
 * that is waiting: percentages of work are of busy - waiting.
 * Measured (a trace with CPU clock samples, cpu.h): every function also gets `on_cpu`, the
 * on-CPU part of its outermost calls' whole inclusive time (waits inside included; recursion
 * counted once), interpolated between the thread's samples, and `incl`, the part of that time
 * the samples cover (between the thread's first and last sample): off-CPU = incl - on_cpu, so
 * time no sample covers (a thread never sampled, samples beyond the spool's bound) is neither.
 * A section's busy_cpu is the on-CPU part of busy, busy_seen the covered part.
 * Waiting, measured (`measure` set, split, and the thread has CPU samples): the names no
 * longer decide, the thread's CPU clock does.  Every call's self time is split: its on-CPU
 * part (the on-CPU of its span minus that of its direct children's spans, clamped to
 * [0, self]) is working, its off-CPU part (blocked, asleep, or runnable but not running:
 * waiting for a core or the GIL) is waiting, booked to the function itself in `wait`, under
 * its listed kind or, for a function on no list, VCT_WAIT_OFFCPU.  Calls inside a listed
 * call are split like any other: the thread ran them or it did not.  The part of a self time
 * no sample covers falls back to the names, as above: waiting if the function is listed (or
 * runs inside a listed call, then booked to that call), else working.  The gap of an
 * unlisted call in progress at attach is "at attach" for its off-CPU and uncovered part,
 * work for its on-CPU part.  So `self` and `total` are measured working time, `wait` measured waiting,
 * and self + wait + at_attach is still the function's whole self time.
 * Exact (a thread with scheduler events, sched_split.h): the same, with CPU samples at every
 * context switch, so on-CPU is exact; the off-CPU part is split further: its runnable part
 * (preempted, waiting for a core) is `runnable`, neither work nor waiting, and only the
 * blocked rest is `wait`: self + wait + at_attach + runnable is the whole self time.
 * Computation only; the printing is summary_report.c's.
 */
#ifndef VCT_SUMMARY_H
#define VCT_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "histogram.h"
#include "model.h"
#include "vctrace.h" /* enum vct_sort_key */
#include "waits.h"

typedef struct vct_func_stats {
    uint64_t calls;
    int64_t self, total, sum_dur, max_dur; /* ticks; working time when split */
    int64_t wait;      /* ticks waiting in this function's outermost blocking calls */
    int64_t at_attach; /* ticks it was already in progress at attach, before its first child */
    vct_hist durs;     /* every duration summed in sum_dur: p50, p99 */
    int64_t incl;      /* measured: inclusive time of its outermost calls (waits in) that
                          the thread's CPU samples cover */
    int64_t on_cpu;    /* measured: the on-CPU part of incl */
    int64_t runnable;  /* exact (scheduler events): self time runnable, not running (CPU
                          starved): neither working nor waiting */
} vct_func_stats;

typedef struct vct_walk_slot {
    int64_t wait_at_open; /* the thread's waiting clock when the call opened */
    int64_t first_child;  /* start of its first direct child, or -1 */
    int64_t span_on, span_cov; /* measured: on-CPU and sampled ticks of the call's span */
    int64_t kids_on, kids_cov; /* measured: the same summed over its direct children */
    int64_t span_run, kids_run; /* exact: runnable ticks of its span, of its children's */
} vct_walk_slot;

/* One section (a thread, or all threads when merged) being accumulated. */
typedef struct vct_summary {
    const vct_trace *trace;
    int split;             /* keep waiting apart (the default); 0: everything is work */
    int measure;           /* split by the CPU samples where a thread has them (above); 0:
                              by names only.  Set by the caller after init. */
    int measuring;         /* the thread being walked is split by its samples */
    uint32_t wait_func;    /* the function of the outermost open wait (wait_depth) */
    vct_func_stats *stats; /* [nfuncs], indexed by function id; zero outside `touched` */
    uint32_t *active;      /* [nfuncs]: calls of the function open on the current stack */
    unsigned char *kind;   /* [nfuncs]: enum vct_wait_kind of each function (+ a seen bit) */
    uint32_t *touched;     /* ids of the functions with calls in this section */
    size_t ntouched;
    vct_walk_slot *slots;  /* per open call of the thread being walked */
    size_t nslots;
    int64_t wait_clock;    /* waiting seen so far on the thread being walked */
    size_t wait_depth;     /* depth of the outermost open wait, SIZE_MAX if none */
    int failed;            /* allocation failure during a walk */
    uint64_t calls;
    int64_t busy;          /* time in calls: the sum of root call durations */
    int64_t waiting;       /* the part of busy spent waiting */
    int64_t runnable;      /* exact: the part of busy runnable, not running (CPU starved) */
    int64_t busy_cpu;      /* measured: the on-CPU part of busy */
    int64_t busy_seen;     /* measured: the part of busy the CPU samples cover */
    const vct_thread *walking; /* the thread being walked (its CPU samples) */
    enum vct_sort_key sort;
} vct_summary;

/* Allocates the per-function arrays for t and classifies its functions.  split: see above.
 * 0, or -1 on allocation failure. */
int vct_summary_init(vct_summary *s, const vct_trace *t, int split);
void vct_summary_free(vct_summary *s);

/* Adds one thread's calls to the section.  0, or -1 on allocation failure. */
int vct_summary_add_thread(vct_summary *s, const vct_thread *th);

/* Orders `touched` by key, descending (ties: by function name).  VCT_SORT_WAIT orders by
 * wait + at_attach, VCT_SORT_CPU by on_cpu (measured). */
void vct_summary_sort(vct_summary *s, enum vct_sort_key key);

/* The wait kind of function `func` (VCT_WAIT_NONE when not split). */
enum vct_wait_kind vct_summary_kind(const vct_summary *s, uint32_t func);

/* Empties the section for the next one (keeps the arrays). */
void vct_summary_reset(vct_summary *s);

/* Which threads get a table when there are more than max_threads: the ones with the most
 * calls (a thread-per-request server has hundreds of tiny threads).  Returns a malloc'd flag
 * per thread (1 = shown), or NULL with *failed set on allocation failure; NULL and !*failed
 * when every thread fits. */
unsigned char *vct_summary_busiest_threads(const vct_trace *t, size_t max_threads, int *failed);

#endif /* VCT_SUMMARY_H */

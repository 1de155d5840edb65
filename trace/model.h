/* model.h — a loaded trace as per-thread, time-sorted complete events, and the
 * nesting walk that `vcattach summary` and the speedscope/collapsed exporters share.
 *
 * The .cvf stores complete events grouped by (pid, tid, function); every consumer here wants
 * them per thread in call order instead.  vct_trace holds exactly that: function names interned
 * once (an event is 24 bytes, not a string), events per thread sorted by (start asc, duration
 * desc) so a parent always comes before its children, and the trace-wide facts the summary
 * header prints (span, event count, drops).
 *
 * Times are ticks of 10 ns, the .cvf's own unit (cvf.h), so nothing is lost or rounded here.
 * Names carry the prefix vct_ (vcattach trace): the agent has its own vc_thread, its per-thread
 * recording state, which has nothing to do with a thread of a loaded trace.
 */
#ifndef VCT_MODEL_H
#define VCT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define VCT_TICKS_PER_US 100

/* What the agent said about a call (in the event's args, see VCT_ARG_* below). */
enum {
    VCT_EV_RESUME = 1u,    /* a coroutine/generator resumed: a slice of a call, not a call */
    VCT_EV_AT_ATTACH = 2u, /* already running when the trace began: the time before its first
                              traced child is not the function's own work */
};

/* How the agent marks them: the X event's args carry "vcattach": "resume" / "at_attach". */
#define VCT_ARG_KEY "vcattach"
#define VCT_ARG_RESUME "resume"
#define VCT_ARG_AT_ATTACH "at_attach"

/* At most this many events per thread (seq has 30 bits). */
#define VCT_MAX_THREAD_EVENTS ((1u << 30) - 1)

/* One complete call (or resume slice) on one thread. */
typedef struct vct_event {
    int64_t ts;        /* start, ticks */
    int64_t end;       /* ts + dur, saturated at INT64_MAX */
    uint32_t func;     /* index into vct_trace.funcs */
    uint32_t seq : 30; /* insertion order: makes the sort, and so every output, deterministic */
    uint32_t flags : 2; /* VCT_EV_* */
} vct_event;

/* A run of the compact form (model_runs.c): `count` events of one function and flags, in
 * walk order, delta-encoded at `off` in their thread's `packed` bytes. */
typedef struct vct_run {
    uint64_t off;
    uint32_t count;
    uint32_t func;
    uint32_t flags;
} vct_run;

/* A thread's CPU clock samples (the agent's counter "cpu TID", trace/cpu.h): at ts[i] ticks
 * the thread had run cpu[i] ticks in all.  Sorted by ts once loaded (vct_cpu_finish). */
typedef struct vct_cpu_samples {
    int64_t *ts, *cpu;
    size_t n, cap;
} vct_cpu_samples;

/* A thread's asyncio task step markers (the agent's counter "task TID", trace/tasks.h): at
 * ts[i] ticks the thread began a step of task id[i].  Sorted by ts once loaded
 * (vct_tasks_finish). */
typedef struct vct_task_mark {
    int64_t ts;
    uint32_t id; /* 1 .. VCT_TASK_ID_MAX */
} vct_task_mark;

typedef struct vct_task_marks {
    vct_task_mark *m;
    size_t n, cap;
} vct_task_marks;

/* A thread's scheduler states (the "sched TID" counters vcattach records, trace/sched_split.h): from
 * ts[i] ticks on, state[i] (VCT_SCHED_*).  In load order until vct_sched_finish. */
typedef struct vct_sched_marks {
    int64_t *ts;
    unsigned char *state;
    size_t n, cap;
} vct_sched_marks;

typedef struct vct_thread {
    uint64_t pid, tid;
    char *name; /* thread_name from the trace, or NULL */
    vct_event *events;
    size_t nevents, cap;
    /* The compact form (VCT_LOAD_COMPACT): no `events`; the calls as sorted runs of 2–5 bytes
     * an event instead of 24, merged back into order by the walk.  Only the walk and the
     * counts read a compact thread: a 100 M-call trace then loads in well under 1 GB. */
    vct_run *runs;
    size_t nruns, runs_cap;
    unsigned char *packed;
    size_t packed_len, packed_cap;
    vct_cpu_samples cpu; /* none (n = 0): a trace without CPU samples */
    vct_sched_marks sched; /* none (n = 0): no scheduler events for this thread */
    vct_cpu_samples run; /* from sched: cumulative runnable ticks at each change (sched_split.h) */
    vct_task_marks tasks; /* none (n = 0): no asyncio task ran on it, or an older agent */
} vct_thread;

typedef struct vct_trace {
    int compact; /* threads hold runs, not events (VCT_LOAD_COMPACT) */
    char **funcs; /* interned function names, id = index */
    size_t nfuncs, funcs_cap;
    uint32_t *func_slots; /* open-addressing hash of funcs: slot -> id + 1, 0 = empty */
    size_t func_slots_cap;

    vct_thread *threads; /* after vct_trace_finish: sorted by (pid, tid) */
    size_t nthreads, threads_cap;
    size_t last_thread; /* lookup cache: events arrive in runs of one thread */
    uint32_t *thread_slots; /* open-addressing hash of (pid, tid): slot -> index + 1, 0 = empty;
                               a trace may hold 200k threads (one event each) */
    size_t thread_slots_cap;

    uint64_t nevents;     /* complete events */
    uint64_t nprocesses;  /* distinct pids among threads (set by vct_trace_finish) */
    int64_t min_ts;       /* earliest start (valid if nevents) */
    int64_t max_end;      /* latest end */
    struct vct_process { uint64_t pid; char *name; } *procs; /* process_name records */
    size_t nprocs, procs_cap;
    int has_drops;        /* an event carried args.dropped */
    uint64_t dropped;     /* sum of every args.dropped */
    uint64_t interps_untraced; /* sum of the detach instants' args.interps_untraced: the
                                  agent's sub-interpreters left alone (CPython 3.12+) */
    uint64_t interps_untraced_shared; /* ... of which under the main GIL */
    char *filters;        /* the agent's "vcattach filters" instant, as text; NULL: none (a
                             full trace) */
    /* The agent's "vcattach attach" / "vcattach detach" instants, one per traced process (a
     * pid traced twice has two).  The agent closes the calls still open at stop at the detach
     * time: a call ending there was cut by the trace's end (requests.c). */
    struct vct_session { uint64_t pid; int64_t attach, detach; } *sessions; /* ticks; -1: none */
    size_t nsessions, sessions_cap;
    /* The agent's "vcattach task" instants (trace/tasks.h): a task's name, by (pid, id). */
    struct vct_task_name { uint64_t pid; uint32_t id; char *name; } *task_names;
    size_t ntask_names, task_names_cap;
    int has_cpu;          /* some thread has at least two CPU samples (trace/cpu.h) */
    int64_t cpu_period;   /* the median interval between CPU samples, ticks (0: none) */
    int has_sched;        /* some thread's CPU split is exact: scheduler events (sched_split.h) */
    int sched_tried;      /* a "vcattach sched" instant says they were asked for */
    uint64_t sched_switches, sched_lost, sched_refused; /* from those instants */
    char *sched_why;      /* why they were not recorded (the instant's), or NULL */
} vct_trace;

vct_trace *vct_trace_new(void);

/* a + b saturating at INT64_MAX (and INT64_MIN): a trace's timestamps may span the whole int64
 * range and be negative, so neither a sum of durations nor a timestamp plus a duration may
 * overflow (undefined behaviour). */
static inline int64_t vct_sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* later - earlier (later >= earlier) without overflow: saturates at INT64_MAX. */
static inline int64_t vct_sat_diff(int64_t later, int64_t earlier)
{
    if (later <= earlier)
        return 0;
    uint64_t d = (uint64_t)later - (uint64_t)earlier;
    return d > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)d;
}

/* max_end - min_ts without signed overflow (timestamps come from the file: any int64):
 * saturates at INT64_MAX; 0 when there is no event. */
int64_t vct_trace_span(const vct_trace *t);
/* The calls of a thread: its events but a coroutine's resume slices (VCT_EV_RESUME), which are
 * parts of one call, not calls. */
uint64_t vct_thread_calls(const vct_thread *th);
void vct_trace_free(vct_trace *t);

/* Returns the id of `name` (adding it if new) in *id.  0, or -1 on allocation failure. */
int vct_trace_intern(vct_trace *t, const char *name, uint32_t *id);
/* The thread (pid, tid), created if new.  NULL on allocation failure. */
vct_thread *vct_trace_thread(vct_trace *t, uint64_t pid, uint64_t tid);
int vct_trace_set_thread_name(vct_trace *t, uint64_t pid, uint64_t tid, const char *name);
/* The name of process pid (its command line, as the agent recorded it).  0 or -1 (memory). */
int vct_trace_set_process_name(vct_trace *t, uint64_t pid, const char *name);
/* The recorded name of process pid, or NULL. */
const char *vct_trace_process_name(const vct_trace *t, uint64_t pid);
/* Whether the trace holds process pid (a thread of it, or its name). */
int vct_trace_has_pid(const vct_trace *t, uint64_t pid);
/* Compact form: appends n events, already in walk order (vct_thread_walk's), as runs of
 * one function and flags.  0, or -1 on allocation failure. */
int vct_trace_add_sorted(vct_trace *t, vct_thread *th, const vct_event *ev, size_t n);
/* Appends one complete event (flags: VCT_EV_*).  0, or -1 on allocation failure or when the
 * thread already has VCT_MAX_THREAD_EVENTS events. */
int vct_trace_add_event(vct_trace *t, vct_thread *th, int64_t ts, uint64_t dur, uint32_t func,
                        unsigned flags);
/* The VCT_EV_* flags an args object (JSON text, len bytes) carries. */
unsigned vct_args_flags(const char *json, size_t len);
void vct_trace_add_drops(vct_trace *t, uint64_t dropped);
/* Records process pid's attach (detach = 0) or detach instant at ts ticks: an attach opens a
 * session, a detach closes the pid's last session without one.  0, or -1 on allocation
 * failure. */
int vct_trace_note_session(vct_trace *t, uint64_t pid, int detach, int64_t ts);
/* Whether `end` is a detach time of process pid (within 2 ticks: the agent rounds a call's
 * start and duration separately), i.e. the call was still running when the trace stopped. */
int vct_trace_ends_at_detach(const vct_trace *t, uint64_t pid, int64_t end);
/* Sorts threads and their events; call once, after the last add and before any walk (load.c
 * then finishes the CPU samples and the task markers: cpu.h, tasks.h).  0, or -1 on
 * allocation failure. */
int vct_trace_finish(vct_trace *t);
/* The index of thread (pid, tid) in a finished trace (a binary search in its order), or
 * SIZE_MAX. */
size_t vct_trace_thread_index(const vct_trace *t, uint64_t pid, uint64_t tid);

/* Which thread a --thread argument names: an exact thread name, or a decimal tid.
 * Returns the index, or -1. */
long vct_trace_find_thread(const vct_trace *t, const char *name_or_tid);

/* "MainThread" or, for an unnamed thread, "thread 1234"; written into buf. */
const char *vct_thread_label(const vct_thread *th, char *buf, size_t buflen);

/* ---- the nesting walk ------------------------------------------------------------------- */

/* Callbacks of vct_thread_walk.  `depth` is 0 for a root call.  Start and end are clipped to
 * the enclosing call (an event that overlaps its parent without nesting — a broken trace —
 * is cut at the parent's end, so the calls always form a proper tree). */
typedef struct vct_walk_ops {
    void (*open)(void *ctx, const vct_event *ev, int64_t start, int64_t end, size_t depth);
    /* self = (end - start) minus the clipped durations of the direct children. */
    void (*close)(void *ctx, const vct_event *ev, int64_t start, int64_t end, int64_t self,
                  size_t depth);
} vct_walk_ops;

/* Walks one thread's calls in order: open(parent) … children … close(parent).  Opens and
 * closes come in non-decreasing time order.  `ev` is valid during the callback only.  A
 * compact thread's runs are merged on the fly (the same order: start, then the longer call
 * first, then the order they were added in).  0, or -1 on allocation failure. */
int vct_thread_walk(const vct_thread *th, const vct_walk_ops *ops, void *ctx);

#endif /* VCT_MODEL_H */

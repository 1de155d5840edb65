/* vctrace.h — the one public header of libvctrace.a, the offline trace tools: what the command
 * line may ask of trace files.  Everything else in trace/ (the model, the loaders, the
 * analyses, the exporters and their headers) is internal: cli/ is compiled with
 * -Itrace/include only, so it cannot reach them.
 *
 *   1. results       what every call returns, and the one line it explains a failure with
 *   2. summary       `vcattach summary`: where the time of a trace went, as a text report
 *   3. requests      `vcattach requests`: every request of a trace, slowest first
 *   4. convert       `vcattach convert`: a .cvf to Chrome JSON, speedscope, folded stacks or
 *                    SVG (a window of it, with request and asyncio task tracks), or JSON back
 *   5. merge         several .cvf into one (a process tree's parts)
 *   6. live          `vcattach top`: a streaming session's frames aggregated as they arrive
 *                    (the one part that reads no file)
 *
 * Every command's input is one file or several read as one trace (merged in memory, a JSON
 * one converted to .cvf first);
 * .cvf or Chrome-trace JSON is told by the file's first bytes, never its name; asyncio tasks
 * (the agent's markers) shape the summary's header, the requests of an event loop and
 * convert's task tracks.  The reports print every name a trace holds (functions, threads,
 * processes, tasks: what the traced program's user chose) through the one terminal sanitizer
 * (common/term.h).  Times in options are ticks of 10 ns, the .cvf's unit.
 */
#ifndef VCTRACE_H
#define VCTRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- 1. results ------------------------------------------------------------------------- */

/* What the calls below return.  Not VCT_OK: one line (no prefix, no newline) in err. */
enum vct_result {
    VCT_OK = 0,
    VCT_FAILED = 1,  /* the trace cannot be read, memory ran out, the output failed */
    VCT_REFUSED = 2, /* the options do not fit the input (a process or thread it does not
                        hold, a JSON input given .cvf options, an output too big to view) */
};

/* Ticks of 10 ns in one second. */
#define VCT_TICKS_PER_SECOND 100000000ll

/* ---- 2. summary ------------------------------------------------------------------------- */

/* The percentiles' worst relative error (a log-bucketed histogram per function), as text for
 * --help and docs. */
#define VCT_PERCENTILE_ERROR_TEXT "0.99 percent"

enum vct_sort_key { VCT_SORT_SELF, VCT_SORT_TOTAL, VCT_SORT_CALLS, VCT_SORT_WAIT, VCT_SORT_CPU };

typedef struct vct_summary_options {
    const char *const *paths; /* the trace: one file, or several read as one */
    size_t npaths;
    uint64_t pid;             /* only that process's threads (0: every process) */
    size_t top;               /* functions per table */
    size_t max_threads;       /* tables for the threads with the most calls (SIZE_MAX: all) */
    const char *thread;       /* only the thread of that name or tid (NULL: every thread) */
    enum vct_sort_key sort;
    int merged;               /* one table for every thread */
    int all;                  /* no waiting table: waits ranked with work */
    int by_interp;            /* one table per interpreter, its threads merged */
} vct_summary_options;

/* Loads the trace and prints its summary to out: the header (span, calls, threads, drops,
 * filters, asyncio tasks, how CPU was measured, the processes), then a working table and a
 * waiting table per thread, per interpreter, or merged.  VCT_REFUSED: pid or thread is not
 * in the trace (err lists the threads there are). */
int vct_summary_report(const vct_summary_options *o, FILE *out, char *err, size_t errlen);

/* ---- 3. requests ------------------------------------------------------------------------ */

typedef struct vct_requests_options {
    const char *const *paths; /* the trace: one file, or several read as one */
    size_t npaths;
    const char *entry;        /* the request function, a glob (NULL: the known servers') */
    size_t top;               /* requests listed */
    int64_t min_dur;          /* ticks: list only requests at least this long */
    uint64_t pid;             /* only that process's requests (0: every process) */
} vct_requests_options;

/* Loads the trace and prints its requests to out: how many and how they were recognised,
 * the latency percentiles and histogram of the complete ones, the slowest with where their
 * time went, and apart the ones the trace's start or end cut.  VCT_REFUSED: pid is not in
 * the trace. */
int vct_requests_report(const vct_requests_options *o, FILE *out, char *err, size_t errlen);

/* ---- 4. convert ------------------------------------------------------------------------- */

/* An output format of a .cvf input. */
typedef struct vct_format_info {
    const char *name;    /* --format NAME */
    const char *ext;     /* the default output's extension */
    const char *summary; /* one line for --help */
} vct_format_info;

/* The formats, the default (chrome) first; *n gets their number. */
const vct_format_info *vct_convert_formats(size_t *n);

typedef struct vct_convert_options {
    const char *const *paths; /* one file, or several merged into one trace */
    size_t npaths;
    const char *format;       /* a vct_convert_formats() name, for a .cvf input only; NULL:
                                 the first (a JSON input converts to .cvf) */
    int windowed;             /* from, to, min_dur given (a .cvf input only) */
    int64_t from, to;         /* ticks into the trace, from its first call; to < 0: its end */
    uint64_t min_dur;         /* ticks: calls shorter are left out */
    int merged;               /* svg: one flame graph for every thread */
    int working;              /* svg, collapsed, speedscope: weighed by on-CPU time */
    int requests;             /* chrome: a track of the requests in each process ... */
    const char *entry;        /* ... recognised by this glob (NULL: the known servers') */
    int tasks;                /* chrome: each asyncio task's steps on a track of its own */
    int force;                /* convert a .cvf whose JSON would pass ~1 GiB */
    /* Now and then, bytes done of total (NULL: none). */
    void (*progress)(void *ctx, size_t done, size_t total);
    void *progress_ctx;
    /* A line for the operator that is no error (--tasks on a trace without tasks). */
    void (*note)(void *ctx, const char *line);
    void *note_ctx;
} vct_convert_options;

typedef struct vct_conversion vct_conversion;

/* Opens the input and checks the options against it: which way it converts (its first
 * bytes), whether the options apply to that direction, whether the output would be viewable.
 * VCT_OK with *cv; else nothing to free. */
int vct_convert_open(const vct_convert_options *o, vct_conversion **cv, char *err,
                     size_t errlen);
/* How messages name the input (its path, or "N files"), and its size in bytes. */
const char *vct_convert_input_name(const vct_conversion *cv);
size_t vct_convert_input_size(const vct_conversion *cv);
/* The input's path with its extension replaced by the output's (.cvf <-> the format's),
 * malloc'd; NULL when there is no such name (several inputs, memory) or it would be the
 * input itself. */
char *vct_convert_default_output(const vct_conversion *cv);
/* Converts into fd (a file the caller made, or stdout), which stays open.  VCT_OK, or
 * VCT_FAILED with err (the input's fault and its fix, or the output's). */
int vct_convert_write(vct_conversion *cv, int fd, char *err, size_t errlen);
void vct_convert_close(vct_conversion *cv);

/* ---- 5. merge --------------------------------------------------------------------------- */

/* Whether path is a whole .cvf a merge can take: every record decodes, JSON included.
 * Checking each input first lets a caller leave out a malformed one and merge the others.
 * 0, or -1 with a one-line message ("offset N: what", or why it could not be read). */
int vct_cvf_check(const char *path, char *err, size_t errlen);

/* Merges paths[0 .. n) into one .cvf written to fd.  0, or -1 with a one-line message (which
 * file, what).  Names shared by several inputs (same pid and tid) are written once. */
int vct_cvf_merge_fd(const char *const *paths, size_t n, int fd, char *err, size_t errlen);


/* ---- 6. live ---------------------------------------------------------------------------- */

/* `vcattach top`: the last seconds of a streaming session, aggregated as its frames arrive
 * (trace/live.h says how).  Frames are the agent's (untrusted): each is checked; the memory
 * held stays within budget bytes, and the calls that found no room are counted. */
typedef struct vct_live vct_live;
/* window_s: the seconds the views cover (1..60).  NULL when memory runs out or the budget
 * cannot hold the tables. */
vct_live *vct_live_new(uint64_t budget, unsigned window_s, int64_t now_ms);
void vct_live_free(vct_live *lv);
/* One streaming frame (CHUNK, NAMES, THREADS, CLOCK, META) of process number proc (0 for a
 * single process; a tree's member index), received at now_ms (CLOCK_MONOTONIC). */
void vct_live_frame(vct_live *lv, unsigned proc, uint64_t pid, uint32_t type, const void *buf,
                    size_t len, int64_t now_ms);
/* The time the views are taken at. */
void vct_live_now(vct_live *lv, int64_t now_ms);

enum vct_live_sort { VCT_LIVE_BY_SELF, VCT_LIVE_BY_TOTAL, VCT_LIVE_BY_CALLS };
enum vct_live_what { VCT_LIVE_WORK, VCT_LIVE_REQUESTS };
typedef struct vct_live_row {
    char name[512];              /* as the agent named it: sanitize before printing */
    double self_ms, total_ms;    /* per second of the window */
    double calls;                /* per second */
    double p50_ms, p99_ms, max_ms; /* of one call's duration */
    uint64_t n;                  /* calls in the window */
} vct_live_row;
/* The functions (work: not a wait of waits.def) or the request entry points (requests.def)
 * of the window, sorted, at most max into rows.  Returns how many.  The same name in several
 * processes is one row (its p99: the largest of theirs). */
size_t vct_live_functions(vct_live *lv, enum vct_live_what what, enum vct_live_sort sort,
                          vct_live_row *rows, size_t max);
typedef struct vct_live_wait {
    const char *kind;            /* "lock", "sleep", "select", … */
    double ms, calls;            /* self time and calls per second */
} vct_live_wait;
/* The wait kinds with time in the window, longest first.  Returns how many (at most max). */
size_t vct_live_waits(vct_live *lv, vct_live_wait *rows, size_t max);
typedef struct vct_live_thread {
    uint64_t pid;
    int32_t tid;
    char name[64];               /* sanitize before printing */
    double work_ms, wait_ms, calls; /* per second */
} vct_live_thread;
/* The threads with calls in the window, the busiest first. */
size_t vct_live_threads(vct_live *lv, vct_live_thread *rows, size_t max);
typedef struct vct_live_status {
    double window_s, events_per_s;
    uint64_t events, dropped, unfitted, malformed, mem_bytes, budget;
    size_t processes, threads, functions;
} vct_live_status;
void vct_live_status_of(vct_live *lv, vct_live_status *st);

#endif /* VCTRACE_H */

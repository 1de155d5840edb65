/* trace_stream.h — the controller's end of a streaming session (trace_stream.c): `vcattach
 * trace` receives what the agent records while it traces, spools it next to OUT (trace/
 * spool.h) and builds OUT from the spool at the end.
 *
 * The spool is OUT.spool, made by vcattach (O_EXCL|O_NOFOLLOW, 0600) before the target is
 * touched.  It is removed once OUT is written; on any other end (a failure, Ctrl-C twice,
 * vcattach killed) it stays, and `vcattach recover OUT.spool -o OUT` makes a trace of it.
 */
#ifndef VC_TRACE_STREAM_H
#define VC_TRACE_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "spool.h"
#include "trace_sink.h"

struct trace_stream {
    struct spool *sp;        /* the spool being written (OUT.spool) */
    struct spool *prev;      /* --last: the generation before it (OUT.spool.prev), or NULL */
    uint64_t last_ns;        /* --last DUR, 0: the whole trace */
    uint64_t rotated_records; /* --last: records of the generations dropped so far */
    uint64_t early_rotations; /* --last: generations ended by --max-trace-mb before DUR */
    int full;                /* the spool could not be written: records are dropped here */
    int broken;              /* the agent broke the protocol: nothing it sent is used */
    uint64_t lost_here;      /* ... this many */
    char why[512];           /* the spool's failure, said once */
    int64_t rate_ms;         /* for the rate on the status line */
    uint64_t rate_records;
    double rate;
    uint64_t pid;            /* the target (for the watcher, trace_watch.h) */
    uint64_t unspooled;      /* records seen without a spool (`top` without -o) */
    struct sched_events *sched; /* the scheduler's switches (sched_events.h), or NULL */
};

struct sched_events;
/* sched_events' sink: a thread's state change into the spool being written. */
void trace_stream_sched_sink(void *ctx, int32_t tid, uint64_t ns, unsigned state);

/* Creates OUT.spool (out_abs: the absolute OUT), capped at max_bytes; with force, a regular
 * file left there by an earlier run is removed first (and said).  last_ns: --last (keep the
 * final DUR: two generations, OUT.spool.prev and OUT.spool).  out_abs NULL: no spool at all
 * (`vcattach top` without -o): frames only go to the watcher (trace_watch.h).  0 or -1 + err. */
int trace_stream_open(struct trace_stream *ts, const char *out_abs, pid_t pid,
                      uint64_t max_bytes, int force, uint64_t last_ns, char *err, size_t errlen);
/* A frame of the trace (ctl_data_fn): to the watcher if there is one, and into the spool.  -1 + err only for a frame that breaks
 * the protocol; a spool that cannot be written makes `full`, and records are counted lost. */
int trace_stream_on_data(void *ctx, uint32_t type, const void *buf, size_t len, char *err,
                         size_t errlen);
/* While tracing: takes the frames ready on fd for up to slice_ms.  0: go on; 1: END came
 * (its text in end_text: the agent stopped by itself); 2: the spool just became full (stop
 * now); -1: the connection ended (err says how). */
int trace_stream_pump(struct trace_stream *ts, int fd, int slice_ms, char *end_text, size_t cap,
                      char *err, size_t errlen);
/* ", 1.2 M events (3.4 M/s), spool 12 MiB" for the status line. */
void trace_stream_progress(struct trace_stream *ts, char *buf, size_t cap);
/* The .cvf from the spool into the sink.  0 or -1 + err; st filled. */
int trace_stream_build(struct trace_stream *ts, struct trace_sink *sink, struct spool_stats *st,
                       char *err, size_t errlen);
/* Closes the spool: removed if `built`, else kept and named on stderr. */
void trace_stream_close(struct trace_stream *ts, int built);

#endif /* VC_TRACE_STREAM_H */

/* spool.h — a streamed trace on its way to a .cvf (spool.c, spool_build.c).
 *
 * While a streaming session traces (docs/protocol.md "Streaming"), the agent sends what it
 * recorded: CHUNK frames of raw records, the names of new keys, the thread table, the clock's
 * fit, and at stop the process name and the session's instants.  vcattach keeps all of it
 * here, bounded in memory: records are sorted into lanes, one or a few per (thread, key,
 * mark), each in start order and delta-encoded (a zig-zag varint of the start's delta and a
 * varint of the duration: 4–6 bytes per call against 24 raw), and every lane's bytes go to
 * the spool file when the memory held passes a bound or a second has passed.  At the end the
 * .cvf is built from the spool in one pass per lane (spool_build.c), whatever the trace's
 * length: every lane is one or more FEE groups of its (pid, tid, name).
 *
 * The spool file is self-describing: the frames as they came (names, threads, clock, meta,
 * events), lane declarations and lane segments.  If vcattach is killed, the file holds
 * everything flushed so far (at most a second behind), and `vcattach recover SPOOL -o OUT`
 * turns it into a trace (spool_open replays it).
 *
 * Everything an agent sends is untrusted (SECURITY.md): every frame is checked before it is
 * used, ids and owners are bounded, and a bad frame is an error, never a crash.
 */
#ifndef VC_SPOOL_H
#define VC_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "cvf.h"
#include "protocol.h"

struct spool;

struct spool_stats {
    uint64_t events;        /* X events written to the .cvf */
    uint64_t records;       /* records received (calls), drop markers excluded */
    uint64_t dropped;       /* calls the agent lost at the source (window full) */
    uint64_t drop_ranges;   /* ... in this many time ranges */
    uint64_t unnamed;       /* calls whose key was never named (a process killed before it
                               could say): in the .cvf as "unknown function 0x<id>" */
    uint64_t unthreaded;    /* calls of a thread never announced: not in the .cvf */
    uint64_t threads;       /* thread tracks written */
    uint64_t cpu_samples;   /* CPU clock samples written (counter events "cpu TID") */
    uint64_t task_steps;    /* asyncio task steps written (counter events "task TID") */
    uint64_t tasks;         /* asyncio tasks named (instants "vcattach task") */
    uint64_t instants_refused; /* instants beyond the list's cap (SPOOL_INSTANTS_MAX) */
    uint64_t names_refused; /* names beyond the budget of name bytes (SPOOL_NAMES_MAX) */
    uint64_t marks_lost;    /* CPU samples and task marks beyond their caps (not kept) */
    uint64_t sched_changes; /* scheduler state changes written (counter events "sched TID") */
    uint64_t spool_bytes;   /* size of the spool file */
    uint64_t cvf_bytes;
};

/* A frame type that belongs in a spool (CHUNK, NAMES, THREADS, CLOCK, META, EVENTS). */
int spool_frame_type(uint32_t type);

/* Creates the spool file at path (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600).  pid: the process,
 * as vcattach sees it (the trace's pid until the agent's META says its own).  0 or -1 + err. */
int spool_create(struct spool **out, const char *path, uint64_t pid, char *err, size_t errlen);
/* Opens an existing spool file (recover) and replays it.  0 or -1 + err. */
int spool_open(struct spool **out, const char *path, char *err, size_t errlen);

/* One frame from the agent.  0; -1 with err when the frame is malformed (the agent is not to
 * be trusted any more); -2 with err when the spool cannot be written (disk full, I/O error,
 * the size cap): what was written so far stays usable. */
int spool_add(struct spool *sp, uint32_t type, const void *payload, size_t len, char *err,
              size_t errlen);
/* What a process left in its window (common/protocol.h "the window", spool_window.c): when
 * its session ended without END, the window's clock fit, the names of its arena, and every
 * chunk it had not sent (its thread announced if the spool did not know it), through
 * spool_add.  fd: the memfd its agent passed; at most max_bytes of it are read; last: the
 * last CHUNK received from it (a chunk being sent when the process ended may have come
 * whole).  0; -1/-2 as spool_add, or -1 when the fd is not a window. */
struct spool_chunk_mark {
    int valid;
    uint32_t owner, count;
    struct vc_wire_record first, last;
};
void spool_chunk_mark_of(const void *chunk_payload, size_t len, struct spool_chunk_mark *mark);
struct spool_window_stats {
    uint64_t chunks, records;
};
int spool_add_window(struct spool *sp, int fd, uint64_t max_bytes,
                     const struct spool_chunk_mark *last, struct spool_window_stats *got,
                     char *err, size_t errlen);
/* 1 if the spool has a tid for the agent's thread slot `owner`. */
int spool_thread_known(const struct spool *sp, uint32_t owner);

/* Writes what memory holds to the file: everything received so far is on disk.  0 or -2. */
int spool_flush(struct spool *sp, char *err, size_t errlen);
/* The lane bytes held in memory before they go to the file (default 64 MiB). */
void spool_set_memory(struct spool *sp, uint64_t max_bytes);
/* Caps the spool file's size (0: none); passing it is a -2 of spool_add, after which
 * spool_at_limit is 1 (what came is kept in memory and built all the same). */
void spool_set_limit(struct spool *sp, uint64_t max_bytes);
int spool_at_limit(const struct spool *sp);

/* Counters while it runs: records received, calls dropped at the source, the file's size. */
void spool_progress(const struct spool *sp, uint64_t *records, uint64_t *dropped,
                    uint64_t *disk_bytes);

/* Threads with a known tid that have records (state slots of one OS thread counted apart). */
uint64_t spool_thread_count(const struct spool *sp);

/* Builds the .cvf into sink (cvf.h's writer).  0 or -1 + err; st filled either way. */
int spool_build(struct spool *sp, cvf_sink_fn sink, void *ctx, struct spool_stats *st,
                char *err, size_t errlen);

/* --last (a flight recorder): a trace is kept in two generations, the spool being written and
 * the one before; when the newer covers the duration, the older is dropped and a new one
 * begins.  spool_span_ns: the time the spool's records cover.  spool_rotate: a new generation
 * at path, with every name, thread, the clock and the process of `from` (so that it replays
 * alone), no record, the same cap and memory bound.  spool_build_many: one .cvf from generations (oldest first; names and
 * threads from the last), keeping only calls that end within last_ns of the newest (0: all). */
uint64_t spool_span_ns(const struct spool *sp);
int spool_rotate(const struct spool *from, const char *path, struct spool **out, char *err,
                 size_t errlen);
/* The step of --last's generations: *cur (which covers the kept duration) becomes PATH.prev,
 * the generation before (*prev) is dropped (its records and file bytes added to
 * *dropped_records and *dropped_bytes when they are not NULL), and a new *cur begins at PATH
 * (spool_rotate), with the same memory bound and size cap.  0, or -2 with err. */
int spool_next_generation(struct spool **cur, struct spool **prev, uint64_t *dropped_records,
                          uint64_t *dropped_bytes, char *err, size_t errlen);
int spool_build_many(struct spool **sps, size_t n, uint64_t last_ns, cvf_sink_fn sink,
                     void *ctx, struct spool_stats *st, char *err, size_t errlen);
/* One .cvf of several processes (a tree: one spool per process, each with its own pid, names,
 * threads and clock fit; one clock, CLOCK_MONOTONIC), in one pass over each spool. */
int spool_build_processes(struct spool **sps, size_t n, cvf_sink_fn sink, void *ctx,
                          struct spool_stats *st, char *err, size_t errlen);

/* What the budgets refused (SECURITY.md, "Budgets"), as one line for the operator:
 * "vcattach kept less than the agent sent: ..." into buf; 0 when nothing was refused. */
int spool_refusals(const struct spool_stats *st, char *buf, size_t cap);
/* One .cvf of several processes, each with its generations (--last on a tree): process p's
 * are sps[first[p] .. first[p + 1]), oldest first, with first[nprocs] == n (first NULL: one
 * each, spool_build_processes).  last_ns: only calls that end within last_ns of the newest
 * call of any process are kept (0: all). */
int spool_build_tree(struct spool **sps, size_t n, const size_t *first, uint64_t last_ns,
                     cvf_sink_fn sink, void *ctx, struct spool_stats *st, char *err,
                     size_t errlen);

/* The scheduler's state changes of the process's threads (vcattach's cli/sched_events.c,
 * not the agent's): tid as the trace names it, ns on CLOCK_MONOTONIC, state 0 blocked, 1
 * runnable, 2 on-CPU from then on.  Kept in memory only (a recovered spool has none), at most
 * SPOOL_MAX_SCHED; beyond, counted lost.  Written as counter groups "sched TID" and one
 * instant "vcattach sched" with the counts (docs/cvf-format.md). */
struct spool_sched_info {
    int recorded;      /* the events were recorded (0: not tried or failed: `why`) */
    uint64_t threads, switches, lost, refused;
    char why[200];     /* why they were not recorded ("" when they were, or --no-sched) */
};
int spool_add_sched(struct spool *sp, int32_t tid, uint64_t ns, unsigned state);
void spool_set_sched_info(struct spool *sp, const struct spool_sched_info *info);

/* Frees everything; the file is removed when `remove_file` (the trace was built). */
void spool_close(struct spool *sp, int remove_file);
const char *spool_path(const struct spool *sp);
/* Renames the spool's file (its fd stays).  0 or -2 + err. */
int spool_rename(struct spool *sp, const char *path, char *err, size_t errlen);

#endif /* VC_SPOOL_H */

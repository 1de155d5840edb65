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

struct spool;

struct spool_stats {
    uint64_t events;        /* X events written to the .cvf */
    uint64_t records;       /* records received (calls), drop markers excluded */
    uint64_t dropped;       /* calls the agent lost at the source (window full) */
    uint64_t drop_ranges;   /* ... in this many time ranges */
    uint64_t unnamed;       /* calls whose key or thread was never named (a process killed
                               before it could say): not in the .cvf */
    uint64_t threads;       /* thread tracks written */
    uint64_t cpu_samples;   /* CPU clock samples written (counter events "cpu TID") */
    uint64_t task_steps;    /* asyncio task steps written (counter events "task TID") */
    uint64_t tasks;         /* asyncio tasks named (instants "vcattach task") */
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
/* Writes what memory holds to the file: everything received so far is on disk.  0 or -2. */
int spool_flush(struct spool *sp, char *err, size_t errlen);
/* The lane bytes held in memory before they go to the file (default 64 MiB). */
void spool_set_memory(struct spool *sp, uint64_t max_bytes);
/* Caps the spool file's size (0: none); passing it is a -2 of spool_add. */
void spool_set_limit(struct spool *sp, uint64_t max_bytes);

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
 * alone), no record.  spool_build_many: one .cvf from generations (oldest first; names and
 * threads from the last), keeping only calls that end within last_ns of the newest (0: all). */
uint64_t spool_span_ns(const struct spool *sp);
int spool_rotate(const struct spool *from, const char *path, struct spool **out, char *err,
                 size_t errlen);
int spool_build_many(struct spool **sps, size_t n, uint64_t last_ns, cvf_sink_fn sink,
                     void *ctx, struct spool_stats *st, char *err, size_t errlen);
/* One .cvf of several processes (a tree: one spool per process, each with its own pid, names,
 * threads and clock fit; one clock, CLOCK_MONOTONIC), in one pass over each spool. */
int spool_build_processes(struct spool **sps, size_t n, cvf_sink_fn sink, void *ctx,
                          struct spool_stats *st, char *err, size_t errlen);

/* Frees everything; the file is removed when `remove_file` (the trace was built). */
void spool_close(struct spool *sp, int remove_file);
const char *spool_path(const struct spool *sp);
/* Renames the spool's file (its fd stays).  0 or -2 + err. */
int spool_rename(struct spool *sp, const char *path, char *err, size_t errlen);

#endif /* VC_SPOOL_H */

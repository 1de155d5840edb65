/* sched_events.h — the scheduler's context switches of a traced process's threads, read by
 * vcattach itself (sched_events.c), so that a call's span splits exactly into on-CPU,
 * runnable (preempted, still wanting a core) and blocked time (docs/cvf-format.md "sched").
 *
 * vcattach (root) opens one perf_event_open per thread of the target (a software dummy event
 * with context_switch records, timestamps on CLOCK_MONOTONIC: the trace's clock), maps its
 * ring and drains it on each tick of the trace loop; threads born during the trace are found
 * by rescanning /proc/PID/task on each tick.  Nothing runs in the target.  Rings are bounded
 * (SCHED_RING_PAGES each); what the kernel could not write is counted from its
 * PERF_RECORD_LOST records, never guessed.
 */
#ifndef VC_SCHED_EVENTS_H
#define VC_SCHED_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A thread's state from a moment on (the values of the trace's "sched TID" counters). */
enum { SCHED_BLOCKED = 0, SCHED_RUNNABLE = 1, SCHED_ON_CPU = 2 };

/* Where the states go: tid as the trace names it (the target's own pid namespace), ns on
 * CLOCK_MONOTONIC. */
typedef void (*sched_sink_fn)(void *ctx, int32_t tid, uint64_t ns, unsigned state);

struct sched_stats {
    uint64_t threads;   /* threads whose switches were recorded */
    uint64_t switches;  /* switch records read */
    uint64_t lost;      /* records the kernel lost (a ring was full: PERF_RECORD_LOST) */
    uint64_t bad;       /* malformed ring contents skipped */
    uint64_t refused;   /* threads beyond SCHED_MAX_THREADS, or whose event could not open */
};

struct sched_events;

/* Starts recording pid's threads.  0; -1 with why ("perf_event_open: Permission denied ...")
 * when no thread's event can be opened: the caller falls back to the CPU samples. */
int sched_events_open(struct sched_events **out, pid_t pid, sched_sink_fn sink, void *ctx,
                      char *why, size_t cap);
/* Drains every ring; opens the threads born since the last rescan (at most every 50 ms). */
void sched_events_tick(struct sched_events *se);
/* Drains a last time, closes everything and frees se; st gets the counts (may be NULL). */
void sched_events_close(struct sched_events *se, struct sched_stats *st);

/* One ring record (header included, len bytes) decoded: 1 a switch (*out_switch: 1 out, 0
 * in; *state the state from then on; *ns its time), 2 a lost record (*lost: records lost), 0
 * another record, -1 malformed.  Exposed for the fuzz harness and unit tests. */
int sched_decode_record(const unsigned char *rec, size_t len, unsigned *state, uint64_t *ns,
                        uint64_t *lost);

#endif /* VC_SCHED_EVENTS_H */

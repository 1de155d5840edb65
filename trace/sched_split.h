/* sched_split.h — the exact on-CPU / runnable / blocked split of a thread's time, from the
 * scheduler's context switches vcattach records (cli/sched_events.c): one counter group per
 * thread, "sched TID", keys "on_cpu" and "runnable" (1 or 0 from that timestamp on; both 0:
 * blocked), and one instant "vcattach sched" per process with the counts (docs/cvf-format.md).
 *
 * Where a thread has them, vct_sched_finish replaces its CPU clock samples (cpu.h) with
 * samples at every state change: the interpolation of cpu.c is then exact (the clock advances
 * at rate 1 while on-CPU and 0 otherwise, and every change is a sample), so the summary's and
 * the requests' on-CPU figures are exact with no change to how they are computed; the
 * thread's cumulative runnable time gets the same samples (vct_thread.run), and a span's
 * runnable part is vct_sched_runnable.  Off-CPU minus runnable is blocked.
 * The counters come from a file that may be hostile: a value that is not 0 or 1, or a group
 * that is not exactly this shape, is ignored.
 */
#ifndef VCT_SCHED_SPLIT_H
#define VCT_SCHED_SPLIT_H

#include "model.h"

struct cvf_counter_group;

#define VCT_SCHED_COUNTER_PREFIX "sched "
enum { VCT_SCHED_BLOCKED = 0, VCT_SCHED_RUNNABLE = 1, VCT_SCHED_ON_CPU = 2 };

/* Adds a "sched TID" group's states to its thread (others are ignored).  0, or -1 on
 * allocation failure. */
int vct_sched_add_group(vct_trace *t, const struct cvf_counter_group *g);
/* The "vcattach sched" instant's counts (json: the parsed event; others are ignored).  0, or
 * -1 on allocation failure. */
struct json_t;
int vct_sched_note(vct_trace *t, struct json_t *event);
/* Sorts each thread's states and makes its CPU samples and runnable samples from them; sets
 * has_sched.  Called by load.c before vct_cpu_finish.  0, or -1 on allocation failure. */
int vct_sched_finish(vct_trace *t);
/* Runnable ticks of th in [start, end] (0 when th has no scheduler events). */
int64_t vct_sched_runnable(const vct_thread *th, int64_t start, int64_t end);

#endif /* VCT_SCHED_SPLIT_H */

/* cpu.h — on-CPU time of a thread's calls, measured: the agent samples every traced thread's
 * CPU clock (agent/cpu_sample.c) and the trace holds them as one counter group per thread,
 * named "cpu TID", key "ms": the thread's cumulative on-CPU milliseconds (docs/cvf-format.md).
 *
 * A call's on-CPU time is the thread's CPU clock advance over the call's span, the clock at
 * the call's start and end being interpolated linearly between the samples around them; its
 * off-CPU time is its duration minus that (asleep, blocked, or runnable but not running).
 * Resolution: a sample period (10–100 ms, the trace's median is vct_trace.cpu_period): a call
 * shorter than the period inside one sampling interval gets the interval's average rate, an
 * estimate; calls much longer than the period are measured to within a period's share.
 * Outside the first and last sample of its thread nothing is known: that part of a call is
 * counted as off-CPU by callers that need on + off = duration, and reported by
 * vct_cpu_span's `covered`.
 */
#ifndef VCT_CPU_H
#define VCT_CPU_H

#include "model.h"

struct cvf_counter_group;

/* The name prefix of the agent's counter groups. */
#define VCT_CPU_COUNTER_PREFIX "cpu "

/* Adds the samples of a counter group if it is a "cpu TID" one of that thread (others are
 * ignored).  0, or -1 on allocation failure. */
int vct_cpu_add_group(vct_trace *t, const struct cvf_counter_group *g);
/* Adds one sample (ts and cpu in ticks).  0, or -1 on allocation failure. */
int vct_cpu_add(vct_thread *th, int64_t ts, int64_t cpu);
/* Sorts each thread's samples, drops those that make no sense (a clock going back), sets
 * has_cpu and cpu_period.  Called by load.c after vct_trace_finish.  0, or -1 on allocation
 * failure. */
int vct_cpu_finish(vct_trace *t);
/* On-CPU ticks of th in [start, end] (0 <= result <= end - start), interpolated; the part of
 * the span outside th's samples is not counted: *covered gets the ticks that were (NULL: not
 * wanted). */
int64_t vct_cpu_span(const vct_thread *th, int64_t start, int64_t end, int64_t *covered);

/* vct_cpu_add on any cumulative series of the same shape (sched_split.c's runnable time). */
int vct_samples_add(vct_cpu_samples *c, int64_t ts, int64_t v);
/* The same over any cumulative series of the same shape (sched_split.c's runnable time). */
int64_t vct_samples_span(const vct_cpu_samples *c, int64_t start, int64_t end,
                         int64_t *covered);

#endif /* VCT_CPU_H */

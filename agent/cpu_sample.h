/* cpu_sample.h — per-thread CPU clocks sampled by the sender thread (cpu_sample.c), so that a
 * trace says when each thread was on a CPU and `vcattach summary` can split every call into
 * on-CPU and off-CPU time (docs/protocol.md "CPU samples", docs/cvf-format.md).
 *
 * Called only by stream.c: from the sender thread while the session traces (no GIL, never
 * Python, never the traced threads), and once more by the agent thread at stop after the
 * sender was joined.  Samples travel as CHUNK records whose id is VC_ID_CPU. */
#ifndef VC_AGENT_CPU_SAMPLE_H
#define VC_AGENT_CPU_SAMPLE_H

#include "session.h"

#include <stddef.h>

/* A record whose id is VC_ID_CPU is a CPU clock sample of its chunk's thread: at raw time
 * `start`, the thread had run `dur` ns in all (common/protocol.h VC_WIRE_CPU). */
#define VC_ID_CPU (UINT32_MAX - 3)

/* Sends one CHUNK payload (u32 owner | u32 count | records); 0 or -1 (the stream broke). */
typedef int (*vc_cpu_send_fn)(vc_session *s, const void *payload, size_t len);

/* A new session: forgets the last one's samples.  0, or -1 (out of memory: no sampling). */
int vc_cpu_sample_reset(void);
/* The sender thread's tick (every 5 ms): a sampling round when one is due (the period adapts
 * so that the reads cost at most VC_CPU_BUDGET of a core), and the samples held for 100 ms
 * go out.  0, or -1 when a send failed. */
int vc_cpu_sample_tick(vc_session *s, vc_cpu_send_fn send);
/* At stop (agent thread, sender joined): a last round, then every sample still held. */
int vc_cpu_sample_finish(vc_session *s, vc_cpu_send_fn send);
/* What the sampling cost, for the trace's "vcattach cpu" instant (stream.c). */
struct vc_cpu_stats {
    uint64_t rounds, reads;   /* sampling rounds, clock reads */
    uint64_t spent_ns;        /* this thread's CPU time in the rounds (reads and sends) */
    uint64_t period_min_ns, period_max_ns; /* the adaptive period's range */
};
void vc_cpu_sample_stats(struct vc_cpu_stats *st);

#endif /* VC_AGENT_CPU_SAMPLE_H */

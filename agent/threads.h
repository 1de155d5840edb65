/* threads.h — per-thread states of the session (threads.c): creating and finding a thread's
 * state, seeding its shadow stack with the frames running at attach, OS ids and names.
 * Called by the backends (on each thread's first event) and by agent.c (start and stop). */
#ifndef VC_AGENT_THREADS_H
#define VC_AGENT_THREADS_H

#include "session.h"

vc_thread *vc_thread_new(vc_session *s, PyThreadState *ts);
vc_thread *vc_thread_for_tstate(vc_session *s, PyThreadState *ts);
/* The calling thread's state for ts, its current thread state: one not bound yet (seeded at
 * attach), or the one it was bound to before it entered another interpreter and came back
 * (same OS thread, same interpreter).  NULL: none yet. */
vc_thread *vc_thread_for_current(vc_session *s, PyThreadState *ts);
/* Pushes the frames already running on ts onto t's shadow stack, all started at `now`.
 * by_frame: a running call is matched by its frame object (legacy hook), by what the frame
 * evaluator is given for it (VC_SEED_BY_EVAL), else by its code.  t->seeded: how many. */
void vc_thread_seed(vc_session *s, vc_thread *t, PyThreadState *ts, uint64_t now, int by_frame);
#define VC_SEED_BY_CODE 0
#define VC_SEED_BY_FRAME 1
#define VC_SEED_BY_EVAL 2 /* matched by what the frame evaluator gets (hook_evalframe.c) */
void vc_threads_capture_names(vc_session *s);
/* The tid of t's track in the trace: its OS tid, or for a sub-interpreter's thread state a
 * track of its own, tid | (interp_id % 511 + 1) << 22 (Linux tids are < 2^22): every
 * (OS thread, interpreter) is a track, named "name [interp N]" (docs/cvf-format.md). */
int32_t vc_thread_track_tid(const vc_thread *t);
void vc_thread_capture_current_name(vc_session *s, vc_thread *t);
void vc_thread_free_all(vc_session *s);
int vc_threads_alloc(vc_session *s);
/* hidden: the monitoring callbacks compare with its address PC-relative */
extern vc_thread vc_ignored_thread __attribute__((visibility("hidden")));

#endif /* VC_AGENT_THREADS_H */

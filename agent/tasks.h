/* tasks.h — asyncio task steps (issue 20): which task each coroutine slice belongs to.
 *
 * A request served by an ASGI server is one asyncio task, run as many steps (resume slices of
 * its coroutine) interleaved with other tasks' on one event loop thread: the calls alone
 * cannot say which slice is whose.  At the start of each task step — a coroutine's frame
 * entered (started or resumed) whose caller on the shadow stack is no coroutine frame: the
 * event loop resuming a task, not one coroutine awaiting another — the hook asks asyncio for
 * the running task (_asyncio.current_task, C, no Python frame) and writes a marker record
 * into the thread's chunk: VC_ID_TASK, start = the step's start (the same raw clock value as
 * its call record), dur = the task's number in the session.  A task seen for the first time
 * also gets its name (Task.get_name(), at most VC_TASK_NAME_MAX bytes of UTF-8) as up to three
 * VC_ID_TASK_NAME_0 - k records of 16 bytes each, flags = its number.
 *
 * Cost: the hot path gains one test of the code's flags (record.h callers, only when the
 * session tracks tasks); a step start costs one C call into _asyncio and a table probe.
 * Numbers: a 4-way set-associative table of task addresses (VC_TASK_SETS sets, 1 MiB, kept
 * for the process), no allocation per task.  A task's first step (its coroutine starts:
 * not a resume) always gets a fresh number, so an address reused by a new task is never
 * taken for the old one; a task evicted from the table gets a new number at its next step
 * (its steps then read as two tasks: rare, and harmless).
 *
 * Only with streaming (the spool reads the markers: common/spool.c), only in the main
 * interpreter (_asyncio's state is per interpreter), and only once _asyncio is imported
 * (looked for at every GIL visit).  The receiver: common/spool.c; in the .cvf: counters
 * "task TID" and instants "vcattach task" (docs/cvf-format.md).
 */
#ifndef VC_AGENT_TASKS_H
#define VC_AGENT_TASKS_H

#include "session.h"

/* Record ids (common/protocol.h VC_WIRE_TASK*). */
#define VC_ID_TASK (UINT32_MAX - 4)
#define VC_ID_TASK_NAME_0 (UINT32_MAX - 5) /* part k of a name: VC_ID_TASK_NAME_0 - k */
#define VC_TASK_NAME_PARTS 3
#define VC_TASK_NAME_MAX (16 * VC_TASK_NAME_PARTS)

/* The code flags of frames that may run a task's steps or await inside one. */
#define VC_CO_ASYNC (CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)

/* Out of line: the frame just pushed on t runs code co, which has VC_CO_ASYNC flags. */
void vc_tasks_step(vc_session *s, vc_thread *t, PyCodeObject *co);

/* Called by the backends right after a Python call was pushed on t (not excluded). */
static inline void vc_tasks_enter(vc_session *s, vc_thread *t, PyCodeObject *co)
{
    if (__builtin_expect(s->tasks_on, 0) && (co->co_flags & VC_CO_ASYNC))
        vc_tasks_step(s, t, co);
}

/* At every GIL visit (and at start): turns tracking on once _asyncio is imported. */
void vc_tasks_visit(vc_session *s);
/* At stop, under the GIL, with the hooks removed: tracking off, references released. */
void vc_tasks_stop(vc_session *s);

#endif /* VC_AGENT_TASKS_H */

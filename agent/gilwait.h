/* gilwait.h — how the agent thread takes the GIL on a target whose own threads keep it.
 *
 * CPython hands the GIL to a waiting thread only when the holder is asked to drop it, and a
 * waiter asks only after a whole switch interval (5 ms) in which nobody signalled it.  A
 * thread that computes and makes a short system call every millisecond or two (a stat, a
 * socket send, a log write) releases the GIL for microseconds each time: the release wakes
 * the waiter, the holder takes the GIL back before the waiter is even scheduled, and the
 * waiter's 5 ms start over.  CPython's own threads starve behind such a thread as well (the
 * "convoy"); our agent thread starved for 0.1-19 s at its start, at each visit and at the stop
 * (measured on tests/targets/busy_service.py: a stat every 2 ms), and a start that took more
 * than 15 s failed the attach.
 *
 * So while the agent thread waits it also queues a CPython pending call (what a signal
 * handler uses): on 3.12+ the thread holding the GIL runs it at its next bytecode boundary,
 * before 3.12 the main thread does.  That call lets the GIL go and waits, at most
 * VC_GIL_YIELD_MAX_MS and without the GIL, until the agent thread has taken it; then it takes
 * the GIL back in turn.  It does nothing when nobody waits any more (the GIL came on its own),
 * in a fork child, and once the interpreter is finalizing.  One call is queued at a time.
 * Not on 3.8 (compat.h: its Py_AddPendingCall crashes a process that has begun to exit): the
 * agent thread waits there as before.
 */
#ifndef VC_AGENT_GILWAIT_H
#define VC_AGENT_GILWAIT_H

#include <Python.h>

/* The longest a thread of the target waits in our pending call for the agent to take the GIL
 * (it waits only while the agent thread wants the GIL and has not got it). */
#define VC_GIL_YIELD_MAX_MS 20

/* PyGILState_Ensure and PyEval_RestoreThread for the agent thread, with the yield above. */
PyGILState_STATE vc_gil_ensure(void);
void vc_gil_restore(PyThreadState *ts);

#endif /* VC_AGENT_GILWAIT_H */

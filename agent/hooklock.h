/* hooklock.h — the lock that stands in for "one GIL" once a sub-interpreter with its own GIL
 * is traced (3.12+, PEP 684: _interpreters.create(), concurrent.interpreters,
 * InterpreterPoolExecutor).
 *
 * Every table the hooks share (the chunk pool, the key table, the thread table, the slots of
 * interps.c) assumes that one hook runs at a time, which one GIL gives.  An own-GIL
 * interpreter runs its hooks in parallel with the main interpreter's.  So, from the moment
 * the agent asks the first one to hook itself until the session's next start, the session is
 * "parallel" (vc_session.parallel): every sys.monitoring callback runs its general half under
 * this lock, and the agent thread holds it for the visits' table work and for the stop.
 * Until then nothing takes it: the hot path pays one well-predicted test.
 *
 * The rule that keeps it from deadlocking with the GILs: the lock is taken by a thread that
 * holds its interpreter's GIL, and whoever holds it never runs Python bytecode, never lets a
 * GIL go and never waits for one (bytecode may hand the GIL to a thread that then waits for
 * this lock).  So the agent thread reads threading's names, looks for _asyncio and imports
 * nothing under it, and lets it go (vc_hooklock_release_all) before it lets the GIL go.
 * Recursive per thread: a hook that fires inside our own C calls (a C function we call from
 * a hook is not traced, but the rule costs nothing) finds it held by itself.
 */
#ifndef VC_AGENT_HOOKLOCK_H
#define VC_AGENT_HOOKLOCK_H

void vc_hooklock_acquire(void);
void vc_hooklock_release(void);
/* Lets go of every level this thread holds; returns how many (for vc_hooklock_reacquire). */
int vc_hooklock_release_all(void);
void vc_hooklock_reacquire(int depth);
/* In a fork child (pthread_atfork): usable again, held by nobody. */
void vc_hooklock_reset_in_child(void);

#endif /* VC_AGENT_HOOKLOCK_H */

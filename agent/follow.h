/* follow.h — process-tree sessions' fork children (follow.c): they never write into their
 * parent's window, go on tracing from their fork with a window, keys and threads of their
 * own, and their exit through os._exit still sends their trace.  Called by agent.c. */
#ifndef VC_AGENT_FOLLOW_H
#define VC_AGENT_FOLLOW_H

#include "session.h"

/* Once per process, before a session's window is shared (agent.c): a fork child of a
 * process with a running session takes no more chunks of the parent's window, from inside
 * fork() on (a pthread_atfork child handler: memory writes only). */
void vc_follow_register_atfork(void);

/* In a fork child of a session with follow_forks, under the child's GIL (agent.c's fork
 * handler), the parent's hooks still installed: the session's data made the child's own — a
 * new window, a new key table (the parent's released, none named), the forking thread's
 * state kept (its running frames marked as running at the child's start), the others' gone,
 * nothing sent yet — so that its hooks record on without a gap.  0; -1 (nothing changed)
 * when a new window or table cannot be had. */
int vc_follow_continue_in_child(vc_session *s);

/* In a fork child of a session with follow_forks, under the child's GIL: wraps os._exit (once
 * per process image) so that a child leaving through it still sends its trace. */
void vc_follow_wrap_os_exit(void);

#endif /* VC_AGENT_FOLLOW_H */

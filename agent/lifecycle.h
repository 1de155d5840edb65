/* lifecycle.h — the life cycle of the one tracing session a process can run: its state, the
 * stop request, the pipe that wakes the agent thread, the last result and error.
 *
 * One lock guards all of it; callers never see the lock.  Three kinds of callers: the
 * exported entry points (claim an idle cycle, launch the agent thread, wait for it), the
 * agent thread (report start, stopping, result, end) and control.c (state for `status`, the
 * wake fd, stop requests).  This module knows nothing of the session's contents (session.h)
 * and calls nothing outside libc, so anything may use it without an include cycle.
 */
#ifndef VC_AGENT_LIFECYCLE_H
#define VC_AGENT_LIFECYCLE_H

#include "vcagent.h"

enum vc_state { VC_IDLE = 0, VC_STARTING, VC_RUNNING, VC_STOPPING };

enum vc_stop_reason { VC_STOP_NONE = 0, VC_STOP_API, VC_STOP_DEADLINE, VC_STOP_CONTROL,
                      VC_STOP_CONTROL_EOF, VC_STOP_STATUS, VC_STOP_ATEXIT };

/* ---- entry points (any thread, no Python) ---- */

/* Takes the life cycle if it is idle: returns 0 with it held (until vc_life_release), or
 * -EBUSY.  Between the two the caller fills the session's config and calls vc_life_launch. */
int vc_life_claim(void);
void vc_life_release(void);
/* With the claim held: resets the per-session state, opens the wake pipe and starts fn on a
 * detached thread that takes none of the process's signals.  0 (state STARTING) or -errno. */
int vc_life_launch(void *(*fn)(void *));

/* Waits up to wait_ms for the launched session to report its start (vc_agent_wait_started). */
int vc_life_wait_started(int wait_ms);
/* Asks the session to stop and waits up to wait_ms for it to become idle (vc_agent_stop). */
int vc_life_stop_and_wait(int wait_ms, struct vc_result *out);
/* Waits up to wait_ms for the session to become idle; 1 if it did. */
int vc_life_wait_idle(int wait_ms);
int vc_life_last_result(struct vc_result *out);
/* A copy of the last error, valid until the next call. */
const char *vc_life_last_error(void);

/* The session's progress for a young process's injector (protocol.h enum vc_agent_phase),
 * exported as `vc_agent_phase`: CONNECTING at launch, DONE once started or ended; the agent
 * thread sets the phases between. */
void vc_life_set_phase(unsigned phase);
/* The agent thread records its tid (exported as `vc_agent_tid`) for the same reader. */
void vc_life_mark_agent_thread(void);
/* Publishes where _PyRuntime.initialized is (vc_agent_init_flag; 0: not known), for the
 * hold of a young process (injector/hold.c), before the phase says INIT_WAIT. */
void vc_life_note_init_flag(uintptr_t addr);

/* ---- any thread ---- */

int vc_life_state(void);                /* enum vc_state */
void vc_life_request_stop(int reason);  /* the first reason wins; wakes the agent thread */
int vc_life_stop_requested(void);       /* enum vc_stop_reason, VC_STOP_NONE if none */
int vc_life_wake_fd(void);              /* read end of the wake pipe, -1 if none */
/* 1 on the process that launched the session (0 in a fork child). */
int vc_life_in_session_process(void);

/* ---- the agent thread ---- */

/* status 0: hooks installed (state RUNNING); else the session failed to start. */
void vc_life_signal_started(int status);
void vc_life_set_stopping(void);
void vc_life_set_result(const struct vc_result *res);
/* The session is over: records status and error, becomes IDLE, closes the wake pipe and
 * wakes every waiter. */
void vc_life_finish(int status, const char *err);

/* END is sent after the session became idle (agent.c, end_session): a process about to exit
 * (atexit, os._exit) must wait for that too, or it dies between idle and END.  delivered()
 * counts sessions whose END went out; wait_delivered waits (bounded) for it to pass `seen`. */
unsigned vc_life_delivered(void);
void vc_life_mark_delivered(void);
int vc_life_wait_delivered(unsigned seen, int wait_ms);

/* ---- fork ---- */

/* Registers (once) the pthread_atfork handlers that keep the lock usable in a fork child. */
void vc_life_register_atfork(void);
/* In a fork child: 1 once if a session was running at the fork (its hooks must go). */
int vc_life_take_fork_cleanup(void);

#endif /* VC_AGENT_LIFECYCLE_H */

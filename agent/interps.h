/* interps.h — every interpreter of the process (interps.c): which ones the session traces,
 * their slots (the owner tag of the keys they pin, names.h), and the end of one while the
 * session runs (its atexit callback, or its disappearance found by the periodic visit).
 * Every function needs the GIL, held by the agent thread on its own (main-interpreter)
 * thread state, except where said. */
#ifndef VC_AGENT_INTERPS_H
#define VC_AGENT_INTERPS_H

#include "session.h"

/* Slots in the table; an ended interpreter's slot is reused.  Interpreters beyond it are not
 * traced. */
#define VC_MAX_INTERPS 256

/* Starts the table with the main interpreter (slot 0). */
void vc_interps_begin(vc_session *s);
/* Adopts the sub-interpreters that appeared (reachable, not finalizing, initialized): our
 * atexit callback is registered in each, then (attach) the backend's attach_interp runs for
 * it (3.12+: each one is asked to do both itself, install_here; the first with its own GIL
 * makes the session parallel, hooklock.h).  Interpreters that vanished since the last call
 * without our atexit end here (their keys
 * named "?", nothing of theirs touched). */
void vc_interps_adopt(vc_session *s, int attach);
/* Calls fn for every interpreter the session traces that still exists (main first). */
typedef void (*vc_interp_fn)(vc_session *s, PyInterpreterState *interp, void *ctx);
void vc_interps_each(vc_session *s, vc_interp_fn fn, void *ctx);
/* 3.12+, in a sub-interpreter whose callbacks carry `tag` from an ended session: asks it (a
 * pending call of its own) to remove our hooks once the callback has returned. */
void vc_interps_unhook_current_later(PyObject *tag);
/* The slot and id of interp for a new thread state (slot 0 / id 0 if unknown). */
uint32_t vc_interps_slot_of(PyInterpreterState *interp, int64_t *id);
/* 1 if ts is a thread state the agent made for itself in a sub-interpreter (never traced). */
int vc_interps_is_agent_tstate(PyThreadState *ts);
/* Stop, rollback, fork child: every sub-interpreter's atexit callback unregistered and its
 * keys named and released in it (or, if it is gone, dropped untouched).  3.12+: each is asked
 * to do it itself, and the GIL is let go for at most wait_ms (0: not at all) while they do.
 * Idempotent. */
void vc_interps_end_all(vc_session *s, int wait_ms);

#endif /* VC_AGENT_INTERPS_H */

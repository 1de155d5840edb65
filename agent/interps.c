/* interps.c — every interpreter of the process, not only the agent thread's (issue 19).
 *
 * Apache's mod_wsgi runs each application in a sub-interpreter (Py_NewInterpreter), and
 * _xxsubinterpreters / concurrent.interpreters make more: a session that hooked only the main
 * interpreter recorded nothing of them.  This file owns the session's table of interpreters
 * (slot → interpreter, id, state) and three mechanisms:
 *
 *  - adoption, at start and at every 100 ms visit: the runtime's list is walked (compat.c says
 *    which interpreters share the GIL we hold: all before 3.12, the main one after) and each
 *    new one gets our atexit callback, registered *in it* through a thread state the agent
 *    makes there for the moment (PyThreadState_New + Swap, then Clear + Delete: what
 *    mod_wsgi does per request), with C calls only (register_in says why) — so only when
 *    the interpreter has imported atexit (mod_wsgi's have); one that has not is traced
 *    without it (and asked again at every visit).  Then the backend hooks its threads
 *    (backend.h).  An interpreter whose Py_EndInterpreter has begun is never adopted.
 *  - the end of one: Py_EndInterpreter runs its atexit callbacks before it clears anything, so
 *    ours, running in it with the GIL, removes our hooks from its threads (the backend's
 *    detach_interp), closes its threads' open calls, names its keys and releases its pins
 *    (names.h: the names stay, the references go, the slots become tombstones), so that
 *    nothing of ours outlives it and no reference into it is kept.  An interpreter found gone
 *    without our atexit having run (a failed start, a fork child) has its keys dropped
 *    untouched: leaked, never read (its names that streaming had sent at the 100 ms visits
 *    stay right; the others read "?").
 *  - the session's stop: every live sub-interpreter's callback unregistered and its keys named
 *    in it.
 * Slots are matched by (address, id): ids only grow, so a new interpreter at a freed address
 * is never taken for the old one.
 *
 * From 3.12 none of this runs: a sub-interpreter may have its own GIL (PEP 684), be created
 * and destroyed on another thread while we hold the main one, and entering one would need a
 * thread state of ours there across PyThreadState_Swap, which from 3.12 releases the GIL and
 * takes it again (_PyEval_ReleaseLock/_PyEval_AcquireLock, seen in 3.12.1's and 3.13.0's
 * code): a Py_EndInterpreter in that window would find a second thread and abort the
 * process, even for an interpreter under the main GIL.  The visits
 * only count the sub-interpreters, apart those under the main GIL (count_untraced), so the
 * trace says what it lacks.
 */
#include "interps.h"
#include "backend.h"
#include "record.h"

#include <stdio.h>

enum { VC_INTERP_FREE = 0, VC_INTERP_LIVE, VC_INTERP_ENDED, VC_INTERP_SKIPPED };

typedef struct vc_interp {
    PyInterpreterState *interp;
    int64_t id;
    int state;
    PyObject *atexit_cb; /* registered in its atexit module (sub-interpreters); owned */
} vc_interp;

static vc_interp g_interps[VC_MAX_INTERPS];
static PyThreadState *g_agent_ts; /* the agent's thread state in a sub-interpreter, if any */
static int64_t g_max_seen_id;      /* 3.12+: the highest sub-interpreter id counted (below) */

int vc_interps_is_agent_tstate(PyThreadState *ts)
{
    return ts != NULL && ts == g_agent_ts;
}

/* ---- entering a sub-interpreter from the agent thread ------------------------------------ */

static PyThreadState *enter(PyInterpreterState *interp, PyThreadState **saved)
{
    PyThreadState *ts = PyThreadState_New(interp);
    if (ts == NULL)
        return NULL;
    g_agent_ts = ts;
    *saved = PyThreadState_Swap(ts);
    return ts;
}

static void leave(PyThreadState *ts, PyThreadState *saved)
{
    PyErr_Clear();
    PyThreadState_Swap(saved);
    PyThreadState_Clear(ts);
    PyThreadState_Delete(ts);
    g_agent_ts = NULL;
}

/* ---- the table ------------------------------------------------------------------------ */

static int present(PyInterpreterState *interp, int64_t id)
{
    for (PyInterpreterState *i = vc_compat_interp_head(); i != NULL; i = vc_compat_interp_next(i))
        if (i == interp)
            return vc_compat_interp_id(i) == id;
    return 0;
}

static int find(PyInterpreterState *interp, int64_t id)
{
    for (int k = 0; k < VC_MAX_INTERPS; k++)
        if (g_interps[k].state != VC_INTERP_FREE && g_interps[k].interp == interp &&
            g_interps[k].id == id)
            return k;
    return -1;
}

static int free_slot(void)
{
    for (int k = 1; k < VC_MAX_INTERPS; k++)
        if (g_interps[k].state == VC_INTERP_FREE)
            return k;
    return -1;
}

void vc_interps_begin(vc_session *s)
{
    (void)s;
    for (int k = 0; k < VC_MAX_INTERPS; k++)
        g_interps[k] = (vc_interp){0};
    PyInterpreterState *main = vc_compat_tstate_interp(vc_compat_current_tstate());
    g_interps[0] = (vc_interp){main, vc_compat_interp_id(main), VC_INTERP_LIVE, NULL};
    g_max_seen_id = g_interps[0].id;
}

uint32_t vc_interps_slot_of(PyInterpreterState *interp, int64_t *id)
{
    for (int k = 0; k < VC_MAX_INTERPS; k++)
        if (g_interps[k].state == VC_INTERP_LIVE && g_interps[k].interp == interp) {
            *id = g_interps[k].id;
            return (uint32_t)k;
        }
    *id = 0;
    return 0;
}

void vc_interps_each(vc_session *s, vc_interp_fn fn, void *ctx)
{
    /* The main interpreter outlives the session (its atexit stops it first). */
    if (g_interps[0].state == VC_INTERP_LIVE)
        fn(s, g_interps[0].interp, ctx);
    for (int k = 1; k < VC_MAX_INTERPS; k++)
        if (g_interps[k].state == VC_INTERP_LIVE && present(g_interps[k].interp, g_interps[k].id))
            fn(s, g_interps[k].interp, ctx);
}

/* The end of slot k's interpreter: our hooks out of it, its threads' open calls closed, its
 * keys named and released (alive) or dropped untouched (gone). */
static void end_slot(vc_session *s, int k, int alive)
{
    vc_interp *in = &g_interps[k];
    if (alive && s->backend != NULL && s->backend->detach_interp != NULL)
        s->backend->detach_interp(s, in->interp);
    uint64_t now = vc_clock_now();
    for (uint32_t i = 0; i < s->nthreads; i++) {
        vc_thread *t = &s->threads[i];
        if (t->interp_slot != (uint32_t)k || t->interp_id != in->id)
            continue;
        vc_record_close_thread(s, t, now);
        t->tstate = NULL; /* its address may be a new thread state's */
        t->hooked = 0;
    }
    vc_pins_release_owner(&s->pins, (uint32_t)k, alive);
    PyErr_Clear();
}

/* ---- our atexit callback in a sub-interpreter --------------------------------------------
 * self: (session generation << 16) | slot, so that a callback of an earlier session (left
 * registered if unregistering failed) does nothing. */

static PyObject *interp_atexit(PyObject *self, PyObject *unused)
{
    (void)unused;
    vc_session *s = &g_vc;
    unsigned long long v = PyLong_AsUnsignedLongLong(self);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    int k = (int)(v & 0xffff);
    PyThreadState *ts = vc_compat_current_tstate();
    if ((uint32_t)(v >> 16) != s->gen || s->backend == NULL || k <= 0 || k >= VC_MAX_INTERPS ||
        g_interps[k].state != VC_INTERP_LIVE || ts == NULL ||
        g_interps[k].interp != vc_compat_tstate_interp(ts))
        Py_RETURN_NONE;
    end_slot(s, k, 1);
    g_interps[k].state = VC_INTERP_ENDED; /* until it leaves the runtime's list */
    Py_CLEAR(g_interps[k].atexit_cb); /* atexit holds its own reference while it runs us */
    Py_RETURN_NONE;
}

static PyMethodDef interp_atexit_def = {"_vcattach_interp_end", interp_atexit, METH_NOARGS,
                                        "vcattach: unhooks this sub-interpreter before it ends"};

/* In interp (entered): registers our callback for slot k in its atexit module.  Nothing here
 * may run Python code: bytecode lets the GIL go to another thread, which would find our
 * thread state in the interpreter (_xxsubinterpreters refuses to run in an interpreter with
 * two threads; Py_EndInterpreter aborts the process if it is not the last one).  So the
 * module is taken only if the interpreter imported it already (mod_wsgi does, in each of its
 * interpreters), never imported here.  Returns 0 (registered), 1 (ready, but atexit not
 * imported: adopted without it; the next visits try again) or -1 (not initialized yet: no
 * __main__; or refused). */
static int register_in(vc_session *s, int k)
{
    PyObject *modules = PySys_GetObject("modules"); /* borrowed */
    if (modules == NULL || !PyDict_Check(modules) || PyDict_GetItemString(modules, "__main__") == NULL)
        return -1;
    PyObject *mod = PyDict_GetItemString(modules, "atexit"); /* borrowed */
    if (mod == NULL || !PyModule_Check(mod))
        return 1;
    PyObject *self = PyLong_FromUnsignedLongLong(((unsigned long long)s->gen << 16) | (unsigned)k);
    PyObject *fn = self ? PyCFunction_New(&interp_atexit_def, self) : NULL;
    PyObject *reg = fn ? PyObject_GetAttrString(mod, "register") : NULL;
    /* the C function itself, not a Python replacement (which would run bytecode) */
    PyObject *r = reg && PyCFunction_Check(reg) ? PyObject_CallFunctionObjArgs(reg, fn, NULL) : NULL;
    int rc = -1;
    if (r != NULL) {
        g_interps[k].atexit_cb = fn;
        fn = NULL;
        rc = 0;
    }
    Py_XDECREF(r);
    Py_XDECREF(reg);
    Py_XDECREF(fn);
    Py_XDECREF(self);
    PyErr_Clear();
    return rc;
}

/* In interp (entered), with no Python code either (register_in). */
static void unregister_in(int k)
{
    PyObject *modules = PySys_GetObject("modules"); /* borrowed */
    PyObject *mod = modules && PyDict_Check(modules) ? PyDict_GetItemString(modules, "atexit") : NULL;
    PyObject *unreg = mod ? PyObject_GetAttrString(mod, "unregister") : NULL;
    PyObject *r = unreg && PyCFunction_Check(unreg)
                      ? PyObject_CallFunctionObjArgs(unreg, g_interps[k].atexit_cb, NULL)
                      : NULL;
    Py_XDECREF(r);
    Py_XDECREF(unreg);
    PyErr_Clear();
}

/* Slot k adopted without our atexit (its interpreter had not imported atexit): try again. */
static void retry_register(vc_session *s, int k)
{
    vc_interp *in = &g_interps[k];
    if (vc_compat_interp_finalizing(in->interp))
        return;
    PyThreadState *saved = NULL;
    PyThreadState *ts = enter(in->interp, &saved);
    if (ts == NULL) {
        PyErr_Clear();
        return;
    }
    (void)register_in(s, k);
    leave(ts, saved);
}

/* 3.12+: sub-interpreters are not traced (compat.h: any of them may have its own GIL, and
 * entering one needs more than its list entry), but the trace says how many there were: the
 * ids beyond the highest seen so far are new ones (ids only grow, and the list is read whole
 * under the runtime's lock).  One that came and went between two visits is not counted. */
static void count_untraced(vc_session *s)
{
    int64_t max = 0;
    int shared = -1;
    int n = vc_compat_subinterps_above(g_max_seen_id, &max, &shared);
    if (n <= 0)
        return; /* none new, or not read this time (the next visit tries again) */
    s->interps_untraced += (uint64_t)n;
    if (shared > 0)
        s->interps_untraced_shared += (uint64_t)shared;
    g_max_seen_id = max;
}

void vc_interps_adopt(vc_session *s, int attach)
{
    if (!vc_compat_interps_walkable()) {
        count_untraced(s);
        return;
    }
    /* Gone since the last visit: ours ended without our atexit, or an ended one finished. */
    for (int k = 1; k < VC_MAX_INTERPS; k++) {
        vc_interp *in = &g_interps[k];
        if (in->state == VC_INTERP_FREE || present(in->interp, in->id))
            continue;
        if (in->state == VC_INTERP_LIVE)
            end_slot(s, k, 0);
        in->atexit_cb = NULL; /* leaked with its interpreter: never touched */
        in->state = VC_INTERP_FREE;
    }
    for (int k = 1; k < VC_MAX_INTERPS; k++)
        if (g_interps[k].state == VC_INTERP_LIVE && g_interps[k].atexit_cb == NULL)
            retry_register(s, k);
    PyInterpreterState *main = g_interps[0].interp;
    for (PyInterpreterState *i = vc_compat_interp_head(); i != NULL; i = vc_compat_interp_next(i)) {
        int64_t id = vc_compat_interp_id(i);
        if (i == main || find(i, id) >= 0)
            continue;
        int k = free_slot();
        if (k < 0)
            return; /* table full: the rest stay untraced */
        if (!vc_compat_interp_reachable(i) || vc_compat_interp_finalizing(i)) {
            g_interps[k] = (vc_interp){i, id, VC_INTERP_SKIPPED, NULL};
            continue;
        }
        PyThreadState *saved = NULL;
        PyThreadState *ts = enter(i, &saved);
        if (ts == NULL) {
            PyErr_Clear();
            continue;
        }
        int rc = register_in(s, k);
        leave(ts, saved);
        if (rc < 0)
            continue; /* not ready yet: the next visit tries again */
        g_interps[k].interp = i;
        g_interps[k].id = id;
        g_interps[k].state = VC_INTERP_LIVE;
        if (attach && s->backend != NULL && s->backend->attach_interp != NULL)
            s->backend->attach_interp(s, i);
    }
}

void vc_interps_end_all(vc_session *s)
{
    for (int k = 1; k < VC_MAX_INTERPS; k++) {
        vc_interp *in = &g_interps[k];
        if (in->state == VC_INTERP_FREE)
            continue;
        if (in->state == VC_INTERP_LIVE) {
            if (present(in->interp, in->id) && in->atexit_cb == NULL) {
                vc_pins_release_owner(&s->pins, (uint32_t)k, 1); /* shared GIL: from here */
            } else if (present(in->interp, in->id)) {
                PyThreadState *saved = NULL;
                PyThreadState *ts = enter(in->interp, &saved);
                if (ts != NULL) {
                    unregister_in(k);
                    Py_CLEAR(in->atexit_cb);
                    vc_pins_release_owner(&s->pins, (uint32_t)k, 1);
                    leave(ts, saved);
                } else {
                    /* Could not enter it: the GIL is shared (vc_compat_interp_reachable), so
                     * its keys are still released, from here; the callback stays, inert (an
                     * older generation). */
                    PyErr_Clear();
                    in->atexit_cb = NULL;
                    vc_pins_release_owner(&s->pins, (uint32_t)k, 1);
                }
            } else {
                in->atexit_cb = NULL;
                vc_pins_release_owner(&s->pins, (uint32_t)k, 0);
            }
        }
        *in = (vc_interp){0};
    }
    PyErr_Clear();
}

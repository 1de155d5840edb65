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
 * From 3.12 the agent thread never enters a sub-interpreter: a sub-interpreter may have its own
 * GIL (PEP 684), be created and destroyed on another thread while we hold the main one, and
 * entering one would need a thread state of ours there across PyThreadState_Swap, which from
 * 3.12 releases the GIL and takes it again: a Py_EndInterpreter in that window would find a
 * second thread and abort the process.  Instead (the "pending" section below), the visits
 * read the runtime's list under the runtime's own lock (compat.h) and ask each new
 * sub-interpreter to hook itself: a pending call, which CPython runs on whichever of its own
 * threads next runs Python, with its GIL, as a signal handler would.  There it imports
 * atexit, registers our end callback and asks the backend to install_here.  At stop each is
 * asked the same way to unhook itself; the agent thread lets the GIL go for at most 300 ms
 * (agent.c) while they do.  One that runs no Python in that time keeps its hooks until it
 * next does: its callbacks see the session over and record nothing, and the queued request
 * unhooks it then (its keys are named, their references left: never released from another
 * interpreter).
 * One with its own GIL (the default config, concurrent.interpreters) runs its hooks in
 * parallel with the main interpreter's: before the first is asked, the session goes parallel
 * (hooklock.h) and from then every hook, this file's work in such an interpreter (arming,
 * its end, its unhooking) and the agent thread's table work take the lock among GILs; its
 * keys are named from the agent thread by their characters only (names.c, own_gil).
 */
#include "interps.h"
#include "backend.h"
#include "gilwait.h"
#include "hooklock.h"
#include "record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    VC_INTERP_FREE = 0,
    VC_INTERP_LIVE,
    VC_INTERP_ENDED,
    VC_INTERP_SKIPPED,
    /* 3.12+ only (pending calls): */
    VC_INTERP_WAITING,   /* listed but not ready (initializing): asked at the next visit */
    VC_INTERP_ARMING,    /* asked to hook itself (its pending call is queued) */
    VC_INTERP_DISARMING, /* asked to unhook itself at stop */
};


typedef struct vc_interp {
    PyInterpreterState *interp;
    int64_t id;
    int state;
    PyObject *atexit_cb; /* registered in its atexit module (sub-interpreters); owned */
    int gil;             /* 3.12+, what a visit saw of it: VC_GIL_UNSEEN, _OWN or _SHARED */
} vc_interp;

/* A sub-interpreter that ends before it was hooked is counted by its GIL as last seen; one
 * never seen with its GIL set is not counted, as one made and ended between two visits. */
enum { VC_GIL_UNSEEN = 0, VC_GIL_OWN, VC_GIL_SHARED };

static vc_interp g_interps[VC_MAX_INTERPS];
static PyThreadState *g_agent_ts; /* the agent's thread state in a sub-interpreter, if any */
static int64_t g_max_seen_id;      /* 3.12+: the highest sub-interpreter id seen (below) */
static const vc_backend_ops *g_sub_backend; /* 3.12+: the backend hooked into sub-interpreters */
/* [slot] = 1: its interpreter has its own GIL (armed under the lock among GILs): how its keys
 * are named from the agent thread (names.h, own_gil). */
static unsigned char g_own_gil[VC_MAX_INTERPS];
_Static_assert(VC_MAX_INTERPS == VC_PINS_OWNERS, "names.h's own_gil covers every slot");

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
    for (int k = 0; k < VC_MAX_INTERPS; k++)
        g_interps[k] = (vc_interp){0};
    PyInterpreterState *main = vc_compat_tstate_interp(vc_compat_current_tstate());
    g_interps[0] = (vc_interp){main, vc_compat_interp_id(main), VC_INTERP_LIVE, NULL, VC_GIL_UNSEEN};
    g_max_seen_id = g_interps[0].id;
    g_sub_backend = s->backend != NULL && s->backend->install_here != NULL ? s->backend : NULL;
    memset(g_own_gil, 0, sizeof g_own_gil);
    s->pins.own_gil = g_own_gil;
}

uint32_t vc_interps_slot_of(PyInterpreterState *interp, int64_t *id)
{
    for (int k = 0; k < VC_MAX_INTERPS; k++)
        if ((g_interps[k].state == VC_INTERP_LIVE || g_interps[k].state == VC_INTERP_DISARMING) &&
            g_interps[k].interp == interp) {
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
    if (alive == 1 && vc_compat_interps_walkable() && s->backend != NULL &&
        s->backend->detach_interp != NULL)
        s->backend->detach_interp(s, in->interp);
    else if (alive == 1 && !vc_compat_interps_walkable() && g_sub_backend != NULL)
        g_sub_backend->remove_here(s, (uint32_t)k); /* 3.12+: we run in it */
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
    /* An own-GIL interpreter ends on its own thread while the agent may be at its tables. */
    int parallel = s->parallel;
    if (parallel)
        vc_hooklock_acquire();
    int hooked = vc_compat_interps_walkable() ? s->backend != NULL : g_sub_backend != NULL;
    if ((uint32_t)(v >> 16) == s->gen && hooked && k > 0 && k < VC_MAX_INTERPS &&
        (g_interps[k].state == VC_INTERP_LIVE || g_interps[k].state == VC_INTERP_DISARMING) &&
        ts != NULL && g_interps[k].interp == vc_compat_tstate_interp(ts)) {
        end_slot(s, k, 1);
        g_interps[k].state = VC_INTERP_ENDED; /* until it leaves the runtime's list */
        Py_CLEAR(g_interps[k].atexit_cb); /* atexit holds its own reference while it runs us */
    }
    if (parallel)
        vc_hooklock_release();
    Py_RETURN_NONE;
}

static PyMethodDef interp_atexit_def = {"_vcattach_interp_end", interp_atexit, METH_NOARGS,
                                        "vcattach: unhooks this sub-interpreter before it ends"};

/* 3.12+, on the interpreter's own thread (a pending call): atexit imported if it was not, once
 * the interpreter has a __main__ (a thread switch during the import is harmless there; the
 * module stays in its sys.modules).  Never under the lock among GILs: an import runs
 * bytecode (hooklock.h). */
static void import_atexit(void)
{
    PyObject *modules = PySys_GetObject("modules"); /* borrowed */
    if (modules == NULL || !PyDict_Check(modules) || PyDict_GetItemString(modules, "__main__") == NULL ||
        PyDict_GetItemString(modules, "atexit") != NULL)
        return;
    PyObject *imported = PyImport_ImportModule("atexit");
    Py_XDECREF(imported); /* sys.modules holds it */
    PyErr_Clear();
}

/* In interp (entered): registers our callback for slot k in its atexit module.  Nothing here
 * may run Python code: bytecode lets the GIL go to another thread, which would find our
 * thread state in the interpreter (_xxsubinterpreters refuses to run in an interpreter with
 * two threads; Py_EndInterpreter aborts the process if it is not the last one).  So the
 * module is taken only if the interpreter imported it already (mod_wsgi does, in each of its
 * interpreters; 3.12+: arm_here imports it first, on the interpreter's own thread), never
 * imported here.  Returns 0 (registered), 1 (ready, but atexit not
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

/* In interp (entered, or its own thread): our callback cb out of its atexit module.  Never
 * under the lock among GILs: atexit.unregister compares cb with every registered callable,
 * and a callable of the application's may compare in Python (hooklock.h). */
static void unregister_in(PyObject *cb)
{
    PyObject *modules = PySys_GetObject("modules"); /* borrowed */
    PyObject *mod = modules && PyDict_Check(modules) ? PyDict_GetItemString(modules, "atexit") : NULL;
    PyObject *unreg = mod ? PyObject_GetAttrString(mod, "unregister") : NULL;
    PyObject *r = unreg && PyCFunction_Check(unreg)
                      ? PyObject_CallFunctionObjArgs(unreg, cb, NULL)
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

/* ---- 3.12+: sub-interpreters under the main GIL, asked through pending calls -------------
 * A request's argument is a tag, (session generation << 16) | slot, never a pointer: one that
 * runs after its session ended (or in a later one) finds another generation and only unhooks
 * what it finds of ours. */

static const vc_backend_ops *g_armed_backend; /* the last backend that hooked a sub-interpreter */

/* Every tag handed to install_here in this session, referenced until its end: a thread's
 * binding is checked by the tag's address (hook_monitoring.c), which must then never be a
 * later interpreter's tag in the same session.  Released at stop under the main GIL: an int,
 * made by an interpreter that shares the main one's allocator. */
static PyObject **g_tags;
static size_t g_ntags, g_tags_cap;

#define VC_MAX_TAGS 65536 /* interpreters hooked in one session: then the rest are counted */

static int keep_tag(PyObject *tag)
{
    if (g_ntags >= VC_MAX_TAGS)
        return -1; /* the target's memory stays bounded under a churn of interpreters */
    if (g_ntags == g_tags_cap) {
        size_t cap = g_tags_cap ? g_tags_cap * 2 : 64;
        PyObject **grown = realloc(g_tags, cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        g_tags = grown;
        g_tags_cap = cap;
    }
    Py_INCREF(tag);
    g_tags[g_ntags++] = tag;
    return 0;
}

static void release_tags(void)
{
    for (size_t i = 0; i < g_ntags; i++)
        Py_DECREF(g_tags[i]);
    free(g_tags);
    g_tags = NULL;
    g_ntags = g_tags_cap = 0;
}

static uintptr_t tag_of(const vc_session *s, int k)
{
    return ((uintptr_t)s->gen << 16) | (uintptr_t)k;
}

/* The slot a tag names in this session, -1 if it is another session's or no slot. */
static int tag_slot(const vc_session *s, uintptr_t tag)
{
    int k = (int)(tag & 0xffff);
    if ((uint32_t)(tag >> 16) != s->gen || k <= 0 || k >= VC_MAX_INTERPS)
        return -1;
    return k;
}

static int slot_state(int k)
{
    return __atomic_load_n(&g_interps[k].state, __ATOMIC_ACQUIRE);
}

static void set_state(int k, int state)
{
    __atomic_store_n(&g_interps[k].state, state, __ATOMIC_RELEASE);
}

/* 1 if the calling thread runs in slot k's interpreter, and it is not ending. */
static int running_in(int k)
{
    PyThreadState *ts = vc_compat_current_tstate();
    return ts != NULL && vc_compat_tstate_interp(ts) == g_interps[k].interp &&
           !vc_compat_current_interp_ending();
}

static void count_untraced_one(vc_session *s, int shared)
{
    s->interps_untraced++;
    if (shared)
        s->interps_untraced_shared++;
}

/* One that waited (not ready when seen) and is not hooked now. */
static void count_waiting(vc_session *s, int k)
{
    if (g_interps[k].gil != VC_GIL_UNSEEN)
        count_untraced_one(s, g_interps[k].gil == VC_GIL_SHARED);
}

/* arm_here's work, in the sub-interpreter (own: its own GIL; in a parallel session the lock
 * among GILs held).  Nothing here runs bytecode: a callback registered in its atexit that
 * must come out again (the hooks could not be installed) is left in *unreg for the caller. */
static void arm_slot(vc_session *s, int k, int own, PyObject **unreg)
{
    g_own_gil[k] = (unsigned char)own; /* before anything of it is pinned */
    set_state(k, VC_INTERP_LIVE); /* first: the threads it seeds take this slot */
    int ok = 0, reg = register_in(s, k); /* 3.12+: atexit imported already (arm_here) */
    if (reg < 0) {
        /* Still being set up (its start runs bytecode before it has a __main__): asked again
         * at the next visit. */
        set_state(k, VC_INTERP_WAITING);
        return;
    }
    if (reg == 0) {
        /* An own-GIL one's tag is not kept in g_tags (released from the main GIL at stop, an
         * object of another allocator): its callbacks hold it while it is hooked, and a
         * thread bound through it is bound again once its interpreter ended (the parallel
         * callbacks compare the thread state, hook_monitoring.c). */
        PyObject *tag = PyLong_FromUnsignedLongLong((unsigned long long)tag_of(s, k));
        ok = tag != NULL && (own || keep_tag(tag) == 0) &&
             g_sub_backend->install_here(s, (uint32_t)k, tag) == 0;
        Py_XDECREF(tag); /* the callbacks hold it (and g_tags) */
        if (!ok) {
            *unreg = g_interps[k].atexit_cb; /* owned */
            g_interps[k].atexit_cb = NULL;
        }
    }
    if (ok) {
        g_armed_backend = g_sub_backend;
    } else {
        vc_pins_release_owner(&s->pins, (uint32_t)k, 1); /* what seeding pinned */
        set_state(k, VC_INTERP_SKIPPED);
        count_untraced_one(s, !own);
    }
}

/* In the sub-interpreter (a pending call, its thread, its GIL): our end callback registered
 * (atexit imported if it was not), then the backend's hooks.  In a parallel session (one
 * with its own GIL is, hooklock.h) it does so under the lock among GILs, its atexit imported
 * before (an import runs bytecode, which may also let the main GIL go: the session may have
 * gone parallel meanwhile, so it is read after), and checks again under the lock that it is
 * still asked (the stop may have withdrawn the request meanwhile). */
static int arm_here(void *arg)
{
    vc_session *s = &g_vc;
    int k = tag_slot(s, (uintptr_t)arg);
    if (k < 0 || slot_state(k) != VC_INTERP_ARMING)
        return 0;
    vc_exc_saved saved;
    vc_compat_exc_save(&saved);
    if (running_in(k))
        import_atexit();
    int parallel = s->parallel, own = parallel && g_interps[k].gil != VC_GIL_SHARED;
    if (parallel) {
        vc_hooklock_acquire();
        if (tag_slot(s, (uintptr_t)arg) != k || slot_state(k) != VC_INTERP_ARMING) {
            vc_hooklock_release();
            PyErr_Clear();
            vc_compat_exc_restore(&saved);
            return 0;
        }
    }
    PyObject *unreg = NULL;
    if (g_sub_backend == NULL || !running_in(k)) {
        set_state(k, VC_INTERP_SKIPPED);
        count_untraced_one(s, !own);
    } else {
        arm_slot(s, k, own, &unreg);
        PyErr_Clear();
    }
    if (parallel)
        vc_hooklock_release();
    if (unreg != NULL) {
        unregister_in(unreg);
        Py_DECREF(unreg);
    }
    vc_compat_exc_restore(&saved);
    return 0;
}

/* 1 if the running session has hooked the current interpreter, or is about to: a request
 * from an ended session must then leave its hooks alone (install_here replaces what an ended
 * session left). */
static int hooked_now(void)
{
    PyThreadState *ts = vc_compat_current_tstate();
    PyInterpreterState *interp = ts != NULL ? vc_compat_tstate_interp(ts) : NULL;
    for (int k = 1; k < VC_MAX_INTERPS && interp != NULL; k++) {
        int st = slot_state(k);
        if ((st == VC_INTERP_LIVE || st == VC_INTERP_DISARMING || st == VC_INTERP_ARMING) &&
            g_interps[k].interp == interp && g_interps[k].id == vc_compat_interp_id(interp))
            return 1;
    }
    return 0;
}

/* In the sub-interpreter, at stop: its hooks, end callback and pins out.  From an ended
 * session (the interpreter ran no Python while that stop waited): only the hooks of ours it
 * still has. */
static int disarm_here(void *arg)
{
    vc_session *s = &g_vc;
    vc_exc_saved saved;
    vc_compat_exc_save(&saved);
    int parallel = s->parallel; /* an own-GIL one runs this beside the agent's stop */
    if (parallel)
        vc_hooklock_acquire();
    int k = tag_slot(s, (uintptr_t)arg);
    PyObject *unreg = NULL;
    if (k >= 0 && slot_state(k) == VC_INTERP_DISARMING && running_in(k) &&
        g_sub_backend != NULL) {
        end_slot(s, k, 1);
        unreg = g_interps[k].atexit_cb; /* owned: unregistered once the lock is let go */
        g_interps[k].atexit_cb = NULL;
        set_state(k, VC_INTERP_ENDED);
    } else if (k < 0 && g_armed_backend != NULL && !vc_compat_current_interp_ending() &&
               !hooked_now()) {
        g_armed_backend->remove_here(s, 0);
    }
    if (parallel)
        vc_hooklock_release();
    if (unreg != NULL) {
        unregister_in(unreg);
        Py_DECREF(unreg);
    }
    PyErr_Clear();
    vc_compat_exc_restore(&saved);
    return 0;
}

void vc_interps_unhook_current_later(PyObject *tag)
{
    PyThreadState *ts = vc_compat_current_tstate();
    unsigned long long v = tag != NULL && PyLong_Check(tag) ? PyLong_AsUnsignedLongLong(tag) : 0;
    PyErr_Clear();
    if (ts == NULL || v == 0 || (uint32_t)(v >> 16) == g_vc.gen)
        return;
    /* Its own interpreter, from one of its threads with its GIL: alive while this runs. */
    (void)vc_compat_pending_call(vc_compat_tstate_interp(ts), disarm_here, (void *)(uintptr_t)v);
}

static void ask(vc_session *s, int k, int (*fn)(void *), int state)
{
    if (vc_compat_pending_call(g_interps[k].interp, fn, (void *)tag_of(s, k)) == 0)
        set_state(k, state);
}

struct visit {
    vc_session *s;
    int stopping;
    int locks; /* levels of the lock among GILs this visit took */
    int64_t max_id;
    unsigned char listed[VC_MAX_INTERPS];
};

/* Before the first own-GIL interpreter is asked to hook itself: the session goes parallel
 * (hooklock.h), the agent thread holding the lock for the rest of the visit.  No hook of the
 * main GIL runs while it switches (we hold that GIL), and the own-GIL one's first hook comes
 * after our request, which it receives through CPython's pending-call lock. */
static void go_parallel(struct visit *v)
{
    if (v->s->parallel)
        return;
    vc_hooklock_acquire();
    v->locks++;
    v->s->parallel = 1;
}

/* Under the runtime's lock, the main GIL held (compat.h: vc_sub_fn).  One caught while it is
 * being made (not ready: its GIL may not be set yet) waits in a slot until the next visit
 * tells what it is. */
static void visit_one(PyInterpreterState *interp, int64_t id, int flags, void *ctx)
{
    struct visit *v = ctx;
    int shared = (flags & VC_SUB_SHARED_GIL) != 0, ready = (flags & VC_SUB_READY) != 0;
    int gil = !(flags & VC_SUB_GIL_KNOWN) ? VC_GIL_UNSEEN : shared ? VC_GIL_SHARED : VC_GIL_OWN;
    int k = find(interp, id);
    if (k >= 0) {
        v->listed[k] = 1;
        if (gil != VC_GIL_UNSEEN)
            g_interps[k].gil = gil;
        int st = slot_state(k);
        if (v->stopping && st == VC_INTERP_LIVE && ready) {
            ask(v->s, k, disarm_here, VC_INTERP_DISARMING);
        } else if (!v->stopping && st == VC_INTERP_WAITING && ready) {
            if (g_sub_backend != NULL) {
                if (!shared)
                    go_parallel(v);
                ask(v->s, k, arm_here, VC_INTERP_ARMING);
            } else {
                count_untraced_one(v->s, shared);
                set_state(k, VC_INTERP_SKIPPED);
            }
        }
        return;
    }
    if (id <= g_max_seen_id || v->stopping)
        return; /* seen at an earlier visit and decided then */
    if (id > v->max_id)
        v->max_id = id;
    if ((ready && g_sub_backend == NULL) || (k = free_slot()) < 0) {
        count_untraced_one(v->s, shared);
        return;
    }
    g_interps[k] = (vc_interp){interp, id, VC_INTERP_WAITING, NULL, gil};
    g_own_gil[k] = 0;
    v->listed[k] = 1;
    if (ready) {
        if (!shared)
            go_parallel(v);
        ask(v->s, k, arm_here, VC_INTERP_ARMING);
    }
}

static void visit_unlock(struct visit *v)
{
    for (; v->locks > 0; v->locks--)
        vc_hooklock_release();
}

/* The visit: new sub-interpreters asked to hook themselves (or counted), slots whose
 * interpreter left the list freed (one that ended without our atexit: its keys named "?"). */
static void adopt_pending(vc_session *s)
{
    struct visit v = {.s = s, .max_id = g_max_seen_id};
    if (s->parallel) {
        vc_hooklock_acquire();
        v.locks++;
    }
    if (vc_compat_subinterps_each(visit_one, &v) != 0) {
        visit_unlock(&v);
        return; /* not read this time: the next visit tries again */
    }
    if (v.max_id > g_max_seen_id)
        g_max_seen_id = v.max_id;
    for (int k = 1; k < VC_MAX_INTERPS; k++) {
        int st = slot_state(k);
        if (st == VC_INTERP_FREE || v.listed[k])
            continue;
        if (st == VC_INTERP_LIVE || st == VC_INTERP_DISARMING)
            end_slot(s, k, 0);
        else if (st == VC_INTERP_WAITING)
            count_waiting(s, k); /* gone before it was ready (being made, or ending) */
        else if (st == VC_INTERP_ARMING) /* gone before it ran our request */
            count_untraced_one(s, g_interps[k].gil == VC_GIL_SHARED);
        g_interps[k].atexit_cb = NULL; /* leaked with its interpreter: never touched */
        set_state(k, VC_INTERP_FREE);
    }
    visit_unlock(&v);
}

static int any_disarming(void)
{
    for (int k = 1; k < VC_MAX_INTERPS; k++)
        if (slot_state(k) == VC_INTERP_DISARMING)
            return 1;
    return 0;
}

/* The stop: every hooked sub-interpreter asked to unhook itself, the GIL let go for at most
 * wait_ms while they do (the agent thread's: a fork child passes 0, it has no other thread);
 * the rest keep their hooks, inert, until they next run Python (see the top comment). */
static void end_all_pending(vc_session *s, int wait_ms)
{
    /* Parallel (hooklock.h): own-GIL ones arm, disarm and end on their own threads meanwhile;
     * the lock is let go only while the GIL is. */
    int parallel = s->parallel;
    if (parallel)
        vc_hooklock_acquire();
    /* Those not hooked yet stay so: a request of ours still queued in one finds it no longer
     * ARMING (an interpreter hooked now would get no request to unhook). */
    for (int k = 1; k < VC_MAX_INTERPS; k++) {
        int st = slot_state(k);
        if (st == VC_INTERP_WAITING || st == VC_INTERP_ARMING) {
            if (st == VC_INTERP_ARMING)
                count_untraced_one(s, g_interps[k].gil == VC_GIL_SHARED);
            else
                count_waiting(s, k);
            set_state(k, VC_INTERP_SKIPPED);
        }
    }
    struct visit v = {.s = s, .stopping = 1, .max_id = g_max_seen_id};
    if (g_sub_backend != NULL && vc_compat_subinterps_each(visit_one, &v) == 0 && wait_ms > 0 &&
        any_disarming()) {
        int depth = vc_hooklock_release_all();
        PyThreadState *me = PyEval_SaveThread();
        for (int waited = 0; waited < wait_ms && any_disarming(); waited++) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        vc_gil_restore(me);
        vc_hooklock_reacquire(depth);
    }
    /* Own-GIL ones that did not unhook in time keep their hooks for now: from here they
     * record nothing (their threads are closed and their keys named below, the tables then
     * read by the stop); the generation's switch (agent.c) makes that permanent. */
    if (parallel)
        s->closed = 1;
    /* Which are still there (a fork child has none: CPython deletes them in it). */
    struct visit after = {.s = s, .stopping = 1, .max_id = g_max_seen_id};
    int listed = g_sub_backend != NULL && vc_compat_subinterps_each(visit_one, &after) == 0;
    for (int k = 1; k < VC_MAX_INTERPS; k++) {
        int st = slot_state(k);
        if ((st == VC_INTERP_LIVE || st == VC_INTERP_DISARMING) && listed && after.listed[k]) {
            /* Its names read (the GIL is shared; an own-GIL one's from their characters
             * only, names.c), its references left: never released from another interpreter
             * than theirs. */
            uint64_t now = vc_clock_now();
            for (uint32_t i = 0; i < s->nthreads; i++)
                if (s->threads[i].interp_slot == (uint32_t)k &&
                    s->threads[i].interp_id == g_interps[k].id)
                    vc_record_close_thread(s, &s->threads[i], now);
            vc_pins_release_owner(&s->pins, (uint32_t)k, VC_PINS_NAME_ONLY);
        } else if (st == VC_INTERP_LIVE || st == VC_INTERP_DISARMING) {
            end_slot(s, k, 0); /* gone, or not known: nothing of it touched, its keys "?" */
        }
        g_interps[k] = (vc_interp){0}; /* its end callback, if any: inert (an ended session's) */
    }
    release_tags();
    g_sub_backend = NULL;
    if (parallel)
        vc_hooklock_release();
}

void vc_interps_adopt(vc_session *s, int attach)
{
    if (!vc_compat_interps_walkable()) {
        adopt_pending(s);
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
            g_interps[k] = (vc_interp){i, id, VC_INTERP_SKIPPED, NULL, VC_GIL_UNSEEN};
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

void vc_interps_end_all(vc_session *s, int wait_ms)
{
    if (!vc_compat_interps_walkable()) {
        end_all_pending(s, wait_ms);
        return;
    }
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
                    unregister_in(in->atexit_cb);
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

/* hook_monitoring.c — the sys.monitoring (PEP 669) backend, 3.12+.
 *
 * One tool id (PROFILER_ID, 2), process-wide: no per-thread installation.  Callbacks are
 * METH_FASTCALL C functions registered with sys.monitoring.register_callback, as cProfile
 * does (Modules/_lsprof.c):
 *   PY_START → enter; PY_RESUME, PY_THROW → enter of a resume slice (VC_REC_RESUME)
 *   PY_RETURN, PY_YIELD, PY_UNWIND → exit
 *   CALL of a C function / method descriptor → C enter     C_RETURN, C_RAISE → C exit
 * Filters (filter.h): an excluded code object's PY_START/PY_RESUME/PY_RETURN/PY_YIELD and
 * every CALL site in excluded code answer sys.monitoring.DISABLE, so excluded code runs at
 * untraced speed after its first event per location (PY_THROW/PY_UNWIND/C_RETURN/C_RAISE
 * cannot be disabled; they are rare or follow a disabled CALL).  --no-c-calls does not
 * subscribe to CALL/C_RETURN/C_RAISE at all.  How the DISABLEd locations are given back at
 * stop without touching other tools: teardown().
 * The thread state comes from a TLS slot checked against the session generation; a thread
 * seen for the first time is bound to a state once (threads.c), never allocating.  The rest
 * of the agent reaches this file only through its operations table, vc_backend_monitoring
 * (backend.h); before 3.12 that table's install refuses with a message.
 */
#include "backend.h"
#include "hooklock.h"
#include "interps.h"
#include "record.h"
#include "tasks.h"
#include "threads.h"

#include <stdio.h>

#if VC_HAVE_MONITORING

#define VC_TOOL_ID 2 /* sys.monitoring.PROFILER_ID */

/* Thread → state binding: a TLS slot checked against the session generation (a slot left
 * over from an earlier session is ignored).  Measured with callgrind: cheaper here than a
 * pthread key.  The default (dynamic) TLS model, one __tls_get_addr call per callback, on
 * purpose: initial-exec would save 1-4 ns a call but takes glibc's surplus of static TLS,
 * which a process with many extension modules has used up (CPython's own test suite under
 * 3.14 did: "cannot allocate memory in static TLS block"), and then the agent could not be
 * loaded at all. */
typedef struct vc_tls_slot {
    vc_thread *thread;
    uint32_t gen; /* never 0 for a bound slot: g_vc.gen counts from 1 */
    /* The tag of the callbacks it was bound through: NULL in the main interpreter, an int
     * object per sub-interpreter (3.12+, install_here).  An OS thread has a thread state, so a
     * state of ours, per interpreter it enters: a callback with another tag rebinds it. */
    PyObject *tag;
    PyObject *stale; /* the last ended session's tag this thread asked to have removed */
} vc_tls_slot;
static __thread vc_tls_slot vc_tls;

static PyObject *g_missing; /* sys.monitoring.MISSING (borrowed while the session runs) */

static void bind_current(vc_thread *t, PyObject *tag)
{
    vc_tls.thread = t;
    vc_tls.gen = g_vc.gen;
    vc_tls.tag = tag;
}

/* 1 if callbacks with this tag belong to the running session: the main interpreter's (NULL),
 * or a sub-interpreter's hooked by it (its generation).  A sub-interpreter that ran no Python
 * while the last stop waited still has its callbacks until its queued request removes them
 * (interps.c): they record nothing. */
static int tag_current(const vc_session *s, PyObject *tag)
{
    if (tag == NULL)
        return 1;
    unsigned long long v = PyLong_Check(tag) ? PyLong_AsUnsignedLongLong(tag) : 0;
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return (uint32_t)(v >> 16) == s->gen;
}

static vc_thread *claim_current(vc_session *s, PyObject *tag)
{
    vc_thread *t = NULL;
    if (!tag_current(s, tag)) {
        /* Our callbacks left in a sub-interpreter by an ended session: it is asked to remove
         * them (once per thread and tag).  Not bound: that tag's address may be a later
         * session's tag by the time this thread runs there again. */
        if (vc_tls.stale != tag)
            vc_interps_unhook_current_later(tag);
        vc_tls.stale = tag;
        return &vc_ignored_thread;
    }
    /* No state is made once the session is stopping (its backend is gone): its tables are
     * about to be read without the GIL. */
    if (s->backend != NULL) {
        PyThreadState *ts = vc_compat_current_tstate();
        t = vc_thread_for_current(s, ts);
        if (t == NULL)
            t = vc_thread_new(s, ts);
        if (t == NULL)
            s->threads_untraced++;
        else
            t->bound = 1;
    }
    if (t == NULL)
        t = &vc_ignored_thread;
    bind_current(t, tag);
    return t;
}

static inline vc_thread *current_thread(vc_session *s, PyObject *tag)
{
    if (__builtin_expect(vc_tls.gen == s->gen && vc_tls.tag == tag, 1))
        return vc_tls.thread; /* never NULL once gen matches: bind_current is the only writer */
    return claim_current(s, tag);
}

/* The fast halves of the callbacks: the thread bound in this session and traced (else NULL:
 * the general path binds it or ignores it). */
static inline vc_thread *bound_thread(vc_session *s, PyObject *tag)
{
    vc_thread *t = vc_tls.thread;
    if (__builtin_expect(vc_tls.gen != s->gen || vc_tls.tag != tag || t == &vc_ignored_thread, 0))
        return NULL;
    return t;
}

/* sys.monitoring.DISABLE: returned for a location whose events we never want again (an
 * excluded code object's start/resume/return/yield, a call site in excluded code).  It is
 * per (tool, location): other tools keep their events there. */
static PyObject *g_disable;

static inline PyObject *disable(void)
{
    Py_INCREF(g_disable);
    return g_disable;
}

/* Each callback is a fast half, inline and a leaf (record.h: the common case, with no call,
 * so the function saves no registers), in front of its general half, out of line (the whole
 * case analysis, as it always was).  The fast half checks every condition before it writes
 * anything, so the general half starts from the same state.  VC_SLOW (cold too) for the
 * general halves that only rare events reach; CALL's and C_RETURN's serve every event when
 * globs are in force (the caller's verdict), so they are only kept out of line. */
#define VC_SLOW __attribute__((noinline, cold))
#define VC_OUT_OF_LINE __attribute__((noinline))

/* A parallel session (hooklock.h: an own-GIL sub-interpreter is hooked): every callback runs
 * its general half under the lock among GILs, and records nothing once the stop has begun
 * taking the tables (closed).  A thread bound to a state whose interpreter has ended (its
 * tstate cleared by interps.c) is bound again: the tag it was bound through may have been
 * freed with that interpreter and its address be a new interpreter's tag now. */
typedef PyObject *(*vc_callback)(PyObject *, PyObject *const *, Py_ssize_t);

static VC_SLOW PyObject *locked(vc_callback general, PyObject *self, PyObject *const *args,
                                Py_ssize_t nargs)
{
    vc_hooklock_acquire();
    PyObject *r = Py_None;
    if (!g_vc.closed) {
        if (vc_tls.gen == g_vc.gen && vc_tls.thread != &vc_ignored_thread &&
            vc_tls.thread->tstate != vc_compat_current_tstate())
            vc_tls.gen = 0;
        r = general(self, args, nargs);
    } else {
        Py_INCREF(r);
    }
    vc_hooklock_release();
    return r;
}

#define VC_IF_PARALLEL(general)                                                                \
    do {                                                                                      \
        if (__builtin_expect(g_vc.parallel, 0))                                               \
            return locked((general), self, args, nargs);                                      \
    } while (0)

/* PY_START: may be disabled per location. */
static VC_SLOW PyObject *cb_enter_slow(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    vc_session *s = &g_vc;
    vc_thread *t = current_thread(s, self);
    if (t != &vc_ignored_thread && nargs >= 1) {
        if (vc_record_enter(s, t, args[0], args[0], NULL, 0, 0) == VC_ID_EXCLUDED)
            return disable();
        vc_tasks_enter(s, t, (PyCodeObject *)args[0]);
    }
    Py_RETURN_NONE;
}

static PyObject *cb_enter(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    VC_IF_PARALLEL(cb_enter_slow);
    vc_session *s = &g_vc;
    vc_thread *t = bound_thread(s, self);
    if (__builtin_expect(t != NULL && nargs >= 1, 1)) {
        int r = vc_record_enter_fast(s, t, args[0], args[0], NULL, 0, 0);
        if (__builtin_expect(r == VC_FAST_DONE, 1)) {
            vc_tasks_enter(s, t, (PyCodeObject *)args[0]);
            Py_RETURN_NONE;
        }
        if (r == VC_FAST_EXCLUDED)
            return disable();
    }
    return cb_enter_slow(self, args, nargs);
}

/* PY_RESUME: a suspended generator or coroutine runs again — a new slice of the same call,
 * marked so that the summary counts the call once.  May be disabled per location. */
static VC_SLOW PyObject *cb_resume_slow(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    vc_session *s = &g_vc;
    vc_thread *t = current_thread(s, self);
    if (t != &vc_ignored_thread && nargs >= 1) {
        if (vc_record_enter(s, t, args[0], args[0], NULL, 0, VC_REC_RESUME) == VC_ID_EXCLUDED)
            return disable();
        vc_tasks_enter(s, t, (PyCodeObject *)args[0]);
    }
    Py_RETURN_NONE;
}

static PyObject *cb_resume(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    VC_IF_PARALLEL(cb_resume_slow);
    vc_session *s = &g_vc;
    vc_thread *t = bound_thread(s, self);
    if (__builtin_expect(t != NULL && nargs >= 1, 1)) {
        int r = vc_record_enter_fast(s, t, args[0], args[0], NULL, 0, VC_REC_RESUME);
        if (__builtin_expect(r == VC_FAST_DONE, 1)) {
            vc_tasks_enter(s, t, (PyCodeObject *)args[0]);
            Py_RETURN_NONE;
        }
        if (r == VC_FAST_EXCLUDED)
            return disable();
    }
    return cb_resume_slow(self, args, nargs);
}

/* PY_THROW: a resume slice too; cannot be disabled (sys.monitoring raises for it).  Rare: the
 * general path only. */
static PyObject *cb_throw_general(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    vc_session *s = &g_vc;
    vc_thread *t = current_thread(s, self);
    if (t != &vc_ignored_thread && nargs >= 1 &&
        vc_record_enter(s, t, args[0], args[0], NULL, 0, VC_REC_RESUME) != VC_ID_EXCLUDED)
        vc_tasks_enter(s, t, (PyCodeObject *)args[0]);
    Py_RETURN_NONE;
}

static PyObject *cb_throw(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    VC_IF_PARALLEL(cb_throw_general);
    return cb_throw_general(self, args, nargs);
}

/* PY_RETURN, PY_YIELD: may be disabled per location. */
static VC_SLOW PyObject *cb_exit_slow(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    vc_session *s = &g_vc;
    vc_thread *t = current_thread(s, self);
    if (t != &vc_ignored_thread && nargs >= 1 && vc_record_exit_py(s, t, args[0], args[0]))
        return disable();
    Py_RETURN_NONE;
}

static PyObject *cb_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    VC_IF_PARALLEL(cb_exit_slow);
    vc_session *s = &g_vc;
    vc_thread *t = bound_thread(s, self);
    if (__builtin_expect(t != NULL && nargs >= 1, 1) &&
        __builtin_expect(vc_record_exit_fast(s, t, args[0], 0) == VC_FAST_DONE, 1))
        Py_RETURN_NONE;
    return cb_exit_slow(self, args, nargs);
}

/* PY_UNWIND: cannot be disabled. */
static PyObject *cb_unwind_general(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    vc_session *s = &g_vc;
    vc_thread *t = current_thread(s, self);
    if (t != &vc_ignored_thread && nargs >= 1)
        vc_record_exit_py(s, t, args[0], args[0]);
    Py_RETURN_NONE;
}

static PyObject *cb_unwind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    VC_IF_PARALLEL(cb_unwind_general);
    return cb_unwind_general(self, args, nargs);
}

/* CALL, C_RETURN and C_RAISE all get (code, offset, callable, arg0): the key of the callable
 * when it is a C function we trace, else 0 (Python callables are seen at PY_START). */
static inline int c_callable_key(PyObject *const *args, Py_ssize_t nargs, const PyMethodDef **ml,
                                 PyObject **qual)
{
    if (nargs < 4)
        return 0;
    PyObject *self_arg = args[3] == g_missing ? NULL : args[3];
    return vc_cfunc_key(args[2], self_arg, ml, qual);
}

/* The same for the fast halves: -1 where the general path must decide.  The callable's type
 * is tested before arg0 is read: a Python callee (the common CALL) costs a load and three
 * compares. */
static inline int c_callable_key_fast(PyObject *const *args, Py_ssize_t nargs,
                                      const PyMethodDef **ml, PyObject **qual)
{
    if (nargs < 4)
        return 0;
    return vc_cfunc_key_exact(args[2], args + 3, g_missing, ml, qual);
}

/* CALL (not subscribed with --no-c-calls).  A call site in excluded code is disabled
 * whatever it calls: its C callees are judged by this caller, its Python callees get their
 * own PY_START. */
static VC_OUT_OF_LINE PyObject *cb_call_slow(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    vc_session *s = &g_vc;
    const PyMethodDef *ml;
    PyObject *qual;
    if (s->filter.has_globs && nargs >= 1) {
        vc_thread *t = current_thread(s, self);
        if (t != &vc_ignored_thread && !vc_record_caller_traced(s, t, args[0], args[0]))
            return disable();
    }
    if (!c_callable_key(args, nargs, &ml, &qual))
        Py_RETURN_NONE;
    vc_thread *t = current_thread(s, self);
    if (t != &vc_ignored_thread)
        vc_record_enter(s, t, ml, ml, qual, 1, 0);
    Py_RETURN_NONE;
}

static PyObject *cb_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    VC_IF_PARALLEL(cb_call_slow);
    vc_session *s = &g_vc;
    if (__builtin_expect(!s->filter.has_globs, 1)) {
        const PyMethodDef *ml = NULL; /* set when k > 0 (gcc cannot always tell) */
        PyObject *qual = NULL;
        int k = c_callable_key_fast(args, nargs, &ml, &qual);
        if (k == 0)
            Py_RETURN_NONE; /* a Python callable: its PY_START does the work */
        vc_thread *t = bound_thread(s, self);
        if (k > 0 && t != NULL && vc_record_enter_fast(s, t, ml, ml, qual, 1, 0) == VC_FAST_DONE)
            Py_RETURN_NONE;
    }
    return cb_call_slow(self, args, nargs);
}

/* C_RETURN, C_RAISE. */
static VC_OUT_OF_LINE PyObject *cb_c_exit_slow(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    vc_session *s = &g_vc;
    const PyMethodDef *ml;
    PyObject *qual;
    if (!c_callable_key(args, nargs, &ml, &qual))
        Py_RETURN_NONE;
    vc_thread *t = current_thread(s, self);
    if (t != &vc_ignored_thread)
        vc_record_exit_c(s, t, ml, args[0]);
    Py_RETURN_NONE;
}

static PyObject *cb_c_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    VC_IF_PARALLEL(cb_c_exit_slow);
    vc_session *s = &g_vc;
    if (__builtin_expect(!s->filter.has_globs, 1)) {
        const PyMethodDef *ml = NULL; /* set when k > 0 (gcc cannot always tell) */
        PyObject *qual = NULL;
        int k = c_callable_key_fast(args, nargs, &ml, &qual);
        if (k == 0)
            Py_RETURN_NONE;
        vc_thread *t = bound_thread(s, self);
        if (k > 0 && t != NULL && vc_record_exit_fast(s, t, ml, 1) == VC_FAST_DONE)
            Py_RETURN_NONE;
    }
    return cb_c_exit_slow(self, args, nargs);
}

static PyObject *cb_null(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_RETURN_NONE;
}

static PyMethodDef def_enter = {"_vc_enter", (PyCFunction)(void (*)(void))cb_enter, METH_FASTCALL, NULL};
static PyMethodDef def_resume = {"_vc_resume", (PyCFunction)(void (*)(void))cb_resume, METH_FASTCALL, NULL};
static PyMethodDef def_exit = {"_vc_exit", (PyCFunction)(void (*)(void))cb_exit, METH_FASTCALL, NULL};
static PyMethodDef def_throw = {"_vc_throw", (PyCFunction)(void (*)(void))cb_throw, METH_FASTCALL, NULL};
static PyMethodDef def_unwind = {"_vc_unwind", (PyCFunction)(void (*)(void))cb_unwind, METH_FASTCALL, NULL};
static PyMethodDef def_call = {"_vc_call", (PyCFunction)(void (*)(void))cb_call, METH_FASTCALL, NULL};
static PyMethodDef def_c_exit = {"_vc_c_exit", (PyCFunction)(void (*)(void))cb_c_exit, METH_FASTCALL, NULL};
static PyMethodDef def_null = {"_vc_null", (PyCFunction)(void (*)(void))cb_null, METH_FASTCALL, NULL};

struct event_binding {
    const char *event;
    PyMethodDef *def;
    int c_calls; /* only subscribed when C calls are traced */
};

static const struct event_binding bindings[] = {
    {"PY_START", &def_enter, 0},  {"PY_RESUME", &def_resume, 0}, {"PY_THROW", &def_throw, 0},
    {"PY_RETURN", &def_exit, 0},  {"PY_YIELD", &def_exit, 0},    {"PY_UNWIND", &def_unwind, 0},
    {"CALL", &def_call, 1},       {"C_RETURN", &def_c_exit, 1},  {"C_RAISE", &def_c_exit, 1},
};
#define NBINDINGS (sizeof bindings / sizeof bindings[0])

/* sys.monitoring, read from sys's dict: no import (builtins.__import__ may be Python code,
 * which must never run under the lock among GILs, hooklock.h). */
static PyObject *monitoring_module(void)
{
    PyObject *mon = PySys_GetObject("monitoring"); /* borrowed */
    if (mon == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_AttributeError, "sys.monitoring");
        return NULL;
    }
    Py_INCREF(mon);
    return mon;
}

static long event_bit(PyObject *events, const char *name)
{
    PyObject *v = PyObject_GetAttrString(events, name);
    if (v == NULL)
        return -1;
    long bit = PyLong_AsLong(v);
    Py_DECREF(v);
    return bit;
}

static void set_error_from_python(char *err, size_t errlen, const char *what)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    const char *msg = NULL;
    PyObject *str = value ? PyObject_Str(value) : NULL;
    if (str != NULL)
        msg = PyUnicode_AsUTF8(str);
    snprintf(err, errlen, "%s: %s", what, msg ? msg : "unknown Python error");
    Py_XDECREF(str);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_Clear();
}

/* Re-instruments one code object for our tool now, in two steps (see teardown). */
struct clear_ctx {
    PyObject *mon;
    long py_start; /* sys.monitoring.events.PY_START */
};

static void clear_local(PyObject *code, void *arg)
{
    struct clear_ctx *c = arg;
    PyObject *r = PyObject_CallMethod(c->mon, "set_local_events", "iOl", VC_TOOL_ID, code, c->py_start);
    Py_XDECREF(r);
    PyErr_Clear();
    r = PyObject_CallMethod(c->mon, "set_local_events", "iOi", VC_TOOL_ID, code, 0);
    Py_XDECREF(r);
    PyErr_Clear();
}

/* Unregisters every callback and frees the tool id (best effort, errors cleared).
 *
 * What DISABLE left behind: a disabled location is per (tool, code, offset) state inside the
 * code object's instrumentation (Python/instrumentation.c), re-applied lazily: a code object
 * is re-instrumented when it next runs, and only for the events whose tool set changed since
 * it was last instrumented.  set_events(ours, 0) alone would leave an excluded code object
 * that has not run since with its old state: the next session (same tool, same events) would
 * find nothing changed for it and its locations still disabled (measured: an excluded
 * function stayed invisible to every later session).  set_local_events() re-instruments one
 * code object at once, but does nothing when the local set does not change; so, with our
 * global events off, every code object we disabled (they are pinned in the key table until
 * stop) gets set_local_events(ours, code, PY_START) then (ours, code, 0): the first removes
 * from all its locations every event of ours but PY_START, the second PY_START; nothing of
 * ours remains and the next session instruments every location afresh.  Only our tool's
 * bits are touched: other tools' events and their own DISABLEd locations are kept.
 * restart_events() is never called: it would re-enable every tool's disabled locations.
 * (Call sites disabled in included code do not exist: only excluded code's sites are.)
 * owner: the interpreter slot whose excluded code objects are re-instrumented (each
 * interpreter's own, in it), or -1 for none (a sub-interpreter's hooks left from an ended
 * session: its pins are gone; its disabled locations come back at its next session's
 * instrumentation of them, or never if the tool is never used again there). */
static void teardown(PyObject *mon, PyObject *events, int owner)
{
    PyObject *r = PyObject_CallMethod(mon, "set_events", "ii", VC_TOOL_ID, 0);
    Py_XDECREF(r);
    PyErr_Clear();
    long py_start = events != NULL ? event_bit(events, "PY_START") : -1;
    PyErr_Clear();
    if (py_start > 0 && owner >= 0) {
        struct clear_ctx c = {mon, py_start};
        vc_pins_each_excluded(&g_vc.pins, (uint32_t)owner, clear_local, &c);
    }
    for (size_t i = 0; i < NBINDINGS && events != NULL; i++) {
        long bit = event_bit(events, bindings[i].event);
        if (bit < 0) {
            PyErr_Clear();
            continue;
        }
        r = PyObject_CallMethod(mon, "register_callback", "ilO", VC_TOOL_ID, bit, Py_None);
        Py_XDECREF(r);
        PyErr_Clear();
    }
    r = PyObject_CallMethod(mon, "free_tool_id", "i", VC_TOOL_ID);
    Py_XDECREF(r);
    PyErr_Clear();
}

/* Our callbacks registered for every event we trace, each carrying tag (NULL: the main
 * interpreter), then the events switched on, in the current interpreter.  -1 with a message
 * (the caller tears down). */
static int subscribe(vc_session *s, PyObject *mon, PyObject *events, PyObject *tag, char *err,
                     size_t errlen)
{
    long mask = 0;
    PyObject *r;
    for (size_t i = 0; i < NBINDINGS; i++) {
        if (bindings[i].c_calls && s->filter.no_c_calls)
            continue; /* not subscribed at all: C calls cost nothing */
        long bit = event_bit(events, bindings[i].event);
        if (bit < 0) {
            set_error_from_python(err, errlen, "sys.monitoring.events lookup failed");
            return -1;
        }
        PyObject *fn = PyCFunction_New(s->null_hook ? &def_null : bindings[i].def, tag);
        if (fn == NULL)
            goto fail_py;
        r = PyObject_CallMethod(mon, "register_callback", "ilO", VC_TOOL_ID, bit, fn);
        Py_DECREF(fn);
        if (r == NULL)
            goto fail_py;
        Py_DECREF(r);
        mask |= bit;
    }
    r = PyObject_CallMethod(mon, "set_events", "il", VC_TOOL_ID, mask);
    if (r == NULL)
        goto fail_py;
    Py_DECREF(r);
    return 0;
fail_py:
    set_error_from_python(err, errlen, "sys.monitoring registration failed");
    return -1;
}

/* Existing threads get a state now (seeded), bound to their TLS on their first event. */
static void seed_existing_threads(vc_session *s)
{
    PyInterpreterState *interp = vc_compat_tstate_interp(vc_compat_current_tstate());
    uint64_t now = vc_clock_now();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts; ts = PyThreadState_Next(ts)) {
        if (ts == s->agent_tstate)
            continue;
        vc_thread *t = vc_thread_new(s, ts);
        if (t == NULL)
            s->threads_untraced++;
        else
            vc_thread_seed(s, t, ts, now, 0);
    }
}

static int monitoring_install(vc_session *s, char *err, size_t errlen)
{
    /* The agent's own thread (this one) is never traced. */
    vc_ignored_thread.gen = s->gen;
    bind_current(&vc_ignored_thread, NULL);
    seed_existing_threads(s);
    PyObject *mon = monitoring_module();
    if (mon == NULL) {
        set_error_from_python(err, errlen, "sys.monitoring is unavailable");
        return -1;
    }
    PyObject *events = PyObject_GetAttrString(mon, "events");
    PyObject *missing = PyObject_GetAttrString(mon, "MISSING");
    PyObject *dis = PyObject_GetAttrString(mon, "DISABLE");
    PyObject *r = NULL;
    if (events == NULL || missing == NULL || dis == NULL) {
        set_error_from_python(err, errlen, "sys.monitoring is incomplete");
        goto fail_nofree;
    }
    g_missing = missing;
    g_disable = dis;
    r = PyObject_CallMethod(mon, "use_tool_id", "is", VC_TOOL_ID, "vcattach");
    if (r == NULL) {
        set_error_from_python(err, errlen, "sys.monitoring.use_tool_id(PROFILER_ID) failed");
        goto fail_nofree;
    }
    Py_DECREF(r);
    s->tool_id = VC_TOOL_ID;
    if (subscribe(s, mon, events, NULL, err, errlen) != 0)
        goto fail;
    Py_DECREF(events);
    Py_DECREF(missing); /* sys.monitoring keeps MISSING alive (a singleton) */
    Py_DECREF(dis);     /* and DISABLE */
    Py_DECREF(mon);
    return 0;
fail:
    teardown(mon, events, 0);
    s->tool_id = -1;
fail_nofree:
    Py_XDECREF(events);
    Py_XDECREF(missing);
    Py_XDECREF(dis);
    Py_DECREF(mon);
    return -1;
}

static void monitoring_remove(vc_session *s)
{
    if (s->tool_id < 0)
        return;
    PyObject *mon = monitoring_module();
    if (mon == NULL) {
        PyErr_Clear();
        return;
    }
    PyObject *events = PyObject_GetAttrString(mon, "events");
    PyErr_Clear();
    teardown(mon, events, 0);
    Py_XDECREF(events);
    Py_DECREF(mon);
    s->tool_id = -1;
}

/* The PROFILER_ID slot taken by someone else (cProfile on 3.12+): a foreign profiler. */
static int monitoring_foreign(vc_session *s, char *err, size_t errlen)
{
    PyObject *mon = monitoring_module();
    if (mon == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyObject *name = PyObject_CallMethod(mon, "get_tool", "i", VC_TOOL_ID);
    Py_DECREF(mon);
    if (name == NULL) {
        PyErr_Clear();
        return 0;
    }
    int foreign = name != Py_None;
    if (foreign) {
        const char *n = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        PyErr_Clear();
        snprintf(err, errlen, "another profiler holds sys.monitoring's PROFILER_ID (%s, e.g. "
                 "cProfile): vcattach does not replace it; stop that profiler and retry",
                 n ? n : "?");
    }
    Py_DECREF(name);
    return foreign;
}

/* A thread threading just started: bound to a state now (it is named at once). */
static vc_thread *monitoring_on_new_thread(vc_session *s, PyThreadState *ts)
{
    /* &g_vc (== s), as the callbacks pass: every caller of claim_current passes the same
     * constant, so the compiler keeps the callbacks' slow path as lean as it was. */
    int parallel = g_vc.parallel;
    if (parallel)
        vc_hooklock_acquire(); /* it may make a state (hooklock.h) */
    vc_thread *t = current_thread(&g_vc, NULL);
    if (parallel)
        vc_hooklock_release();
    return t == &vc_ignored_thread ? NULL : t;
}

/* Who holds PROFILER_ID in the current interpreter: 1 our tool name, 0 nobody, -1 another
 * profiler (or it could not be read). */
static int tool_owner(PyObject *mon)
{
    PyObject *name = PyObject_CallMethod(mon, "get_tool", "i", VC_TOOL_ID);
    int owner = name == Py_None ? 0
                : name != NULL && PyUnicode_Check(name) &&
                        PyUnicode_CompareWithASCIIString(name, "vcattach") == 0
                    ? 1
                    : -1;
    Py_XDECREF(name);
    PyErr_Clear();
    return owner;
}

/* A sub-interpreter (3.12+, interps.c: a pending call in it, its GIL held; an own-GIL one
 * under the lock among GILs too, so nothing here runs bytecode, hooklock.h): sys.monitoring
 * is per interpreter, so our tool is taken and our callbacks registered in it too, with its
 * own function objects (tag: the session's generation and the slot, so that a thread's calls
 * go to its state here and an ended session's callbacks are told apart). */
static int monitoring_install_here(vc_session *s, uint32_t slot, PyObject *tag)
{
    char err[256];
    PyObject *mon = monitoring_module();
    PyObject *events = mon ? PyObject_GetAttrString(mon, "events") : NULL;
    int owner = mon ? tool_owner(mon) : -1, rc = -1;
    if (events == NULL || owner < 0)
        goto out; /* another profiler's in this interpreter: left alone, counted as not traced */
    if (owner == 1)
        teardown(mon, events, -1); /* ours, left by an ended session (not hooked yet): replaced */
    PyObject *r = PyObject_CallMethod(mon, "use_tool_id", "is", VC_TOOL_ID, "vcattach");
    if (r == NULL)
        goto out;
    Py_DECREF(r);
    seed_existing_threads(s); /* its threads, this one too: their frames at this moment */
    if (subscribe(s, mon, events, tag, err, sizeof err) != 0)
        teardown(mon, events, (int)slot);
    else
        rc = 0;
out:
    Py_XDECREF(events);
    Py_XDECREF(mon);
    PyErr_Clear();
    return rc;
}

static void monitoring_remove_here(vc_session *s, uint32_t slot)
{
    (void)s;
    PyObject *mon = monitoring_module();
    if (mon == NULL) {
        PyErr_Clear();
        return;
    }
    if (tool_owner(mon) == 1) {
        PyObject *events = PyObject_GetAttrString(mon, "events");
        PyErr_Clear();
        teardown(mon, events, slot == 0 ? -1 : (int)slot);
        Py_XDECREF(events);
    }
    Py_DECREF(mon);
    PyErr_Clear();
}

const vc_backend_ops vc_backend_monitoring = {
    .name = "monitoring",
    .foreign = monitoring_foreign,
    .install = monitoring_install,
    .remove = monitoring_remove,
    .scan_new_threads = vc_backend_scan_nothing, /* one hook serves every thread */
    .on_new_thread = monitoring_on_new_thread,
    .install_here = monitoring_install_here,
    .remove_here = monitoring_remove_here,
};

#else /* !VC_HAVE_MONITORING */

static int monitoring_install(vc_session *s, char *err, size_t errlen)
{
    snprintf(err, errlen, "hook=monitoring needs Python 3.12+ (this is %s): use hook=profile",
             vc_compat_python_version());
    return -1;
}

const vc_backend_ops vc_backend_monitoring = VC_BACKEND_ABSENT("monitoring", monitoring_install);

#endif


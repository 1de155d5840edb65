/* hook_monitoring.c — the sys.monitoring (PEP 669) backend, 3.12+.
 *
 * One tool id (PROFILER_ID, 2), process-wide: no per-thread installation.  Callbacks are
 * METH_FASTCALL C functions registered with sys.monitoring.register_callback, as cProfile
 * does (Modules/_lsprof.c):
 *   PY_START → enter; PY_RESUME, PY_THROW → enter of a resume slice (VC_REC_RESUME)
 *   PY_RETURN, PY_YIELD, PY_UNWIND → exit
 *   CALL of a C function / method descriptor → C enter     C_RETURN, C_RAISE → C exit
 * The thread state comes from a TLS slot checked against the session generation; a thread
 * seen for the first time is bound to a state once (threads.c), never allocating.  The rest
 * of the agent reaches this file only through its operations table, vc_backend_monitoring
 * (backend.h); before 3.12 that table's install refuses with a message.
 */
#include "backend.h"
#include "record.h"

#include <stdio.h>

#if VC_HAVE_MONITORING

#define VC_TOOL_ID 2 /* sys.monitoring.PROFILER_ID */

/* Thread → state binding: a TLS slot checked against the session generation (a slot left
 * over from an earlier session is ignored).  Measured with callgrind: cheaper here than a
 * pthread key. */
typedef struct vc_tls_slot {
    vc_thread *thread;
    uint32_t gen;
} vc_tls_slot;
static __thread vc_tls_slot vc_tls;

static PyObject *g_missing; /* sys.monitoring.MISSING (borrowed while the session runs) */

static void bind_current(vc_thread *t)
{
    vc_tls.thread = t;
    vc_tls.gen = g_vc.gen;
}

static vc_thread *claim_current(vc_session *s)
{
    PyThreadState *ts = vc_compat_current_tstate();
    vc_thread *t = vc_thread_for_tstate(s, ts);
    if (t == NULL)
        t = vc_thread_new(s, ts);
    if (t == NULL) {
        s->threads_untraced++;
        t = &vc_ignored_thread;
    } else {
        t->bound = 1;
    }
    bind_current(t);
    return t;
}

static inline vc_thread *current_thread(vc_session *s)
{
    vc_tls_slot *slot = &vc_tls; /* one TLS address computation */
    if (__builtin_expect(slot->gen == s->gen && slot->thread != NULL, 1))
        return slot->thread;
    return claim_current(s);
}

static PyObject *cb_enter(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    vc_session *s = &g_vc;
    vc_thread *t = current_thread(s);
    if (t != &vc_ignored_thread && nargs >= 1)
        vc_record_enter(s, t, args[0], args[0], NULL, 0, 0);
    Py_RETURN_NONE;
}

/* PY_RESUME, PY_THROW: a suspended generator or coroutine runs again — a new slice of the
 * same call, marked so that the summary counts the call once. */
static PyObject *cb_resume(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    vc_session *s = &g_vc;
    vc_thread *t = current_thread(s);
    if (t != &vc_ignored_thread && nargs >= 1)
        vc_record_enter(s, t, args[0], args[0], NULL, 0, VC_REC_RESUME);
    Py_RETURN_NONE;
}

static PyObject *cb_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    vc_session *s = &g_vc;
    vc_thread *t = current_thread(s);
    if (t != &vc_ignored_thread && nargs >= 1)
        vc_record_exit(s, t, args[0], 0);
    Py_RETURN_NONE;
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

static PyObject *cb_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    vc_session *s = &g_vc;
    const PyMethodDef *ml;
    PyObject *qual;
    if (!c_callable_key(args, nargs, &ml, &qual))
        Py_RETURN_NONE;
    vc_thread *t = current_thread(s);
    if (t != &vc_ignored_thread)
        vc_record_enter(s, t, ml, ml, qual, 1, 0);
    Py_RETURN_NONE;
}

static PyObject *cb_c_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    vc_session *s = &g_vc;
    const PyMethodDef *ml;
    PyObject *qual;
    if (!c_callable_key(args, nargs, &ml, &qual))
        Py_RETURN_NONE;
    vc_thread *t = current_thread(s);
    if (t != &vc_ignored_thread)
        vc_record_exit(s, t, ml, 1);
    Py_RETURN_NONE;
}

static PyObject *cb_null(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_RETURN_NONE;
}

static PyMethodDef def_enter = {"_vc_enter", (PyCFunction)(void (*)(void))cb_enter, METH_FASTCALL, NULL};
static PyMethodDef def_resume = {"_vc_resume", (PyCFunction)(void (*)(void))cb_resume, METH_FASTCALL, NULL};
static PyMethodDef def_exit = {"_vc_exit", (PyCFunction)(void (*)(void))cb_exit, METH_FASTCALL, NULL};
static PyMethodDef def_call = {"_vc_call", (PyCFunction)(void (*)(void))cb_call, METH_FASTCALL, NULL};
static PyMethodDef def_c_exit = {"_vc_c_exit", (PyCFunction)(void (*)(void))cb_c_exit, METH_FASTCALL, NULL};
static PyMethodDef def_null = {"_vc_null", (PyCFunction)(void (*)(void))cb_null, METH_FASTCALL, NULL};

struct event_binding {
    const char *event;
    PyMethodDef *def;
};

static const struct event_binding bindings[] = {
    {"PY_START", &def_enter},  {"PY_RESUME", &def_resume}, {"PY_THROW", &def_resume},
    {"PY_RETURN", &def_exit},  {"PY_YIELD", &def_exit},   {"PY_UNWIND", &def_exit},
    {"CALL", &def_call},       {"C_RETURN", &def_c_exit}, {"C_RAISE", &def_c_exit},
};
#define NBINDINGS (sizeof bindings / sizeof bindings[0])

static PyObject *monitoring_module(void)
{
    PyObject *sys = PyImport_ImportModule("sys");
    if (sys == NULL)
        return NULL;
    PyObject *mon = PyObject_GetAttrString(sys, "monitoring");
    Py_DECREF(sys);
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

/* Unregisters every callback and frees the tool id (best effort, errors cleared). */
static void teardown(PyObject *mon, PyObject *events)
{
    PyObject *r = PyObject_CallMethod(mon, "set_events", "ii", VC_TOOL_ID, 0);
    Py_XDECREF(r);
    PyErr_Clear();
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
    bind_current(&vc_ignored_thread);
    seed_existing_threads(s);
    PyObject *mon = monitoring_module();
    if (mon == NULL) {
        set_error_from_python(err, errlen, "sys.monitoring is unavailable");
        return -1;
    }
    PyObject *events = PyObject_GetAttrString(mon, "events");
    PyObject *missing = PyObject_GetAttrString(mon, "MISSING");
    PyObject *r = NULL;
    long mask = 0;
    if (events == NULL || missing == NULL) {
        set_error_from_python(err, errlen, "sys.monitoring is incomplete");
        goto fail;
    }
    g_missing = missing;
    r = PyObject_CallMethod(mon, "use_tool_id", "is", VC_TOOL_ID, "vcattach");
    if (r == NULL) {
        set_error_from_python(err, errlen, "sys.monitoring.use_tool_id(PROFILER_ID) failed");
        goto fail_nofree;
    }
    Py_DECREF(r);
    s->tool_id = VC_TOOL_ID;
    for (size_t i = 0; i < NBINDINGS; i++) {
        long bit = event_bit(events, bindings[i].event);
        if (bit < 0) {
            set_error_from_python(err, errlen, "sys.monitoring.events lookup failed");
            goto fail;
        }
        PyObject *fn = PyCFunction_New(s->null_hook ? &def_null : bindings[i].def, NULL);
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
    Py_DECREF(events);
    Py_DECREF(missing); /* sys.monitoring keeps MISSING alive (a singleton) */
    Py_DECREF(mon);
    return 0;
fail_py:
    set_error_from_python(err, errlen, "sys.monitoring registration failed");
fail:
    teardown(mon, events);
    s->tool_id = -1;
fail_nofree:
    Py_XDECREF(events);
    Py_XDECREF(missing);
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
    teardown(mon, events);
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

static void monitoring_scan_new_threads(vc_session *s)
{
    (void)s; /* one tool id serves every thread: nothing to install per thread */
}

/* A thread threading just started: bound to a state now (it is named at once). */
static vc_thread *monitoring_on_new_thread(vc_session *s, PyThreadState *ts)
{
    /* &g_vc (== s), as the callbacks pass: every caller of claim_current passes the same
     * constant, so the compiler keeps the callbacks' slow path as lean as it was. */
    vc_thread *t = current_thread(&g_vc);
    return t == &vc_ignored_thread ? NULL : t;
}

#else /* !VC_HAVE_MONITORING */

static int monitoring_install(vc_session *s, char *err, size_t errlen)
{
    snprintf(err, errlen, "hook=monitoring needs Python 3.12+ (this is %s): use hook=profile",
             vc_compat_python_version());
    return -1;
}

static void monitoring_remove(vc_session *s)
{
    (void)s;
}

static int monitoring_foreign(vc_session *s, char *err, size_t errlen)
{
    return 0;
}

static void monitoring_scan_new_threads(vc_session *s)
{
    (void)s;
}

static vc_thread *monitoring_on_new_thread(vc_session *s, PyThreadState *ts)
{
    return NULL;
}

#endif

const vc_backend_ops vc_backend_monitoring = {
    .name = "monitoring",
    .foreign = monitoring_foreign,
    .install = monitoring_install,
    .remove = monitoring_remove,
    .scan_new_threads = monitoring_scan_new_threads,
    .on_new_thread = monitoring_on_new_thread,
};

/* hook_profile.c — the legacy Py_tracefunc backend (every CPython version).
 *
 * The hook gets its thread's state for free: the `obj` argument of the profile function is a
 * tiny per-thread object (VcHook) holding the vc_thread pointer, so the hot path needs no TLS
 * or table lookup.  Installation is per thread state (compat.c knows how on each version), on
 * every thread of the interpreter at start, on threads started later through threading's
 * start hook (starthook.c) and through the agent's periodic scan.  The rest of the agent
 * reaches this file only through its operations table, vc_backend_profile (backend.h).
 * Every interpreter the session traces is walked (interps.h): a sub-interpreter's thread
 * states get the hook like the main one's, and lose it in its atexit (detach_interp).
 */
#include "backend.h"
#include "interps.h"
#include "record.h"
#include "tasks.h"
#include "threads.h"

#include <stdio.h>

typedef struct {
    PyObject_HEAD
    vc_thread *thread;
    uint32_t gen;
} VcHookObject;

static void vchook_dealloc(PyObject *self)
{
    VcHookObject *h = (VcHookObject *)self;
    /* The thread state dropped our hook: the thread ended (or its hook was replaced).  Its
     * PyThreadState address may be reused by a new thread, so forget the association. */
    if (h->gen == g_vc.gen && h->thread != NULL && h->thread->tstate != NULL)
        h->thread->hooked = 0, h->thread->tstate = NULL;
    PyObject_Free(self);
}

static PyTypeObject VcHook_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "vcattach._ThreadHook",
    .tp_basicsize = sizeof(VcHookObject),
    .tp_dealloc = vchook_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "vcattach: per-thread state of the in-process tracer",
};

static int profile_hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    vc_session *s = &g_vc;
    vc_thread *t = ((VcHookObject *)obj)->thread;
    const PyMethodDef *ml;
    PyObject *qual;
    switch (what) {
    case PyTrace_CALL: {
        /* The frame identifies the call (no second code lookup at return); the code is the key. */
        PyCodeObject *co = vc_compat_frame_code(frame);
        if (vc_record_enter(s, t, frame, co, NULL, 0,
                            vc_compat_frame_resumes(frame, co) ? VC_REC_RESUME : 0) !=
            VC_ID_EXCLUDED)
            vc_tasks_enter(s, t, co);
        break;
    }
    case PyTrace_RETURN:
        if (__builtin_expect(s->filter.has_globs, 0))
            vc_record_exit_py(s, t, frame, vc_compat_frame_code(frame));
        else
            vc_record_exit(s, t, frame, 0);
        break;
    case PyTrace_C_CALL:
        /* --no-c-calls: the interpreter still calls us (this hook cannot unsubscribe from C
         * events); the eval backend avoids even that. */
        if (s->filter.no_c_calls || !vc_cfunc_key(arg, NULL, &ml, &qual))
            break;
        if (s->filter.has_globs && !vc_record_caller_traced(s, t, frame, vc_compat_frame_code(frame)))
            break;
        vc_record_enter(s, t, ml, ml, qual, 1, 0);
        break;
    case PyTrace_C_RETURN:
    case PyTrace_C_EXCEPTION:
        if (!s->filter.no_c_calls && vc_cfunc_key(arg, NULL, &ml, &qual))
            vc_record_exit_c(s, t, ml, frame);
        break;
    default:
        break;
    }
    return 0;
}

/* null_hook=1: the same mechanism, recording nothing (the benchmark's floor). */
static int null_profile_hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    return 0;
}

static Py_tracefunc our_func(const vc_session *s)
{
    return s->null_hook ? null_profile_hook : profile_hook;
}

static int is_ours(Py_tracefunc f)
{
    return f == profile_hook || f == null_profile_hook;
}

/* Installs the hook on ts with a fresh thread state, seeding it with the running frames. */
static int install_on(vc_session *s, PyThreadState *ts, uint64_t now)
{
    vc_thread *t = vc_thread_new(s, ts);
    if (t == NULL) {
        s->threads_untraced++;
        return 0;
    }
    VcHookObject *h = PyObject_New(VcHookObject, &VcHook_Type);
    if (h == NULL)
        return -1;
    h->thread = t;
    h->gen = s->gen;
    vc_thread_seed(s, t, ts, now, 1);
    int rc = vc_compat_set_profile(ts, our_func(s), (PyObject *)h);
    Py_DECREF(h);
    if (rc != 0)
        return -1;
    t->hooked = 1;
    return 0;
}

static int profile_foreign(vc_session *s, char *err, size_t errlen)
{
    PyInterpreterState *interp = vc_compat_tstate_interp(vc_compat_current_tstate());
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts; ts = PyThreadState_Next(ts)) {
        if (ts == s->agent_tstate)
            continue;
        Py_tracefunc f = vc_compat_profile_func(ts);
        if (f != NULL && !is_ours(f)) {
            snprintf(err, errlen, "another profiler is active (sys.setprofile or cProfile on thread "
                     "%lu): vcattach does not replace it; stop that profiler and retry",
                     (unsigned long)ts->thread_id);
            return 1;
        }
    }
    return 0;
}

/* Hooks the thread states of interp that have no hook (ours or anyone's: never replaced).
 * ctx: int *failed, set when installing failed (a Python error was cleared). */
static void hook_interp(vc_session *s, PyInterpreterState *interp, void *ctx)
{
    int *failed = ctx;
    uint64_t now = vc_clock_now();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts; ts = PyThreadState_Next(ts)) {
        if (ts == s->agent_tstate || vc_interps_is_agent_tstate(ts) || vc_compat_profile_func(ts) != NULL)
            continue;
        if (install_on(s, ts, now) != 0) {
            PyErr_Clear();
            if (failed != NULL)
                *failed = 1;
        }
    }
}

static int profile_install_all(vc_session *s, char *err, size_t errlen)
{
    if (PyType_Ready(&VcHook_Type) != 0) {
        PyErr_Clear();
        snprintf(err, errlen, "internal: PyType_Ready failed");
        return -1;
    }
    int failed = 0;
    vc_interps_each(s, hook_interp, &failed);
    if (failed) {
        snprintf(err, errlen, "installing the profile hook failed (audit hook refused "
                 "sys.setprofile?)");
        return -1;
    }
    return 0;
}

/* A thread threading just started: hooked unless it has a hook already (ours, or someone
 * else's: never replaced); its newest state. */
static vc_thread *profile_on_new_thread(vc_session *s, PyThreadState *ts)
{
    if (vc_compat_profile_func(ts) == NULL && install_on(s, ts, vc_clock_now()) != 0)
        PyErr_Clear();
    vc_thread *t = NULL;
    for (uint32_t i = 0; i < s->nthreads; i++)
        if (s->threads[i].tstate == ts)
            t = &s->threads[i];
    return t;
}

static void profile_scan_new_threads(vc_session *s)
{
    vc_interps_each(s, hook_interp, NULL);
}

static void unhook_interp(vc_session *s, PyInterpreterState *interp, void *ctx)
{
    (void)s, (void)ctx;
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts; ts = PyThreadState_Next(ts)) {
        if (is_ours(vc_compat_profile_func(ts))) {
            if (vc_compat_set_profile(ts, NULL, NULL) != 0)
                PyErr_Clear();
        }
    }
}

static void profile_remove_all(vc_session *s)
{
    vc_interps_each(s, unhook_interp, NULL);
}

static void profile_detach_interp(vc_session *s, PyInterpreterState *interp)
{
    unhook_interp(s, interp, NULL);
}

const vc_backend_ops vc_backend_profile = {
    .name = "profile",
    .foreign = profile_foreign,
    .install = profile_install_all,
    .remove = profile_remove_all,
    .scan_new_threads = profile_scan_new_threads,
    .on_new_thread = profile_on_new_thread,
    .detach_interp = profile_detach_interp, /* attach: the next scan hooks its threads */
};

/* compat.h — the only place that knows how CPython versions differ (3.8 … 3.15).
 *
 * Everything else in the agent talks to the interpreter through these helpers, so there is
 * no PY_VERSION_HEX test outside compat.[ch].  Hot-path helpers are static inline here; the
 * rest (hook installation per thread state, frame walks, finalization) live in compat.c.
 * All functions need the GIL unless said otherwise.
 *
 * 3.14 and 3.15 need no new branch here (checked against Debian sid's headers, tests in the
 * sid root): frames in progress are read through the public frame API (PyThreadState_GetFrame,
 * PyFrame_GetBack, PyFrame_GetCode), which hides 3.14's tagged _PyStackRef f_executable and
 * the frames owned by the C stack or the interpreter; sys.monitoring, the per-thread
 * _PyEval_SetProfile and native_thread_id are as in 3.13.  A 3.14+ difference goes here.
 */
#ifndef VC_COMPAT_H
#define VC_COMPAT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

/* sys.monitoring (PEP 669) exists from 3.12. */
#if PY_VERSION_HEX >= 0x030C0000
#define VC_HAVE_MONITORING 1
#else
#define VC_HAVE_MONITORING 0
#endif

/* "3.11.7": the interpreter's own version string (runtime, not the headers'). */
const char *vc_compat_python_version(void);

/* Current thread state without checks (NULL when the thread has none).  No GIL needed. */
PyThreadState *vc_compat_current_tstate(void);

/* Installs (func, obj) as the profile hook of thread state ts (obj may be NULL; func NULL
 * removes).  Works on any thread state of the interpreter, not only the current one.
 * Returns 0, or -1 with a Python error set. */
int vc_compat_set_profile(PyThreadState *ts, Py_tracefunc func, PyObject *obj);

/* The profile hook currently installed on ts (NULL if none). */
static inline Py_tracefunc vc_compat_profile_func(PyThreadState *ts) { return ts->c_profilefunc; }
static inline PyObject *vc_compat_profile_obj(PyThreadState *ts) { return ts->c_profileobj; }

/* The code object running in a frame given to a Py_tracefunc.  Borrowed (the frame owns it). */
static inline PyCodeObject *vc_compat_frame_code(PyFrameObject *frame)
{
#if PY_VERSION_HEX >= 0x03090000
    PyCodeObject *co = PyFrame_GetCode(frame);
    Py_DECREF(co); /* the frame keeps its code alive for the duration of the call */
    return co;
#else
    return frame->f_code;
#endif
}

/* Whether a PyTrace_CALL for `frame` resumes a suspended generator or coroutine rather than
 * starting a call.  Before 3.11 a frame that has not run yet has f_lasti == -1; on 3.11 the
 * frame stands at a RESUME instruction whose oparg is 0 at the start, 1..3 after a
 * yield/yield from/await.  (3.12+ uses sys.monitoring, whose PY_RESUME says it directly.) */
#define VC_CO_SUSPENDABLE (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)
static inline int vc_compat_frame_resumes(PyFrameObject *frame, PyCodeObject *co)
{
    if (!(co->co_flags & VC_CO_SUSPENDABLE))
        return 0;
#if PY_VERSION_HEX >= 0x030B0000
    /* A code unit is two bytes, opcode then oparg, on every 3.11+ (quickening and
     * instrumentation rewrite the opcode, never the oparg). */
    int lasti = PyFrame_GetLasti(frame);
    if (lasti < 0)
        return 0;
    if ((Py_ssize_t)lasti + 1 >= Py_SIZE(co) * 2)
        return 1;
    return ((const unsigned char *)co->co_code_adaptive)[lasti + 1] != 0;
#else
    return frame->f_lasti >= 0;
#endif
}

/* Py_TYPE(o) is exactly a builtin-function type (PyCMethod_Type exists from 3.9). */
static inline int vc_compat_is_cfunction_exact(PyTypeObject *type)
{
#if PY_VERSION_HEX >= 0x03090000
    return type == &PyCFunction_Type || type == &PyCMethod_Type;
#else
    return type == &PyCFunction_Type;
#endif
}

/* Fills codes[] with new references to the code objects of the Python frames running on ts,
 * innermost first, at most max, and frames[] with the (borrowed, identity only) frame objects.
 * Returns how many. */
int vc_compat_thread_codes(PyThreadState *ts, PyObject **codes, const void **frames, int max);

/* The name VizTracer shows for a code object: co_qualname on 3.11+, co_name before.
 * Borrowed. */
PyObject *vc_compat_code_name(PyCodeObject *co);

/* 1 once the interpreter has started finalizing (taking the GIL then may never return). */
int vc_compat_is_finalizing(void);

/* The OS thread id of ts if CPython records it (3.11+), else 0. */
unsigned long vc_compat_native_tid(PyThreadState *ts);

/* PyEval_SetProfileAllThreads exists (3.12+); per-thread installation also works everywhere. */
PyInterpreterState *vc_compat_tstate_interp(PyThreadState *ts);

#endif /* VC_COMPAT_H */

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

/* PEP 523's frame-evaluation hook as a tracing mechanism (hook_evalframe.c): 3.9-3.13.
 * 3.8 keeps the evaluator in the internal PyInterpreterState (no exported setter).  On 3.12
 * and 3.13 it is the cheaper mechanism for Python calls alone: a null evaluator cost a Flask
 * service nothing measurable (0.97 and 1.04 of its untraced req/s) where sys.monitoring's
 * PY_START/PY_RETURN with null callbacks cost 0.83 and 0.86 (bench/service, --hook).  3.14's
 * frame holds its code as a tagged _PyStackRef: not read here (sys.monitoring serves it). */
#if PY_VERSION_HEX >= 0x03090000 && PY_VERSION_HEX < 0x030E0000
#define VC_HAVE_EVAL_HOOK 1
#else
#define VC_HAVE_EVAL_HOOK 0
#endif

#if VC_HAVE_EVAL_HOOK
#if PY_VERSION_HEX >= 0x030B0000
/* 3.11+ evaluate a _PyInterpreterFrame (internal, Include/internal/pycore_frame.h); only its
 * first eight fields are read here, which every x.y.z of a minor lays out so.  What is read:
 * its code object and where its next instruction is (3.11/3.12 keep the code unit before it,
 * prev_instr; 3.13 the instruction itself, instr_ptr). */
typedef struct _PyInterpreterFrame vc_eval_frame;
#if PY_VERSION_HEX >= 0x030D0000
/* (3.13 moved _Py_CODEUNIT and _PyCode_CODE to the internal headers: a code unit is two
 * bytes, opcode then oparg, and the code starts at co_code_adaptive.) */
typedef struct vc_iframe_head {
    PyObject *f_executable; /* a code object, or None for a frame of no code */
    void *previous;
    PyObject *f_funcobj, *f_globals, *f_builtins, *f_locals, *frame_obj;
    uint16_t *instr_ptr;
} vc_iframe_head;
#define VC_IFRAME_CODE(h) ((PyCodeObject *)(h)->f_executable)
#define VC_IFRAME_NEXT(h) ((const void *)(h)->instr_ptr)
#define VC_CODE_START(co) ((const void *)(co)->co_code_adaptive)
#elif PY_VERSION_HEX >= 0x030C0000
typedef struct vc_iframe_head {
    PyCodeObject *f_code;
    void *previous;
    PyObject *f_funcobj, *f_globals, *f_builtins, *f_locals, *frame_obj;
    _Py_CODEUNIT *prev_instr;
} vc_iframe_head;
#define VC_IFRAME_CODE(h) ((h)->f_code)
#define VC_IFRAME_NEXT(h) ((const void *)((h)->prev_instr + 1))
#else
typedef struct vc_iframe_head {
    PyObject *f_func, *f_globals, *f_builtins, *f_locals;
    PyCodeObject *f_code;
    PyObject *frame_obj;
    void *previous;
    _Py_CODEUNIT *prev_instr;
} vc_iframe_head;
#define VC_IFRAME_CODE(h) ((h)->f_code)
#define VC_IFRAME_NEXT(h) ((const void *)((h)->prev_instr + 1))
#endif
#ifndef VC_CODE_START
#define VC_CODE_START(co) ((const void *)_PyCode_CODE(co))
#endif
static inline PyCodeObject *vc_compat_eval_code(vc_eval_frame *f)
{
    return VC_IFRAME_CODE((vc_iframe_head *)(void *)f);
}
/* Whether evaluating f is no call of a body: 3.11+ evaluate a generator function's frame
 * once when it is called, up to its RETURN_GENERATOR, which makes the generator (the profile
 * hook does not report it either) — the evaluation that starts at the first instruction;
 * 3.13 may name no code object (None) for a frame. */
static inline int vc_compat_eval_not_a_call(vc_eval_frame *f)
{
    vc_iframe_head *h = (vc_iframe_head *)(void *)f;
    PyCodeObject *co = VC_IFRAME_CODE(h);
#if PY_VERSION_HEX >= 0x030D0000
    if (!PyCode_Check((PyObject *)co))
        return 1;
#endif
    return (co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) &&
           VC_IFRAME_NEXT(h) == VC_CODE_START(co);
}
#else
typedef PyFrameObject vc_eval_frame;
static inline PyCodeObject *vc_compat_eval_code(vc_eval_frame *f) { return f->f_code; }
/* 3.9/3.10 make a generator without evaluating its frame. */
static inline int vc_compat_eval_not_a_call(vc_eval_frame *f) { return 0; }
#endif
/* 0 where the frame evaluator misses some Python calls: 3.11.0–3.11.3 inline a Python
 * __getitem__ (BINARY_SUBSCR_GETITEM) around a custom evaluator (CPython gh-104405, fixed
 * in 3.11.4).  Runtime version, not the headers'. */
int vc_compat_eval_exact(void);
/* What the evaluator is given for a running frame, from its frame object (seeding): from
 * 3.11 a PyFrameObject points at its _PyInterpreterFrame (f_frame, internal struct _frame,
 * whose head is the same in 3.11, 3.12 and 3.13); before, the frame object itself. */
static inline const void *vc_compat_eval_identity(PyFrameObject *fo)
{
#if PY_VERSION_HEX >= 0x030B0000
    struct vc_frameobject311_head {
        PyObject_HEAD
        PyFrameObject *f_back;
        void *f_frame;
    };
    return ((struct vc_frameobject311_head *)(void *)fo)->f_frame;
#else
    return fo;
#endif
}
/* The identity (as above) of the frame that called or resumed f, NULL at a thread's bottom;
 * asked before f is evaluated.  3.11+ link f->previous only inside the evaluation: the caller
 * is then the thread's current frame (3.13 keeps it in the thread state, before in its
 * cframe). */
static inline const void *vc_compat_eval_caller(PyThreadState *ts, vc_eval_frame *f)
{
#if PY_VERSION_HEX >= 0x030D0000
    (void)f;
    return ts->current_frame;
#elif PY_VERSION_HEX >= 0x030B0000
    (void)f;
    return ts->cframe != NULL ? (const void *)ts->cframe->current_frame : NULL;
#else
    (void)ts;
    return f->f_back;
#endif
}
/* Whether evaluating f resumes a suspended generator or coroutine (a resume slice, as
 * vc_compat_frame_resumes tells the profile hook).  3.11+: the frame stands before its next
 * instruction, a RESUME whose oparg is 0 at the start and 1..3 after a yield/await (the
 * generator's creation, before RETURN_GENERATOR, is skipped earlier); before, f_lasti >= 0. */
static inline int vc_compat_eval_resumes(vc_eval_frame *f, PyCodeObject *co)
{
    if (!(co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)))
        return 0;
#if PY_VERSION_HEX >= 0x030B0000
    const unsigned char *next = (const unsigned char *)VC_IFRAME_NEXT((vc_iframe_head *)(void *)f);
    return next[1] != 0;
#else
    return f->f_lasti >= 0;
#endif
}
/* The evaluator's signature (_PyFrameEvalFunction) on 3.9–3.13. */
typedef PyObject *(*vc_eval_func)(PyThreadState *ts, vc_eval_frame *f, int throwflag);
/* CPython's own evaluator, which ours wraps. */
static inline PyObject *vc_compat_eval_default(PyThreadState *ts, vc_eval_frame *f, int throwflag)
{
    return _PyEval_EvalFrameDefault(ts, f, throwflag);
}
/* The interpreter's evaluator: 1 if it is CPython's default. */
int vc_compat_eval_is_default(PyInterpreterState *interp);
/* 1 if the interpreter's evaluator is fn. */
int vc_compat_eval_is(PyInterpreterState *interp, vc_eval_func fn);
/* Installs fn (NULL: CPython's default) as the interpreter's evaluator. */
void vc_compat_eval_set(PyInterpreterState *interp, vc_eval_func fn);
#endif

#if !VC_HAVE_EVAL_HOOK
static inline const void *vc_compat_eval_identity(PyFrameObject *fo) { return fo; }
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

/* The exception being raised on this thread, taken out (a hook about to call into the
 * interpreter must leave it as it found it), and put back. */
typedef struct vc_exc_saved {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc;
#else
    PyObject *type, *value, *tb;
#endif
} vc_exc_saved;
static inline void vc_compat_exc_save(vc_exc_saved *e)
{
#if PY_VERSION_HEX >= 0x030C0000
    e->exc = PyErr_GetRaisedException();
#else
    PyErr_Fetch(&e->type, &e->value, &e->tb);
#endif
}
static inline void vc_compat_exc_restore(vc_exc_saved *e)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(e->exc);
#else
    PyErr_Restore(e->type, e->value, e->tb);
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

/* The address of _PyRuntime.initialized (what Py_IsInitialized reads), for the injector that
 * holds a young process (injector/hold.c): it reads it from outside to know when the main
 * thread has finished its initialization.  0 when the layout is not the one this minor's
 * headers give (checked against Py_IsInitialized and the flags before it), or _PyRuntime is
 * not exported. */
uintptr_t vc_compat_init_flag_addr(void);

/* The OS thread id of ts: CPython's record (3.11+), before that the one its pthread's CPU
 * clock encodes; 0 if neither tells. */
unsigned long vc_compat_native_tid(PyThreadState *ts);

/* PyEval_SetProfileAllThreads exists (3.12+); per-thread installation also works everywhere. */
PyInterpreterState *vc_compat_tstate_interp(PyThreadState *ts);

/* ---- interpreters (interps.c) ----------------------------------------------------------
 * Walking the runtime's list of interpreters and telling which ones the agent may enter.
 * The list is changed under the runtime's HEAD_LOCK by whoever creates or destroys an
 * interpreter; before 3.12 every interpreter shares the one GIL and creation/destruction
 * happen with it held (Py_NewInterpreter / Py_EndInterpreter require it), so a walk under the
 * GIL sees a stable list.  From 3.12 an own-GIL interpreter can come and go while we hold the
 * main GIL: sub-interpreters are then not traced (vc_compat_interp_reachable answers 0 for
 * them), and the list is read only under the runtime's own lock, to count them
 * (vc_compat_subinterps_above). */
/* 1 if the list may be walked with the GIL held (before 3.12); 0: only the main interpreter
 * is traced and the list is never walked. */
int vc_compat_interps_walkable(void);
PyInterpreterState *vc_compat_interp_head(void);
PyInterpreterState *vc_compat_interp_next(PyInterpreterState *interp);
int64_t vc_compat_interp_id(PyInterpreterState *interp);
PyInterpreterState *vc_compat_interp_main(void);
/* 1 if interp runs under the GIL the agent holds (so its thread states, hooks and objects can
 * be touched from the agent thread, through a thread state of its own in interp): every
 * interpreter before 3.12; from 3.12 the main one only (see above). */
int vc_compat_interp_reachable(PyInterpreterState *interp);
/* 1 once Py_EndInterpreter has begun on interp (its `finalizing` flag, set before it waits for
 * its threads and runs its atexit callbacks), or the runtime is finalizing: nothing of ours
 * may be installed in it any more. */
int vc_compat_interp_finalizing(PyInterpreterState *interp);
/* 3.12+: how many interpreters other than the main one have an id above `above`, read from
 * the runtime's list under the runtime's own lock (HEAD_LOCK: what creating or destroying an
 * interpreter takes, on any thread, whatever GIL it holds, so every listed interpreter's memory
 * stays valid while it is held); *max_id: the highest id listed (at least `above`); *shared:
 * how many of them run under the main interpreter's GIL (Py_NewInterpreter / the "legacy"
 * config: mod_wsgi's), -1 if this minor's PyInterpreterState layout did not check out (one
 * caught before its GIL is set counts as not shared).  The lock is waited for at most ~20 ms
 * and held for the walk only.  -1 if it was not taken in time or the runtime's layout is not
 * the one known for this minor (nothing read); before 3.12, where the list is walked with the
 * GIL (vc_compat_interp_head), always -1. */
int vc_compat_subinterps_above(int64_t above, int64_t *max_id, int *shared);

/* 3.12+: fn(interp, id, flags, ctx) for every sub-interpreter in the runtime's list, called
 * under the runtime's own lock (as above: none is freed meanwhile; fn must not take it again,
 * nor run Python).  flags: VC_SUB_SHARED_GIL (it runs under the main interpreter's GIL: with
 * that GIL held by the caller, it cannot be created, run or end meanwhile), VC_SUB_READY
 * (its GIL set, so the first flag is known, and not finalizing; its modules may still be
 * being set up), VC_SUB_GIL_KNOWN (its GIL set: the first flag is known, ready or not; one
 * being made may be listed before, even a shared one from 3.13, whose maker lets the main GIL
 * go meanwhile).  0, or -1 if the list could not be read this time (nothing
 * called).  Before 3.12 always -1. */
#define VC_SUB_SHARED_GIL 1
#define VC_SUB_READY 2
#define VC_SUB_GIL_KNOWN 4
typedef void (*vc_sub_fn)(PyInterpreterState *interp, int64_t id, int flags, void *ctx);
int vc_compat_subinterps_each(vc_sub_fn fn, void *ctx);
/* 3.12+: schedules fn(arg) to run in interp, on whichever of its threads next runs Python,
 * with that interpreter's GIL and as its current thread (CPython's pending calls: what a
 * signal handler uses).  Only on an interpreter handed to a vc_sub_fn with VC_SUB_READY and
 * VC_SUB_SHARED_GIL, from that fn, with the main GIL held: one that is ending cannot be
 * reached then (3.12 frees the queue's lock early in PyInterpreterState_Delete, which needs
 * the GIL we hold to get there).  fn must return 0 (else the interpreter raises).  0, or -1
 * (the queue is full, or this interpreter does not export the call). */
int vc_compat_pending_call(PyInterpreterState *interp, int (*fn)(void *), void *arg);
/* Schedules fn(arg) in the main interpreter, from any thread and without the GIL: on 3.12+ it
 * runs on whichever of its threads holds the GIL when the call is queued (CPython sets the
 * holder's eval breaker), before 3.12 on the main thread only, at its next bytecode boundary
 * (Py_AddPendingCall); never on 3.8 (whose Py_AddPendingCall crashes a process that has
 * begun to exit).  0, or -1 (the queue is full, or 3.8). */
int vc_compat_gil_holder_call(int (*fn)(void *), void *arg);
/* 1 if the calling thread's interpreter has begun to end (Py_EndInterpreter) or the runtime
 * is finalizing: a pending call or callback of ours must then install nothing. */
int vc_compat_current_interp_ending(void);

#endif /* VC_COMPAT_H */

/* compat.c — CPython version differences that are not on the hot path (see compat.h). */
#include "compat.h"

#include <pthread.h>
#include <stdio.h>

#if PY_VERSION_HEX >= 0x030D0000
/* 3.13 moved the per-thread setter to the internal headers; libpython still exports it. */
extern int _PyEval_SetProfile(PyThreadState *tstate, Py_tracefunc func, PyObject *arg);
#endif

const char *vc_compat_python_version(void)
{
    /* Py_GetVersion() is "3.11.7 (main, …) [GCC …]": keep the first word. */
    static char buf[32];
    const char *v = Py_GetVersion();
    size_t i = 0;
    while (v[i] && v[i] != ' ' && i + 1 < sizeof buf) {
        buf[i] = v[i];
        i++;
    }
    buf[i] = '\0';
    return buf;
}

PyThreadState *vc_compat_current_tstate(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyThreadState_GetUnchecked();
#else
    return _PyThreadState_UncheckedGet();
#endif
}

int vc_compat_set_profile(PyThreadState *ts, Py_tracefunc func, PyObject *obj)
{
#if PY_VERSION_HEX >= 0x03090000
    return _PyEval_SetProfile(ts, func, obj);
#else
    /* 3.8 exports no per-thread setter: write the fields as PyEval_SetProfile does for the
     * current thread (the other thread is blocked on the GIL we hold). */
    PyObject *old = ts->c_profileobj;
    Py_XINCREF(obj);
    ts->c_profilefunc = NULL;
    ts->c_profileobj = NULL;
    ts->use_tracing = ts->c_tracefunc != NULL;
    Py_XDECREF(old);
    ts->c_profileobj = obj;
    ts->c_profilefunc = func;
    ts->use_tracing = (func != NULL) || (ts->c_tracefunc != NULL);
    return 0;
#endif
}

int vc_compat_thread_codes(PyThreadState *ts, PyObject **codes, const void **frames, int max)
{
    int n = 0;
#if PY_VERSION_HEX >= 0x03090000
    PyFrameObject *f = PyThreadState_GetFrame(ts); /* new reference or NULL */
    while (f != NULL && n < max) {
        /* The frame object stays owned by its interpreter frame: the same object is what the
         * profile hook receives when this frame returns. */
        frames[n] = f;
        codes[n++] = (PyObject *)PyFrame_GetCode(f);
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    Py_XDECREF(f);
#else
    for (PyFrameObject *f = ts->frame; f != NULL && n < max; f = f->f_back) {
        Py_INCREF(f->f_code);
        frames[n] = f;
        codes[n++] = (PyObject *)f->f_code;
    }
#endif
    return n;
}

PyObject *vc_compat_code_name(PyCodeObject *co)
{
#if PY_VERSION_HEX >= 0x030B0000
    return co->co_qualname;
#else
    return co->co_name;
#endif
}

int vc_compat_is_finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

unsigned long vc_compat_native_tid(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x030B0000
    return ts->native_thread_id;
#else
    /* 3.8-3.10 keep only the pthread_t: the thread's CPU clock id, which the C library makes
     * from its kernel tid as the kernel's ABI wants it (~tid << 3 | flags, glibc and musl
     * alike; cpu_sample.c makes the same), gives the tid back.  Else a thread hooked from the
     * agent thread stayed without one until threading named it, and a process that ended
     * before that had its calls on no thread. */
    clockid_t c;
    if (ts->thread_id == 0 || pthread_getcpuclockid((pthread_t)ts->thread_id, &c) != 0)
        return 0;
    long tid = ~((long)c >> 3);
    return tid > 0 ? (unsigned long)tid : 0;
#endif
}

PyInterpreterState *vc_compat_tstate_interp(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x03090000
    return PyThreadState_GetInterpreter(ts);
#else
    return ts->interp;
#endif
}

#if VC_HAVE_EVAL_HOOK
/* 3.9/3.10 store _PyEval_EvalFrameDefault itself as the default; 3.11+ store NULL and its
 * getter answers _PyEval_EvalFrameDefault for it (and its setter stores NULL for it). */
int vc_compat_eval_is_default(PyInterpreterState *interp)
{
    return _PyInterpreterState_GetEvalFrameFunc(interp) == _PyEval_EvalFrameDefault;
}

int vc_compat_eval_is(PyInterpreterState *interp, vc_eval_func fn)
{
    return _PyInterpreterState_GetEvalFrameFunc(interp) == (_PyFrameEvalFunction)fn;
}

int vc_compat_eval_exact(void)
{
#if PY_VERSION_HEX >= 0x030B0000
    return Py_Version >= 0x030B0400;
#else
    return 1;
#endif
}

void vc_compat_eval_set(PyInterpreterState *interp, vc_eval_func fn)
{
    _PyInterpreterState_SetEvalFrameFunc(interp, fn ? (_PyFrameEvalFunction)fn : _PyEval_EvalFrameDefault);
}
#endif

/* ---- interpreters ------------------------------------------------------------------------ */

int vc_compat_interps_walkable(void)
{
    return PY_VERSION_HEX < 0x030C0000;
}

PyInterpreterState *vc_compat_interp_head(void)
{
    return PyInterpreterState_Head();
}

PyInterpreterState *vc_compat_interp_next(PyInterpreterState *interp)
{
    return PyInterpreterState_Next(interp);
}

int64_t vc_compat_interp_id(PyInterpreterState *interp)
{
    return PyInterpreterState_GetID(interp);
}

PyInterpreterState *vc_compat_interp_main(void)
{
    return PyInterpreterState_Main();
}

int vc_compat_interp_reachable(PyInterpreterState *interp)
{
#if PY_VERSION_HEX >= 0x030C0000
    /* 3.12+: a sub-interpreter may have its own GIL (PEP 684) and its own allocator; which
     * one shares ours is internal state (not handled yet: main interpreter only). */
    return interp == PyInterpreterState_Main();
#else
    (void)interp;
    return 1;
#endif
}

/* The head of the internal PyInterpreterState (Include/internal/pycore_pystate.h on 3.8,
 * pycore_interp.h on 3.9–3.11), up to `finalizing`, which every patch release of a minor lays
 * out alike.  Read only by the agent thread, with the GIL. */
#if PY_VERSION_HEX < 0x030C0000
struct vc_interp_head {
    PyInterpreterState *next;
#if PY_VERSION_HEX >= 0x030B0000
    struct {
        uint64_t next_unique_id;
        PyThreadState *head;
        long count;
        size_t stacksize;
    } threads;
#else
    PyThreadState *tstate_head;
#endif
#if PY_VERSION_HEX >= 0x03090000
    void *runtime;
#endif
    int64_t id;
    int64_t id_refcount;
    int requires_idref;
    void *id_mutex;
#if PY_VERSION_HEX >= 0x030B0000
    int _initialized;
#endif
    int finalizing;
};
#endif

int vc_compat_interp_finalizing(PyInterpreterState *interp)
{
    if (vc_compat_is_finalizing())
        return 1;
#if PY_VERSION_HEX < 0x030C0000
    const struct vc_interp_head *h = (const struct vc_interp_head *)(const void *)interp;
    if (h->id != PyInterpreterState_GetID(interp))
        return 1; /* not the layout we know: take it as not ours to touch */
    return h->finalizing != 0;
#else
    (void)interp;
    return 0; /* only the main interpreter is reached (vc_compat_interp_reachable) */
#endif
}

/* ---- _PyRuntime.initialized ------------------------------------------------------------------
 * Its offset in _PyRuntimeState per minor, as offsetof() gives it with each minor's internal
 * headers (pycore_pystate.h in 3.8, pycore_runtime.h after; the same with Py_DEBUG): after
 * {preinitializing, preinitialized, core_initialized} ints (3.11+: after _initialized too;
 * 3.13+: after the debug offsets). */
#if PY_VERSION_HEX >= 0x030F0000
#define VC_RT_INITIALIZED 904
#elif PY_VERSION_HEX >= 0x030E0000
#define VC_RT_INITIALIZED 776
#elif PY_VERSION_HEX >= 0x030D0000
#define VC_RT_INITIALIZED 600
#elif PY_VERSION_HEX >= 0x030B0000
#define VC_RT_INITIALIZED 16
#else
#define VC_RT_INITIALIZED 12
#endif
extern char _PyRuntime[] __attribute__((weak));

uintptr_t vc_compat_init_flag_addr(void)
{
    if (_PyRuntime == NULL)
        return 0;
    volatile int *flags = (volatile int *)(void *)(_PyRuntime + VC_RT_INITIALIZED - 12);
    for (int i = 0; i < 4; i++) /* preinitializing .. initialized: each 0 or 1 */
        if (flags[i] != 0 && flags[i] != 1)
            return 0;
    /* initialized: once set, its neighbours preinitialized and core_initialized are too */
    if (flags[3] != Py_IsInitialized() || (flags[3] && !(flags[1] && flags[2])))
        return 0;
    return (uintptr_t)&flags[3];
}

/* ---- the runtime's list under its own lock (3.12+) ----------------------------------------
 * _PyRuntime.interpreters is {mutex; head; main; next_id} in 3.12 … 3.15 (internal
 * pycore_runtime.h / pycore_runtime_structs.h); its offset in _PyRuntimeState, per minor, as
 * offsetof() gives it with each minor's internal headers.  Before it is used, the `main` field
 * 16 bytes further must hold PyInterpreterState_Main() and `head` must be set: a layout we do
 * not know is never locked.  3.12's mutex is a PyThread_type_lock (PyThread_acquire_lock_timed
 * bounds the wait); 3.13+'s a one-byte PyMutex, taken here like PyMutex_Lock's fast path
 * (0 → locked, no parked waiter) and retried for a bounded time (the timed lock is not
 * exported), released with PyMutex_Unlock, which wakes any waiter that parked meanwhile.
 * _PyRuntime is referenced weakly: an interpreter that does not export it gets -1, and the
 * agent still loads. */
#if PY_VERSION_HEX >= 0x030C0000
#include <time.h>
#if PY_VERSION_HEX >= 0x030F0000
#define VC_RT_INTERPS 928
#elif PY_VERSION_HEX >= 0x030E0000
#define VC_RT_INTERPS 800
#elif PY_VERSION_HEX >= 0x030D0000
#define VC_RT_INTERPS 624
#else
#define VC_RT_INTERPS 32
#endif
/* In PyInterpreterState (internal pycore_interp.h), per minor as offsetof() gives them:
 * ceval.gil (the GIL it runs under), _gil (its own GIL's storage, which the main interpreter
 * uses: the layout check) and id. */
#if PY_VERSION_HEX >= 0x030F0000
#define VC_IS_GIL 16
#define VC_IS_OWN_GIL 7736
#define VC_IS_ID 7272
#define VC_IS_INITIALIZED 7304
#define VC_IS_FINALIZING 7384
#elif PY_VERSION_HEX >= 0x030E0000
#define VC_IS_GIL 16
#define VC_IS_OWN_GIL 7784
#define VC_IS_ID 7280
#define VC_IS_INITIALIZED 7312
#define VC_IS_FINALIZING 7392
#elif PY_VERSION_HEX >= 0x030D0000
#define VC_IS_GIL 16
#define VC_IS_OWN_GIL 7752
#define VC_IS_ID 7272
#define VC_IS_INITIALIZED 7312
#define VC_IS_FINALIZING 7384
#else
#define VC_IS_GIL 384
#define VC_IS_OWN_GIL 1040
#define VC_IS_ID 8
#define VC_IS_INITIALIZED 40
#define VC_IS_FINALIZING 104
#endif

/* _initialized (int) and _finalizing (the thread state ending it, NULL until then; an atomic
 * pointer in 3.12): read as any other thread of CPython reads them. */
static int interp_ready(PyInterpreterState *interp)
{
    int init = *(volatile int *)(void *)((char *)interp + VC_IS_INITIALIZED);
    void *fin = __atomic_load_n((void **)(void *)((char *)interp + VC_IS_FINALIZING), __ATOMIC_ACQUIRE);
    return init != 0 && fin == NULL;
}

/* The GIL interp runs under, NULL if not set yet.  Only with the interpreter's memory valid
 * (the main one, or any listed one under the runtime's lock). */
static void *interp_gil(PyInterpreterState *interp)
{
    return *(void *volatile *)(void *)((char *)interp + VC_IS_GIL);
}

/* 1 if the main interpreter's fields sit where this minor's layout says. */
static int interp_layout_known(PyInterpreterState *main)
{
    return interp_gil(main) == (void *)((char *)main + VC_IS_OWN_GIL) &&
           *(int64_t *)(void *)((char *)main + VC_IS_ID) == PyInterpreterState_GetID(main);
}
#define VC_LOCK_WAIT_US 20000

static int rt_lock(char *mutex)
{
#if PY_VERSION_HEX >= 0x030D0000
    for (int waited = 0; waited < VC_LOCK_WAIT_US; waited += 100) {
        unsigned char expected = 0;
        if (__atomic_compare_exchange_n((unsigned char *)mutex, &expected, 1, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return 0;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    return -1;
#else
    PyThread_type_lock lock = *(PyThread_type_lock *)(void *)mutex;
    if (lock == NULL)
        return -1;
    return PyThread_acquire_lock_timed(lock, VC_LOCK_WAIT_US, 0) == PY_LOCK_ACQUIRED ? 0 : -1;
#endif
}

static void rt_unlock(char *mutex)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyMutex_Unlock((PyMutex *)(void *)mutex);
#else
    PyThread_release_lock(*(PyThread_type_lock *)(void *)mutex);
#endif
}

int vc_compat_subinterps_each(vc_sub_fn fn, void *ctx)
{
    if (_PyRuntime == NULL)
        return -1;
    char *mutex = _PyRuntime + VC_RT_INTERPS;
    PyInterpreterState *volatile *head = (PyInterpreterState *volatile *)(void *)(mutex + 8);
    PyInterpreterState *main = PyInterpreterState_Main();
    if (main == NULL || *(PyInterpreterState *volatile *)(void *)(mutex + 16) != main ||
        *head == NULL)
        return -1;
    /* Without the known layout nothing is said shared (nor ready): nothing is entered. */
    void *main_gil = interp_layout_known(main) ? interp_gil(main) : NULL;
    if (rt_lock(mutex) != 0)
        return -1;
    for (PyInterpreterState *i = *head; i != NULL; i = PyInterpreterState_Next(i)) {
        if (i == main)
            continue;
        int flags = 0;
        if (main_gil != NULL && interp_gil(i) == main_gil)
            flags |= VC_SUB_SHARED_GIL;
        /* _initialized is set when it is listed, its GIL later (Py_NewInterpreterFromConfig):
         * until then it is being made, and whether it shares ours is not known yet */
        if (main_gil != NULL && interp_gil(i) != NULL)
            flags |= VC_SUB_GIL_KNOWN;
        if ((flags & VC_SUB_GIL_KNOWN) && interp_ready(i))
            flags |= VC_SUB_READY;
        fn(i, PyInterpreterState_GetID(i), flags, ctx);
    }
    rt_unlock(mutex);
    return 0;
}

struct above_ctx {
    int64_t above, max;
    int n, same;
};

static void count_above(PyInterpreterState *interp, int64_t id, int flags, void *ctx)
{
    (void)interp;
    struct above_ctx *c = ctx;
    if (id <= c->above)
        return;
    c->n++;
    if (id > c->max)
        c->max = id;
    if (flags & VC_SUB_SHARED_GIL)
        c->same++;
}

int vc_compat_subinterps_above(int64_t above, int64_t *max_id, int *shared)
{
    struct above_ctx c = {above, above, 0, 0};
    *max_id = above;
    *shared = -1;
    PyInterpreterState *main = PyInterpreterState_Main();
    if (vc_compat_subinterps_each(count_above, &c) != 0)
        return -1;
    *max_id = c.max;
    if (main != NULL && interp_layout_known(main))
        *shared = c.same;
    return c.n;
}

/* Exported by every 3.12+ libpython (PyAPI_FUNC, for _testinternalcapi), with this shape in
 * each minor (3.12's last argument is `mainthreadonly`, 3.13+'s `flags`: 0 in both means any
 * thread of the interpreter).  Weak: one that does not export it gets -1. */
extern int _PyEval_AddPendingCall(PyInterpreterState *interp, int (*func)(void *), void *arg,
                                  int flags) __attribute__((weak));

int vc_compat_pending_call(PyInterpreterState *interp, int (*fn)(void *), void *arg)
{
    if (_PyEval_AddPendingCall == NULL)
        return -1;
    return _PyEval_AddPendingCall(interp, fn, arg, 0) == 0 ? 0 : -1;
}

int vc_compat_gil_holder_call(int (*fn)(void *), void *arg)
{
    PyInterpreterState *main = PyInterpreterState_Main();
    if (_PyEval_AddPendingCall != NULL && main != NULL)
        return _PyEval_AddPendingCall(main, fn, arg, 0) == 0 ? 0 : -1;
    return Py_AddPendingCall(fn, arg) == 0 ? 0 : -1;
}

int vc_compat_current_interp_ending(void)
{
    if (vc_compat_is_finalizing())
        return 1;
    PyThreadState *ts = vc_compat_current_tstate();
    if (ts == NULL)
        return 1;
    PyInterpreterState *interp = vc_compat_tstate_interp(ts);
    PyInterpreterState *main = PyInterpreterState_Main();
    if (interp == main)
        return 0;
    return main == NULL || !interp_layout_known(main) || !interp_ready(interp);
}
#else
int vc_compat_subinterps_above(int64_t above, int64_t *max_id, int *shared)
{
    *max_id = above;
    *shared = -1;
    return -1;
}

int vc_compat_subinterps_each(vc_sub_fn fn, void *ctx)
{
    (void)fn;
    (void)ctx;
    return -1;
}

int vc_compat_pending_call(PyInterpreterState *interp, int (*fn)(void *), void *arg)
{
    (void)interp;
    (void)fn;
    (void)arg;
    return -1;
}

int vc_compat_gil_holder_call(int (*fn)(void *), void *arg)
{
#if PY_VERSION_HEX < 0x03090000
    /* 3.8's Py_AddPendingCall, once Py_FinalizeEx has run the pending calls (before the
     * atexit callbacks, our stop among them), reports "cannot add pending calls" through the
     * thread state holding the GIL: none while our atexit stop waits, and it crashed the
     * target (SIGSEGV at exit, test_agent_control.py::test_deadline_and_atexit).  Nothing
     * tells from outside that it has begun, so 3.8 queues none. */
    (void)fn;
    (void)arg;
    return -1;
#else
    return Py_AddPendingCall(fn, arg) == 0 ? 0 : -1;
#endif
}

int vc_compat_current_interp_ending(void)
{
    return vc_compat_is_finalizing();
}
#endif

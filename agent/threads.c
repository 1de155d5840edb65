/* threads.c — per-thread state: the table of traced threads, seeding a thread's shadow stack
 * with the frames already running, OS ids and threading names, and the threading start hook
 * that hooks threads started while a session runs.
 *
 * The table is one mmap of VC_MAX_THREADS states made once per process and never unmapped:
 * a TLS slot left over from an earlier session still points into valid memory (its
 * generation no longer matches, so it is ignored).  Used pages are returned at session end.
 */
#include "record.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

vc_thread vc_ignored_thread; /* the agent's own thread and threads beyond the table */

static vc_thread *table_base(void)
{
    static vc_thread *base;
    if (base == NULL) {
        void *p = mmap(NULL, (size_t)VC_MAX_THREADS * sizeof(vc_thread), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        base = p;
    }
    return base;
}

vc_thread *vc_thread_new(vc_session *s, PyThreadState *ts)
{
    if (s->threads == NULL || s->nthreads >= VC_MAX_THREADS)
        return NULL;
    vc_thread *t = &s->threads[s->nthreads];
    /* Only the header is cleared: the stack is written before it is read. */
    memset(t, 0, offsetof(vc_thread, stack));
    t->index = s->nthreads++;
    t->gen = s->gen;
    t->tstate = ts;
    t->ident = ts ? (unsigned long)ts->thread_id : 0;
    t->tid = ts ? (pid_t)vc_compat_native_tid(ts) : 0;
    return t;
}

vc_thread *vc_thread_for_tstate(vc_session *s, PyThreadState *ts)
{
    for (uint32_t i = 0; i < s->nthreads; i++) {
        vc_thread *t = &s->threads[i];
        if (t->tstate == ts && !t->bound)
            return t;
    }
    return NULL;
}

void vc_thread_seed(vc_session *s, vc_thread *t, PyThreadState *ts, uint64_t now)
{
    PyObject *codes[VC_STACK_DEPTH];
    const void *frames[VC_STACK_DEPTH];
    int n = vc_compat_thread_codes(ts, codes, frames, VC_STACK_DEPTH);
    /* The legacy hook identifies a running call by its frame, sys.monitoring by its code. */
    int by_frame = s->backend == VC_BACKEND_PROFILE;
    /* codes[] is innermost first: push the outermost first. */
    for (int i = n - 1; i >= 0; i--) {
        uint32_t d = t->depth++;
        vc_frame *f = &t->stack[d];
        f->match = by_frame ? frames[i] : (const void *)codes[i];
        f->id = vc_pins_lookup(&s->pins, codes[i], NULL, 0);
        f->is_c = 0;
        f->start = now;
    }
    for (int i = 0; i < n; i++)
        Py_DECREF(codes[i]);
}

static void set_name(vc_thread *t, PyObject *name)
{
    if (name == NULL || !PyUnicode_Check(name))
        return;
    const char *u = PyUnicode_AsUTF8(name);
    if (u == NULL) {
        PyErr_Clear();
        return;
    }
    if (t->name != NULL && strcmp(t->name, u) == 0)
        return;
    char *copy = strdup(u);
    if (copy != NULL) {
        free(t->name);
        t->name = copy;
    }
}

static PyObject *threading_active(void)
{
    PyObject *modules = PySys_GetObject("modules"); /* borrowed */
    if (modules == NULL || !PyDict_Check(modules))
        return NULL;
    PyObject *threading = PyDict_GetItemString(modules, "threading"); /* borrowed */
    if (threading == NULL)
        return NULL;
    PyObject *active = PyObject_GetAttrString(threading, "_active");
    if (active == NULL || !PyDict_Check(active)) {
        PyErr_Clear();
        Py_XDECREF(active);
        return NULL;
    }
    return active;
}

static unsigned long attr_ulong(PyObject *o, const char *name)
{
    PyObject *v = PyObject_GetAttrString(o, name);
    if (v == NULL) {
        PyErr_Clear();
        return 0;
    }
    unsigned long r = PyLong_Check(v) ? PyLong_AsUnsignedLong(v) : 0;
    if (PyErr_Occurred()) {
        PyErr_Clear();
        r = 0;
    }
    Py_DECREF(v);
    return r;
}

/* Names every known thread from threading._active, reading plain attributes (_ident,
 * _native_id, _name) so that no Python code runs. */
void vc_threads_capture_names(vc_session *s)
{
    PyObject *active = threading_active();
    if (active == NULL)
        return;
    Py_ssize_t pos = 0;
    PyObject *key, *thread;
    while (PyDict_Next(active, &pos, &key, &thread)) {
        unsigned long ident = attr_ulong(thread, "_ident");
        unsigned long native = attr_ulong(thread, "_native_id");
        PyObject *name = PyObject_GetAttrString(thread, "_name");
        if (name == NULL) {
            PyErr_Clear();
            continue;
        }
        for (uint32_t i = 0; i < s->nthreads; i++) {
            vc_thread *t = &s->threads[i];
            int same = (native != 0 && t->tid != 0) ? (pid_t)native == t->tid
                                                    : (ident != 0 && ident == t->ident && t->tstate);
            if (same) {
                set_name(t, name);
                if (t->tid == 0 && native != 0)
                    t->tid = (pid_t)native;
            }
        }
        Py_DECREF(name);
    }
    Py_DECREF(active);
}

void vc_thread_capture_current_name(vc_session *s, vc_thread *t)
{
    PyObject *active = threading_active();
    if (active == NULL)
        return;
    PyObject *key = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
    PyObject *thread = key ? PyDict_GetItem(active, key) : NULL; /* borrowed */
    if (thread != NULL) {
        PyObject *name = PyObject_GetAttrString(thread, "_name");
        if (name == NULL)
            PyErr_Clear();
        set_name(t, name);
        Py_XDECREF(name);
    }
    Py_XDECREF(key);
    Py_DECREF(active);
    PyErr_Clear();
}

/* ---- threading._profile_hook replacement ------------------------------------------------
 * threading's bootstrap runs `if _profile_hook: sys.setprofile(_profile_hook)` in every new
 * thread, after registering it in threading._active.  Our object answers the truth test
 * itself, in the new thread: it hooks that thread (legacy backend) or binds it (monitoring),
 * records its name, and answers False so that sys.setprofile is never called.  Calling the
 * object (someone invoking the hook directly) does the same. */

typedef struct {
    PyObject_HEAD
} VcStartHookObject;

static void hook_current_thread(void)
{
    vc_session *s = &g_vc;
    PyThreadState *ts = vc_compat_current_tstate();
    if (ts == NULL || s->gen == 0 || s->threads == NULL)
        return;
    vc_thread *t = NULL;
    if (s->backend == VC_BACKEND_PROFILE) {
        if (vc_compat_profile_func(ts) == NULL && vc_profile_install_current(s, ts) != 0)
            PyErr_Clear();
        for (uint32_t i = 0; i < s->nthreads; i++)
            if (s->threads[i].tstate == ts)
                t = &s->threads[i];
    } else if (s->backend == VC_BACKEND_MONITORING) {
        t = vc_monitoring_current();
        if (t == &vc_ignored_thread)
            t = NULL;
    }
    if (t != NULL)
        vc_thread_capture_current_name(s, t);
}

static int starthook_bool(PyObject *self)
{
    hook_current_thread();
    return 0;
}

static PyObject *starthook_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    hook_current_thread();
    Py_RETURN_NONE;
}

static PyNumberMethods starthook_as_number = {
    .nb_bool = starthook_bool,
};

static PyTypeObject VcStartHook_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "vcattach._StartHook",
    .tp_basicsize = sizeof(VcStartHookObject),
    .tp_as_number = &starthook_as_number,
    .tp_call = starthook_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "vcattach: hooks threads started while a trace session runs",
};

static PyObject *threading_module(void)
{
    PyObject *modules = PySys_GetObject("modules");
    if (modules == NULL || !PyDict_Check(modules))
        return NULL;
    return PyDict_GetItemString(modules, "threading"); /* borrowed */
}

int vc_threading_patch(vc_session *s)
{
    PyObject *threading = threading_module();
    if (threading == NULL)
        return 0; /* not imported: every later thread is found by the periodic scan */
    if (PyType_Ready(&VcStartHook_Type) != 0)
        return -1;
    PyObject *saved = PyObject_GetAttrString(threading, "_profile_hook");
    if (saved == NULL)
        return -1;
    PyObject *hook = PyType_GenericAlloc(&VcStartHook_Type, 0);
    if (hook == NULL) {
        Py_DECREF(saved);
        return -1;
    }
    if (PyObject_SetAttrString(threading, "_profile_hook", hook) != 0) {
        Py_DECREF(saved);
        Py_DECREF(hook);
        return -1;
    }
    s->saved_profile_hook = saved;
    s->start_hook = hook;
    s->threading_patched = 1;
    return 0;
}

/* threading.setprofile() set by someone else: threads started later would get a profiler. */
int vc_threading_foreign(void)
{
    PyObject *threading = threading_module();
    if (threading == NULL)
        return 0;
    PyObject *hook = PyObject_GetAttrString(threading, "_profile_hook");
    if (hook == NULL) {
        PyErr_Clear();
        return 0;
    }
    int foreign = hook != Py_None;
    Py_DECREF(hook);
    return foreign;
}

void vc_threading_restore(vc_session *s)
{
    if (!s->threading_patched)
        return;
    PyObject *threading = threading_module();
    if (threading != NULL) {
        PyObject *cur = PyObject_GetAttrString(threading, "_profile_hook");
        /* Someone replaced ours meanwhile: theirs stays. */
        if (cur == s->start_hook &&
            PyObject_SetAttrString(threading, "_profile_hook", s->saved_profile_hook) != 0)
            PyErr_Clear();
        Py_XDECREF(cur);
        PyErr_Clear();
    }
    Py_CLEAR(s->saved_profile_hook);
    Py_CLEAR(s->start_hook);
    s->threading_patched = 0;
}

int vc_threads_alloc(vc_session *s)
{
    s->threads = table_base();
    s->nthreads = 0;
    return s->threads ? 0 : -1;
}

void vc_thread_free_all(vc_session *s)
{
    for (uint32_t i = 0; i < s->nthreads; i++) {
        free(s->threads[i].name);
        s->threads[i].name = NULL;
    }
    if (s->threads != NULL && s->nthreads > 0) {
        size_t bytes = (size_t)s->nthreads * sizeof(vc_thread);
        bytes = (bytes + 4095) & ~(size_t)4095;
        madvise(s->threads, bytes, MADV_DONTNEED); /* pages read back as zeros: still valid */
    }
    s->nthreads = 0;
}

/* starthook.c — the threading start hook: hooks threads that threading starts while a
 * session runs, and puts threading back as it was at stop.
 *
 * threading's bootstrap runs `if _profile_hook: sys.setprofile(_profile_hook)` in every new
 * thread, after registering it in threading._active.  Our object answers the truth test
 * itself, in the new thread: it hooks that thread (legacy backend) or binds it (monitoring),
 * records its name, and answers False so that sys.setprofile is never called.  Calling the
 * object (someone invoking the hook directly) does the same.  What "hooks" means is the
 * installed backend's on_new_thread (backend.h); the thread's name comes from threads.c.
 */
#include "starthook.h"
#include "backend.h"
#include "threads.h"

typedef struct {
    PyObject_HEAD
} VcStartHookObject;

static void hook_current_thread(void)
{
    vc_session *s = &g_vc;
    PyThreadState *ts = vc_compat_current_tstate();
    if (ts == NULL || s->gen == 0 || s->threads == NULL || s->backend == NULL)
        return;
    vc_thread *t = s->backend->on_new_thread(s, ts);
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

/* follow.c — the exit path of a fork child of a process-tree session (`vcattach
 * --subprocesses`).
 *
 * The child inherits the agent's library but only the forking thread: no agent thread, a
 * copy of the parent's hooks and records (which agent.c's fork handler removes and discards
 * before it starts the child's own session on the same control socket).  Many such children
 * — multiprocessing's fork and forkserver workers, some servers' workers — leave through
 * os._exit, which runs no atexit handler: their trace would die with them.  So, still on the
 * forking thread and under the child's GIL, os._exit is wrapped: the wrapper stops the session
 * and waits (bounded) until its END has gone to the controller, then exits.
 * Nothing here runs on a hijacked thread: the fork handler runs where os.fork() was called.
 */
#include "follow.h"
#include "lifecycle.h"
#include "session.h"

#define VC_EXIT_FLUSH_WAIT_MS 10000

static PyObject *g_real_exit; /* the os._exit the wrapper calls (a strong reference) */

static PyObject *exit_flush(PyObject *self, PyObject *args)
{
    if (vc_life_state() != VC_IDLE && vc_life_in_session_process()) {
        unsigned seen = vc_life_delivered();
        Py_BEGIN_ALLOW_THREADS
        vc_life_request_stop(VC_STOP_ATEXIT);
        /* until END went out, not just idle: END follows the idle state */
        vc_life_wait_delivered(seen, VC_EXIT_FLUSH_WAIT_MS);
        Py_END_ALLOW_THREADS
    }
    return PyObject_Call(g_real_exit, args, NULL);
}

static PyMethodDef exit_def = {"_exit", exit_flush, METH_VARARGS,
                               "vcattach: sends the trace of this process, then os._exit(n)"};

/* Once per process image: a grandchild inherits the wrapper already in place. */
static void wrap_os_exit(void)
{
    if (g_real_exit != NULL)
        return;
    PyObject *os = PyImport_ImportModule("os");
    PyObject *real = os ? PyObject_GetAttrString(os, "_exit") : NULL;
    PyObject *fn = real ? PyCFunction_New(&exit_def, NULL) : NULL;
    if (fn != NULL && PyObject_SetAttrString(os, "_exit", fn) == 0) {
        g_real_exit = real;
        real = NULL;
    }
    Py_XDECREF(fn);
    Py_XDECREF(real);
    Py_XDECREF(os);
    PyErr_Clear();
}

void vc_follow_wrap_os_exit(void)
{
    wrap_os_exit();
}

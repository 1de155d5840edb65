/* follow.c — fork children of a process-tree session (`vcattach --subprocesses`).
 *
 * The child inherits the agent's library but only the forking thread: no agent thread, the
 * parent's hooks still installed, and a copy of the parent's session — whose window, when it
 * is shared with vcattach (buffer.h), is the parent's very memory.  So:
 *  - from inside fork() on (a pthread_atfork child handler) the child takes no chunk of that
 *    window: its hooks drop what they record until it has its own;
 *  - in the child's os.register_at_fork handler (agent.c, under the child's GIL, on the
 *    forking thread) the session becomes the child's own without removing the hooks: a new
 *    window, a new key table, its thread's state kept, nothing of the parent's records or
 *    names kept or sent.  A pool worker forked with tasks waiting runs its first one
 *    immediately: a child that re-installed its hooks only once its controller answered
 *    (tens of milliseconds) missed its first calls, and one killed sooner had no trace;
 *  - the agent thread it then starts opens the child's session on the same control socket
 *    (HELLO with its window, CONFIG, STARTED) while the hooks record.
 * Many such children — multiprocessing's fork and forkserver workers, some servers' workers —
 * leave through os._exit, which runs no atexit handler: their trace would die with them.  So,
 * still on the forking thread and under the child's GIL, os._exit is wrapped: the wrapper
 * stops the session and waits (bounded) until its END has gone to the controller, then exits.
 * (One that is killed instead keeps what its window holds: vcattach reads it.)
 * Nothing here runs on a hijacked thread: the fork handler runs where os.fork() was called.
 */
#include "follow.h"
#include "lifecycle.h"
#include "session.h"
#include "stream.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- inside fork(), in the child ------------------------------------------------------- */

static void forsake_parent_window(void)
{
    vc_session *s = &g_vc;
    if (s->pool.map == NULL)
        return;
    vc_pool_forsake_in_child(&s->pool);
    for (uint32_t i = 0; s->threads != NULL && i < s->nthreads; i++)
        s->threads[i].chunk = NULL;
}

void vc_follow_register_atfork(void)
{
    static int done;
    if (!done && pthread_atfork(NULL, NULL, forsake_parent_window) == 0)
        done = 1;
}

/* ---- the child's own session, under its GIL --------------------------------------------- */

/* The forking thread's running frames keep the keys they were entered with: ids of the
 * parent's table, which the child's new table gives to other functions (or to none: "unknown
 * function" in its trace).  Each is pinned again in the child's table, and named in its window
 * like any first sight; one the child cannot name (a key named by text) is not recorded. */
static void rekey_frames(vc_frame *stack, uint32_t n, const vc_pins *parents, vc_pins *childs)
{
    for (uint32_t d = 0; d < n; d++) {
        uint32_t id = stack[d].id;
        if (id >= parents->count || parents->by_id == NULL)
            continue; /* VC_ID_NONE: not recorded either way */
        const vc_pin *p = &parents->by_id[id];
        stack[d].id = p->is_c == VC_PIN_NAMED
                          ? VC_ID_NONE
                          : vc_pins_lookup(childs, p->ptr, p->qual, p->is_c, p->owner);
        if (stack[d].id == VC_ID_EXCLUDED)
            stack[d].id = VC_ID_NONE; /* entered as included: its exit is only not recorded */
    }
}

/* The thread states of the parent are gone but the forking thread's: that one keeps its
 * slot (the hooks hold it: a profile hook object, a TLS binding) under the child's tid, its
 * running frames now begun at the child's start (marked as running at attach, like any
 * frame found running when a trace begins); the others' slots stay empty for good. */
static void threads_for_child(vc_session *s, const vc_pins *parents, vc_pins *childs)
{
    PyThreadState *me = vc_compat_current_tstate();
    pid_t tid = (pid_t)syscall(SYS_gettid);
    uint64_t now = vc_clock_now();
    for (uint32_t i = 0; s->threads != NULL && i < s->nthreads; i++) {
        vc_thread *t = &s->threads[i];
        t->chunk = NULL;
        t->announced = 0;
        t->announced_name = NULL;
        t->drop_n = 0;
        t->too_deep = 0;
        t->blocked[0] = '\0';
        if (t->tstate == me && me != NULL && t->interp_id == 0) {
            t->tid = tid;
            uint32_t n = t->depth < VC_STACK_DEPTH ? t->depth : VC_STACK_DEPTH;
            for (uint32_t d = 0; d < n; d++) {
                t->stack[d].start = now;
                t->stack[d].flags |= VC_REC_AT_ATTACH;
            }
            t->seeded = n;
            rekey_frames(t->stack, n, parents, childs);
            continue;
        }
        t->tstate = NULL;
        t->tid = 0;
        t->depth = 0;
        t->seeded = 0;
        free(t->name);
        t->name = NULL;
    }
}

int vc_follow_continue_in_child(vc_session *s)
{
    vc_pool fresh;
    if (vc_pool_init_shared(&fresh, s->buffer_mb) != 0 && vc_pool_init(&fresh, s->buffer_mb) != 0)
        return -1;
    vc_pins pins;
    if (vc_pins_init(&pins, 1u << 16) != 0) {
        vc_pool_destroy(&fresh);
        return -1;
    }
    /* From here on nothing fails: the parent's window (the child's mapping of it, its memfd)
     * and key table go, the child's take their place. */
    fresh.streaming = 1;
    vc_pool_destroy(&s->pool);
    s->pool = fresh;
    pins.filter = s->pins.filter;
    pins.own_gil = s->pins.own_gil;
    pins.arena = &s->pool.arena;
    threads_for_child(s, &s->pins, &pins); /* before the parent's table goes: its keys */
    vc_pins_drop(&s->pins, &pins);
    s->pins = pins;
    s->threads_untraced = 0;
    s->agent_tstate = NULL; /* the parent's agent thread: gone (its state's address may be
                               reused); the child's own agent thread sets it */
    vc_stream_release(s, 0); /* nothing of the parent's stream is sent: the child's starts */
    s->names = NULL;
    s->nnames = 0;
    s->kept_tmp[0] = '\0';
    s->window_passed = 0;
    /* The window's clock fit at once (the parent's rate): a child killed before its sender's
     * first round still has its records placed on the tree's clock. */
    vc_clock_pair now = vc_clock_sample();
    vc_clock_map map;
    vc_clock_map_make(&map, s->clk_start, now);
    vc_pool_set_clock(&s->pool, map.raw0, map.ns0, map.ns_per_raw);
    s->clk_start = now; /* the child's trace begins at its fork */
    s->attach_ns = s->clk_start.ns;
    s->start_mono_ms = vc_clock_mono_ns() / 1000000u;
    s->continued = 1;
    return 0;
}

/* ---- os._exit --------------------------------------------------------------------------- */

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

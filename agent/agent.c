/* agent.c — the exported vc_agent_* API and the session life cycle on the agent thread.
 *
 * Entry points (vcagent.h) only copy the config and start the agent thread: they may run on a
 * thread hijacked by ptrace, so they never touch Python.  The agent thread then:
 *   1. (control sessions) connects to the injector, HELLO → CONFIG;
 *   2. takes the GIL (PyGILState_Ensure), refuses if another profiler owns a hook, installs
 *      the hook on every thread, seeds their shadow stacks, patches threading._profile_hook,
 *      registers an atexit stop, releases the GIL;
 *   3. waits for the deadline / vc_agent_stop / STOP / EOF / atexit, visiting the GIL every
 *      ~100 ms to hook threads created outside threading, grow the key table and read names;
 *   4. stops under the GIL (hooks removed, open frames closed, names resolved, pins released),
 *      releases its thread state, then emits the trace without the GIL (emit.c).
 * Every wait is bounded; failures end the session with a message, never a crash.
 */
#include "record.h"
#include "cvf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VC_EXPORT __attribute__((visibility("default")))
#define VC_ATEXIT_WAIT_MS 10000
#define VC_TICK_MS 100

vc_session g_vc = {.control_fd = -1, .status_fd = -1, .status_client_fd = -1, .tool_id = -1};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_state = VC_IDLE;        /* enum vc_state */
static int g_started;                /* this session: 0 pending, 1 hooks installed, <0 failed */
static int g_stop_reason;            /* enum vc_stop_reason requested, 0 none */
static int g_ran;                    /* a session has finished at least once */
static int g_wake[2] = {-1, -1};     /* written to wake the agent thread's poll */
static struct vc_result g_result;
static pid_t g_session_pid;          /* the process that started the session */
static int g_fork_cleanup;           /* a fork child inherited a running session */
static int g_cond_ready_reset;       /* a fork child must re-create the condition variable */
static char g_error[512];
static uint32_t g_gen;

/* ---- small helpers ----------------------------------------------------------------------- */

static void deadline_from_now(struct timespec *ts, int wait_ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += wait_ms / 1000;
    ts->tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static pthread_cond_t *cond(void)
{
    /* The condition variable waits on CLOCK_MONOTONIC (set up once). */
    static int ready;
    if (g_cond_ready_reset) {
        g_cond_ready_reset = 0;
        ready = 0;
    }
    if (!ready) {
        pthread_condattr_t a;
        pthread_condattr_init(&a);
        pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
        pthread_cond_init(&g_cond, &a); /* never waited on yet (or a fork child's copy) */
        pthread_condattr_destroy(&a);
        ready = 1;
    }
    return &g_cond;
}

/* Waits (lock held) until pred() or the deadline; returns pred(). */
static int wait_until(int (*pred)(void), int wait_ms)
{
    struct timespec dl;
    deadline_from_now(&dl, wait_ms < 0 ? 0 : wait_ms);
    while (!pred()) {
        if (pthread_cond_timedwait(cond(), &g_lock, &dl) == ETIMEDOUT)
            break;
    }
    return pred();
}

static int pred_idle(void) { return g_state == VC_IDLE; }
static int pred_started(void) { return g_started != 0 || g_state == VC_IDLE; }

uint64_t vc_elapsed_ms(void)
{
    uint64_t now = vc_clock_mono_ns() / 1000000u;
    return g_vc.start_mono_ms ? now - g_vc.start_mono_ms : 0;
}

int vc_session_state(void)
{
    pthread_mutex_lock(&g_lock);
    int st = g_state;
    pthread_mutex_unlock(&g_lock);
    return st;
}

void vc_request_stop(int reason)
{
    pthread_mutex_lock(&g_lock);
    if (g_stop_reason == VC_STOP_NONE)
        g_stop_reason = reason;
    int fd = g_wake[1];
    pthread_mutex_unlock(&g_lock);
    if (fd >= 0) {
        char c = 1;
        ssize_t w = write(fd, &c, 1); /* a full pipe already wakes the poll */
        (void)w;
    }
}

static int stop_requested(void)
{
    pthread_mutex_lock(&g_lock);
    int r = g_stop_reason;
    pthread_mutex_unlock(&g_lock);
    return r;
}

int vc_wake_fd(void)
{
    return g_wake[0];
}

/* ---- out-of-line parts of the hot path (record.h) ----------------------------------------- */

vc_chunk *vc_record_new_chunk(vc_session *s, vc_thread *t)
{
    vc_chunk *c = vc_pool_next_chunk(&s->pool, t->chunk, t->index);
    if (c == NULL)
        s->pool.dropped++;
    t->chunk = c;
    return c;
}

void vc_record_mismatch(vc_session *s, vc_thread *t, const void *match, int is_c, uint64_t now)
{
    if (is_c)
        return; /* a C call that began before we saw this thread */
    uint32_t top = t->depth;
    for (uint32_t k = top; k-- > 0;) {
        vc_frame *f = &t->stack[k];
        if (f->match == match && !f->is_c) {
            /* The frames above missed their exits: they end now, inside their parent. */
            for (uint32_t j = top - 1; j > k; j--)
                vc_record_store(s, t, t->stack[j].id, t->stack[j].start, now, 0);
            vc_record_store(s, t, f->id, f->start, now, 0);
            t->depth = k;
            return;
        }
    }
    /* Not on the stack: a frame that began before the hook; ignored. */
}

/* ---- atexit: the process is exiting while a session runs ---------------------------------- */

static PyObject *atexit_stop(PyObject *self, PyObject *unused)
{
    if (getpid() != g_session_pid)
        Py_RETURN_NONE; /* a fork child: it has no agent thread to wait for */
    Py_BEGIN_ALLOW_THREADS
    vc_request_stop(VC_STOP_ATEXIT);
    pthread_mutex_lock(&g_lock);
    wait_until(pred_idle, VC_ATEXIT_WAIT_MS);
    pthread_mutex_unlock(&g_lock);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef atexit_def = {"_vcattach_atexit_stop", atexit_stop, METH_NOARGS,
                                 "vcattach: stops the trace session before the interpreter exits"};

static void atexit_register(vc_session *s)
{
    PyObject *mod = PyImport_ImportModule("atexit");
    PyObject *fn = mod ? PyCFunction_New(&atexit_def, NULL) : NULL;
    PyObject *r = fn ? PyObject_CallMethod(mod, "register", "O", fn) : NULL;
    if (r != NULL)
        s->atexit_cb = fn, fn = NULL;
    Py_XDECREF(r);
    Py_XDECREF(fn);
    Py_XDECREF(mod);
    PyErr_Clear();
}

static void atexit_unregister(vc_session *s, int from_atexit)
{
    if (s->atexit_cb == NULL)
        return;
    /* From inside the atexit run, unregistering would free the entry being called. */
    if (!from_atexit) {
        PyObject *mod = PyImport_ImportModule("atexit");
        PyObject *r = mod ? PyObject_CallMethod(mod, "unregister", "O", s->atexit_cb) : NULL;
        Py_XDECREF(r);
        Py_XDECREF(mod);
        PyErr_Clear();
    }
    Py_CLEAR(s->atexit_cb);
}

/* ---- fork: the child inherits the hooks but not the agent thread -------------------------
 * pthread_atfork keeps our lock usable in the child and notes that a session was running;
 * os.register_at_fork(after_in_child=…) (registered once per process: os has no unregister;
 * it does nothing unless a session was running at the fork) then removes, in the child and
 * under its GIL, every hook the child inherited, so it runs on untraced and leaves no trace. */

static void atfork_prepare(void) { pthread_mutex_lock(&g_lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&g_lock); }

static void atfork_child(void)
{
    pthread_mutex_init(&g_lock, NULL);
    g_cond_ready_reset = 1;
    if (g_state != VC_IDLE)
        g_fork_cleanup = 1;
    g_state = VC_IDLE;
    g_ran = 0;
    g_wake[0] = g_wake[1] = -1; /* the parent's pipe: closed below, never written */
}

static PyObject *after_fork_child(PyObject *self, PyObject *unused)
{
    vc_session *s = &g_vc;
    if (!g_fork_cleanup)
        Py_RETURN_NONE;
    g_fork_cleanup = 0;
    if (s->backend == VC_BACKEND_PROFILE)
        vc_profile_remove_all(s);
    else if (s->backend == VC_BACKEND_MONITORING)
        vc_monitoring_remove(s);
    s->backend = 0;
    vc_threading_restore(s);
    atexit_unregister(s, 0);
    uint32_t n = 0;
    char **names = vc_pins_resolve_and_release(&s->pins, &n);
    vc_names_free(names, n);
    vc_pool_destroy(&s->pool);
    vc_thread_free_all(s);
    if (s->control_fd >= 0)
        close(s->control_fd);
    if (s->status_fd >= 0)
        close(s->status_fd);
    if (s->status_client_fd >= 0)
        close(s->status_client_fd);
    s->control_fd = s->status_fd = s->status_client_fd = -1;
    PyErr_Clear();
    Py_RETURN_NONE;
}

static PyMethodDef after_fork_def = {"_vcattach_after_fork_child", after_fork_child, METH_NOARGS,
                                     "vcattach: removes inherited trace hooks in a fork child"};

static void register_fork_handlers(void)
{
    static int done;
    if (done)
        return;
    PyObject *os = PyImport_ImportModule("os");
    PyObject *fn = os ? PyCFunction_New(&after_fork_def, NULL) : NULL;
    PyObject *reg = os ? PyObject_GetAttrString(os, "register_at_fork") : NULL;
    PyObject *kw = fn ? Py_BuildValue("{s:O}", "after_in_child", fn) : NULL;
    PyObject *args = PyTuple_New(0);
    PyObject *r = (reg && kw && args) ? PyObject_Call(reg, args, kw) : NULL;
    if (r != NULL) {
        done = 1;
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    }
    Py_XDECREF(r);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_XDECREF(reg);
    Py_XDECREF(fn);
    Py_XDECREF(os);
    PyErr_Clear();
}

/* ---- start (under the GIL) --------------------------------------------------------------- */

static int install_under_gil(vc_session *s, char *err, size_t errlen)
{
    s->agent_tstate = vc_compat_current_tstate();
    vc_ignored_thread.gen = s->gen;
    vc_monitoring_bind_current(&vc_ignored_thread);
    if (vc_profile_type_ready() != 0) {
        PyErr_Clear();
        snprintf(err, errlen, "internal: PyType_Ready failed");
        return -1;
    }
    int backend = VC_BACKEND_PROFILE;
    if (s->hook_kind == VC_HOOK_MONITORING || (s->hook_kind == VC_HOOK_AUTO && VC_HAVE_MONITORING))
        backend = VC_BACKEND_MONITORING;
    if (s->hook_kind == VC_HOOK_MONITORING && !VC_HAVE_MONITORING) {
        snprintf(err, errlen, "hook=monitoring needs Python 3.12+ (this is %s): use hook=profile",
                 vc_compat_python_version());
        return -1;
    }
    if (vc_profile_foreign(s, err, errlen) || vc_monitoring_foreign(err, errlen))
        return -1;
    if (vc_threading_foreign()) {
        snprintf(err, errlen, "threading.setprofile() has installed another profiler for new "
                 "threads: vcattach does not replace it; call threading.setprofile(None) first");
        return -1;
    }
    s->clk_start = vc_clock_sample();
    s->attach_ns = s->clk_start.ns;
    s->backend = backend;
    if (backend == VC_BACKEND_PROFILE) {
        if (vc_profile_install_all(s, err, errlen) != 0) {
            vc_profile_remove_all(s);
            return -1;
        }
    } else {
        /* Existing threads get a state now (seeded), bound to their TLS on their first event. */
        PyInterpreterState *interp = vc_compat_tstate_interp(vc_compat_current_tstate());
        uint64_t now = vc_clock_now();
        for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts; ts = PyThreadState_Next(ts)) {
            if (ts == s->agent_tstate)
                continue;
            vc_thread *t = vc_thread_new(s, ts);
            if (t == NULL)
                s->threads_untraced++;
            else
                vc_thread_seed(s, t, ts, now);
        }
        if (vc_monitoring_install(s, err, errlen) != 0)
            return -1;
    }
    if (vc_threading_patch(s) != 0)
        PyErr_Clear(); /* new threads are still found by the periodic scan */
    vc_threads_capture_names(s);
    atexit_register(s);
    register_fork_handlers();
    return 0;
}

static void periodic_under_gil(vc_session *s)
{
    if (vc_pins_maybe_grow(&s->pins) != 0)
        PyErr_Clear();
    if (s->backend == VC_BACKEND_PROFILE)
        vc_profile_scan_new_threads(s);
    vc_threads_capture_names(s);
    PyErr_Clear();
}

/* Removes every trace of the session from the interpreter and snapshots what emit needs. */
static void stop_under_gil(vc_session *s, int reason)
{
    s->stop_raw = vc_clock_now();
    vc_threads_capture_names(s); /* while every thread state is still associated */
    if (s->backend == VC_BACKEND_PROFILE)
        vc_profile_remove_all(s);
    else if (s->backend == VC_BACKEND_MONITORING)
        vc_monitoring_remove(s);
    s->backend = 0;
    vc_threading_restore(s);
    atexit_unregister(s, reason == VC_STOP_ATEXIT);
    /* Calls still running are closed at the stop time, so that every started call pairs up. */
    for (uint32_t i = 0; i < s->nthreads; i++) {
        vc_thread *t = &s->threads[i];
        uint32_t n = t->depth < VC_STACK_DEPTH ? t->depth : VC_STACK_DEPTH;
        for (uint32_t d = n; d-- > 0;)
            vc_record_store(s, t, t->stack[d].id, t->stack[d].start, s->stop_raw, VC_REC_OPEN);
        t->depth = 0;
    }
    s->names = vc_pins_resolve_and_release(&s->pins, &s->nnames);
    s->clk_stop = vc_clock_sample();
    PyErr_Clear();
}

/* ---- the agent thread -------------------------------------------------------------------- */

static int check_output(const vc_session *s, char *err, size_t errlen)
{
    const char *out = s->output;
    if (out[0] == '\0') {
        snprintf(err, errlen, "no output given");
        return -EINVAL;
    }
    if (strcmp(out, "control") == 0) {
        if (s->control_fd < 0) {
            snprintf(err, errlen, "output=control needs a control connection");
            return -EINVAL;
        }
        return 0;
    }
    if (strncmp(out, "fd:", 3) == 0) {
        char *end;
        long fd = strtol(out + 3, &end, 10);
        if (*end != '\0' || fd < 0 || fd > INT_MAX || fcntl((int)fd, F_GETFL) < 0) {
            snprintf(err, errlen, "output %.300s is not an open file descriptor", out);
            return -EBADF;
        }
        return 0;
    }
    if (strncmp(out, "unix:", 5) == 0)
        return 0; /* connected at emit time */
    char dir[VC_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        slash[1] = '\0';
    else
        *slash = '\0';
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, errlen, "output %.200s is not writable (directory %.200s: %s): choose another path",
                 out, dir, strerror(errno));
        return -EACCES;
    }
    return 0;
}

static void finish_session(vc_session *s, int status, const char *err)
{
    vc_names_free(s->names, s->nnames);
    s->names = NULL;
    s->nnames = 0;
    if (s->backend == 0) {
        /* Only once no hook can write into them (see the finalizing case in agent_main). */
        vc_pool_destroy(&s->pool);
        vc_thread_free_all(s);
    }
    vc_status_close(s);
    vc_control_close(s);
    pthread_mutex_lock(&g_lock);
    g_result.status = status;
    if (err != NULL && err[0] != '\0')
        snprintf(g_error, sizeof g_error, "%s", err);
    if (g_started == 0)
        g_started = status ? status : -EIO;
    g_state = VC_IDLE;
    g_ran = 1;
    if (g_wake[0] >= 0)
        close(g_wake[0]);
    if (g_wake[1] >= 0)
        close(g_wake[1]);
    g_wake[0] = g_wake[1] = -1;
    pthread_cond_broadcast(cond());
    pthread_mutex_unlock(&g_lock);
}

static void signal_started(int status)
{
    pthread_mutex_lock(&g_lock);
    g_started = status == 0 ? 1 : status;
    if (status == 0)
        g_state = VC_RUNNING;
    pthread_cond_broadcast(cond());
    pthread_mutex_unlock(&g_lock);
}

static void *agent_main(void *arg)
{
    vc_session *s = &g_vc;
    char err[512] = "";
    struct vc_result res = {0};
    int rc = 0;

    vc_clock_init(); /* reads /proc/cpuinfo once: here, not on the caller's thread */
    if (s->control_path[0] != '\0')
        rc = vc_control_handshake(s, err, sizeof err);
    if (rc == 0)
        rc = check_output(s, err, sizeof err);
    if (rc == 0 && (!Py_IsInitialized() || vc_compat_is_finalizing())) {
        snprintf(err, sizeof err, "the Python interpreter is not initialized (yet or anymore)");
        rc = -ENOENT;
    }
    if (rc == 0 && (vc_pool_init(&s->pool, s->buffer_mb) != 0 || vc_pins_init(&s->pins, 1u << 16) != 0 ||
                    vc_threads_alloc(s) != 0)) {
        snprintf(err, sizeof err, "out of memory for a %u MB buffer: use a smaller buffer", s->buffer_mb);
        rc = -ENOMEM;
    }
    if (rc != 0) {
        vc_control_send_error(s, err);
        finish_session(s, rc, err);
        return NULL;
    }

    PyGILState_STATE gstate = PyGILState_Ensure();
    rc = install_under_gil(s, err, sizeof err) == 0 ? 0 : -EPERM;
    if (rc != 0) {
        /* Nothing may stay behind: undo whatever part was done. */
        vc_threading_restore(s);
        atexit_unregister(s, 0);
        if (s->backend == VC_BACKEND_PROFILE)
            vc_profile_remove_all(s);
        s->backend = 0;
        uint32_t n = 0;
        char **names = vc_pins_resolve_and_release(&s->pins, &n);
        vc_names_free(names, n);
        PyErr_Clear();
        PyGILState_Release(gstate);
        vc_control_send_error(s, err);
        finish_session(s, rc, err);
        return NULL;
    }
    PyThreadState *mine = PyEval_SaveThread();
    s->start_mono_ms = vc_clock_mono_ns() / 1000000u;
    vc_status_open(s);
    vc_control_send_started(s);
    signal_started(0);

    int reason = VC_STOP_NONE;
    uint64_t last_visit = vc_clock_mono_ns();
    for (;;) {
        int timeout = VC_TICK_MS;
        if (s->duration_ms) {
            uint64_t el = vc_elapsed_ms();
            if (el >= s->duration_ms) {
                reason = VC_STOP_DEADLINE;
                break;
            }
            if (s->duration_ms - el < (uint64_t)timeout)
                timeout = (int)(s->duration_ms - el);
        }
        int r = vc_control_poll(s, timeout);
        if (r != VC_STOP_NONE)
            vc_request_stop(r);
        reason = stop_requested();
        if (reason != VC_STOP_NONE)
            break;
        uint64_t now = vc_clock_mono_ns();
        if (now - last_visit >= (uint64_t)VC_TICK_MS * 1000000u) {
            last_visit = now;
            vc_pool_prefault(&s->pool);
            if (vc_compat_is_finalizing())
                continue; /* taking the GIL now could end this thread */
            PyEval_RestoreThread(mine);
            periodic_under_gil(s);
            mine = PyEval_SaveThread();
        }
    }
    pthread_mutex_lock(&g_lock);
    g_state = VC_STOPPING;
    pthread_mutex_unlock(&g_lock);

    if (vc_compat_is_finalizing()) {
        /* The interpreter is tearing down (the atexit stop did not run or timed out): taking
         * the GIL now would end this thread inside CPython.  The process is exiting; the hooks
         * go with it, and the records cannot be named without the GIL. */
        snprintf(err, sizeof err, "the interpreter began finalizing before the session stopped: "
                 "trace lost (stop the session before exit)");
        finish_session(s, -ESHUTDOWN, err);
        return NULL;
    }
    PyEval_RestoreThread(mine);
    uint64_t t0 = vc_clock_mono_ns();
    stop_under_gil(s, reason);
    uint64_t hold_ns = vc_clock_mono_ns() - t0;
    PyGILState_Release(gstate); /* our thread state is gone: the rest runs without Python */

    res.gil_hold_us = hold_ns / 1000u;
    s->gil_hold_us = res.gil_hold_us;
    int status = 0;
    if (strcmp(s->output, "control") == 0 && s->control_fd >= 0 && reason != VC_STOP_CONTROL_EOF)
        status = vc_control_emit_data(s, &res, err, sizeof err);
    else if (strcmp(s->output, "control") == 0)
        status = -EPIPE, snprintf(err, sizeof err, "the controller went away before the trace was sent");
    else
        status = vc_emit(s, s->output, &res, err, sizeof err);
    if (status != 0 && s->fallback[0] != '\0') {
        char err2[512] = "";
        struct vc_result res2 = res;
        if (vc_emit(s, s->fallback, &res2, err2, sizeof err2) == 0) {
            char both[1024];
            snprintf(both, sizeof both, "%.500s; trace written to the fallback %.400s", err, s->fallback);
            snprintf(err, sizeof err, "%.500s", both);
            res = res2;
        }
    }
    res.status = status;
    pthread_mutex_lock(&g_lock);
    g_result = res;
    pthread_mutex_unlock(&g_lock);
    /* Idle first, END last: a controller that attaches again as soon as it reads END must
     * find neither this session (-EBUSY) nor its status socket ("already running").  END
     * then goes out on fds taken out of g_vc, which the next session may already reuse. */
    vc_names_free(s->names, s->nnames);
    s->names = NULL;
    s->nnames = 0;
    vc_pool_destroy(&s->pool);
    vc_thread_free_all(s);
    vc_end_msg end;
    vc_control_prepare_end(s, &res, &end);
    finish_session(s, status, err);
    vc_control_send_end(&end);
    return NULL;
}

/* ---- exported API ------------------------------------------------------------------------ */

static int copy_str(char *dst, size_t cap, const char *src)
{
    if (src == NULL) {
        dst[0] = '\0';
        return 0;
    }
    size_t n = strlen(src);
    if (n >= cap)
        return -ENAMETOOLONG;
    memcpy(dst, src, n + 1);
    return 0;
}

static int launch(void)
{
    /* Caller holds g_lock and has filled g_vc's config. */
    if (pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0)
        return -errno;
    g_vc.gen = ++g_gen;
    g_session_pid = getpid();
    g_vc.tool_id = -1;
    g_vc.status_fd = g_vc.status_client_fd = -1;
    g_vc.threads_untraced = 0;
    g_vc.start_mono_ms = 0;
    g_started = 0;
    g_stop_reason = VC_STOP_NONE;
    g_error[0] = '\0';
    g_result = (struct vc_result){0};

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* The agent thread must not take the process's signals. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_t th;
    int rc = pthread_create(&th, &attr, agent_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        close(g_wake[0]);
        close(g_wake[1]);
        g_wake[0] = g_wake[1] = -1;
        return -rc;
    }
    g_state = VC_STARTING;
    return 0;
}

VC_EXPORT int vc_agent_start(const struct vc_config *cfg)
{
    if (cfg == NULL || cfg->abi != VC_CONFIG_ABI || cfg->struct_size < sizeof(struct vc_config))
        return -EINVAL;
    pthread_mutex_lock(&g_lock);
    if (g_state != VC_IDLE) {
        pthread_mutex_unlock(&g_lock);
        return -EBUSY;
    }
    vc_session *s = &g_vc;
    int rc = copy_str(s->output, sizeof s->output, cfg->output);
    if (rc == 0)
        rc = copy_str(s->fallback, sizeof s->fallback, cfg->fallback);
    if (rc == 0 && (cfg->output == NULL || cfg->output[0] == '\0'))
        rc = -EINVAL;
    if (rc == 0) {
        s->control_path[0] = '\0';
        s->control_fd = -1;
        s->detach = 0;
        s->duration_ms = cfg->duration_ms;
        s->buffer_mb = cfg->buffer_mb ? cfg->buffer_mb : 256;
        s->hook_kind = cfg->hook;
        s->null_hook = cfg->null_hook;
        rc = launch();
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

VC_EXPORT int vc_agent_connect(const char *control_path)
{
    if (control_path == NULL || control_path[0] == '\0')
        return -EINVAL;
    pthread_mutex_lock(&g_lock);
    if (g_state != VC_IDLE) {
        pthread_mutex_unlock(&g_lock);
        return -EBUSY;
    }
    vc_session *s = &g_vc;
    int rc = copy_str(s->control_path, sizeof s->control_path, control_path);
    if (rc == 0) {
        s->output[0] = s->fallback[0] = '\0';
        s->control_fd = -1;
        s->detach = 0;
        s->duration_ms = 0;
        s->buffer_mb = 256;
        s->hook_kind = VC_HOOK_AUTO;
        s->null_hook = 0;
        rc = launch();
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

VC_EXPORT int vc_agent_wait_started(int wait_ms)
{
    pthread_mutex_lock(&g_lock);
    if (g_state == VC_IDLE && !g_ran) {
        pthread_mutex_unlock(&g_lock);
        return -ESRCH;
    }
    int ok = wait_until(pred_started, wait_ms);
    int rc = !ok ? -ETIMEDOUT : g_started > 0 ? 0 : g_started < 0 ? g_started : -EIO;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

VC_EXPORT int vc_agent_stop(int wait_ms, struct vc_result *out)
{
    pthread_mutex_lock(&g_lock);
    if (g_state == VC_IDLE) {
        int ran = g_ran;
        if (ran && out != NULL)
            *out = g_result;
        pthread_mutex_unlock(&g_lock);
        return ran ? 0 : -ESRCH;
    }
    pthread_mutex_unlock(&g_lock);
    vc_request_stop(VC_STOP_API);
    pthread_mutex_lock(&g_lock);
    int done = wait_until(pred_idle, wait_ms);
    if (done && out != NULL)
        *out = g_result;
    pthread_mutex_unlock(&g_lock);
    return done ? 0 : -ETIMEDOUT;
}

VC_EXPORT int vc_agent_active(void)
{
    return vc_session_state() != VC_IDLE;
}

VC_EXPORT int vc_agent_last_result(struct vc_result *out)
{
    pthread_mutex_lock(&g_lock);
    int ran = g_ran;
    if (out != NULL)
        *out = g_result;
    pthread_mutex_unlock(&g_lock);
    return ran ? 0 : -ESRCH;
}

VC_EXPORT const char *vc_agent_last_error(void)
{
    static char copy[512];
    pthread_mutex_lock(&g_lock);
    memcpy(copy, g_error, sizeof copy);
    pthread_mutex_unlock(&g_lock);
    return copy;
}

/* agent.c — the exported vc_agent_* API and the session on the agent thread.
 *
 * Entry points (vcagent.h) only copy the config and start the agent thread: they may run on a
 * thread hijacked by ptrace, so they never touch Python.  The agent thread then:
 *   1. (control sessions) connects to the injector, HELLO → CONFIG;
 *   2. takes the GIL (gilwait.c: a thread that keeps it is asked to yield it), refuses if
 *      another profiler owns a hook, adopts every sub-interpreter it may enter (interps.c),
 *      installs the backend's hook on every thread of each (backend.h), patches
 *      threading._profile_hook (starthook.c), registers an atexit stop, releases the GIL;
 *   3. waits for the deadline / vc_agent_stop / STOP / EOF / atexit, visiting the GIL every
 *      ~100 ms to adopt new interpreters, hook threads created outside threading, grow the
 *      key table and read names;
 *   4. stops under the GIL (hooks removed, open frames closed, names resolved, pins released),
 *      releases its thread state, then emits the trace without the GIL (emit.c).
 * The life-cycle state those steps report (starting, running, stopping, idle; the result)
 * lives in lifecycle.c.  Every wait is bounded; failures end the session with a message,
 * never a crash.
 */
#include "backend.h"
#include "channel.h"
#include "control.h"
#include "emit.h"
#include "follow.h"
#include "gilwait.h"
#include "hooklock.h"
#include "interps.h"
#include "lifecycle.h"
#include "record.h"
#include "starthook.h"
#include "stream.h"
#include "tasks.h"
#include "threads.h"
#include "cvf.h"
#include "protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VC_EXPORT __attribute__((visibility("default")))
#define VC_ATEXIT_WAIT_MS 10000
#define VC_TICK_MS 100
/* At stop, how long 3.12+ sub-interpreters get to unhook themselves (interps.c). */
#define VC_INTERPS_WAIT_MS 300
/* Streaming without a sender thread (it could not be created): how often the agent thread
 * sends the outbox itself.  A 32 MiB window holds ~1.4 M calls, 0.2 s of the busiest target
 * measured (7 M calls/s). */
#define VC_STREAM_TICK_MS 10

static uint32_t g_gen;

/* ---- atexit: the process is exiting while a session runs ---------------------------------- */

static PyObject *atexit_stop(PyObject *self, PyObject *unused)
{
    if (!vc_life_in_session_process())
        Py_RETURN_NONE; /* a fork child: it has no agent thread to wait for */
    if (vc_life_state() == VC_IDLE)
        Py_RETURN_NONE; /* already over (its END is out or about to be) */
    unsigned seen = vc_life_delivered();
    Py_BEGIN_ALLOW_THREADS
    vc_life_request_stop(VC_STOP_ATEXIT);
    /* until END went out: the process exits right after us */
    vc_life_wait_delivered(seen, VC_ATEXIT_WAIT_MS);
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

/* ---- the one uninstall path -------------------------------------------------------------
 * Stop, the rollback of a failed install and a fork child all leave the interpreter the same
 * way: the backend's hooks removed (also a partial install), threading's start hook put back,
 * the atexit stop unregistered.  Under the GIL. */

static void uninstall_under_gil(vc_session *s, int from_atexit, int interps_wait_ms)
{
    /* Parallel (hooklock.h): the main interpreter's teardown reads the key table, which an
     * own-GIL interpreter's hooks may be adding to; it calls sys.monitoring's C functions
     * only. */
    int parallel = s->parallel;
    if (parallel)
        vc_hooklock_acquire();
    if (s->backend != NULL)
        s->backend->remove(s);
    s->backend = NULL;
    if (parallel)
        vc_hooklock_release();
    vc_tasks_stop(s); /* no hook left to mark a step */
    vc_threading_restore(s);
    /* Before our atexit goes: 3.12+ sub-interpreters unhook themselves while the GIL is let go
     * for them, and an exit meanwhile must still wait for this stop. */
    vc_interps_end_all(s, interps_wait_ms); /* their callbacks out, their keys named in them */
    atexit_unregister(s, from_atexit);
    /* A hook of ours still in a 3.12+ sub-interpreter (one that ran no Python meanwhile) finds
     * another generation from here on and records nothing. */
    if (parallel)
        vc_hooklock_acquire();
    s->gen = ++g_gen;
    s->closed = 0; /* the generation says it from now on */
    if (parallel)
        vc_hooklock_release();
}

/* ---- fork: the child inherits the hooks but not the agent thread -------------------------
 * lifecycle.c's pthread_atfork handlers keep the lock usable in the child and note that a
 * session was running; os.register_at_fork(after_in_child=…) (registered once per process: os
 * has no unregister; it does nothing unless a session was running at the fork) then removes,
 * in the child and under its GIL, every hook the child inherited and discards the parent's
 * records it holds a copy of.  A plain session's child then runs on untraced; a process-tree
 * session's child (follow_forks) starts its own session on the controller's socket
 * (follow.c), so that it is traced from its start with its own buffers, pid and threads. */

static void *agent_main(void *arg);

/* A streaming process-tree session's child goes on tracing (follow.c): its agent thread only
 * has to open the child's session.  The generation stays: the hooks carry it. */
static int launch_continued(vc_session *s)
{
    int rc = vc_life_claim();
    if (rc != 0)
        return rc;
    s->status_fd = s->status_client_fd = -1;
    s->interps_untraced = s->interps_untraced_shared = 0;
    rc = vc_life_launch(agent_main);
    vc_life_release();
    return rc;
}

static PyObject *after_fork_child(PyObject *self, PyObject *unused)
{
    vc_session *s = &g_vc;
    if (!vc_life_take_fork_cleanup())
        Py_RETURN_NONE;
    /* The copies of the parent's sockets are not the child's to use. */
    if (s->control_fd >= 0)
        close(s->control_fd);
    if (s->status_fd >= 0)
        close(s->status_fd);
    if (s->status_client_fd >= 0)
        close(s->status_client_fd);
    s->control_fd = s->status_fd = s->status_client_fd = -1;
    int follow = s->follow_forks && s->control_path[0] != '\0';
    if (follow && s->backend != NULL && s->pool.streaming && s->spool == NULL &&
        strcmp(s->output, "control") == 0 && vc_follow_continue_in_child(s) == 0) {
        vc_follow_wrap_os_exit();
        /* Its window reaches vcattach before the child runs a line of its own: were it killed
         * at once, vcattach still reads what it recorded.  One try, no wait (the agent thread
         * connects if the controller's backlog is full). */
        char ignored[256];
        s->hello_sent = 0;
        (void)vc_control_hello(s, 0, ignored, sizeof ignored);
        if (launch_continued(s) == 0)
            Py_RETURN_NONE;
        s->continued = 0; /* no agent thread: the hooks go, as below */
        vc_channel_close(s);
        s->hello_sent = 0;
        follow = 0;
    }
    uninstall_under_gil(s, 0, 0); /* no other thread: nothing would run them */
    vc_pins_drop(&s->pins, NULL);
    vc_pool_destroy(&s->pool);
    vc_thread_free_all(s);
    vc_stream_release(s, 0);
    PyErr_Clear();
    /* A process-tree session that did not stream (an older controller): the child opens a new
     * session back to the same controller, which tells it apart by SO_PEERCRED. */
    if (follow) {
        vc_follow_wrap_os_exit();
        /* A failure leaves the child untraced, as before: the controller reports it. */
        (void)vc_agent_connect(s->control_path); /* it copies the path first */
        PyErr_Clear();
    }
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
        vc_life_register_atfork();
    }
    Py_XDECREF(r);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_XDECREF(reg);
    Py_XDECREF(fn);
    Py_XDECREF(os);
    PyErr_Clear();
}

/* ---- start, visit, stop (under the GIL) -------------------------------------------------- */

/* Profilers on these mechanisms are refused whichever backend we use (they would see our
 * hook or we theirs); another frame evaluator only matters to the eval backend (its install
 * refuses it; auto then keeps the profile hook). */
static const vc_backend_ops *const all_backends[] = {&vc_backend_profile, &vc_backend_monitoring};

/* hook=auto: sys.monitoring on 3.12+, before it the legacy profile hook; with --no-c-calls
 * the frame evaluator instead, where no other evaluator is installed and it sees every Python
 * call on this version: it costs nothing per bytecode (bench/filters) and, on 3.12/3.13,
 * less per call than sys.monitoring (bench/service).  On 3.12+ it hooks the main interpreter
 * only, so a process that has sub-interpreters keeps sys.monitoring. */
static int eval_serves(vc_session *s)
{
#if VC_HAVE_EVAL_HOOK
    char ignored[256];
    if (!s->filter.no_c_calls || !vc_compat_eval_exact() ||
        vc_backend_eval.foreign(s, ignored, sizeof ignored))
        return 0;
    if (!VC_HAVE_MONITORING)
        return 1;
    int64_t max_id;
    int shared;
    return vc_compat_subinterps_above(0, &max_id, &shared) == 0;
#else
    (void)s;
    return 0;
#endif
}

static const vc_backend_ops *choose_backend(vc_session *s)
{
    switch (s->hook_kind) {
    case VC_HOOK_MONITORING: return &vc_backend_monitoring;
    case VC_HOOK_PROFILE: return &vc_backend_profile;
    case VC_HOOK_EVAL: return &vc_backend_eval;
    default: break;
    }
    if (eval_serves(s))
        return &vc_backend_eval;
    return VC_HAVE_MONITORING ? &vc_backend_monitoring : &vc_backend_profile;
}

static int install_under_gil(vc_session *s, char *err, size_t errlen)
{
    s->agent_tstate = vc_compat_current_tstate();
    const vc_backend_ops *backend = choose_backend(s);
    if (s->hook_kind == VC_HOOK_MONITORING && !VC_HAVE_MONITORING) {
        snprintf(err, errlen, "hook=monitoring needs Python 3.12+ (this is %s): use hook=profile",
                 vc_compat_python_version());
        return -1;
    }
    /* Another profiler on either mechanism is refused, whichever backend we would use. */
    for (size_t i = 0; i < sizeof all_backends / sizeof all_backends[0]; i++)
        if (all_backends[i]->foreign(s, err, errlen))
            return -1;
    if (vc_threading_foreign()) {
        snprintf(err, errlen, "threading.setprofile() has installed another profiler for new "
                 "threads: vcattach does not replace it; call threading.setprofile(None) first");
        return -1;
    }
    s->clk_start = vc_clock_sample();
    s->attach_ns = s->clk_start.ns;
    s->backend = backend;
    snprintf(s->backend_name, sizeof s->backend_name, "%s", backend->name);
    vc_interps_begin(s);
    vc_interps_adopt(s, 0); /* install hooks every interpreter adopted here */
    /* An own-GIL sub-interpreter asked just now may be hooking itself already: the main
     * interpreter's threads join the tables under the lock among GILs (C calls only). */
    if (s->parallel)
        vc_hooklock_acquire();
    int rc = backend->install(s, err, errlen);
    if (s->parallel)
        vc_hooklock_release();
    if (rc != 0)
        return -1;
    if (vc_threading_patch(s) != 0)
        PyErr_Clear(); /* new threads are still found by the periodic scan */
    vc_threads_capture_names(s);
    vc_tasks_visit(s);
    atexit_register(s);
    register_fork_handlers();
    return 0;
}

static void periodic_under_gil(vc_session *s)
{
    /* The key table grows under the lock among GILs once an own-GIL interpreter's hooks may
     * be reading it (hooklock.h); vc_interps_adopt takes it itself (it may go parallel). */
    if (s->parallel)
        vc_hooklock_acquire();
    if (vc_pins_maybe_grow(&s->pins) != 0)
        PyErr_Clear();
    if (s->parallel)
        vc_hooklock_release();
    vc_interps_adopt(s, 1);
    s->backend->scan_new_threads(s);
    vc_threads_capture_names(s);
    vc_tasks_visit(s);
    PyErr_Clear();
}

/* Removes every trace of the session from the interpreter and snapshots what emit needs. */
static void stop_under_gil(vc_session *s, int reason)
{
    s->stop_raw = vc_clock_now();
    vc_threads_capture_names(s); /* while every thread state is still associated */
    uninstall_under_gil(s, reason == VC_STOP_ATEXIT, VC_INTERPS_WAIT_MS);
    vc_record_close_open(s, s->stop_raw);
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
    if (s->backend == NULL) {
        /* Only once no hook can write into them (see the finalizing case in agent_main). */
        vc_pool_destroy(&s->pool);
        vc_thread_free_all(s);
    }
    vc_stream_release(s, 1);
    vc_status_close(s);
    vc_channel_close(s);
    vc_life_finish(status, err);
}

/* A process of a tree found at its exec (a spawned worker) may be injected while its
 * interpreter is still initializing: this thread waits for it (a flag read every ms, no
 * Python), so that its first calls after its initialization are traced. */
static void wait_initialized(uint32_t wait_ms)
{
    for (uint32_t waited = 0; waited < wait_ms && !Py_IsInitialized(); waited++) {
        struct timespec ms = {0, 1000 * 1000};
        nanosleep(&ms, NULL);
    }
}

/* Step 1, without the GIL: the config (from the controller if any), the output, the
 * interpreter, the buffers.  0 or -errno with a message. */
static int prepare_session(vc_session *s, char *err, size_t errlen)
{
    int rc = 0;
    vc_clock_init(); /* reads /proc/cpuinfo once: here, not on the caller's thread */
    if (s->control_path[0] != '\0')
        rc = vc_control_handshake(s, err, errlen);
    if (s->continued) /* a fork child: window, keys, threads and filters are ready (follow.c) */
        return rc;
    if (rc == 0)
        rc = check_output(s, err, errlen);
    if (rc == 0 && !Py_IsInitialized() && s->init_wait_ms) {
        vc_life_note_init_flag(vc_compat_init_flag_addr()); /* (the hold reads it first) */
        vc_life_set_phase(VC_PHASE_INIT_WAIT); /* a held main thread must run its init now */
        wait_initialized(s->init_wait_ms);
    }
    if (rc == 0 && Py_IsInitialized())
        vc_life_set_phase(VC_PHASE_PREPARING); /* nothing below needs the main thread */
    if (rc == 0 && (!Py_IsInitialized() || vc_compat_is_finalizing())) {
        snprintf(err, errlen, "the Python interpreter is not initialized (yet or anymore)");
        rc = -ENOENT;
    }
    /* A session that streams to vcattach records into a window vcattach shares (buffer.h):
     * what it recorded outlives the process if it is killed before sending it. */
    int shared = s->stream && strcmp(s->output, "control") == 0 && s->control_fd >= 0 &&
                 !s->detach;
    if (shared)
        vc_follow_register_atfork(); /* before any fork can copy the window */
    if (rc == 0 && ((!shared || vc_pool_init_shared(&s->pool, s->buffer_mb) != 0) &&
                    vc_pool_init(&s->pool, s->buffer_mb) != 0))
        rc = -ENOMEM;
    if (rc == 0 && (vc_pins_init(&s->pins, 1u << 16) != 0 || vc_threads_alloc(s) != 0))
        rc = -ENOMEM;
    if (rc == -ENOMEM) {
        snprintf(err, errlen, "out of memory for a %u MB buffer: use a smaller buffer", s->buffer_mb);
        rc = -ENOMEM;
    }
    if (rc == 0) {
        /* Records stream while tracing: to the controller when it takes the trace
         * (output=control), else (vcattach start: a file) into the session's own spool. */
        int to_file = strcmp(s->output, "control") != 0 && strncmp(s->output, "fd:", 3) != 0 &&
                      strncmp(s->output, "unix:", 5) != 0;
        s->pool.streaming = s->stream && (!to_file || s->detach);
        if (s->pool.streaming && to_file)
            rc = vc_stream_open_local(s, err, errlen);
    }
    if (rc == 0) {
        vc_filter_prepare(&s->filter);
        s->pins.filter = s->filter.has_globs ? &s->filter : NULL;
        s->pins.arena = &s->pool.arena; /* keys named at first sight, if the window has one */
    }
    return rc;
}

/* Step 2: installs under the GIL and releases it (*mine: our thread state, to take it back).
 * On failure nothing stays behind and the GIL is released for good. */
static int start_tracing(vc_session *s, PyGILState_STATE *gstate, PyThreadState **mine, char *err,
                         size_t errlen)
{
    vc_life_set_phase(VC_PHASE_GIL_WAIT);
    *gstate = vc_gil_ensure();
    if (s->continued) {
        /* A fork child's hooks are installed since its fork; this thread is never traced. */
        s->agent_tstate = vc_compat_current_tstate();
    } else if (install_under_gil(s, err, errlen) != 0) {
        uninstall_under_gil(s, 0, VC_INTERPS_WAIT_MS);
        vc_pins_drop(&s->pins, NULL);
        PyErr_Clear();
        PyGILState_Release(*gstate);
        return -EPERM;
    }
    *mine = PyEval_SaveThread();
    if (!s->continued) {
        s->start_mono_ms = vc_clock_mono_ns() / 1000000u;
        /* A first fit for the window (over the install: the sender refines it) */
        vc_clock_map map;
        vc_clock_map_make(&map, s->clk_start, vc_clock_sample());
        vc_pool_set_clock(&s->pool, map.raw0, map.ns0, map.ns_per_raw);
    }
    vc_status_open(s);
    vc_control_send_started(s);
    vc_life_signal_started(0);
    return 0;
}

/* Step 3, without the GIL: waits for a stop reason (deadline, API, controller, status client,
 * atexit), visiting the GIL every tick for the periodic work.  The sockets are served by the
 * socket thread meanwhile (control.c), so a long wait for the GIL keeps nobody waiting; when
 * that thread cannot be created this thread serves them between visits, as it always could. */
static int wait_for_stop(vc_session *s, PyThreadState **mine)
{
    unsigned what = vc_control_serve_start(s) == 0 ? VC_POLL_WAKE : VC_POLL_WAKE | VC_POLL_SOCKETS;
    uint64_t last_visit = vc_clock_mono_ns();
    int sender = vc_stream_on(s) && vc_stream_start(s) == 0;
    int tick = vc_stream_on(s) && !sender ? VC_STREAM_TICK_MS : VC_TICK_MS;
    int reason;
    for (;;) {
        int timeout = tick;
        if (s->duration_ms) {
            uint64_t el = vc_session_elapsed_ms(s);
            if (el >= s->duration_ms) {
                reason = VC_STOP_DEADLINE;
                break;
            }
            if (s->duration_ms - el < (uint64_t)timeout)
                timeout = (int)(s->duration_ms - el);
        }
        int r = vc_control_poll(s, timeout, what);
        if (r != VC_STOP_NONE)
            vc_life_request_stop(r);
        reason = vc_life_stop_requested();
        if (reason != VC_STOP_NONE)
            break;
        if (vc_stream_on(s) && !sender)
            (void)vc_stream_send_chunks(s); /* a failure: the controller's EOF stops us */
        uint64_t now = vc_clock_mono_ns();
        if (now - last_visit >= (uint64_t)VC_TICK_MS * 1000000u) {
            last_visit = now;
            vc_pool_prefault(&s->pool);
            if (vc_compat_is_finalizing())
                continue; /* taking the GIL now could end this thread */
            vc_gil_restore(*mine);
            periodic_under_gil(s);
            if (vc_stream_on(s)) {
                /* C only: it flushes the threads' chunks and names the new keys */
                if (s->parallel)
                    vc_hooklock_acquire();
                vc_stream_collect(s);
                if (s->parallel)
                    vc_hooklock_release();
            }
            *mine = PyEval_SaveThread();
            if (vc_stream_on(s))
                (void)vc_stream_send_pending(s);
        }
    }
    vc_control_serve_stop(); /* the sockets are the agent thread's again (DATA, END) */
    return reason;
}

/* Step 4: stops under the GIL and gives up our thread state for good (the rest runs without
 * Python).  res->gil_hold_us: how long the stop held the GIL. */
static void stop_tracing(vc_session *s, int reason, PyGILState_STATE gstate, PyThreadState *mine,
                         struct vc_result *res)
{
    vc_gil_restore(mine);
    uint64_t t0 = vc_clock_mono_ns();
    stop_under_gil(s, reason);
    uint64_t hold_ns = vc_clock_mono_ns() - t0;
    PyGILState_Release(gstate);
    /* Only now: until the hooks were gone (waiting for the GIL can take a while on a busy
     * target) they kept filling the window, which the sender kept emptying. */
    vc_stream_stop();
    res->gil_hold_us = hold_ns / 1000u;
    s->gil_hold_us = res->gil_hold_us;
}

/* Step 5, without the GIL: the trace to the output (the controller, a file, an fd, a socket),
 * else to the fallback.  0 or -errno with a message (kept if the fallback saved the trace). */
static int deliver_trace(vc_session *s, int reason, struct vc_result *res, char *err, size_t errlen)
{
    int status = 0;
    if (vc_stream_on(s) && s->spool != NULL) { /* start: its own spool, then the output */
        status = vc_stream_finish(s, res, err, errlen);
        if (status == 0)
            status = vc_stream_write_local(s, res, err, errlen);
        res->status = status;
        return status; /* no fallback: what was recorded is in the spool, which stays */
    }
    if (vc_stream_on(s) && s->control_fd >= 0 && reason != VC_STOP_CONTROL_EOF)
        status = vc_stream_finish(s, res, err, errlen);
    else if (strcmp(s->output, "control") == 0 && s->control_fd >= 0 && reason != VC_STOP_CONTROL_EOF)
        status = vc_control_emit_data(s, res, err, errlen);
    else if (strcmp(s->output, "control") == 0)
        status = -EPIPE, snprintf(err, errlen, "the controller went away before the trace was sent");
    else
        status = vc_emit(s, s->output, VC_OUTPUT_MODE, s->force ? VC_ATOMIC_FORCE : 0, res, err,
                         errlen);
    /* The fallback: not when the output's OUT.tmp was kept (the whole trace is there already,
     * and END names it); it replaces an earlier fallback, as it always has. */
    if (status != 0 && s->fallback[0] != '\0' && s->kept_tmp[0] == '\0') {
        char err2[512] = "";
        vc_pool_outbox_to_fifo(&s->pool); /* streaming: the window not sent yet */
        struct vc_result res2 = *res;
        if (vc_emit(s, s->fallback, VC_FALLBACK_MODE, VC_ATOMIC_FORCE, &res2, err2, sizeof err2) == 0) {
            char both[1024];
            snprintf(both, sizeof both, "%.500s; trace written to the fallback %.400s", err, s->fallback);
            snprintf(err, errlen, "%.500s", both);
            *res = res2;
        }
    }
    res->status = status;
    return status;
}

/* Step 6: idle first, END last: a controller that attaches again as soon as it reads END must
 * find neither this session (-EBUSY) nor its status socket ("already running").  END then
 * goes out on fds taken out of g_vc, which the next session may already reuse. */
static void end_session(vc_session *s, int status, const struct vc_result *res, const char *err)
{
    vc_life_set_result(res);
    vc_names_free(s->names, s->nnames);
    s->names = NULL;
    s->nnames = 0;
    vc_pool_destroy(&s->pool);
    vc_thread_free_all(s);
    vc_stream_release(s, 1);
    vc_end_msg end;
    vc_control_prepare_end(s, res, err, &end);
    finish_session(s, status, err);
    vc_control_send_end(&end);
    vc_life_mark_delivered();
}

/* A fork child whose controller did not take its session (gone, or the tree's budget was
 * spent): its hooks, installed since the fork, are removed and what they recorded dropped. */
static void abandon_continued(vc_session *s)
{
    PyGILState_STATE g = vc_gil_ensure();
    s->agent_tstate = vc_compat_current_tstate();
    uninstall_under_gil(s, 0, 0);
    vc_pins_drop(&s->pins, NULL);
    PyErr_Clear();
    PyGILState_Release(g);
    s->continued = 0;
}

static void *agent_main(void *arg)
{
    vc_session *s = &g_vc;
    char err[512] = "";
    struct vc_result res = {0};
    PyGILState_STATE gstate;
    PyThreadState *mine = NULL;

    vc_life_mark_agent_thread();
    int rc = prepare_session(s, err, sizeof err);
    if (rc != 0 && s->continued)
        abandon_continued(s); /* its hooks go: nobody will take its trace */
    if (rc == 0)
        rc = start_tracing(s, &gstate, &mine, err, sizeof err);
    if (rc != 0) {
        vc_control_send_error(s, err);
        finish_session(s, rc, err);
        vc_life_mark_delivered();
        return NULL;
    }
    int reason = wait_for_stop(s, &mine);
    vc_life_set_stopping();
    if (vc_compat_is_finalizing()) {
        /* The interpreter is tearing down (the atexit stop did not run or timed out): taking
         * the GIL now would end this thread inside CPython.  The process is exiting; the hooks
         * go with it, and the records cannot be named without the GIL. */
        snprintf(err, sizeof err, "the interpreter began finalizing before the session stopped: "
                 "trace lost (stop the session before exit)");
        vc_stream_stop();
        finish_session(s, -ESHUTDOWN, err);
        vc_life_mark_delivered();
        return NULL;
    }
    stop_tracing(s, reason, gstate, mine, &res);
    int status = deliver_trace(s, reason, &res, err, sizeof err);
    end_session(s, status, &res, err);
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

/* The filters of a vc_config (absent from a config older than them).  No Python: copies
 * and checks only.  0 or -EINVAL. */
static int copy_filters(vc_filter *f, const struct vc_config *cfg)
{
    char err[256];
    vc_filter_reset(f);
    if (cfg->struct_size < sizeof(struct vc_config))
        return 0;
    if (vc_filter_add_list(f, 1, cfg->include, err, sizeof err) != 0 ||
        vc_filter_add_list(f, 0, cfg->exclude, err, sizeof err) != 0)
        return -EINVAL;
    f->no_c_calls = cfg->no_c_calls != 0;
    f->max_depth = cfg->max_depth;
    f->min_dur_ns = cfg->min_dur_ns;
    return 0;
}

/* With the life cycle claimed: the session's per-run state, then the agent thread. */
static int launch(void)
{
    g_vc.gen = ++g_gen;
    g_vc.parallel = 0;
    g_vc.closed = 0;
    g_vc.tool_id = -1;
    g_vc.status_fd = g_vc.status_client_fd = -1;
    g_vc.threads_untraced = 0;
    g_vc.interps_untraced = 0;
    g_vc.interps_untraced_shared = 0;
    g_vc.backend_name[0] = '\0';
    g_vc.start_mono_ms = 0;
    g_vc.kept_tmp[0] = '\0';
    return vc_life_launch(agent_main);
}

VC_EXPORT int vc_agent_start(const struct vc_config *cfg)
{
    if (cfg == NULL || cfg->abi != VC_CONFIG_ABI || cfg->struct_size < VC_CONFIG_MIN_SIZE)
        return -EINVAL;
    int rc = vc_life_claim();
    if (rc != 0)
        return rc;
    vc_session *s = &g_vc;
    rc = copy_str(s->output, sizeof s->output, cfg->output);
    if (rc == 0)
        rc = copy_str(s->fallback, sizeof s->fallback, cfg->fallback);
    if (rc == 0 && (cfg->output == NULL || cfg->output[0] == '\0'))
        rc = -EINVAL;
    if (rc == 0) {
        s->control_path[0] = '\0';
        s->control_fd = -1;
        s->hello_sent = 0;
        s->continued = 0;
        s->detach = 0;
        s->follow_forks = 0;
        /* The in-process API (the Python package) names its own output and has always
         * replaced it: only an operator's `vcattach start` is refused an existing file. */
        s->force = 1;
        s->stream = 0;
        s->duration_ms = cfg->duration_ms;
        s->init_wait_ms = 0;
        s->last_ns = 0;
        s->buffer_mb = cfg->buffer_mb ? cfg->buffer_mb : 256;
        s->hook_kind = cfg->hook;
        s->null_hook = cfg->null_hook;
        rc = copy_filters(&s->filter, cfg);
        if (rc == 0)
            rc = launch();
    }
    vc_life_release();
    return rc;
}

/* protocol.h VC_AGENT_LOADED_MAGIC: set when the loader runs our constructor, which it does
 * only after relocating all of us; the injector checks it before calling vc_agent_connect. */
VC_EXPORT volatile uint32_t vc_agent_loaded;

__attribute__((constructor)) static void mark_loaded(void)
{
    vc_agent_loaded = VC_AGENT_LOADED_MAGIC;
}

VC_EXPORT int vc_agent_connect(const char *control_path)
{
    if (control_path == NULL || control_path[0] == '\0')
        return -EINVAL;
    int rc = vc_life_claim();
    if (rc != 0)
        return rc;
    vc_session *s = &g_vc;
    char path[VC_PATH_MAX];
    rc = copy_str(path, sizeof path, control_path); /* it may be s->control_path itself */
    if (rc == 0)
        memcpy(s->control_path, path, strlen(path) + 1);
    if (rc == 0) {
        s->output[0] = s->fallback[0] = '\0';
        s->control_fd = -1;
        s->hello_sent = 0;
        s->continued = 0;
        s->detach = 0;
        s->follow_forks = 0;
        s->force = 0; /* CONFIG's force=1 (vcattach --force) */
        s->stream = 0; /* CONFIG's stream=1 (vcattach trace) */
        s->no_tasks = 0; /* CONFIG's tasks=0 (--no-tasks) */
        s->duration_ms = 0;
        s->init_wait_ms = 0;
        s->last_ns = 0;
        s->buffer_mb = 256;
        s->hook_kind = VC_HOOK_AUTO;
        s->null_hook = 0;
        vc_filter_reset(&s->filter); /* filled from CONFIG */
        rc = launch();
    }
    vc_life_release();
    return rc;
}

VC_EXPORT int vc_agent_wait_started(int wait_ms)
{
    return vc_life_wait_started(wait_ms);
}

VC_EXPORT int vc_agent_stop(int wait_ms, struct vc_result *out)
{
    return vc_life_stop_and_wait(wait_ms, out);
}

VC_EXPORT int vc_agent_active(void)
{
    return vc_life_state() != VC_IDLE;
}

VC_EXPORT int vc_agent_last_result(struct vc_result *out)
{
    return vc_life_last_result(out);
}

VC_EXPORT const char *vc_agent_last_error(void)
{
    return vc_life_last_error();
}

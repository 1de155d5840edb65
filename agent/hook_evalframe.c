/* hook_evalframe.c — the PEP 523 frame-evaluation backend, 3.9–3.13, Python calls only.
 *
 * Why: any legacy profile hook sets the interpreter's tracing flag, and on 3.10/3.11 that
 * sends every bytecode through the tracing dispatch: a call-free loop ran 2.3–2.7× slower
 * while attached.  A frame evaluator is called once per frame evaluation and never per
 * bytecode, so code without calls runs at its untraced speed.  On 3.12/3.13 sys.monitoring
 * has no per-bytecode cost either, but each PY_START/PY_RETURN goes through its dispatch
 * (an offset boxed as an int, a vectorcall of our callback): a Flask service under null
 * callbacks kept 0.83-0.86 of its req/s, under a null evaluator all of it (bench/service).
 * It sees no C calls, hence it serves --no-c-calls (hook=eval, or auto with --no-c-calls
 * where it measured faster).  On 3.12+ it hooks the main interpreter only: a sub-interpreter
 * there is counted as not traced (auto then keeps sys.monitoring when one exists at attach).
 *
 * How: the interpreter's evaluator (_PyInterpreterState_SetEvalFrameFunc, compat.c) becomes
 * eval_hook, which pushes the frame, calls CPython's own _PyEval_EvalFrameDefault and pops
 * it.  With a non-default evaluator CPython does not inline Python-to-Python calls (from
 * 3.11 every specialized call, property, __getitem__, __getattribute__ and generator send
 * checks interp->eval_frame and deoptimizes), so every Python call goes through here; a generator or
 * coroutine is evaluated again on every resume (one call per resume, as the profile hook
 * reports it).  Installed and removed from the agent thread with the GIL held, never on a
 * hijacked thread; removed only if it is still ours.  Refused when another evaluator (a JIT,
 * a debugger) is installed: we never wrap or replace someone else's.
 *
 * Frames already running at attach are seeded on the shadow stack (threads.c) and never seen
 * returning by this hook (it sees only new evaluations): a new evaluation's caller tells
 * which of them have returned meanwhile (settle_seeded); the stop closes the rest.  Evaluations
 * still in progress at stop return through eval_hook later: it records their exit only if
 * the session that pushed them is still the installed one (generation and backend checked
 * under the GIL), so nothing is written after stop and nothing pairs wrongly.
 */
#include "backend.h"
#include "interps.h"
#include "record.h"
#include "tasks.h"
#include "threads.h"

#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#if VC_HAVE_EVAL_HOOK

/* Thread → state binding, as in hook_monitoring.c: a TLS slot checked against the session
 * generation, in the default TLS model (why: hook_monitoring.c), and against the thread
 * state the evaluator is given: an OS thread that enters a sub-interpreter (mod_wsgi per
 * request, _xxsubinterpreters.run_string) evaluates with another thread state, which is
 * another vc_thread (its own shadow stack and track); switching back finds the first again. */
typedef struct vc_tls_slot {
    vc_thread *thread;
    PyThreadState *ts;
    uint32_t gen;
} vc_tls_slot;
static __thread vc_tls_slot vc_tls;

/* The state bound to ts on this OS thread already, if any (a switch back from another
 * interpreter). */
static vc_thread *bound_here(vc_session *s, PyThreadState *ts)
{
    pid_t tid = 0;
    for (uint32_t i = 0; i < s->nthreads; i++) {
        vc_thread *t = &s->threads[i];
        if (t->tstate != ts || !t->bound)
            continue;
        if (tid == 0)
            tid = (pid_t)syscall(SYS_gettid);
        if (t->tid == tid)
            return t;
    }
    return NULL;
}

static vc_thread *claim_current(vc_session *s, PyThreadState *ts)
{
    vc_thread *t;
    if (ts == s->agent_tstate || vc_interps_is_agent_tstate(ts)) {
        t = &vc_ignored_thread; /* the agent's own, in any interpreter */
    } else {
        t = bound_here(s, ts);
        if (t == NULL)
            t = vc_thread_for_tstate(s, ts);
        if (t == NULL)
            t = vc_thread_new(s, ts);
        if (t == NULL) {
            s->threads_untraced++;
            t = &vc_ignored_thread;
        } else {
            t->bound = 1;
        }
    }
    vc_tls.thread = t;
    vc_tls.ts = ts;
    vc_tls.gen = s->gen;
    return t;
}

static inline vc_thread *current_thread(vc_session *s, PyThreadState *ts)
{
    vc_tls_slot *slot = &vc_tls;
    if (__builtin_expect(slot->gen == s->gen && slot->ts == ts, 1))
        return slot->thread;
    return claim_current(s, ts);
}

/* Frames seeded at attach return unseen (their evaluation began before the hook).  When a
 * new evaluation starts with a seeded frame on top of the stack, its caller tells which of
 * them still run: the seeded frames above the caller have returned, and end now (the first
 * moment we know; they ended at or before it), so that later calls do not nest inside them. */
static void settle_seeded(vc_session *s, vc_thread *t, const void *caller)
{
    if (t->seeded > t->depth)
        t->seeded = t->depth;
    if (t->depth != t->seeded || t->depth > VC_STACK_DEPTH)
        return; /* a frame of ours is on top: the seeded ones below it are its callers */
    uint64_t now = vc_clock_now();
    while (t->seeded > 0 && t->stack[t->seeded - 1].match != caller) {
        vc_frame *fr = &t->stack[--t->seeded];
        vc_record_store(s, t, fr->id, fr->start, now, 0);
        t->depth--;
    }
}

static PyObject *eval_hook(PyThreadState *ts, vc_eval_frame *f, int throwflag)
{
    vc_session *s = &g_vc;
    vc_thread *t = current_thread(s, ts);
    if (t == &vc_ignored_thread || __builtin_expect(vc_compat_eval_not_a_call(f), 0))
        return vc_compat_eval_default(ts, f, throwflag);
    if (__builtin_expect(t->seeded != 0, 0))
        settle_seeded(s, t, vc_compat_eval_caller(ts, f));
    uint32_t gen = s->gen;
    PyCodeObject *co = vc_compat_eval_code(f);
    uint32_t id = vc_record_enter(s, t, f, co, NULL, 0,
                                  vc_compat_eval_resumes(f, co) ? VC_REC_RESUME : 0);
    if (id != VC_ID_EXCLUDED)
        vc_tasks_enter(s, t, co);
    PyObject *r = vc_compat_eval_default(ts, f, throwflag);
    /* Still the session that pushed this frame (see the top comment)? */
    if (id != VC_ID_EXCLUDED && __builtin_expect(s->gen == gen && s->backend == &vc_backend_eval, 1))
        vc_record_exit(s, t, f, 0);
    return r;
}

/* null_hook=1: the same mechanism, recording nothing (the benchmark's floor). */
static PyObject *null_eval_hook(PyThreadState *ts, vc_eval_frame *f, int throwflag)
{
    return vc_compat_eval_default(ts, f, throwflag);
}

static PyInterpreterState *our_interp(void)
{
    return vc_compat_tstate_interp(vc_compat_current_tstate());
}

static int foreign_in(PyInterpreterState *interp)
{
    return !(vc_compat_eval_is_default(interp) || vc_compat_eval_is(interp, eval_hook) ||
             vc_compat_eval_is(interp, null_eval_hook));
}

static int eval_foreign(vc_session *s, char *err, size_t errlen)
{
    if (!foreign_in(our_interp()))
        return 0;
    snprintf(err, errlen, "another frame evaluator is installed (PEP 523: a JIT or a debugger "
             "replaced the interpreter's eval function): vcattach does not replace it; use "
             "--hook profile");
    return 1;
}

/* One interpreter: its threads seeded, then its evaluator ours.  A sub-interpreter whose
 * evaluator is someone else's is left alone. */
static void attach_interp(vc_session *s, PyInterpreterState *interp, void *ctx)
{
    (void)ctx;
    if (foreign_in(interp))
        return;
    uint64_t now = vc_clock_now();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts; ts = PyThreadState_Next(ts)) {
        if (ts == s->agent_tstate || vc_interps_is_agent_tstate(ts) || vc_thread_for_tstate(s, ts))
            continue;
        vc_thread *t = vc_thread_new(s, ts);
        if (t == NULL)
            s->threads_untraced++;
        else
            vc_thread_seed(s, t, ts, now, VC_SEED_BY_EVAL);
    }
    vc_compat_eval_set(interp, s->null_hook ? null_eval_hook : eval_hook);
}

static void eval_attach_interp(vc_session *s, PyInterpreterState *interp)
{
    attach_interp(s, interp, NULL);
}

static int eval_install(vc_session *s, char *err, size_t errlen)
{
    if (!s->filter.no_c_calls) {
        snprintf(err, errlen, "hook=eval sees Python calls only: add --no-c-calls, or use "
                 "--hook profile to trace C calls too");
        return -1;
    }
    if (eval_foreign(s, err, errlen))
        return -1;
    if (!vc_compat_eval_exact()) {
        snprintf(err, errlen, "hook=eval would miss Python __getitem__ calls on Python %s "
                 "(CPython gh-104405, fixed in 3.11.4): use --hook profile",
                 vc_compat_python_version());
        return -1;
    }
    /* The agent's own thread is never traced. */
    vc_ignored_thread.gen = s->gen;
    vc_tls.thread = &vc_ignored_thread;
    vc_tls.ts = s->agent_tstate;
    vc_tls.gen = s->gen;
    vc_interps_each(s, attach_interp, NULL);
    return 0;
}

static void detach_interp(vc_session *s, PyInterpreterState *interp, void *ctx)
{
    (void)s, (void)ctx;
    if (vc_compat_eval_is(interp, eval_hook) || vc_compat_eval_is(interp, null_eval_hook))
        vc_compat_eval_set(interp, NULL);
}

static void eval_detach_interp(vc_session *s, PyInterpreterState *interp)
{
    detach_interp(s, interp, NULL);
}

static void eval_remove(vc_session *s)
{
    vc_interps_each(s, detach_interp, NULL);
}

static vc_thread *eval_on_new_thread(vc_session *s, PyThreadState *ts)
{
    vc_thread *t = current_thread(&g_vc, ts);
    return t == &vc_ignored_thread ? NULL : t;
}

const vc_backend_ops vc_backend_eval = {
    .name = "eval",
    .foreign = eval_foreign,
    .install = eval_install,
    .remove = eval_remove,
    .scan_new_threads = vc_backend_scan_nothing, /* one hook serves every thread */
    .on_new_thread = eval_on_new_thread,
    .attach_interp = eval_attach_interp,
    .detach_interp = eval_detach_interp,
};

#else /* !VC_HAVE_EVAL_HOOK */

static int eval_install(vc_session *s, char *err, size_t errlen)
{
    snprintf(err, errlen, "hook=eval needs Python 3.9-3.13 (this is %s): use --hook auto",
             vc_compat_python_version());
    return -1;
}

const vc_backend_ops vc_backend_eval = VC_BACKEND_ABSENT("eval", eval_install);

#endif


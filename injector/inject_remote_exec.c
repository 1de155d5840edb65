/* inject_remote_exec.c — the remote-exec method (PEP 768, CPython 3.14+), see method.h.
 *
 * What sys.remote_exec(pid, script) does, done from C so that no matching Python is needed on
 * the operator's side: with the target's _Py_DebugOffsets (debug_offsets.c) find the main
 * interpreter (id 0; sys.remote_exec takes the list's head, which is a subinterpreter while
 * one exists) and its thread states, then on one thread state
 *     write the script path into remote_debugger_support.debugger_script_path,
 *     set remote_debugger_support.debugger_pending_call = 1,
 *     set _PY_EVAL_PLEASE_STOP_BIT in its eval_breaker,
 * all with process_vm_writev.  At that thread's next evaluation breaker the interpreter
 * clears the pending flag, copies the path and runs the script (with the GIL, as ordinary
 * Python code, after an audit event).  Nothing is stopped and no code of ours runs outside
 * the interpreter's own, planned path: the strongest safety argument of this method.
 *
 * Bounded: a thread blocked in C (accept(), a long sleep, a lock) reaches no evaluation
 * breaker.  So the request goes to the thread most likely to run Python soon (the GIL holder,
 * else a thread that runs or was scheduled since the last look, i.e. wakes up and returns to
 * the interpreter, else the main thread), is moved when another thread becomes a better
 * choice, and is cancelled at the deadline: path buffer set to /dev/null, then pending flag
 * cleared.  The interpreter clears the flag itself when it takes a request, which tells taken
 * from not.
 *
 * The thread list is read while it changes: threads come and go, and CPython makes and frees
 * short-lived thread states in the main interpreter (a process that makes subinterpreters
 * nonstop does so all the time).  So a walk that meets a freed state (another interpreter,
 * unreadable, a cycle) is done again, and a request goes only to a state that two looks
 * ACTIVITY_SAMPLE_MS apart both saw, bound to a live thread: a thread's own, not one that may
 * be freed under the write.
 *
 * Races, all of them also present in CPython's own sys.remote_exec: the eval_breaker word is
 * read, or-ed and written back, so a bit the thread changes in between could be lost or
 * revived; vcattach writes only its lowest byte, and only when bit 5 is not set yet, to narrow
 * that to the signal/GIL-request bits, which the interpreter re-checks and re-requests (a
 * revived bit costs one spurious check, a lost GIL drop request is re-sent by the waiter
 * after its interval).  The interpreter checks the flag, clears it, and only then (after an
 * allocation) copies the path: a cancel that reads the flag still set can cross a take.  So
 * the cancel first points the path at /dev/null (an empty script: nothing runs), then checks
 * the flag again, then clears it; a take that crosses it copies /dev/null, never our script
 * (which the caller deletes) nor what the buffer held before (an earlier attach's deleted
 * script: CI once saw "Can't open debugger script" in a target's stderr from that).  The
 * buffer keeps /dev/null, inert while the flag is clear.  Left: a take between the cancel's
 * two writes copies either path; it is waited for as taken (await_script).  A cancel writes
 * only to a thread state a whole walk of the list still shows (a freed one must not be
 * written); when no walk is whole for DECIDE_MS the request stays posted and the caller keeps
 * its script (*script_in_use), which a later take then still finds.
 */
#include "method.h"
#include "monotonic.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bounded_read.h"
#include "debug_offsets.h"
#include "proc.h"
#include "test_seam.h"

#define PLEASE_STOP_BIT (1u << 5) /* _PY_EVAL_PLEASE_STOP_BIT, 3.14 and 3.15 */
#define MAX_THREADS 4096
#define ACTIVITY_SAMPLE_MS 20  /* between two looks at which threads get scheduled */
#define SLICE_MS 50               /* how often the choice of thread is revisited */
#define CANCEL_GRACE_MS 200       /* after a cancel: a request taken meanwhile still connects */
#define SCRIPT_RUN_MS 10000       /* taken: import ctypes + dlopen + connect, on a busy target */
#define WALK_TRIES 20             /* walks of the thread list before it is called unreadable */
#define WALK_RETRY_US 2000        /* between two of them */
#define WALK_TIMEOUT_MS 2000      /* one walk, in its child (bounded_read.h) */
#define DECIDE_MS 2000            /* a cancel's looks for whether its thread state still lives */
#define TSTATE_SPAN_MAX 512       /* a thread state's fields read at once up to this far apart */

struct target {
    pid_t pid;
    struct py_debug_offsets o;
    uint64_t interp;
    int verbose;
    int left_pending; /* a request stays posted: see cancel() */
};

/* 1 if the interpreter at addr has id 0 and is the last in the list: the main one. */
static int is_main_interp(const struct target *t, uint64_t addr)
{
    int64_t id = -1;
    uint64_t next = 1;
    return dbg_read(t->pid, addr + t->o.interp_id, &id, sizeof id) == 0 &&
           dbg_read(t->pid, addr + t->o.interp_next, &next, sizeof next) == 0 && id == 0 &&
           next == 0;
}

/* The debug offsets, the main interpreter, and whether it accepts remote execution. */
static int open_target(pid_t pid, int verbose, struct target *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->pid = pid;
    t->verbose = verbose;
    if (debug_offsets_read(pid, &t->o, err, errlen) < 0)
        return INJECT_UNTOUCHED;
    /* The main interpreter (id 0, the oldest: last in the runtime's list, whose head is the
     * newest, a subinterpreter while one exists; ctypes cannot be imported there, and the
     * agent traces the main one).  Read first through _PyRuntime.interpreters.main, the
     * pointer after .head in struct pyinterpreters (3.14, 3.15; the debug offsets name only
     * the head): the list changes under us while subinterpreters come and go, and a walk
     * can step onto one being freed, whose id may well read 0 (a process that made and
     * destroyed interpreters nonstop had its remote-exec picking a freed one's threads).
     * The walk remains for a layout where that pointer is elsewhere; either way an
     * interpreter is taken only with id 0 and no next one. */
    uint64_t interp = 0;
    int rc = dbg_read(pid, t->o.runtime + t->o.interpreters_head + 8, &interp, sizeof interp);
    if (rc == 0 && interp && is_main_interp(t, interp))
        t->interp = interp;
    if (rc == 0 && !t->interp)
        rc = dbg_read(pid, t->o.runtime + t->o.interpreters_head, &interp, sizeof interp);
    for (int n = 0; rc == 0 && !t->interp && interp && n < 1024; n++) {
        uint64_t next = 0;
        if (is_main_interp(t, interp))
            t->interp = interp;
        else
            rc = dbg_read(pid, interp + t->o.interp_next, &next, sizeof next);
        interp = next;
    }
    if (rc < 0 || !t->interp) {
        inject_set_err(err, errlen, "pid %d has no main interpreter (starting or exiting): %s",
                (int)pid, rc < 0 ? strerror(-rc) : "not in the interpreter list");
        return INJECT_UNTOUCHED;
    }
    int32_t enabled = 0;
    rc = dbg_read(pid, t->interp + t->o.remote_debug_enabled, &enabled, sizeof enabled);
    if (rc < 0) {
        inject_set_err(err, errlen, "cannot read pid %d's interpreter: %s", (int)pid, strerror(-rc));
        return INJECT_UNTOUCHED;
    }
    if (enabled != 1) {
        inject_set_err(err, errlen,
                "pid %d disabled remote debugging (PYTHON_DISABLE_REMOTE_DEBUG, "
                "-X disable-remote-debug, or a build --without-remote-debug): use "
                "--method ptrace", (int)pid);
        return INJECT_UNTOUCHED;
    }
    return INJECT_OK;
}

int inject_remote_exec_check(pid_t pid, char *err, size_t errlen)
{
    struct target t;
    return open_target(pid, 0, &t, err, errlen);
}

/* The process's threads as (id in the target's own pid namespace, as native_thread_id holds
 * it; id for us).  Inside a pid namespace the two differ: NSpid's last field is the inner one. */
struct task_ids {
    pid_t inner[MAX_THREADS], outer[MAX_THREADS];
    uint64_t slices[MAX_THREADS]; /* times it was scheduled (schedstat): activity */
    size_t n;
};

/* How many times the thread got the CPU (3rd field of /proc/PID/task/TID/schedstat). */
static uint64_t task_slices(pid_t pid, pid_t tid)
{
    char path[96], text[128];
    unsigned long long run = 0, wait = 0, count = 0;
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
    if (proc_read_text(path, text, sizeof text) > 0 &&
        sscanf(text, "%llu %llu %llu", &run, &wait, &count) == 3)
        return count;
    return 0;
}

static void list_task_ids(pid_t pid, struct task_ids *ids)
{
    pid_t *tids = NULL;
    size_t n = 0;
    ids->n = 0;
    if (proc_list_tasks(pid, &tids, &n) < 0)
        return;
    for (size_t i = 0; i < n && ids->n < MAX_THREADS; i++) {
        struct proc_status st; /* its NSpid: the id the interpreter knows it by */
        pid_t inner = proc_status_read(pid, tids[i], &st) == 0 ? st.own_pid : tids[i];
        ids->slices[ids->n] = task_slices(pid, tids[i]);
        ids->inner[ids->n] = inner;
        ids->outer[ids->n++] = tids[i];
    }
    free(tids);
}

static pid_t outer_tid(const struct task_ids *ids, uint64_t native, size_t *at)
{
    for (size_t i = 0; i < ids->n; i++)
        if ((uint64_t)ids->inner[i] == native) {
            *at = i;
            return ids->outer[i];
        }
    return 0;
}

/* 1 if the thread was scheduled since the previous sample: it wakes up, so it returns to the
 * interpreter now and then (a thread blocked in accept() or a long read is not scheduled). */
static int was_active(const struct task_ids *prev, const struct task_ids *now, size_t i)
{
    for (size_t j = 0; j < prev->n; j++)
        if (prev->outer[j] == now->outer[i])
            return now->slices[i] != prev->slices[j];
    return 0;
}

struct candidate {
    uint64_t addr; /* PyThreadState in the target */
    pid_t tid;     /* its thread id (ours) */
    int score;
};

/* The main interpreter's thread states as one walk of its list saw them. */
enum walk { WALK_OK, WALK_TORN, WALK_GONE };

struct tstate_list {
    uint64_t addr[MAX_THREADS], native[MAX_THREADS];
    size_t n;
    uint64_t main_ts, holder;
    int32_t locked;
    enum walk walk; /* how the walk that filled it ended */
};

/* In the walk's child: a thread state's interpreter, native thread id and next, in one read
 * when the three fields lie close together (they do, in 3.14 and 3.15). */
static int read_tstate(const struct target *t, uint64_t ts, uint64_t *interp, uint64_t *native,
                       uint64_t *next)
{
    const struct py_debug_offsets *o = &t->o;
    uint64_t lo = o->tstate_interp, hi = o->tstate_interp;
    uint64_t fields[3] = {o->tstate_interp, o->tstate_native_id, o->tstate_next};
    for (int i = 1; i < 3; i++) {
        lo = fields[i] < lo ? fields[i] : lo;
        hi = fields[i] > hi ? fields[i] : hi;
    }
    uint64_t *out[3] = {interp, native, next};
    unsigned char span[TSTATE_SPAN_MAX];
    if (hi + 8 - lo <= sizeof span) {
        if (dbg_read_in_child(t->pid, ts + lo, span, (size_t)(hi + 8 - lo)) < 0)
            return -1;
        for (int i = 0; i < 3; i++)
            memcpy(out[i], span + (fields[i] - lo), 8);
        return 0;
    }
    for (int i = 0; i < 3; i++)
        if (dbg_read_in_child(t->pid, ts + fields[i], out[i], 8) < 0)
            return -1;
    return 0;
}

/* One walk of the main interpreter's thread states, without stopping anything: so the list
 * may change under it.  It runs in one child (walk_once), whose reads follow each other within
 * microseconds: a walk read by one child per read (a fork each) took tens of milliseconds on a
 * loaded machine, long enough for a process that makes threads nonstop (CPython's
 * test_threading) to tear every one of 20 walks, and a cancel that cannot tell whether its
 * thread state lives cannot withdraw its request (cancel()).
 * Threads come and go, and CPython makes short-lived thread states in
 * the main interpreter too (a process that made and destroyed subinterpreters nonstop had
 * one at the head, freed before its fields were read: garbage, once a "next" pointing at
 * itself, which an unchecked walk followed for seconds).  A walk that meets a thread state
 * of another interpreter, an unreadable one, or one seen before is torn: WALK_TORN, look
 * again.  WALK_GONE when even the interpreter is unreadable (the process exited). */
static enum walk walk_threads(const struct target *t, struct tstate_list *l)
{
    const struct py_debug_offsets *o = &t->o;
    uint64_t ts = 0;
    l->n = 0;
    if (dbg_read_in_child(t->pid, t->interp + o->threads_head, &ts, 8) < 0 ||
        dbg_read_in_child(t->pid, t->interp + o->threads_main, &l->main_ts, 8) < 0 ||
        dbg_read_in_child(t->pid, t->interp + o->gil_locked, &l->locked, 4) < 0 ||
        dbg_read_in_child(t->pid, t->interp + o->gil_holder, &l->holder, 8) < 0)
        return WALK_GONE;
    while (ts) {
        if (l->n == MAX_THREADS)
            return WALK_TORN;
        for (size_t i = 0; i < l->n; i++)
            if (l->addr[i] == ts)
                return WALK_TORN; /* a cycle */
        uint64_t interp = 0, native = 0, next = 0;
        if (read_tstate(t, ts, &interp, &native, &next) < 0 || interp != t->interp)
            return WALK_TORN;
        l->addr[l->n] = ts;
        l->native[l->n++] = native;
        ts = next;
    }
    return WALK_OK;
}

/* Test-only fault injection (test_seam.h, not in the product): VCATTACH_TEST_WHOLE_WALKS=N
 * makes every walk after the first N torn, as in a process that makes threads nonstop
 * (tests/system/test_e2e_remote_exec.py).  Unset, it does nothing. */
static int torn_by_test(void)
{
    static long walks;
    const char *v = VC_SEAM(WHOLE_WALKS);
    return v && ++walks > atol(v);
}

static int walk_in_child(void *arg, void *buf, size_t len)
{
    struct tstate_list *l = buf;
    l->walk = walk_threads(arg, l);
    return 0;
}

/* One walk, in a child (bounded_read.h: the thread states are memory the target's user
 * controls, and may sit in a FUSE mapping that never answers: WALK_GONE then). */
static enum walk walk_once(const struct target *t, struct tstate_list *l)
{
    if (torn_by_test()) {
        l->n = 0;
        return WALK_TORN;
    }
    int rc = bounded_read("dbg", walk_in_child, (void *)t, l, sizeof *l, WALK_TIMEOUT_MS);
    if (rc < 0) {
        l->n = 0;
        return rc == -ETIMEDOUT ? WALK_GONE : WALK_TORN; /* no child now: try again */
    }
    return l->walk;
}

/* Walks until one is whole, a few times over a few milliseconds: the short-lived thread
 * states live for microseconds.  Still torn after that: the thread-state offsets are wrong
 * (every walk meets a "foreign" interpreter). */
static enum walk look(const struct target *t, struct tstate_list *l)
{
    struct timespec pause = {0, WALK_RETRY_US * 1000L};
    enum walk w = WALK_TORN;
    for (int i = 0; i < WALK_TRIES && w == WALK_TORN; i++) {
        if (i > 0)
            nanosleep(&pause, NULL);
        w = walk_once(t, l);
    }
    return w;
}

static void walk_err(const struct target *t, enum walk w, char *err, size_t errlen)
{
    if (w == WALK_GONE)
        inject_set_err(err, errlen, "cannot read pid %d's interpreter state (it exited?)",
                (int)t->pid);
    else
        inject_set_err(err, errlen, "pid %d's thread list never read whole in %d tries: its "
                             "debug offsets are not usable; use --method ptrace",
                (int)t->pid, WALK_TRIES);
}

static int listed_in(const struct tstate_list *l, uint64_t ts)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->addr[i] == ts)
            return 1;
    return 0;
}

/* Two looks at the target: the thread states and the threads' activity, the one before and
 * the one now. */
struct looks {
    struct tstate_list lists[2];
    struct task_ids ids[2];
    int now; /* index of the latest */
};

/* A new look; 0, or -1 with err. */
static int sample(const struct target *t, struct looks *k, char *err, size_t errlen)
{
    k->now ^= 1;
    enum walk w = look(t, &k->lists[k->now]);
    if (w != WALK_OK) {
        walk_err(t, w, err, errlen);
        return -1;
    }
    list_task_ids(t->pid, &k->ids[k->now]);
    return 0;
}

/* After a new sample: the thread state most likely to reach an evaluation breaker soon.  A
 * candidate names a thread of the process and was in the previous sample too, ACTIVITY_SAMPLE_MS
 * or more before: a thread's own state, not a short-lived one that could be freed under our
 * write.  0 (best->score -1 when every state that names a thread is new: none yet), or -1
 * with err. */
static int pick_thread(const struct target *t, struct looks *k, struct candidate *best,
                       uint64_t current, int *current_score, char *err, size_t errlen)
{
    const struct tstate_list *l = &k->lists[k->now], *before = &k->lists[k->now ^ 1];
    const struct task_ids *ids = &k->ids[k->now], *prev = &k->ids[k->now ^ 1];
    memset(best, 0, sizeof *best);
    best->score = -1;
    size_t unknown = 0, fresh = 0;
    for (size_t i = 0; i < l->n; i++) {
        uint64_t ts = l->addr[i];
        size_t at = 0;
        pid_t tid = outer_tid(ids, l->native[i], &at);
        char state = tid ? proc_task_state(t->pid, tid) : 0;
        if (!state) {
            unknown++; /* a thread that just exited, or offsets that are wrong */
            continue;
        }
        if (!listed_in(before, ts)) {
            fresh++; /* new since the last look: not yet known to last */
            continue;
        }
        int active = state == 'R' || was_active(prev, ids, at);
        int score = (l->locked && ts == l->holder ? 4 : 0) + (active ? 2 : 0) +
                    (ts == l->main_ts ? 1 : 0);
        if (ts == current)
            *current_score = score;
        if (score > best->score) {
            best->addr = ts;
            best->tid = tid;
            best->score = score;
        }
    }
    if (best->score < 0 && fresh > 0 && unknown <= l->n / 2)
        return 0; /* only new ones (the main thread gone): the next look may tell */
    if (best->score < 0 || unknown > l->n / 2) {
        inject_set_err(err, errlen, "pid %d's thread states do not match its threads (%zu of %zu "
                             "unknown): its debug offsets are not usable; use --method ptrace",
                (int)t->pid, unknown, l->n);
        return -1;
    }
    return 0;
}

struct request {
    uint64_t tstate;
    pid_t tid;
    int posted;
    int crossed;            /* taken while being withdrawn: our script or /dev/null runs */
};

static uint64_t support(const struct target *t, uint64_t tstate)
{
    return tstate + t->o.remote_support;
}

static int post(const struct target *t, struct request *r, const struct candidate *c,
                const char *path, char *err, size_t errlen)
{
    const struct py_debug_offsets *o = &t->o;
    r->tstate = c->addr;
    r->tid = c->tid;
    uint64_t path_addr = support(t, c->addr) + o->script_path;
    uint64_t breaker = 0;
    int32_t one = 1;
    int rc = dbg_write(t->pid, path_addr, path, strlen(path) + 1);
    if (rc == 0)
        r->posted = 1;
    if (rc == 0)
        rc = dbg_write(t->pid, support(t, c->addr) + o->pending_call, &one, sizeof one);
    if (rc == 0)
        rc = dbg_read(t->pid, c->addr + o->eval_breaker, &breaker, sizeof breaker);
    if (rc == 0 && !(breaker & PLEASE_STOP_BIT)) {
        uint8_t low = (uint8_t)(breaker | PLEASE_STOP_BIT);
        rc = dbg_write(t->pid, c->addr + o->eval_breaker, &low, 1);
    }
    if (rc < 0) {
        inject_set_err(err, errlen, "cannot write pid %d's thread state: %s", (int)t->pid,
                strerror(-rc));
        return -1;
    }
    if (t->verbose)
        fprintf(stderr, "vcattach: remote-exec: request posted to thread %d (%s)\n",
                (int)c->tid, c->score >= 4 ? "holds the GIL" : c->score >= 2 ? "active"
                                                                             : "main thread");
    return 0;
}

/* 1 when the interpreter took the request (it cleared the pending flag), 0 if still pending,
 * -1 if unreadable (the thread state is gone: the thread exited). */
static int taken(const struct target *t, const struct request *r)
{
    int32_t pending = 1;
    if (dbg_read(t->pid, support(t, r->tstate) + t->o.pending_call, &pending, 4) < 0)
        return -1;
    return pending == 0;
}

/* 1 while tstate is still one of the interpreter's thread states, 0 when it is not (a thread
 * that exited has its state freed: its memory must not be written any more; or the process
 * exited), -1 when no walk was whole for DECIDE_MS. */
static int still_listed(const struct target *t, uint64_t tstate)
{
    static struct tstate_list l;
    int64_t until = vc_monotonic_ms() + DECIDE_MS;
    for (;;) {
        enum walk w = look(t, &l);
        if (w == WALK_OK)
            return listed_in(&l, tstate);
        if (kill(t->pid, 0) < 0 && errno == ESRCH)
            return 0;
        if (vc_monotonic_ms() >= until)
            return -1;
    }
}

/* Withdraws a posted request (see the top comment for the order of the writes): 1 if it was
 * withdrawn before anyone took it (or its thread is gone), 0 if it had been taken (the script
 * runs; r->crossed when that may be /dev/null), -1 if it could not be told whether its thread
 * state still lives.  Then nothing is written (the state may be freed), the request may still
 * be taken at any time, and so its script must stay (t->left_pending): CI once saw "Can't
 * open debugger script" in a target that took, after the script was removed, a request
 * called withdrawn because no walk of its thread list was whole. */
static int cancel(struct target *t, struct request *r)
{
    if (!r->posted)
        return 1;
    r->posted = 0;
    int listed = still_listed(t, r->tstate);
    if (listed < 0) {
        t->left_pending = 1;
        return -1;
    }
    if (!listed)
        return 1; /* gone: nothing is written to a state that may be freed */
    static const char inert[] = "/dev/null";
    int was = taken(t, r);
    if (was == 0 &&
        dbg_write(t->pid, support(t, r->tstate) + t->o.script_path, inert, sizeof inert) == 0) {
        was = taken(t, r);
        r->crossed = was == 1;
    }
    if (was != 0)
        return was < 0 ? 1 : 0;
    int32_t zero = 0;
    dbg_write(t->pid, support(t, r->tstate) + t->o.pending_call, &zero, sizeof zero);
    if (t->verbose)
        fprintf(stderr, "vcattach: remote-exec: request on thread %d withdrawn\n", (int)r->tid);
    return 1;
}

/* wait for up to ms in all, however early each call returns: 1, 0 at the deadline, or -1. */
static int wait_for(inject_wait_fn wait, void *ctx, int ms)
{
    int64_t deadline = vc_monotonic_ms() + ms;
    for (;;) {
        int64_t left = deadline - vc_monotonic_ms();
        int w = wait(ctx, left > 0 ? (int)left : 0);
        if (w != 0 || left <= 0)
            return w;
    }
}

/* The script was taken: give it time to import ctypes, load the agent and connect. */
static int await_script(const struct target *t, const struct request *r, inject_wait_fn wait,
                        void *ctx, char *err, size_t errlen)
{
    if (t->verbose)
        fprintf(stderr, "vcattach: remote-exec: thread %d runs the script\n", (int)r->tid);
    int w = wait_for(wait, ctx, SCRIPT_RUN_MS);
    if (w == 1)
        return INJECT_OK;
    if (w < 0) {
        inject_set_err(err, errlen, "thread %d of pid %d ran the remote-exec script, then the wait "
                             "for its agent was interrupted or pid %d exited",
                (int)r->tid, (int)t->pid, (int)t->pid);
        return INJECT_FAILED;
    }
    if (r->crossed)
        inject_set_err(err, errlen, "thread %d of pid %d took the remote-exec request while it was "
                             "being withdrawn, and no agent connected within %d s (it ran either "
                             "the script or /dev/null, which does nothing); try again",
                (int)r->tid, (int)t->pid, SCRIPT_RUN_MS / 1000);
    else
        inject_set_err(err, errlen, "thread %d of pid %d ran the remote-exec script but the agent "
                             "did not connect within %d s (see the target's stderr)",
                (int)r->tid, (int)t->pid, SCRIPT_RUN_MS / 1000);
    return INJECT_FAILED;
}

/* cancel() could not tell whether the request's thread state lives: the request stays posted
 * (so does its script, t->left_pending), and the attach failed (no fallback: a request the
 * interpreter may still take must not meet another method's agent). */
static int left_posted(const struct target *t, const struct request *r, char *err,
                       size_t errlen)
{
    inject_set_err(err, errlen, "the remote-exec request on thread %d of pid %d could not be "
                         "withdrawn: no walk of its thread list was whole for %d s (a process "
                         "that makes threads nonstop?); it stays posted, with its script in the "
                         "target's /tmp, until the next vcattach removes it; try again or use "
                         "--method ptrace",
            (int)r->tid, (int)t->pid, DECIDE_MS / 1000);
    return INJECT_FAILED;
}

/* The outcome of a cancel() that ends the attempt: an inject_status. */
static int after_cancel(struct target *t, struct request *r, inject_wait_fn wait, void *ctx,
                        int cancelled, int withdrawn_status, char *err, size_t errlen)
{
    if (cancelled < 0)
        return left_posted(t, r, err, errlen);
    if (cancelled == 0)
        return await_script(t, r, wait, ctx, err, errlen);
    return withdrawn_status;
}

/* The deadline passed and no thread took the request: it is withdrawn (unless it was taken
 * meanwhile: then the agent is awaited) and the agent gets a last grace to connect. */
static int give_up(const struct method_request *req, struct target *t, struct request *r,
                   inject_wait_fn wait_connected, void *ctx, char *err, size_t errlen)
{
    pid_t tid = r->tid;
    int cancelled = cancel(t, r);
    if (cancelled <= 0)
        return after_cancel(t, r, wait_connected, ctx, cancelled, 0, err, errlen);
    if (wait_for(wait_connected, ctx, CANCEL_GRACE_MS) == 1)
        return INJECT_OK;
    if (tid == 0) {
        inject_set_err(err, errlen, "pid %d's thread states changed at every look for %.1f s: "
                       "no request was posted; use --method ptrace",
                       (int)req->pid, (double)req->timeout_ms / 1000.0);
        return INJECT_UNTOUCHED;
    }
    inject_set_err(err, errlen,
                   "no thread of pid %d reached an evaluation breaker within %.1f s (the last "
                   "one asked, thread %d, is blocked in C code: accept(), a long sleep, a "
                   "lock); the request was withdrawn", (int)req->pid,
                   (double)req->timeout_ms / 1000.0, (int)tid);
    return INJECT_UNTOUCHED;
}

static int run_request(const struct method_request *req, struct target *t,
                       const char *script_path, inject_wait_fn wait_connected, void *ctx,
                       char *err, size_t errlen);

int inject_remote_exec(const struct method_request *req, const char *script_path,
                       inject_wait_fn wait_connected, void *ctx, int *script_in_use, char *err,
                       size_t errlen)
{
    struct target t;
    *script_in_use = 0;
    int st = open_target(req->pid, req->verbose, &t, err, errlen);
    if (st != INJECT_OK)
        return st;
    if (strlen(script_path) >= t.o.script_path_size || strlen(script_path) >= 4096) {
        inject_set_err(err, errlen, "script path %s is longer than pid %d's buffer (%llu bytes)",
                script_path, (int)req->pid, (unsigned long long)t.o.script_path_size);
        return INJECT_UNTOUCHED;
    }
    st = run_request(req, &t, script_path, wait_connected, ctx, err, errlen);
    *script_in_use = t.left_pending;
    return st;
}

/* Posts the request, moves it while a better thread shows up, and waits for the agent. */
static int run_request(const struct method_request *req, struct target *t,
                       const char *script_path, inject_wait_fn wait_connected, void *ctx,
                       char *err, size_t errlen)
{
    struct request r;
    memset(&r, 0, sizeof r);
    static struct looks k; /* large: not on the stack */
    memset(&k, 0, sizeof k);
    if (sample(t, &k, err, errlen) < 0) /* the first: which threads run, which states last */
        return INJECT_UNTOUCHED;
    struct timespec gap = {0, ACTIVITY_SAMPLE_MS * 1000000L};
    nanosleep(&gap, NULL);
    int64_t deadline = vc_monotonic_ms() + (req->timeout_ms > 0 ? req->timeout_ms : 5000);
    int sampled = sample(t, &k, err, errlen);
    for (;;) {
        struct candidate c;
        int current_score = -1;
        if (sampled < 0 ||
            pick_thread(t, &k, &c, r.posted ? r.tstate : 0, &current_score, err, errlen) < 0) {
            return after_cancel(t, &r, wait_connected, ctx, cancel(t, &r), INJECT_UNTOUCHED,
                                err, errlen);
        }
        /* Moved only when the thread asked no longer looks like it runs Python soon and
         * another one does: each move is a withdrawal and a new request. */
        if (c.score >= 0 &&
            (!r.posted || (c.addr != r.tstate && current_score < 2 && c.score >= 2))) {
            int cancelled = cancel(t, &r);
            if (cancelled <= 0)
                return after_cancel(t, &r, wait_connected, ctx, cancelled, 0, err, errlen);
            if (post(t, &r, &c, script_path, err, errlen) < 0) {
                char why[256];
                snprintf(why, sizeof why, "%s", err);
                if (cancel(t, &r) < 0)
                    return left_posted(t, &r, err, errlen);
                inject_set_err(err, errlen, "%s", why);
                return INJECT_UNTOUCHED;
            }
        }
        int w = wait_connected(ctx, SLICE_MS);
        if (w == 1)
            return INJECT_OK;
        /* One look a slice: it tells whether the request's state is still there (only then
         * is its flag read), and the next round picks from it. */
        sampled = sample(t, &k, err, errlen);
        int listed = !r.posted ? 0 : sampled < 0 ? -1 : listed_in(&k.lists[k.now], r.tstate);
        int took = listed == 1 ? taken(t, &r) : listed == 0 ? -1 : 0; /* unknowable: pending */
        if (took < 0)
            r.posted = 0; /* its thread exited: post again to another one */
        if (w < 0) {
            int cancelled = took == 1 ? 0 : cancel(t, &r);
            if (cancelled <= 0)
                return after_cancel(t, &r, wait_connected, ctx, cancelled, 0, err, errlen);
            inject_set_err(err, errlen, "interrupted, or pid %d exited, while waiting for a thread "
                                 "to take the remote-exec request (withdrawn)", (int)req->pid);
            return INJECT_UNTOUCHED;
        }
        if (took == 1)
            return await_script(t, &r, wait_connected, ctx, err, errlen);
        if (vc_monotonic_ms() >= deadline)
            return give_up(req, t, &r, wait_connected, ctx, err, errlen);
    }
}

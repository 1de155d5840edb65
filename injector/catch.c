/* catch.c — a new interpreter stopped at the start of its initialization, from its exec
 * until vcattach injects it (vcinject.h inject_catch_at_start).
 *
 * Why: a spawned pool worker is found at its exec, but between the kernel's word and the
 * injection's first stop there is vcattach's own work (the look at /proc, the preflight, the
 * helper's start) and, on a machine whose cores are saturated, the worker's own slices: its
 * first tasks came 73–200 ms after its exec and ran before its agent was in (issue 31).  A
 * hold after the injection (hold.c) cannot reach back there.  So the process is seized at
 * once and run from system call to system call through the loader and its libraries'
 * constructors, and kept at the exit of the first call that shows CPython's initialization
 * under way — the open of `pyvenv.cfg` that every CPython 3.8–3.15 makes while it computes its
 * paths, or any file under a `/lib/python3` directory (its standard library) if that was
 * passed before the seize — until vcattach is ready to inject it.  Held there the thread is
 * past the loader and libc's start (dlopen can run in it), between two calls of its own, and
 * no line of Python has run.  A call made inside something an injection must not interrupt
 * (fopen's: safepoint.h) is passed over for the next one (a stat of the standard library).  The injection then takes it where it stands, without letting it
 * run (inject_request.caught: the catcher is the injecting process), so a worker on a
 * saturated machine runs nothing of its own from its exec until its agent is loaded.
 *
 *   - only the main thread is seized (a process at its exec has no other), with
 *     PTRACE_O_TRACESYSGOOD only; nothing of it is written, nothing runs in it that it would
 *     not run anyway, and every signal is delivered at once (syscall_step.h);
 *   - vcattach releases it by killing the process that holds it (the kernel detaches the
 *     thread, which goes on from that call), as does any kill of vcattach; the hold ends by
 *     itself after hold_ms (then an injection's own bounds apply), and the stepping before
 *     it after step_ms, so the worst a process can be slowed by is bounded whatever vcattach
 *     does;
 *   - a process that shows no such call within max_stops system calls (not CPython, or far
 *     past its start) is let go at once.
 */
#include "vcinject.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>

#include "proc.h"
#include "ptrace.h"
#include "safepoint.h"
#include "syscall_step.h"
#include "watchdog.h"

#define SLICE_MS 5           /* a running thread: the budget is checked this often */
#define MAX_STOPS 4000       /* system-call stops (entries and exits) without a sign: let go */
#define PATH_READ 256        /* the bytes of a path argument looked at */
#define WATCHDOG_GRACE_MS 5000 /* past the budgets: a read blocked in the kernel */

/* The path argument of a call that names a file (entry regs), or 0. */
static uint64_t path_arg(const struct user_regs_struct *regs)
{
    switch ((long)regs->orig_rax) {
    case SYS_open: case SYS_stat: case SYS_lstat: case SYS_access: case SYS_readlink:
        return regs->rdi;
    case SYS_openat: case SYS_newfstatat: case SYS_statx: case SYS_faccessat:
    case SYS_readlinkat:
        return regs->rsi;
    default:
        return 0;
    }
}

/* Reads the NUL-terminated string at addr into buf (cap > 1), stopping at a page's end
 * rather than failing across an unmapped one.  0, or -1 (unreadable). */
static int read_path(pid_t pid, uint64_t addr, char *buf, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        size_t page_left = 4096 - ((addr + n) & 4095), want = cap - 1 - n;
        if (want > page_left)
            want = page_left;
        if (pt_read(pid, addr + n, buf + n, want) < 0)
            break;
        buf[n + want] = '\0';
        if (memchr(buf + n, '\0', want) != NULL)
            return 0;
        n += want;
    }
    buf[n] = '\0';
    return n > 0 ? 0 : -1;
}

/* Whether a path a process names shows CPython's initialization under way. */
static int initializing_python(const char *path)
{
    size_t n = strlen(path);
    static const char cfg[] = "/pyvenv.cfg";
    if (n >= sizeof cfg - 1 && strcmp(path + n - (sizeof cfg - 1), cfg) == 0)
        return 1;
    return strstr(path, "/lib/python3") != NULL;
}

struct catch_walk {
    int64_t step_end, hold_ms;
    int stops;
    int in_call;  /* the sign's call was entered: caught at its exit */
    int caught;
    struct tracee *t;
    struct watchdog *wd;
    int *armed;
    struct inject_catch *res;
    void (*on_caught)(void *arg, struct inject_catch *res);
    void *arg;
};

static void nap_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* A system call's exit that the kernel will restart (interrupted by a signal): not yet its
 * end. */
static int restarting(const struct user_regs_struct *regs)
{
    long ax = (long)regs->rax;
    return ax == -512 || ax == -513 || ax == -514 || ax == -516; /* -ERESTART* */
}

/* Whether an injection could take the thread where it stands (safepoint.h: in no lock of
 * libc or the loader, not inside stdio: the open of pyvenv.cfg is fopen's on most versions). */
static int at_safe_point(struct tracee *t)
{
    struct proc_maps maps;
    if (proc_read_maps(t->tid, &maps) < 0)
        return 0;
    struct tracee_group one = {.pid = t->tid, .t = t, .n = 1, .cap = 1};
    char why[256];
    int safe = safepoint_choose(&one, &maps, 0, why, sizeof why) == 0;
    proc_free_maps(&maps);
    return safe;
}

/* Kept at the exit of the sign's call: there the thread is between two calls of its own, in
 * no lock of libc or the loader, and an injection can take it where it stands. */
static void hold_caught(struct catch_walk *w)
{
    w->caught = 1;
    w->res->stops = w->stops;
    w->res->caught_ms = (int)((pt_now_ns() - w->res->start_ns) / 1000000);
    w->res->hold_ms = (int)w->hold_ms;
    w->res->held = w->t;
    if (w->on_caught == NULL) {
        int64_t until = pt_now_ns() + w->hold_ms * 1000000;
        while (pt_now_ns() < until)
            nap_ms(1);
    } else {
        /* on_caught is bounded by hold_ms, or by inject()'s own bounds (and watchdog) once it
         * hands the thread over: this watchdog would cut an injection short */
        if (*w->armed)
            watchdog_disarm(w->wd);
        *w->armed = 0;
        w->on_caught(w->arg, w->res);
    }
    w->res->held = NULL;
}

static int catch_visit(void *ctx, pid_t pid, const struct user_regs_struct *regs,
                       const char **ended)
{
    struct catch_walk *w = ctx;
    if (regs == NULL) { /* running: nothing to decide until its next call */
        if (pt_now_ns() >= w->step_end) {
            *ended = "no sign of CPython's start in time";
            return 0;
        }
        return 1;
    }
    if (++w->stops > MAX_STOPS) {
        *ended = "no sign of CPython's start";
        return 0;
    }
    if (w->in_call) {
        if (step_at_entry(regs) || restarting(regs))
            return 1;
        w->in_call = 0;
        if (!at_safe_point(w->t)) { /* inside fopen (pyvenv.cfg): the next such call */
            w->res->unsafe++;
            return 1;
        }
        hold_caught(w);
        *ended = w->on_caught ? "released" : "the hold's budget was spent";
        return 0;
    }
    uint64_t at = step_at_entry(regs) ? path_arg(regs) : 0;
    char path[PATH_READ];
    if (at == 0 || read_path(pid, at, path, sizeof path) < 0 || !initializing_python(path))
        return 1;
    w->in_call = 1; /* the call runs (the process would make it anyway): kept at its exit */
    snprintf(w->res->at, sizeof w->res->at, "%.127s", path);
    return 1;
}

/* A caller that ran real-time to seize at once (the watcher's catcher, tree_catch.c) goes back
 * to the fair class now, at its nice: the stepping waits on the thread, and must never spin
 * ahead of it on its CPU. */
static void back_to_fair(void)
{
    struct sched_param p = {.sched_priority = 0};
    if (sched_getscheduler(0) == SCHED_FIFO)
        sched_setscheduler(0, SCHED_OTHER, &p);
}

/* The pidfd's process has ended: the pid seized may be another's now. */
static int pidfd_gone(int pidfd)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    return pidfd >= 0 && poll(&p, 1, 0) > 0;
}

int inject_catch_at_start(pid_t pid, int pidfd, int step_ms, int hold_ms, struct inject_catch *res,
                          void (*on_caught)(void *arg, struct inject_catch *res), void *arg)
{
    memset(res, 0, sizeof *res);
    res->start_ns = pt_now_ns();
    res->caught_ms = -1;
    res->ended = "no sign of CPython's start";
    struct watchdog wd;
    int armed = watchdog_arm(&wd, step_ms + hold_ms + WATCHDOG_GRACE_MS, pid) == 0;
    struct tracee t;
    struct tracee_group g = {.pid = pid, .t = &t, .n = 1, .cap = 1};
    struct catch_walk w = {.step_end = res->start_ns + (int64_t)step_ms * 1000000,
                           .hold_ms = hold_ms, .t = &t, .wd = &wd, .armed = &armed,
                           .res = res, .on_caught = on_caught, .arg = arg};
    int rc = 0;
    if (step_seize(pid, &t, &res->ended) < 0) {
        rc = t.state == TRACEE_DETACHED && errno != ESRCH ? -1 : 0;
    } else if (back_to_fair(), pidfd_gone(pidfd)) { /* seized by pid: still the process the pidfd names? */
        res->ended = "the process ended";
    } else {
        int stops = 0;
        step_syscalls(&t, w.step_end + (int64_t)hold_ms * 1000000, SLICE_MS, catch_visit, &w,
                      &stops, &res->ended);
        if (!w.caught)
            res->stops = w.stops;
    }
    pt_detach(&g, &t); /* (nothing if an injection took it: it let it go itself) */
    if (armed)
        watchdog_disarm(&wd);
    res->caught = w.caught;
    return rc;
}

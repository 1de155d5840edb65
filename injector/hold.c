/* hold.c — a young process held at its system calls until its agent has its hooks in
 * (vcinject.h inject_hold_until_hooked).
 *
 * Why: a process found at its exec (a pool's spawned worker) is injected within tens of ms,
 * but its agent then still has to connect to vcattach, wait for its CONFIG and for the
 * interpreter's initialization, and take the GIL before its hooks are in.  On a loaded
 * machine that took 20–110 ms, in which a worker whose life is 100 ms ran its first tasks
 * untraced.  So its main thread is made to wait for the agent — never for anything else:
 *
 *   - the thread is seized alone (PTRACE_SEIZE, PTRACE_O_TRACESYSGOOD only: never EXITKILL)
 *     and run from system call to system call (PTRACE_SYSCALL); its registers and memory are
 *     never written, nothing runs in it that it would not run anyway;
 *   - it is kept stopped only at the entry or exit of a system call that CPython makes with
 *     the GIL released (reading a file or pipe, opening, stat, polling, waiting: the calls
 *     an import, a pipe read or a sleep make), and only while the agent waits for vcattach
 *     (CONNECTING), makes its buffers (PREPARING) or takes the GIL (GIL_WAIT).  While the
 *     agent waits for the interpreter's initialization (INIT_WAIT) the thread runs, stepping,
 *     to finish it, and is kept from the first call after its end (_PyRuntime.initialized,
 *     whose address the agent publishes: its own thread sees the flag only at its next
 *     look, and the program's first lines would run meanwhile).  Taking the GIL, the agent may yet need something the held thread owns:
 *     the GIL itself (a C extension's read under it), or the import lock, which importlib
 *     holds across the stat calls of a module search while the agent imports `atexit`.  So
 *     that stop is let go as soon as the agent thread sleeps for AGENT_BLOCKED_MS (a thread
 *     that only waits for a core runs), and after GIL_HOLD_MS in any case;
 *   - it ends at the agent's DONE (hooks in, or its session over), at the budget, at any
 *     stop it does not expect (job control, an exec), or when the process ends.  Signals that
 *     arrive meanwhile are delivered at once (a pool's SIGTERM is not held back).
 *
 * Killed at any instant, the kernel detaches the thread: it goes on from the system call it
 * was at as if nothing happened (the stops report SIGTRAP|0x80, which the kernel drops
 * rather than deliver; ptrace.h pt_set_tracesysgood).  Every wait is bounded.
 */
#include "vcinject.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <time.h>

#include "agent_symbols.h"
#include "proc.h"
#include "method.h"
#include "protocol.h"
#include "ptrace.h"
#include "syscall_step.h"
#include "watchdog.h"

#define SLICE_MS 2          /* a running thread: the phase is read this often */
#define POLL_US 200         /* a held thread: the phase is read this often */
#define GIL_HOLD_MS 30      /* the longest one stop is held while the agent takes the GIL */
#define AGENT_BLOCKED_MS 2   /* the agent thread asleep this long while it takes the GIL */
#define WATCHDOG_GRACE_MS 5000 /* past the budget: a read blocked in the kernel (below) */

/* System calls CPython makes between Py_BEGIN_ALLOW_THREADS and Py_END_ALLOW_THREADS (FileIO,
 * os.read/stat/listdir, import's path stats, select/poll, time.sleep, waitpid, sockets). */
static int gil_free_syscall(long nr)
{
    switch (nr) {
    case SYS_read: case SYS_pread64: case SYS_readv: case SYS_write: case SYS_writev:
    case SYS_open: case SYS_openat: case SYS_close: case SYS_lseek:
    case SYS_stat: case SYS_lstat: case SYS_fstat: case SYS_newfstatat: case SYS_statx:
    case SYS_getdents64: case SYS_readlink: case SYS_readlinkat: case SYS_access:
    case SYS_faccessat: case SYS_poll: case SYS_ppoll: case SYS_select: case SYS_pselect6:
    case SYS_epoll_wait: case SYS_epoll_pwait: case SYS_nanosleep: case SYS_clock_nanosleep:
    case SYS_wait4: case SYS_waitid: case SYS_recvfrom: case SYS_recvmsg: case SYS_sendto:
    case SYS_sendmsg: case SYS_accept: case SYS_accept4: case SYS_connect:
        return 1;
    default:
        return 0;
    }
}

static uint32_t read_phase(pid_t tid, uint64_t addr)
{
    uint32_t v = VC_PHASE_DONE;
    if (pt_read(tid, addr, &v, sizeof v) < 0)
        return VC_PHASE_DONE; /* unreadable: nothing to wait for */
    return v;
}

static void nap_us(long us)
{
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

/* The interpreter's initialization is over (the agent's vc_agent_init_flag: the address of
 * _PyRuntime.initialized; flag_at is where that address is), or unknown (0). */
static int initialized(pid_t tid, uint64_t flag_at)
{
    uint64_t addr = 0;
    int32_t v = 0;
    if (flag_at == 0 || pt_read(tid, flag_at, &addr, sizeof addr) < 0 || addr == 0 ||
        pt_read(tid, addr, &v, sizeof v) < 0)
        return 0;
    return v != 0;
}

/* The agent needs nothing of the main thread in these (its GIL perhaps, in GIL_WAIT); while
 * it waits for the initialization, once that is over (the agent thread sees it within a ms:
 * the thread would run its program's first lines meanwhile). */
static int holdable(pid_t tid, uint32_t ph, uint64_t flag_at)
{
    return ph == VC_PHASE_CONNECTING || ph == VC_PHASE_PREPARING || ph == VC_PHASE_GIL_WAIT ||
           (ph == VC_PHASE_INIT_WAIT && initialized(tid, flag_at));
}

/* Keeps the stopped thread where it is while the agent is in a phase it may be held for, up
 * to end_ns (absolute).  Waiting for the GIL, the agent thread (atid) runs or is about
 * to; asleep there for AGENT_BLOCKED_MS it waits for something the held thread owns (the
 * import lock, held across the stat calls of a module search): the thread is let go then,
 * as after GIL_HOLD_MS in any case, and not held again while the agent takes the GIL
 * (*gil_gave_up: it would only wait for the same thing at each call of a module search).
 * 1 if it was held (the time added to *held_ns), else 0. */
static int hold_here(pid_t tid, uint64_t addr, uint64_t flag_at, pid_t atid, int64_t end_ns,
                     int64_t *held_ns,
                     int *gil_gave_up)
{
    int64_t t0 = pt_now_ns(), gil_since = 0, asleep_since = 0, now = t0;
    uint32_t ph = read_phase(tid, addr);
    if (!holdable(tid, ph, flag_at) || (ph == VC_PHASE_GIL_WAIT && *gil_gave_up))
        return 0;
    while (holdable(tid, ph, flag_at) && now < end_ns) {
        if (ph == VC_PHASE_GIL_WAIT) {
            if (gil_since == 0)
                gil_since = now;
            if (now - gil_since >= (int64_t)GIL_HOLD_MS * 1000000) {
                *gil_gave_up = 1; /* the GIL did not come: maybe this thread holds it here */
                break;
            }
            char st = atid > 0 ? proc_task_state(tid, atid) : 'R';
            if (st == 'R' || st == 0)
                asleep_since = 0;
            else if (asleep_since == 0)
                asleep_since = now;
            else if (now - asleep_since >= (int64_t)AGENT_BLOCKED_MS * 1000000) {
                *gil_gave_up = 1;
                break;
            }
        }
        nap_us(POLL_US);
        ph = read_phase(tid, addr);
        now = pt_now_ns();
    }
    *held_ns += now - t0;
    return 1;
}

/* The agent thread's tid (0: not known yet, or an agent without it). */
static pid_t agent_tid(pid_t pid, uint64_t addr)
{
    int32_t v = 0;
    if (addr == 0 || pt_read(pid, addr, &v, sizeof v) < 0)
        return 0;
    return v;
}

static int hold(pid_t pid, const char *agent_path, int budget_ms, struct inject_hold *res,
                char *err, size_t errlen);

/* The hold reads the target's memory and the agent's file from this process, where a read
 * of a stalled FUSE mapping cannot be cancelled: the watchdog's bound (watchdog.h) ends this
 * process then, and the kernel lets the thread go. */
int inject_hold_until_hooked(pid_t pid, const char *agent_path, int budget_ms,
                             struct inject_hold *res, char *err, size_t errlen)
{
    struct watchdog w;
    int armed = watchdog_arm(&w, budget_ms + WATCHDOG_GRACE_MS, pid) == 0;
    int rc = hold(pid, agent_path, budget_ms, res, err, errlen);
    if (armed)
        watchdog_disarm(&w);
    return rc;
}

/* The stepper's visits (syscall_step.h): held at a GIL-free call while the agent waits. */
struct hold_walk {
    uint64_t phase_at, tid_at, flag_at; /* vc_agent_phase, vc_agent_tid, vc_agent_init_flag */
    int64_t end, held;
    int held_stops, gil_gave_up;
    uint32_t ph;
};

static int hold_visit(void *ctx, pid_t pid, const struct user_regs_struct *regs,
                      const char **ended)
{
    struct hold_walk *w = ctx;
    (void)ended;
    if (regs != NULL && gil_free_syscall((long)regs->orig_rax))
        w->held_stops += hold_here(pid, w->phase_at, w->flag_at, agent_tid(pid, w->tid_at), w->end,
                                   &w->held, &w->gil_gave_up);
    w->ph = read_phase(pid, w->phase_at);
    return w->ph != VC_PHASE_DONE && w->ph != VC_PHASE_NONE;
}

static int hold(pid_t pid, const char *agent_path, int budget_ms, struct inject_hold *res,
                char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    res->ended = "its agent's start was over";
    struct tracee t;
    struct tracee_group g = {.pid = pid, .t = &t, .n = 1, .cap = 1};
    int64_t start = pt_now_ns();
    struct hold_walk w = {.end = start + (int64_t)budget_ms * 1000000, .ph = VC_PHASE_DONE};
    int rc = 0;
    /* Stopped first, the agent looked for after: the injection has just let it go, and
     * every moment it runs now may be its first task's. */
    if (step_seize(pid, &t, &res->ended) < 0) {
        if (t.state == TRACEE_DETACHED) { /* the seize itself was refused */
            int e = errno;
            pid_t tracer = e == EPERM ? proc_tracer_pid(pid, pid) : 0;
            char by[48] = "";
            if (tracer > 0)
                snprintf(by, sizeof by, " (traced by pid %d)", (int)tracer);
            inject_set_err(err, errlen, "cannot hold pid %d: %s%s", (int)pid, strerror(e), by);
            return e == ESRCH ? 0 : -1;
        }
        goto out;
    }
    static const char *const names[] = {"vc_agent_phase", "vc_agent_tid", "vc_agent_init_flag"};
    uint64_t at[3] = {0, 0, 0};
    if (agent_symbols(pid, agent_path, names, at, 3, err, errlen) < 0) {
        rc = -1;
        goto out;
    }
    w.phase_at = at[0];
    w.tid_at = at[1];
    w.flag_at = at[2];
    if (w.phase_at == 0) {
        inject_set_err(err, errlen, "the agent %s has no vc_agent_phase (an older agent)",
                       agent_path);
        rc = -1;
        goto out;
    }
    w.ph = read_phase(pid, w.phase_at);
    if (w.ph == VC_PHASE_NONE) {
        res->ended = "no session of its agent";
        goto out;
    }
    step_syscalls(&t, w.end, SLICE_MS, hold_visit, &w, &res->stops, &res->ended);
    if (t.state != TRACEE_GONE && pt_now_ns() >= w.end && w.ph != VC_PHASE_DONE)
        res->ended = "the hold's budget was spent";
    if (w.ph == VC_PHASE_NONE)
        res->ended = "its agent's session ended";
out:
    pt_detach(&g, &t); /* interrupts it first if it runs; bounded */
    res->held_ms = (int)(w.held / 1000000);
    res->held_stops = w.held_stops;
    res->total_ms = (int)((pt_now_ns() - start) / 1000000);
    return rc;
}

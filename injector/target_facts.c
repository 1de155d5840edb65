/* target_facts.c — owns the target's facts (vcinject.h part 1): target_facts_read,
 * target_facts_release, target_facts_recheck and target_ptrace_permitted.
 *
 * Why one snapshot: the CLI used to re-read /proc/PID/status field by field wherever it
 * needed a uid or a tracer, each read a chance to see another process (a recycled pid) or a
 * changed one.  Here /proc/PID/{stat,status} are read once, tied to a pidfd opened first, so
 * that every later judgement is about the process that was examined; the few things that can
 * change before the target is touched (uids, state, tracers) are read again by
 * target_facts_recheck, right before a method runs.  The permission logic (uids or
 * CAP_SYS_PTRACE, dumpability, Yama, a ptrace probe on a child of ours) lives here too, next
 * to the facts it judges, so that preflight only orders the checks and words the refusals.
 */
#include "vcinject.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc.h"

#define CAP_SYS_PTRACE_BIT 19

/* pidfd_open(2) (Linux 5.3); -1 where the kernel or libc headers have none. */
static int open_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

int target_facts_read(pid_t pid, struct target_facts *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->pid = pid;
    f->pidfd = -1;
    if (pid <= 0) {
        snprintf(err, errlen, "invalid pid %d", (int)pid);
        return -1;
    }
    /* The pidfd first: whatever is read after it is about this process or finds it gone. */
    f->pidfd = open_pidfd(pid);
    if (f->pidfd < 0 && errno == ESRCH) {
        snprintf(err, errlen, "no such process: pid %d (it exited)", (int)pid);
        return -1;
    }
    struct proc_stat ps;
    struct proc_status st;
    if (proc_stat_read(pid, &ps) < 0 || proc_status_read(pid, 0, &st) < 0) {
        snprintf(err, errlen, "no such process: pid %d (it exited)", (int)pid);
        target_facts_release(f);
        return -1;
    }
    f->start_time = ps.start_time;
    f->state = ps.state;
    f->kernel_thread = proc_kernel_thread(pid);
    memcpy(f->uid, st.uid, sizeof f->uid);
    memcpy(f->gid, st.gid, sizeof f->gid);
    f->tracer = st.tracer;
    f->ppid = st.ppid;
    f->own_pid = st.own_pid;
    f->seccomp = st.seccomp;
    snprintf(f->comm, sizeof f->comm, "%s", st.name);
    proc_exe(pid, f->exe, sizeof f->exe);
    /* Not dumpable (setuid, prctl(PR_SET_DUMPABLE, 0)): the kernel makes /proc/PID root's. */
    char dir[64];
    struct stat ds;
    snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
    f->dumpable = stat(dir, &ds) < 0 || ds.st_uid == f->uid[1];
    f->other_mnt_ns = proc_other_root(pid); /* another mount namespace, or chrooted */
    f->other_user_ns = (target_ns_other(pid, "user") == 1);
    f->other_net_ns = (target_ns_other(pid, "net") == 1);
    if (f->kernel_thread) {
        f->python = 0;
        snprintf(f->python_why, sizeof f->python_why, "a kernel thread");
    } else {
        f->python = target_python_detect(pid, &f->py, f->python_why, sizeof f->python_why);
        target_libc_detect(pid, &f->libc);
    }
    return 0;
}

void target_facts_release(struct target_facts *f)
{
    if (f->pidfd >= 0)
        close(f->pidfd);
    f->pidfd = -1;
}

/* 1 when the pidfd says the process has exited (readable), else 0. */
static int pidfd_exited(int pidfd)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    return pidfd >= 0 && poll(&p, 1, 0) > 0;
}

/* Still the process and the credentials that were examined: the same start time (a pid
 * reused by another process has another), the same uids and gids. */
static int same_identity(const struct target_facts *f, const struct proc_stat *ps,
                         const struct proc_status *st, char *err, size_t errlen)
{
    if (ps->start_time != f->start_time) {
        snprintf(err, errlen, "process %d is not the one examined (it exited and its pid was "
                 "reused): run vcattach again", (int)f->pid);
        return -1;
    }
    if (memcmp(st->uid, f->uid, sizeof st->uid) || memcmp(st->gid, f->gid, sizeof st->gid)) {
        snprintf(err, errlen, "process %d changed its user or group ids since it was examined "
                 "(uid %u, now %u): run vcattach again", (int)f->pid, (unsigned)f->uid[1],
                 (unsigned)st->uid[1]);
        return -1;
    }
    return 0;
}

int target_facts_same_identity(const struct target_facts *f, char *err, size_t errlen)
{
    struct proc_stat ps;
    struct proc_status st;
    if (proc_stat_read(f->pid, &ps) < 0 || proc_status_read(f->pid, 0, &st) < 0) {
        snprintf(err, errlen, "process %d exited", (int)f->pid);
        return -1;
    }
    return same_identity(f, &ps, &st, err, errlen);
}

static int recheck(const struct target_facts *f, pid_t ours, char *err, size_t errlen)
{
    pid_t pid = f->pid;
    struct proc_stat ps;
    struct proc_status st;
    if (pid <= 0) {
        snprintf(err, errlen, "invalid pid %d", (int)pid);
        return -1;
    }
    if (pidfd_exited(f->pidfd) || proc_stat_read(pid, &ps) < 0 ||
        proc_status_read(pid, 0, &st) < 0) {
        snprintf(err, errlen, "no process with pid %d (check the pid; it may have exited)",
                 (int)pid);
        return -1;
    }
    if (ps.state == 'Z' || ps.state == 'X') {
        snprintf(err, errlen, "process %d is a zombie (it has exited): nothing to attach to",
                 (int)pid);
        return -1;
    }
    if (f->kernel_thread || proc_kernel_thread(pid)) {
        snprintf(err, errlen, "process %d is a kernel thread: nothing to trace (give the pid "
                 "of a Python process)", (int)pid);
        return -1;
    }
    if (same_identity(f, &ps, &st, err, errlen) < 0)
        return -1;
    if (ps.state == 'T') {
        snprintf(err, errlen,
                 "process %d is stopped (job control): resume it with `kill -CONT %d` and retry",
                 (int)pid, (int)pid);
        return -1;
    }
    pid_t *tids = NULL;
    size_t ntids = 0;
    if (proc_list_tasks(pid, &tids, &ntids) == 0) {
        for (size_t i = 0; i < ntids; i++) {
            int tracer = proc_tracer_pid(pid, tids[i]);
            if (tracer > 0 && tracer != ours) {
                snprintf(err, errlen, "process %d is already traced by pid %d (thread %d; a "
                         "debugger, a profiler, another vcattach?): detach it first", (int)pid,
                         tracer, (int)tids[i]);
                free(tids);
                return -1;
            }
        }
        free(tids);
    }
    return 0;
}

int target_facts_recheck(const struct target_facts *f, char *err, size_t errlen)
{
    return recheck(f, 0, err, errlen);
}

int target_facts_recheck_ours(const struct target_facts *f, char *err, size_t errlen)
{
    return recheck(f, getpid(), err, errlen);
}

/* 1 if pid descends from us (Yama scope 1 allows tracing descendants). */
static int is_descendant(pid_t pid)
{
    pid_t self = getpid();
    for (int depth = 0; pid > 1 && depth < 4096; depth++) {
        struct proc_status st;
        if (proc_status_read(pid, 0, &st) < 0)
            return 0;
        pid = st.ppid;
        if (pid == self)
            return 1;
    }
    return 0;
}

/* Can vcattach ptrace anything at all?  Seccomp filters (Docker's default profile before
 * 19.03) and LSMs can forbid ptrace for the tool itself; we find out on a child of our own
 * rather than on the target.  Returns 0 when allowed, else the errno of PTRACE_SEIZE. */
static int ptrace_probe(void)
{
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0)
        return 0; /* cannot tell: let the injection report the real error */
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* vcattach killed between fork and prctl: no death signal will come, and an orphan
         * pausing for ever would hold vcattach's stderr open for whoever reads it */
        if (getppid() != parent)
            _exit(0);
        for (;;)
            pause();
    }
    int e = 0;
    if (ptrace(PTRACE_SEIZE, child, NULL, NULL) < 0)
        e = errno;
    kill(child, SIGKILL);
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
        ;
    return e;
}

int target_ptrace_permitted(const struct target_facts *f, char *err, size_t errlen)
{
    struct proc_status self;
    int have_self = proc_status_read(0, 0, &self) == 0;
    uid_t me = geteuid();
    int cap = have_self && ((self.cap_eff >> CAP_SYS_PTRACE_BIT) & 1);
    if (!cap) {
        for (int i = 0; i < 3; i++) /* real, effective, saved must all be ours */
            if (f->uid[i] != me) {
                snprintf(err, errlen,
                         "not permitted: pid %d (%s) runs as uid %u and you are uid %u without "
                         "CAP_SYS_PTRACE; run vcattach as that user or with sudo",
                         (int)f->pid, f->comm, (unsigned)f->uid[1], (unsigned)me);
                return -1;
            }
        /* A non-dumpable process (setuid, prctl(PR_SET_DUMPABLE, 0)) has its /proc files
         * owned by root and needs CAP_SYS_PTRACE even for its own user. */
        if (!f->dumpable) {
            snprintf(err, errlen,
                     "not permitted: pid %d (%s) is not dumpable (setuid or "
                     "prctl(PR_SET_DUMPABLE, 0)), so only CAP_SYS_PTRACE may attach; run "
                     "vcattach with sudo",
                     (int)f->pid, f->comm);
            return -1;
        }
    }
    char scope_text[16];
    int scope = 0; /* the file is absent without the Yama LSM: classic ptrace rules */
    if (proc_read_text("/proc/sys/kernel/yama/ptrace_scope", scope_text, sizeof scope_text) > 0)
        scope = atoi(scope_text);
    if (scope >= 3) {
        snprintf(err, errlen,
                 "not permitted: Yama ptrace_scope is 3 (ptrace disabled until reboot); set "
                 "kernel.yama.ptrace_scope=1 or lower at boot (sysctl.d) and reboot");
        return -1;
    }
    if (scope == 2 && !cap) {
        snprintf(err, errlen,
                 "not permitted: Yama ptrace_scope is 2 (admin only); run vcattach with sudo "
                 "(CAP_SYS_PTRACE)");
        return -1;
    }
    if (scope == 1 && !cap && !is_descendant(f->pid)) {
        snprintf(err, errlen,
                 "not permitted: Yama ptrace_scope is 1 (only descendants may be traced); run "
                 "vcattach with sudo, or allow it with `sudo sysctl kernel.yama.ptrace_scope=0`");
        return -1;
    }
    /* Once allowed, for the life of this process: our seccomp filter can only be tightened
     * by ourselves, and a tree asks for every process it meets (a fork each time). */
    static int probed_allowed;
    int probe = probed_allowed ? 0 : ptrace_probe();
    probed_allowed = probe == 0;
    if (probe) {
        snprintf(err, errlen,
                 "not permitted: ptrace is blocked for vcattach itself (%s: %s); in Docker run "
                 "the container with --cap-add=SYS_PTRACE (or --security-opt "
                 "seccomp=unconfined), in Kubernetes add SYS_PTRACE to securityContext."
                 "capabilities or use `kubectl debug --profile=general --target=...`",
                 have_self && self.seccomp ? "seccomp filter on vcattach" : "security module",
                 strerror(probe));
        return -1;
    }
    return 0;
}

/* preflight.c — every check before the target is touched (see preflight.h).
 *
 * Order matters: permission comes before anything that needs it (/proc/PID/exe and maps are
 * only readable with ptrace-read access), so that an operator who lacks permission is told
 * exactly that, not "not a Python process".  Every message names the cause and the fix.
 * Everything read from /proc goes through injector/proc.c, the project's one /proc parser;
 * the one call into the control client (is a session running already?) goes one way only.
 */
#include "preflight.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_locate.h"
#include "control_client.h"
#include "proc.h"

#define CAP_SYS_PTRACE_BIT 19
#define PY_OLDEST_MINOR 8
#define PY_NEWEST_MINOR 15

static int self_has_cap(int bit)
{
    char v[64];
    if (proc_status_field(0, "CapEff", v, sizeof v) < 0)
        return 0;
    unsigned long long caps = strtoull(v, NULL, 16);
    return (int)((caps >> bit) & 1);
}

/* 1 if pid descends from us (Yama scope 1 allows tracing descendants). */
static int is_descendant(pid_t pid)
{
    pid_t self = getpid();
    for (int depth = 0; pid > 1 && depth < 4096; depth++) {
        char v[32];
        if (proc_status_field(pid, "PPid", v, sizeof v) < 0)
            return 0;
        pid = (pid_t)atoi(v);
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
    pid_t child = fork();
    if (child < 0)
        return 0; /* cannot tell: let the injection report the real error */
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
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

static int check_permission(pid_t pid, const char *comm, uid_t target_uids[4], char *err,
                            size_t errlen)
{
    uid_t me = geteuid();
    int cap = self_has_cap(CAP_SYS_PTRACE_BIT);
    if (!cap) {
        for (int i = 0; i < 3; i++) /* real, effective, saved must all be ours */
            if (target_uids[i] != me) {
                snprintf(err, errlen,
                         "not permitted: pid %d (%s) runs as uid %u and you are uid %u without "
                         "CAP_SYS_PTRACE; run vcattach as that user or with sudo",
                         (int)pid, comm, (unsigned)target_uids[1], (unsigned)me);
                return -1;
            }
        /* A non-dumpable process (setuid, prctl(PR_SET_DUMPABLE, 0)) has its /proc files
         * owned by root and needs CAP_SYS_PTRACE even for its own user. */
        char dir[64];
        struct stat st;
        snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
        if (stat(dir, &st) == 0 && st.st_uid != target_uids[1]) {
            snprintf(err, errlen,
                     "not permitted: pid %d (%s) is not dumpable (setuid or "
                     "prctl(PR_SET_DUMPABLE, 0)), so only CAP_SYS_PTRACE may attach; run "
                     "vcattach with sudo",
                     (int)pid, comm);
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
    if (scope == 1 && !cap && !is_descendant(pid)) {
        snprintf(err, errlen,
                 "not permitted: Yama ptrace_scope is 1 (only descendants may be traced); run "
                 "vcattach with sudo, or allow it with `sudo sysctl kernel.yama.ptrace_scope=0`");
        return -1;
    }
    char seccomp[16] = "0";
    proc_status_field(0, "Seccomp", seccomp, sizeof seccomp);
    int probe = ptrace_probe();
    if (probe) {
        snprintf(err, errlen,
                 "not permitted: ptrace is blocked for vcattach itself (%s: %s); in Docker run "
                 "the container with --cap-add=SYS_PTRACE (or --security-opt "
                 "seccomp=unconfined), in Kubernetes add SYS_PTRACE to securityContext."
                 "capabilities or use `kubectl debug --profile=general --target=...`",
                 atoi(seccomp) ? "seccomp filter on vcattach" : "security module",
                 strerror(probe));
        return -1;
    }
    return 0;
}

static int parse_ids(pid_t pid, const char *field, unsigned ids[4])
{
    char v[128];
    if (proc_status_field(pid, field, v, sizeof v) < 0)
        return -1;
    return sscanf(v, "%u %u %u %u", &ids[0], &ids[1], &ids[2], &ids[3]) == 4 ? 0 : -1;
}

/* A target in another mount namespace (a container, a systemd service with PrivateTmp) or
 * under another root directory (chroot: same mounts, another "/") gets the agent either at the
 * same path (if it is visible there) or as a copy in its /tmp made just before injecting, as
 * its own user (agent_copy_into_target), and its fallback file in its /tmp: both need a /tmp
 * directory in the target's view.  (The control socket is an abstract name: no file.) */
static int check_namespace(struct target_info *t, char *err, size_t errlen)
{
    char theirs[64];
    struct stat a, b;
    snprintf(t->agent_in_target, sizeof t->agent_in_target, "%s", t->agent);
    snprintf(theirs, sizeof theirs, "/proc/%d/ns/mnt", (int)t->pid);
    if (stat(theirs, &a) == 0 && stat("/proc/self/ns/mnt", &b) == 0)
        t->foreign_mnt_ns = a.st_dev != b.st_dev || a.st_ino != b.st_ino;
    snprintf(theirs, sizeof theirs, "/proc/%d/root", (int)t->pid);
    if (stat(theirs, &a) == 0 && stat("/proc/self/root", &b) == 0 &&
        (a.st_dev != b.st_dev || a.st_ino != b.st_ino))
        t->foreign_mnt_ns = 1; /* chrooted: paths differ exactly as in another namespace */
    if (!t->foreign_mnt_ns)
        return 0;
    char tmp[64];
    struct stat st;
    snprintf(tmp, sizeof tmp, "/proc/%d/root/tmp", (int)t->pid);
    if (lstat(tmp, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen,
                 "pid %d runs in a different mount namespace or root without a /tmp directory "
                 "(needed for the agent's copy and fallback file): run vcattach inside the container",
                 (int)t->pid);
        return -1;
    }
    t->agent_needs_copy = !proc_same_file(t->pid, t->agent);
    return 0;
}

int preflight_target(pid_t pid, struct target_info *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->pid = pid;
    char v[256];
    if (pid == getpid()) {
        snprintf(err, errlen, "pid %d is vcattach itself: give the pid of the Python process",
                 (int)pid);
        return -1;
    }
    if (kill(pid, 0) < 0 && errno == ESRCH) {
        snprintf(err, errlen, "no such process: pid %d (check it with `ps -p %d`)", (int)pid,
                 (int)pid);
        return -1;
    }
    char state = proc_state(pid);
    unsigned uids[4], gids[4];
    if (!state || parse_ids(pid, "Uid", uids) < 0 || parse_ids(pid, "Gid", gids) < 0) {
        snprintf(err, errlen, "no such process: pid %d (it exited)", (int)pid);
        return -1;
    }
    proc_status_field(pid, "Name", t->comm, sizeof t->comm);
    t->uid = (uid_t)uids[1];
    t->gid = (gid_t)gids[1];
    if (state == 'Z' || state == 'X') {
        snprintf(err, errlen, "pid %d (%s) has exited (zombie): nothing to trace", (int)pid,
                 t->comm);
        return -1;
    }

    uid_t target_uids[4] = {uids[0], uids[1], uids[2], uids[3]};
    if (check_permission(pid, t->comm, target_uids, err, errlen) < 0)
        return -1;

    if (proc_status_field(pid, "TracerPid", v, sizeof v) == 0 && atoi(v) != 0) {
        pid_t tracer = (pid_t)atoi(v);
        char tcomm[64] = "?";
        proc_status_field(tracer, "Name", tcomm, sizeof tcomm);
        snprintf(err, errlen,
                 "pid %d (%s) is already being traced by pid %d (%s): detach that debugger or "
                 "tracer first (only one ptrace tracer is possible)",
                 (int)pid, t->comm, (int)tracer, tcomm);
        return -1;
    }
    if (state == 'T' || state == 't') {
        snprintf(err, errlen,
                 "pid %d (%s) is stopped (state %c, e.g. Ctrl-Z or SIGSTOP): resume it with "
                 "`kill -CONT %d` first (attaching to a stopped process could leave it hung)",
                 (int)pid, t->comm, state, (int)pid);
        return -1;
    }
    if (proc_status_field(pid, "Seccomp", v, sizeof v) == 0 && atoi(v) == 1) {
        snprintf(err, errlen,
                 "pid %d (%s) runs under strict seccomp (mode 1): it cannot load an agent; "
                 "nothing can be traced in it",
                 (int)pid, t->comm);
        return -1;
    }

    char why[512];
    int is_py = target_python_detect(pid, &t->py, why, sizeof why);
    if (is_py < 0) {
        snprintf(err, errlen, "cannot examine pid %d (%s): %s", (int)pid, t->comm, why);
        return -1;
    }
    if (is_py == 0) {
        snprintf(err, errlen, "pid %d (%s) is not a CPython process (%s): give the pid of a "
                              "python process",
                 (int)pid, t->comm, why);
        return -1;
    }
    if (t->py.free_threaded) {
        snprintf(err, errlen,
                 "pid %d runs a free-threaded CPython (%d.%dt), which vcattach does not support "
                 "yet (GIL builds 3.%d to 3.%d only)",
                 (int)pid, t->py.major, t->py.minor, PY_OLDEST_MINOR, PY_NEWEST_MINOR);
        return -1;
    }
    if (t->py.major != 3 || t->py.minor < PY_OLDEST_MINOR || t->py.minor > PY_NEWEST_MINOR) {
        snprintf(err, errlen,
                 "pid %d runs Python %d.%d, which vcattach does not support (3.%d to 3.%d)",
                 (int)pid, t->py.major, t->py.minor, PY_OLDEST_MINOR, PY_NEWEST_MINOR);
        return -1;
    }
    if (agent_locate(t->py.major, t->py.minor, t->agent, sizeof t->agent, err, errlen) < 0)
        return -1;
    if (check_namespace(t, err, errlen) < 0)
        return -1;
    /* A copy made for the target is readable by it; otherwise the original must be. */
    if (agent_check_safe(t->agent, t->agent_needs_copy ? 0 : t->uid, err, errlen) < 0)
        return -1;

    char status[512];
    int running = ctl_query(pid, VC_MSG_STATUS, status, sizeof status, 2000, why, sizeof why);
    if (running > 0) {
        char out[256] = "?";
        vc_kv_get(status, "output", out, sizeof out);
        snprintf(err, errlen,
                 "a vcattach session is already running in pid %d (%s%s): wait for it, or "
                 "stop it with `vcattach stop --pid %d`",
                 (int)pid, strcmp(out, "control") ? "output " : "traced by another vcattach",
                 strcmp(out, "control") ? out : "", (int)pid);
        return -1;
    }
    if (running < 0) {
        snprintf(err, errlen, "pid %d: %s", (int)pid, why);
        return -1;
    }
    return 0;
}

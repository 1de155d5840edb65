/* preflight.c — every check before the target is touched (see preflight.h).
 *
 * Order matters: permission comes before anything that needs it (/proc/PID/exe and maps are
 * only readable with ptrace-read access), so that an operator who lacks permission is told
 * exactly that, not "not a Python process".  Every message names the cause and the fix.
 * What is judged is one snapshot of the target (target_facts_read, vcinject.h), read once and
 * tied to a pidfd; the permission rules are the injector's (target_ptrace_permitted), the
 * wording and the order are ours.  The one call into the control client (is a session running
 * already?) goes one way only.
 */
#include "preflight.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_locate.h"
#include "control_client.h"
#include "session_query.h"
#include "version.h"

#define PY_OLDEST_MINOR 8
#define PY_NEWEST_MINOR 15

/* A target in another mount namespace (a container, a systemd service with PrivateTmp) or
 * under another root directory (chroot: same mounts, another "/") gets the agent either at the
 * same path (if it is visible there) or as a copy in its /tmp made just before injecting, as
 * its own user (agent_copy_into_target), and its fallback file in its /tmp: both need a /tmp
 * directory in the target's view.  (The control socket is an abstract name: no file.) */
static int check_namespace(struct target_info *t, char *err, size_t errlen)
{
    snprintf(t->agent_in_target, sizeof t->agent_in_target, "%s", t->agent);
    if (!t->f.other_mnt_ns) /* (chrooted counts: paths differ exactly as in a namespace) */
        return 0;
    char tmp[64];
    struct stat st;
    snprintf(tmp, sizeof tmp, "/proc/%d/root/tmp", (int)t->f.pid);
    if (lstat(tmp, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen,
                 "pid %d runs in a different mount namespace or root without a /tmp directory "
                 "(needed for the agent's copy and fallback file): run vcattach inside the container",
                 (int)t->f.pid);
        return -1;
    }
    t->agent_needs_copy = !target_same_file(t->f.pid, t->agent);
    return 0;
}

/* The target's state and kind, from the snapshot: not a zombie, not traced, not stopped, not
 * under strict seccomp, CPython of a supported version.  0, or -1 with err. */
static int check_state_and_python(const struct target_facts *f, pid_t held_by, char *err,
                                  size_t errlen)
{
    pid_t pid = f->pid;
    int ours = held_by != 0 && f->tracer == held_by; /* stopped at a system call by us */
    if (f->tracer != 0 && !ours) {
        struct target_facts tf; /* only its comm, for the message */
        char tcomm[64] = "?", unused[128];
        if (target_facts_read(f->tracer, &tf, unused, sizeof unused) == 0)
            snprintf(tcomm, sizeof tcomm, "%s", tf.comm);
        target_facts_release(&tf);
        snprintf(err, errlen,
                 "pid %d (%s) is already being traced by pid %d (%s): detach that debugger or "
                 "tracer first (only one ptrace tracer is possible)",
                 (int)pid, f->comm, (int)f->tracer, tcomm);
        return -1;
    }
    if (f->state == 'T' || (f->state == 't' && !ours)) {
        snprintf(err, errlen,
                 "pid %d (%s) is stopped (state %c, e.g. Ctrl-Z or SIGSTOP): resume it with "
                 "`kill -CONT %d` first (attaching to a stopped process could leave it hung)",
                 (int)pid, f->comm, f->state, (int)pid);
        return -1;
    }
    if (f->seccomp == 1) {
        snprintf(err, errlen,
                 "pid %d (%s) runs under strict seccomp (mode 1): it cannot load an agent; "
                 "nothing can be traced in it",
                 (int)pid, f->comm);
        return -1;
    }
    if (f->python < 0) {
        snprintf(err, errlen, "cannot examine pid %d (%s): %s", (int)pid, f->comm,
                 f->python_why);
        return -1;
    }
    if (f->python == 0) {
        snprintf(err, errlen, "pid %d (%s) is not a CPython process (%s): give the pid of a "
                              "python process",
                 (int)pid, f->comm, f->python_why);
        return -1;
    }
    if (f->py.free_threaded) {
        snprintf(err, errlen,
                 "pid %d runs a free-threaded CPython (%d.%dt), which vcattach does not support "
                 "yet (GIL builds 3.%d to 3.%d only; see docs/free-threading.md)",
                 (int)pid, f->py.major, f->py.minor, PY_OLDEST_MINOR, PY_NEWEST_MINOR);
        return -1;
    }
    if (f->py.trace_refs) {
        snprintf(err, errlen,
                 "pid %d runs a CPython %d.%d built with Py_TRACE_REFS (--with-trace-refs), whose "
                 "object header vcattach's agents do not share: trace a build without it "
                 "(Py_DEBUG alone is fine)",
                 (int)pid, f->py.major, f->py.minor);
        return -1;
    }
    if (f->py.major != 3 || f->py.minor < PY_OLDEST_MINOR || f->py.minor > PY_NEWEST_MINOR) {
        snprintf(err, errlen,
                 "pid %d runs Python %d.%d, which vcattach does not support (3.%d to 3.%d)",
                 (int)pid, f->py.major, f->py.minor, PY_OLDEST_MINOR, PY_NEWEST_MINOR);
        return -1;
    }
    return 0;
}

/* Can an agent load into the target's C library at all?  The glibc agents load into glibc
 * 2.VC_AGENT_GLIBC_FLOOR_MINOR and newer (scripts/glibc-floor); into an older glibc dlopen
 * would fail inside the target after it was stopped.  A musl target is judged by whether a musl
 * agent exists (judge, agent_locate).  A libc that cannot be read is left to the injection,
 * which says what it found.  0, or -1 with err. */
static int check_libc(const struct target_facts *f, char *err, size_t errlen)
{
    pid_t pid = f->pid;
    if (f->libc.kind == TARGET_LIBC_GLIBC && f->libc.glibc_minor >= 0 &&
        f->libc.glibc_minor < VC_AGENT_GLIBC_FLOOR_MINOR) {
        snprintf(err, errlen,
                 "pid %d runs on glibc 2.%d (%s defines no symbol version newer than "
                 "GLIBC_2.%d), older than glibc 2.%d, the oldest vcattach's agents load into: "
                 "trace the service on a newer base image (RHEL/CentOS 7, Debian 8, Ubuntu "
                 "14.04 or later)",
                 (int)pid, f->libc.glibc_minor, f->libc.path, f->libc.glibc_minor,
                 VC_AGENT_GLIBC_FLOOR_MINOR);
        return -1;
    }
    return 0;
}

/* Is a vcattach session running in pid already?  0 no, or -1 with err. */
static int check_no_session(pid_t pid, char *err, size_t errlen)
{
    char status[512], why[512];
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

/* The checks after the snapshot was read, in preflight.h's order.  0, or -1 with err. */
static int judge(struct target_info *t, char *err, size_t errlen)
{
    const struct target_facts *f = &t->f;
    if (f->state == 'Z' || f->state == 'X') {
        snprintf(err, errlen, "pid %d (%s) has exited (zombie): nothing to trace", (int)f->pid,
                 f->comm);
        return -1;
    }
    if (target_ptrace_permitted(f, err, errlen) < 0 ||
        check_state_and_python(f, t->held_by, err, errlen) < 0 || check_libc(f, err, errlen) < 0)
        return -1;
    int musl = f->libc.kind == TARGET_LIBC_MUSL;
    char why[sizeof t->agent + 512];
    if (agent_locate(f->py.major, f->py.minor, f->py.debug, musl, t->agent, sizeof t->agent,
                     why, sizeof why) < 0) {
        if (musl) /* the glibc agent is never the fallback: say what the target runs on */
            snprintf(err, errlen, "pid %d runs on musl libc (Alpine?) (%s); %s", (int)f->pid,
                     f->libc.path, why);
        else
            snprintf(err, errlen, "%s", why);
        return -1;
    }
    if (check_namespace(t, err, errlen) < 0)
        return -1;
    /* A copy made for the target is readable by it; otherwise the original must be. */
    if (agent_check_safe(t->agent, t->agent_needs_copy ? 0 : f->uid[1], err, errlen) < 0)
        return -1;
    return check_no_session(f->pid, err, errlen);
}

int preflight_target(pid_t pid, pid_t held_by, struct target_info *t, char *err,
                     size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->held_by = held_by;
    t->f.pid = pid;
    t->f.pidfd = -1;
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
    if (target_facts_read(pid, &t->f, err, errlen) < 0)
        return -1;
    if (judge(t, err, errlen) < 0) {
        preflight_release(t);
        return -1;
    }
    return 0;
}

void preflight_release(struct target_info *t)
{
    target_facts_release(&t->f);
}

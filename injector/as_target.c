/* as_target.c — a child in the target's filesystem with the target's credentials (see
 * vcinject.h, part 4: the CLI's agent copy and status queries, the injector's remote-exec
 * loader script).
 *
 * Order matters: the target's root and mount namespace are opened while we are still root
 * (/proc/PID/root needs ptrace access), the namespace entered, the root changed, and only then
 * the credentials dropped, groups first (setgroups needs privilege), uid last.  The result
 * comes back on a pipe; the parent waits with a deadline and kills a child that blocks (a
 * FUSE /tmp of the target's user could). */
#include "vcinject.h"
#include "monotonic.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* In the child: enter the target's mount namespace and root.  0 or -1 (why in msg). */
static int enter_filesystem(pid_t pid, char *msg, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/root", (int)pid);
    int root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    snprintf(path, sizeof path, "/proc/%d/ns/mnt", (int)pid);
    int mnt = open(path, O_RDONLY | O_CLOEXEC);
    if (root < 0 || mnt < 0) {
        snprintf(msg, cap, "cannot open the root of pid %d: %s", (int)pid, strerror(errno));
        return -1;
    }
    /* The namespace for its mounts (the same one: EINVAL-free no-op), then its root, which is
     * not the namespace's root when the target runs chrooted. */
    if (setns(mnt, CLONE_NEWNS) < 0 && errno != EPERM) {
        snprintf(msg, cap, "cannot enter the mount namespace of pid %d: %s", (int)pid,
                 strerror(errno));
        return -1;
    }
    if (fchdir(root) < 0 || chroot(".") < 0 || chdir("/") < 0) {
        snprintf(msg, cap, "cannot enter the root of pid %d: %s", (int)pid, strerror(errno));
        return -1;
    }
    close(root);
    close(mnt);
    return 0;
}

/* In the child: become the target's user, in the target's filesystem when enter_fs.  0 or -1
 * (why in msg). */
static int enter_target(pid_t pid, uid_t uid, gid_t gid, int enter_fs, char *msg, size_t cap)
{
    if (enter_fs && enter_filesystem(pid, msg, cap) < 0)
        return -1;
    if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0) {
        snprintf(msg, cap, "cannot take the credentials of pid %d (uid %u): %s", (int)pid,
                 (unsigned)uid, strerror(errno));
        return -1;
    }
    prctl(PR_SET_DUMPABLE, 0); /* nobody ptraces the child to borrow what it holds */
    umask(022);
    return 0;
}

static int run_child(pid_t pid, uid_t uid, gid_t gid, int enter_fs,
                     int (*fn)(void *arg, char *out, size_t cap), void *arg, char *out,
                     size_t outcap, int timeout_ms, char *err, size_t errlen)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "cannot create a pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        snprintf(err, errlen, "cannot fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (child == 0) {
        close(p[0]);
        static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            signal(sigs[i], SIG_DFL);
        char msg[AS_TARGET_OUT_MAX] = "";
        int rc = enter_target(pid, uid, gid, enter_fs, msg, sizeof msg) == 0
                     ? fn(arg, msg, sizeof msg)
                     : 1;
        size_t len = strnlen(msg, sizeof msg);
        if (write(p[1], msg, len) != (ssize_t)len)
            rc = 1;
        _exit(rc ? 1 : 0);
    }
    close(p[1]);
    size_t used = 0;
    char buf[AS_TARGET_OUT_MAX];
    int64_t deadline = vc_monotonic_ms() + timeout_ms;
    int timed_out = 0;
    for (;;) {
        int64_t left = deadline - vc_monotonic_ms();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        int r = poll(&pf, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue; /* the caller's signal flags are checked after us: we are bounded */
        if (r <= 0)
            continue;
        ssize_t n = read(p[0], buf + used, sizeof buf - 1 - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || (used += (size_t)n) == sizeof buf - 1)
            break;
    }
    close(p[0]);
    buf[used] = '\0';
    if (timed_out)
        kill(child, SIGKILL);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    if (timed_out) {
        snprintf(err, errlen, "a helper process as pid %d's user did not finish within %d s",
                 (int)pid, timeout_ms / 1000);
        return -1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err, errlen, "%s", used ? buf : "the helper process failed");
        return -1;
    }
    snprintf(out, outcap, "%s", buf);
    return 0;
}

int as_target_run(pid_t pid, uid_t uid, gid_t gid, int (*fn)(void *arg, char *out, size_t cap),
                  void *arg, char *out, size_t outcap, int timeout_ms, char *err,
                  size_t errlen)
{
    return run_child(pid, uid, gid, 1, fn, arg, out, outcap, timeout_ms, err, errlen);
}

int as_target_user_run(pid_t pid, uid_t uid, gid_t gid,
                       int (*fn)(void *arg, char *out, size_t cap), void *arg, char *out,
                       size_t outcap, int timeout_ms, char *err, size_t errlen)
{
    return run_child(pid, uid, gid, 0, fn, arg, out, outcap, timeout_ms, err, errlen);
}

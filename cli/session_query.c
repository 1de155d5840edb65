/* session_query.c — `status`, `stop` and the preflight asking a running session (see
 * session_query.h): its status socket found by name, past squatters, the listener proven to be
 * the target's own before anything is sent, and the question asked as the target's user when
 * it lives in another user namespace.  The framing is control_client.c's.
 */
#include "session_query.h"
#include "control_client.h"
#include "monotonic.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "vcinject.h"
#include "say.h"


/* Is the peer of the connected fd the live process pid?  SO_PEERPIDFD (Linux 6.5+) names the
 * listener's process itself, not a number: it must still run and have that pid.  Older
 * kernels: SO_PEERCRED's pid must match and pid must hold the listening socket (above).
 * 1 yes, 0 no. */
static int peer_is(int fd, pid_t pid, const char *name)
{
    pid_t peer = 0;
    if (ctl_peer_pid(fd, &peer) < 0 || peer != pid)
        return 0;
    int pidfd = target_peer_pidfd(fd);
    if (pidfd >= 0) {
        pid_t seen = target_pidfd_pid(pidfd);
        close(pidfd);
        return seen == pid;
    }
    if (errno != ENOPROTOOPT && errno != EINVAL)
        return 0; /* e.g. ESRCH: the listener's process is gone */
    return target_holds_listener(pid, name) == 1;
}

/* Connects to the target's own listener on one candidate name.  Returns the connected fd;
 * -2 when nobody there is the target (nobody listens, or a holder that is not the target:
 * warned about and skipped); -1 with err. */
static int connect_name(pid_t pid, const char *name, char *err, size_t errlen)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    if (len + 1 >= sizeof addr.sun_path)
        return -2;
    /* Whose listener it is, before we connect: a squatter that never accepts would hold a
     * blocking connect() until SO_SNDTIMEO (EAGAIN) instead of letting us go on to the other
     * names, and one whose listen() was done by a pid the target got later would pass the
     * SO_PEERCRED check.  Another's name is only connected to without blocking, to name its
     * holder in the warning. */
    int held = target_holds_listener(pid, name);
    if (held < 0)
        return -2; /* nobody listens there */
    memcpy(addr.sun_path + 1, name, len);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (held ? 0 : SOCK_NONBLOCK), 0);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create a socket: %s", strerror(errno));
        return -1;
    }
    /* Bounds connect too: with the agent's backlog full (it is busy writing the trace), a
     * Unix stream connect waits this long, forever without it. */
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&addr, alen) < 0) {
        int e = errno;
        close(fd);
        if (e == ECONNREFUSED || e == ENOENT)
            return -2;
        if (!held) {
            say("vcattach: warning: the session socket name %s is held by another "
                            "process, not by the target %d: ignored\n", name, (int)pid);
            return -2;
        }
        snprintf(err, errlen, "cannot reach the session socket of pid %d: %s", (int)pid,
                 strerror(e));
        return -1;
    }
    if (!held || !peer_is(fd, pid, name)) {
        /* Squatting: any local user may bind a name first.  Not an error: the session (if
         * any) listens on another name then, found by the caller's scan. */
        pid_t peer = 0;
        ctl_peer_pid(fd, &peer);
        close(fd);
        if (peer == pid) /* the listen() was done by an earlier process with the same pid */
            say("vcattach: warning: the session socket name %s is held by another "
                            "process (listening since an earlier pid %d), not by the target: "
                            "ignored\n", name, (int)pid);
        else
            say("vcattach: warning: the session socket name %s is held by pid %d, "
                            "not by the target %d: ignored\n", name, (int)peer, (int)pid);
        return -2;
    }
    return fd;
}

/* Asks the session on one candidate name.  1 answered, 0 nobody there (or a holder that is
 * not the target: warned about and skipped), -1 with err. */
static int query_name(pid_t pid, const char *name, uint32_t request, char *reply, size_t cap,
                      int64_t deadline, char *err, size_t errlen)
{
    int fd = connect_name(pid, name, err, errlen);
    if (fd < 0)
        return fd == -2 ? 0 : -1;
    int rc = -1;
    uint32_t want = request == VC_MSG_STOP ? VC_MSG_END : VC_MSG_STATUS;
    if (vc_msg_send(fd, request, NULL, 0, 2000) < 0) {
        snprintf(err, errlen, "cannot send to the session in pid %d: %s", (int)pid,
                 strerror(errno));
        goto out;
    }
    for (;;) {
        uint32_t type;
        long n = ctl_recv_frame(fd, &type, reply, cap, deadline, NULL);
        if (n < 0) {
            if (errno == ECONNRESET && request == VC_MSG_STATUS) {
                rc = 0; /* the session ended between connect and answer */
                goto out;
            }
            ctl_describe_recv_error(err, errlen,
                                request == VC_MSG_STOP ? "after STOP" : "to STATUS", pid);
            goto out;
        }
        if (type == want) {
            rc = 1;
            goto out;
        }
        if (type == VC_MSG_ERROR) {
            snprintf(err, errlen, "the session in pid %d answered with an error: %s", (int)pid,
                     reply);
            goto out;
        }
    }
out:
    close(fd);
    return rc;
}

/* ctl_query's work, with our own credentials. */
static int query_names(pid_t pid, uint32_t request, char *reply, size_t cap, int timeout_ms,
                       char *err, size_t errlen)
{
    int64_t deadline = vc_monotonic_ms() + timeout_ms;
    char base[64];
    snprintf(base, sizeof base, VC_AGENT_SOCKET_FMT, (int)target_own_pid(pid) /* as the target sees itself: the pid in its name */);
    int r = query_name(pid, base, request, reply, cap, deadline, err, errlen);
    if (r != 0)
        return r;
    /* The well-known name is free or squatted: a session whose name was taken listens on
     * "<name>-<random>" (agent/control.c).  Only the ones whose socket the target holds are
     * tried (the injector's unix_names.c), all of them, until the deadline: any number of names squatted
     * next to it cannot hide the session. */
    unix_name *names = NULL;
    size_t others = 0;
    long n = target_unix_names_held(pid, base, &names, &others);
    if (others)
        say("vcattach: warning: %zu session socket name%s %s-* %s held by other "
                        "processes, not by the target %d: ignored\n", others,
                others == 1 ? "" : "s", base, others == 1 ? "is" : "are", (int)pid);
    for (long i = 0; i < n && r == 0 && vc_monotonic_ms() < deadline; i++)
        r = query_name(pid, names[i], request, reply, cap, deadline, err, errlen);
    free(names);
    return r;
}

/* The target's effective uid and gid as our namespace sees them (from its facts: only asked
 * for a target in another user namespace, so the snapshot's cost is rare). */
static int target_euid(pid_t pid, uid_t *uid, gid_t *gid)
{
    struct target_facts f;
    char err[256];
    if (target_facts_read(pid, &f, err, sizeof err) < 0)
        return -1;
    *uid = f.uid[1];
    *gid = f.gid[1];
    target_facts_release(&f);
    return 0;
}

/* A query run as the target's user (as_target_user_run): "RESULT\nTEXT", TEXT being the
 * reply, or the reason for a result of -1. */
struct query_job {
    pid_t pid;
    uint32_t request;
    int timeout_ms;
};

static int query_in_child(void *arg, char *out, size_t cap)
{
    const struct query_job *q = arg;
    char reply[4096] = "", err[1024] = "";
    int r = query_names(q->pid, q->request, reply, sizeof reply, q->timeout_ms, err, sizeof err);
    snprintf(out, cap, "%d\n%s", r, r < 0 ? err : reply);
    return 0;
}

/* A target in another user namespace (rootless containers, `unshare -U`) sees our uid 0 as
 * the overflow uid (ours is not mapped there), and its agent answers only root or its own
 * user.  So ask as its user: a child (as_target.h) drops to the target's uid and gid as we see
 * them, which the target's namespace maps to the agent's own euid. */
static int query_as_target_user(pid_t pid, uid_t uid, gid_t gid, uint32_t request, char *reply,
                                size_t cap, int timeout_ms, char *err, size_t errlen)
{
    struct query_job q = {.pid = pid, .request = request, .timeout_ms = timeout_ms};
    char out[AS_TARGET_OUT_MAX];
    if (as_target_user_run(pid, uid, gid, query_in_child, &q, out, sizeof out,
                           timeout_ms + 5000, err, errlen) < 0)
        return -1;
    const char *text = strchr(out, '\n');
    text = text ? text + 1 : "";
    int r = atoi(out);
    snprintf(r < 0 ? err : reply, r < 0 ? errlen : cap, "%s", text);
    return r;
}

int ctl_query(pid_t pid, uint32_t request, char *reply, size_t cap, int timeout_ms,
                  char *err, size_t errlen)
{
    uid_t uid;
    gid_t gid;
    if (geteuid() == 0 && target_ns_other(pid, "user") == 1 && target_euid(pid, &uid, &gid) == 0 && uid != 0)
        return query_as_target_user(pid, uid, gid, request, reply, cap, timeout_ms, err,
                                    errlen);
    return query_names(pid, request, reply, cap, timeout_ms, err, errlen);
}

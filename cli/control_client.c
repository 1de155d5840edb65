/* control_client.c — control socket (server) and status socket (client) of the controller;
 * see control_client.h for the protocol and common/protocol.h for the framing.
 *
 * Why this shape (SECURITY.md): the control socket has an abstract name with 128 random bits,
 * made in the target's network namespace, so no file is ever created, chmod'ed, chown'ed or
 * unlinked on the target's behalf (its /tmp is its user's, who could swap a directory for a
 * symlink under root's feet).  The accepted peer must be the target process itself
 * (SO_PEERCRED reports the thread group id of the connecting thread: the target's pid), so no
 * other process can feed us a trace or read the config.  Everything the agent sends is
 * bounded (deadlines per phase, a byte cap) and its text sanitized before it is printed.
 */
#include "control_client.h"
#include "spool.h"
#include "monotonic.h"
#include "term.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "vcinject.h"
#include "say.h"

/* Poll slice while waiting: how quickly a Ctrl-C or a dead target is noticed. */
#define SLICE_MS 100

void ctl_init(struct ctl_conn *s)
{
    memset(s, 0, sizeof *s);
    s->listen_fd = -1;
    s->fd = -1;
}

/* A listening socket on the abstract name (sun_path[0] == 0), created in pid's network
 * namespace: abstract names live per network namespace, and a socket belongs to the one its
 * creator was in.  The thread enters that namespace for the socket() call only and comes back
 * (setns on our own thread: vcattach is single-threaded here).  Returns the fd or -1 (err). */
static int listen_abstract(pid_t pid, const char *name, char *err, size_t errlen)
{
    int own = -1, theirs = -1, fd = -1;
    int other = target_ns_other(pid, "net");
    int same = other == 0;
    if (other < 0) {
        snprintf(err, errlen, "cannot read the network namespace of pid %d: %s", (int)pid,
                 strerror(errno));
        return -1;
    }
    if (!same) {
        own = target_ns_open(0, "net");
        theirs = target_ns_open(pid, "net");
        if (own < 0 || theirs < 0 || setns(theirs, CLONE_NEWNET) < 0) {
            snprintf(err, errlen, "cannot enter the network namespace of pid %d: %s (run "
                                  "vcattach as root, or inside the target's namespaces)",
                     (int)pid, strerror(errno));
            goto out;
        }
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int e = errno;
    if (!same && setns(own, CLONE_NEWNET) < 0) {
        /* We cannot be left in the target's namespace: nothing after this would be safe. */
        say("vcattach: cannot return to our own network namespace: %s\n",
                strerror(errno));
        abort();
    }
    if (fd < 0) {
        snprintf(err, errlen, "cannot create the control socket: %s", strerror(e));
        goto out;
    }
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    memcpy(addr.sun_path + 1, name, n);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    /* A backlog with room: other processes of the namespace can see the name (in
     * /proc/net/unix) and connect; each is turned away at once, the agent still gets in. */
    if (bind(fd, (struct sockaddr *)&addr, alen) < 0 || listen(fd, 64) < 0) {
        snprintf(err, errlen, "cannot listen on the control socket: %s", strerror(errno));
        close(fd);
        fd = -1;
    }
out:
    if (own >= 0)
        close(own);
    if (theirs >= 0)
        close(theirs);
    return fd;
}

int ctl_listen(struct ctl_conn *s, pid_t pid, char *err, size_t errlen)
{
    s->pid = pid;
    /* The name: 128 random bits, fresh per attach.  Nobody can bind it first (squatting
     * needs the name before we bind it), and it is not a file: no directory, nothing in any
     * /tmp (the target's user owns its /tmp and could redirect what root does there), and
     * nothing left behind when vcattach is killed: the name goes with the socket.
     * The token: 128 more random bits, which never appear in /proc/net/unix.  Once this
     * vcattach is gone its name is free, and an agent that connects late (a remote-exec
     * request taken after vcattach was killed, say) could reach whoever bound the name next,
     * e.g. another local user watching /proc/net/unix: the agent starts only for a CONFIG
     * that carries the token. */
    unsigned char rnd[32];
    size_t got = 0;
    while (got < sizeof rnd) {
        ssize_t r = getrandom(rnd + got, sizeof rnd - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(err, errlen, "cannot get random bytes for the control socket's name: %s",
                     strerror(errno));
            return -1;
        }
        got += (size_t)r;
    }
    char name[64];
    int len = snprintf(name, sizeof name, "vcattach-ctl-");
    for (size_t i = 0; i < 16; i++)
        len += snprintf(name + len, sizeof name - (size_t)len, "%02x", rnd[i]);
    for (size_t i = 0; i < 16; i++)
        snprintf(s->token + 2 * i, sizeof s->token - 2 * i, "%02x", rnd[16 + i]);
    s->listen_fd = listen_abstract(pid, name, err, errlen);
    if (s->listen_fd < 0)
        return -1;
    /* What the agent is told: '@' marks an abstract name, '#' starts the token
     * (docs/protocol.md). */
    snprintf(s->target_path, sizeof s->target_path, "@%s#%s", name, s->token);
    return 0;
}

int ctl_peer_pid(int fd, pid_t *pid)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return -1;
    *pid = cred.pid;
    return 0;
}

int ctl_accept(struct ctl_conn *s, int timeout_ms, volatile sig_atomic_t *cancel, char *err,
                   size_t errlen)
{
    int64_t deadline = vc_monotonic_ms() + timeout_ms;
    while (s->fd < 0) {
        if (cancel && *cancel) {
            snprintf(err, errlen, "interrupted while waiting for the agent to connect");
            return -1;
        }
        if (!target_alive(s->pid)) {
            snprintf(err, errlen, "pid %d exited before the agent connected", (int)s->pid);
            return -1;
        }
        int64_t left = deadline - vc_monotonic_ms();
        if (left <= 0) {
            snprintf(err, errlen,
                     "agent did not connect within %d s: it may have failed to load in pid %d "
                     "(see the target's stderr) or be waiting for the GIL",
                     timeout_ms / 1000, (int)s->pid);
            return -1;
        }
        struct pollfd p = {.fd = s->listen_fd, .events = POLLIN};
        int r = poll(&p, 1, left < SLICE_MS ? (int)left : SLICE_MS);
        if (r <= 0)
            continue; /* timeout slice or EINTR: re-check cancel, target, deadline */
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        pid_t peer = 0;
        if (ctl_peer_pid(fd, &peer) < 0 || peer != s->pid) {
            /* Not the target: anyone in its network namespace can see the name and connect. */
            say("vcattach: ignoring a connection from pid %d (expected %d)\n",
                    (int)peer, (int)s->pid);
            close(fd);
            continue;
        }
        s->fd = fd;
    }
    /* Connected: the name is no longer needed; closing the listener removes it. */
    close(s->listen_fd);
    s->listen_fd = -1;
    s->target_path[0] = '\0';
    uint32_t type;
    long n = ctl_recv_frame(s->fd, &type, s->hello, sizeof s->hello, vc_monotonic_ms() + 5000, cancel);
    if (n < 0 || type != VC_MSG_HELLO) {
        snprintf(err, errlen, "agent connected but sent no greeting: %s",
                 n < 0 ? strerror(errno) : "unexpected message");
        return -1;
    }
    return 0;
}

/* Receives one frame before the absolute deadline (vc_monotonic_ms() clock), waiting in slices so
 * that *cancel is honoured; the deadline does not move when frames keep arriving.  Text
 * frames (all but DATA) come back sanitized.  Returns the payload length, or -1 with errno
 * (ECANCELED when cancelled, ETIMEDOUT past the deadline). */
long ctl_recv_frame(int fd, uint32_t *type, void *buf, size_t cap, int64_t deadline,
                    volatile sig_atomic_t *cancel)
{
    for (;;) {
        if (cancel && *cancel) {
            errno = ECANCELED;
            return -1;
        }
        int64_t left = deadline - vc_monotonic_ms();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, left < SLICE_MS ? (int)left : SLICE_MS) <= 0)
            continue;
        left = deadline - vc_monotonic_ms();
        long n = vc_msg_recv(fd, type, buf, cap, (int)(left > 0 ? left : 1));
        if (n >= 0 && *type != VC_MSG_DATA && !spool_frame_type(*type) && cap > 0)
            n = (long)vc_term_sanitize(buf, (size_t)n < cap ? (size_t)n : cap - 1, cap,
                                       VC_TERM_KEEP_NEWLINES); /* printed on root's terminal */
        return n;
    }
}

void ctl_describe_recv_error(char *err, size_t errlen, const char *when, pid_t pid)
{
    if (errno == ECONNRESET && !target_alive(pid))
        snprintf(err, errlen, "target process %d exited %s", (int)pid, when);
    else if (errno == ECONNRESET)
        snprintf(err, errlen, "the agent closed the connection %s", when);
    else if (errno == ETIMEDOUT)
        snprintf(err, errlen, "the agent did not answer %s (timed out)", when);
    else if (errno == ECANCELED)
        snprintf(err, errlen, "interrupted %s", when);
    else
        snprintf(err, errlen, "control socket error %s: %s", when, strerror(errno));
}

int ctl_configure(struct ctl_conn *s, const char *config, char *reply, size_t cap,
                      int timeout_ms, volatile sig_atomic_t *cancel, char *err, size_t errlen)
{
    /* One deadline for the whole phase: an agent sending other frames meanwhile (any number
     * of STATUS answers) must not keep us here. */
    int64_t deadline = vc_monotonic_ms() + timeout_ms;
    size_t used = strlen(config), size = used + sizeof s->token + 16;
    char *full = malloc(size);
    if (full == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(full, config, used + 1);
    int sent = ctl_add_token(s, full, size, &used) == 0 &&
               vc_msg_send(s->fd, VC_MSG_CONFIG, full, used, 5000) == 0;
    free(full);
    if (!sent) {
        ctl_describe_recv_error(err, errlen, "while sending the config", s->pid);
        return -1;
    }
    for (;;) {
        uint32_t type;
        long n = ctl_recv_frame(s->fd, &type, reply, cap, deadline, cancel);
        if (n < 0) {
            ctl_describe_recv_error(err, errlen, "while starting", s->pid);
            return -1;
        }
        if (type == VC_MSG_STARTED)
            return 0;
        if (type == VC_MSG_ERROR) {
            /* Python loaded, not initialized: an embedding host's process that runs none
             * (docs/embedded-hosts.md) — or an interpreter still starting. */
            int uninit = strstr(reply, "not initialized") != NULL;
            snprintf(err, errlen, "the agent refused to start: %s%s", reply,
                     uninit ? ": a host that loads Python without running it (e.g. Apache's "
                              "master under mod_wsgi) has nothing to trace; trace its workers, "
                              "or the whole tree with --subprocesses"
                            : "");
            return -1;
        }
        /* anything else (a STATUS answer) is not for us here */
    }
}

int ctl_add_token(const struct ctl_conn *s, char *config, size_t cap, size_t *used)
{
    return s->token[0] ? vc_kv_append(config, cap, used, "token", s->token) : 0;
}

int ctl_receive(struct ctl_conn *s, ctl_data_fn on_data,
                    void *ctx, char *end_text, size_t cap, const struct receive_limits *lim,
                    volatile sig_atomic_t *cancel, char *err, size_t errlen)
{
    int64_t end_by = vc_monotonic_ms() + lim->total_timeout_ms;
    uint64_t received = 0; /* every frame counts, with its header: a flood of any kind */
    char *buf = malloc(VC_MSG_MAX + 1);
    if (!buf) {
        snprintf(err, errlen, "out of memory for the trace buffer");
        return -1;
    }
    int rc = -1;
    for (;;) {
        uint32_t type;
        int64_t frame_by = vc_monotonic_ms() + lim->frame_timeout_ms;
        long n = ctl_recv_frame(s->fd, &type, buf, VC_MSG_MAX + 1, frame_by < end_by ? frame_by : end_by,
                            cancel);
        if (n < 0 && errno == ETIMEDOUT && vc_monotonic_ms() >= end_by) {
            snprintf(err, errlen, "the agent was still sending after %lld s (--collect-timeout)",
                     (long long)(lim->total_timeout_ms / 1000));
            break;
        }
        if (n < 0) {
            ctl_describe_recv_error(err, errlen, "while sending the trace", s->pid);
            break;
        }
        received += (uint64_t)n + 8;
        if (received > lim->max_bytes) {
            snprintf(err, errlen, "the agent sent more than %llu MiB (--max-trace-mb): "
                                  "transfer stopped",
                     (unsigned long long)(lim->max_bytes >> 20));
            break;
        }
        if (type == VC_MSG_DATA || spool_frame_type(type)) {
            if (on_data(ctx, type, buf, (size_t)n, err, errlen) < 0)
                break;
        } else if (type == VC_MSG_END) {
            snprintf(end_text, cap, "%s", buf);
            rc = 0;
            break;
        } else if (type == VC_MSG_ERROR) {
            snprintf(err, errlen, "the agent failed to emit the trace: %s", buf);
            break;
        }
    }
    free(buf);
    return rc;
}

void ctl_close(struct ctl_conn *s)
{
    if (s->fd >= 0)
        close(s->fd);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    s->fd = s->listen_fd = -1;
}

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

#include <dirent.h>
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

#include "unix_names.h"
#include "vcinject.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

/* Poll slice while waiting: how quickly a Ctrl-C or a dead target is noticed. */
#define SLICE_MS 100

static long recv_frame(int fd, uint32_t *type, void *buf, size_t cap, int64_t deadline,
                       volatile sig_atomic_t *cancel);

void ctl_init(struct ctl_conn *s)
{
    memset(s, 0, sizeof *s);
    s->listen_fd = -1;
    s->fd = -1;
}

/* Same network namespace as ours?  1 yes, 0 no, -1 unknown (errno). */
static int same_net_ns(pid_t pid)
{
    char path[64];
    struct stat a, b;
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    if (stat("/proc/self/ns/net", &a) < 0 || stat(path, &b) < 0)
        return -1;
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* A listening socket on the abstract name (sun_path[0] == 0), created in pid's network
 * namespace: abstract names live per network namespace, and a socket belongs to the one its
 * creator was in.  The thread enters that namespace for the socket() call only and comes back
 * (setns on our own thread: vcattach is single-threaded here).  Returns the fd or -1 (err). */
static int listen_abstract(pid_t pid, const char *name, char *err, size_t errlen)
{
    int own = -1, theirs = -1, fd = -1;
    int same = same_net_ns(pid);
    if (same < 0) {
        snprintf(err, errlen, "cannot read the network namespace of pid %d: %s", (int)pid,
                 strerror(errno));
        return -1;
    }
    if (!same) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
        own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        theirs = open(path, O_RDONLY | O_CLOEXEC);
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
        fprintf(stderr, "vcattach: cannot return to our own network namespace: %s\n",
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

static int peer_pid(int fd, pid_t *pid)
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
        if (peer_pid(fd, &peer) < 0 || peer != s->pid) {
            /* Not the target: anyone in its network namespace can see the name and connect. */
            fprintf(stderr, "vcattach: ignoring a connection from pid %d (expected %d)\n",
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
    long n = recv_frame(s->fd, &type, s->hello, sizeof s->hello, vc_monotonic_ms() + 5000, cancel);
    if (n < 0 || type != VC_MSG_HELLO) {
        snprintf(err, errlen, "agent connected but sent no greeting: %s",
                 n < 0 ? strerror(errno) : "unexpected message");
        return -1;
    }
    return 0;
}

/* Agent text is shown on the operator's (root's) terminal: every control character but '\n'
 * (escape sequences would drive that terminal), C1 controls and bytes that are not UTF-8
 * become '?'.  In place; the text stays NUL-terminated at len. */
void ctl_sanitize(char *t, size_t len)
{
    unsigned char *u = (unsigned char *)t;
    for (size_t i = 0; i < len;) {
        unsigned c = u[i];
        size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                                 : (c & 0xF8) == 0xF0 ? 4 : 0;
        int ok = n > 0 && i + n <= len && !(n == 2 && c < 0xC2);
        for (size_t k = 1; ok && k < n; k++)
            ok = (u[i + k] & 0xC0) == 0x80;
        if (ok && n == 1)
            ok = (c >= 0x20 && c != 0x7f) || c == '\n';
        if (ok && n == 2)
            ok = !(c == 0xC2 && u[i + 1] < 0xA0); /* U+0080..U+009F: the C1 controls */
        if (!ok) {
            u[i++] = '?';
            continue;
        }
        i += n;
    }
    t[len] = '\0';
}

/* Receives one frame before the absolute deadline (vc_monotonic_ms() clock), waiting in slices so
 * that *cancel is honoured; the deadline does not move when frames keep arriving.  Text
 * frames (all but DATA) come back sanitized.  Returns the payload length, or -1 with errno
 * (ECANCELED when cancelled, ETIMEDOUT past the deadline). */
static long recv_frame(int fd, uint32_t *type, void *buf, size_t cap, int64_t deadline,
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
            ctl_sanitize(buf, (size_t)n < cap ? (size_t)n : cap - 1);
        return n;
    }
}

static void describe_recv_error(char *err, size_t errlen, const char *when, pid_t pid)
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
        describe_recv_error(err, errlen, "while sending the config", s->pid);
        return -1;
    }
    for (;;) {
        uint32_t type;
        long n = recv_frame(s->fd, &type, reply, cap, deadline, cancel);
        if (n < 0) {
            describe_recv_error(err, errlen, "while starting", s->pid);
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
        long n = recv_frame(s->fd, &type, buf, VC_MSG_MAX + 1, frame_by < end_by ? frame_by : end_by,
                            cancel);
        if (n < 0 && errno == ETIMEDOUT && vc_monotonic_ms() >= end_by) {
            snprintf(err, errlen, "the agent was still sending after %lld s (--collect-timeout)",
                     (long long)(lim->total_timeout_ms / 1000));
            break;
        }
        if (n < 0) {
            describe_recv_error(err, errlen, "while sending the trace", s->pid);
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

/* The target's pid as the target itself sees it (the last NSpid field: it differs from ours
 * inside a pid namespace), which is the pid the agent puts in its socket's name. */
static pid_t own_view_pid(pid_t pid)
{
    return target_own_pid(pid);
}

/* Does pid hold the socket listening on the abstract name?  SO_PEERCRED cannot say: a
 * listening socket keeps the pid of whoever called listen(), which may have exited (handing
 * the socket to another process) and been reused by the target since.  So: the inodes of the
 * sockets listening on "@name" in /proc/net/unix (__SO_ACCEPTCON in Flags; accepted sockets
 * carry the name too, and there may be several lines), one of which /proc/PID/fd must link
 * to ("socket:[INODE]").  1 yes, 0 no (or unreadable: not proven), -1 nobody listens. */
static int holds_listener(pid_t pid, const char *name)
{
    unsigned long inodes[8];
    int n = 0;
    FILE *f = fopen("/proc/net/unix", "re");
    if (!f)
        return 0;
    char line[512];
    size_t len = strlen(name);
    while (n < 8 && fgets(line, sizeof line, f)) {
        unsigned long flags = 0, inode = 0;
        unsigned type = 0, st = 0;
        int at = 0;
        /* Num RefCount Protocol Flags Type St Inode Path */
        if (sscanf(line, "%*s %*s %*s %lx %x %x %lu %n", &flags, &type, &st, &inode, &at) < 4 ||
            at <= 0 || !(flags & 0x10000))
            continue;
        const char *path = line + at;
        if (path[0] == '@' && strncmp(path + 1, name, len) == 0 &&
            (path[1 + len] == '\n' || path[1 + len] == '\0'))
            inodes[n++] = inode;
    }
    fclose(f);
    if (n == 0)
        return -1;
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return 0;
    }
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        char link[64];
        ssize_t l = readlinkat(dfd, e->d_name, link, sizeof link - 1);
        unsigned long ino;
        if (l <= 0)
            continue;
        link[l] = '\0';
        if (sscanf(link, "socket:[%lu]", &ino) != 1)
            continue;
        for (int i = 0; i < n && !found; i++)
            found = inodes[i] == ino;
    }
    closedir(d);
    return found;
}

/* Is the peer of the connected fd the live process pid?  SO_PEERPIDFD (Linux 6.5+) names the
 * listener's process itself, not a number: it must still run and have that pid.  Older
 * kernels: SO_PEERCRED's pid must match and pid must hold the listening socket (above).
 * 1 yes, 0 no. */
static int peer_is(int fd, pid_t pid, const char *name)
{
    pid_t peer = 0;
    if (peer_pid(fd, &peer) < 0 || peer != pid)
        return 0;
    int pidfd = -1;
    socklen_t len = sizeof pidfd;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0) {
        char path[64], line[128];
        long seen = -1;
        snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
        FILE *f = fopen(path, "re");
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "Pid: %ld", &seen) == 1)
                break;
        if (f)
            fclose(f);
        int alive = syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0;
        close(pidfd);
        return alive && seen == (long)pid;
    }
    if (errno != ENOPROTOOPT && errno != EINVAL)
        return 0; /* e.g. ESRCH: the listener's process is gone */
    return holds_listener(pid, name) == 1;
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
    int held = holds_listener(pid, name);
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
            fprintf(stderr, "vcattach: warning: the session socket name %s is held by another "
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
        peer_pid(fd, &peer);
        close(fd);
        if (peer == pid) /* the listen() was done by an earlier process with the same pid */
            fprintf(stderr, "vcattach: warning: the session socket name %s is held by another "
                            "process (listening since an earlier pid %d), not by the target: "
                            "ignored\n", name, (int)pid);
        else
            fprintf(stderr, "vcattach: warning: the session socket name %s is held by pid %d, "
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
        long n = recv_frame(fd, &type, reply, cap, deadline, NULL);
        if (n < 0) {
            if (errno == ECONNRESET && request == VC_MSG_STATUS) {
                rc = 0; /* the session ended between connect and answer */
                goto out;
            }
            describe_recv_error(err, errlen,
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
    snprintf(base, sizeof base, VC_AGENT_SOCKET_FMT, (int)own_view_pid(pid));
    int r = query_name(pid, base, request, reply, cap, deadline, err, errlen);
    if (r != 0)
        return r;
    /* The well-known name is free or squatted: a session whose name was taken listens on
     * "<name>-<random>" (agent/control.c).  Only the ones whose socket the target holds are
     * tried (unix_names.c), all of them, until the deadline: any number of names squatted
     * next to it cannot hide the session. */
    unix_name *names = NULL;
    size_t others = 0;
    long n = unix_names_held(pid, base, &names, &others);
    if (others)
        fprintf(stderr, "vcattach: warning: %zu session socket name%s %s-* %s held by other "
                        "processes, not by the target %d: ignored\n", others,
                others == 1 ? "" : "s", base, others == 1 ? "is" : "are", (int)pid);
    for (long i = 0; i < n && r == 0 && vc_monotonic_ms() < deadline; i++)
        r = query_name(pid, names[i], request, reply, cap, deadline, err, errlen);
    free(names);
    return r;
}

/* 1 when pid lives in another user namespace than ours, 0 when in ours or unknown. */
static int other_user_ns(pid_t pid)
{
    char path[64];
    struct stat mine, theirs;
    snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
    if (stat(path, &theirs) < 0 || stat("/proc/self/ns/user", &mine) < 0)
        return 0;
    return mine.st_ino != theirs.st_ino || mine.st_dev != theirs.st_dev;
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
    if (geteuid() == 0 && other_user_ns(pid) && target_euid(pid, &uid, &gid) == 0 && uid != 0)
        return query_as_target_user(pid, uid, gid, request, reply, cap, timeout_ms, err,
                                    errlen);
    return query_names(pid, request, reply, cap, timeout_ms, err, errlen);
}

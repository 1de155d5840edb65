/* trace_sink.c — where the CLI's outputs go (`trace`, `convert`, process trees): a file
 * through common/atomic_file.c (the writer the agent uses too), or a Unix socket (see
 * trace_sink.h).  What is the CLI's own: the early checks of OUT before the target is touched,
 * the socket, and removing OUT.tmp on a fatal signal. */
#include "trace_sink.h"
#include "fd_io.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* How long a socket listener may stall the transfer before we give up on it. */
#define SOCKET_STALL_MS 30000

/* The OUT.tmp a fatal signal must remove (sink_remove_on_signal): a copy, so that the handler
 * reads nothing that the main flow may be changing. */
static char signal_tmp[sizeof ((struct trace_sink *)0)->file.tmp];
static volatile sig_atomic_t signal_tmp_live;

static void on_fatal_signal(int sig)
{
    if (signal_tmp_live)
        unlink(signal_tmp);
    signal(sig, SIG_DFL);
    raise(sig);
}

void sink_remove_on_signal(struct trace_sink *k)
{
    if (k->is_socket || !k->file.tmp_ours)
        return;
    signal_tmp_live = 0;
    snprintf(signal_tmp, sizeof signal_tmp, "%s", k->file.tmp);
    signal_tmp_live = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
}

/* OUT.tmp is no longer ours to remove: renamed, removed, or kept on purpose. */
static void forget_tmp(void)
{
    signal_tmp_live = 0;
}

int sink_absolute_path(const char *out, char *abs, size_t cap, char *err, size_t errlen)
{
    char dir[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(out, '/');
    const char *base = slash ? slash + 1 : out;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
        snprintf(err, errlen, "output '%s' names a directory: give a file name, like %s/trace.cvf",
                 out, out);
        return -1;
    }
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == out)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - out), out);
    if (!realpath(dir, real)) {
        snprintf(err, errlen, "cannot write %s: directory %s %s; create it or choose another -o",
                 out, dir, errno == ENOENT ? "does not exist" : strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "cannot write %s: %s is not a directory", out, dir);
        return -1;
    }
    if ((size_t)snprintf(abs, cap, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base) >= cap ||
        strlen(abs) + 16 >= cap) {
        snprintf(err, errlen, "output path too long: %s", out);
        return -1;
    }
    return 0;
}

/* OUT must not exist (unless force) and must not be a directory. */
static int check_existing(const char *abs, int force, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(abs, &st) < 0)
        return 0;
    if (S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "output %s is a directory: give a file name inside it", abs);
        errno = EISDIR;
        return -1;
    }
    if (!force) {
        snprintf(err, errlen, "output %s already exists: choose another name with -o, or pass "
                              "--force to replace it",
                 abs);
        errno = EEXIST;
        return -1;
    }
    return 0;
}

int sink_open_file(struct trace_sink *k, const char *out, int force, char *err, size_t errlen)
{
    memset(k, 0, sizeof *k);
    vc_atomic_init(&k->file);
    k->fd = -1;
    k->force = force;
    if (sink_absolute_path(out, k->path, sizeof k->path, err, errlen) < 0 ||
        check_existing(k->path, force, err, errlen) < 0)
        return -1;
    /* 0644: the operator's file, readable like any other output. */
    int rc = vc_atomic_open(&k->file, k->path, 0644, force ? VC_ATOMIC_FORCE : 0, err, errlen);
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    k->fd = k->file.fd;
    return 0;
}

int sink_open_socket(struct trace_sink *k, const char *path, char *err, size_t errlen)
{
    memset(k, 0, sizeof *k);
    vc_atomic_init(&k->file);
    k->is_socket = 1;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (!*path || strlen(path) >= sizeof addr.sun_path) {
        snprintf(err, errlen, "bad socket path '%s': give unix:/path (at most %zu bytes)", path,
                 sizeof addr.sun_path - 1);
        k->fd = -1;
        return -1;
    }
    snprintf(k->path, sizeof k->path, "%s", path);
    memcpy(addr.sun_path, path, strlen(path) + 1);
    k->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (k->fd < 0 || connect(k->fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        snprintf(err, errlen, "cannot connect to unix:%s: %s; start the listener first", path,
                 strerror(errno));
        if (k->fd >= 0)
            close(k->fd);
        k->fd = -1;
        return -1;
    }
    return 0;
}

static int write_socket(int fd, const char *p, size_t len)
{
    while (len > 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int r = poll(&pfd, 1, SOCKET_STALL_MS);
        if (r == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int sink_write(void *ctx, const void *buf, size_t len, char *err, size_t errlen)
{
    struct trace_sink *k = ctx;
    int rc = k->is_socket ? write_socket(k->fd, buf, len) : vc_write_all(k->fd, buf, len);
    if (rc < 0) {
        snprintf(err, errlen, "cannot write the trace to %s%s: %s", k->is_socket ? "unix:" : "",
                 k->is_socket ? k->path : k->file.tmp, strerror(errno));
        return -1;
    }
    k->bytes += len;
    return 0;
}

int sink_commit(struct trace_sink *k, char *err, size_t errlen)
{
    if (k->is_socket) {
        shutdown(k->fd, SHUT_WR);
        close(k->fd);
        k->fd = -1;
        return 0;
    }
    k->fd = -1; /* the writer's fd: closed by the commit */
    int rc = vc_atomic_commit(&k->file, err, errlen);
    if (rc < 0 && !k->file.kept)
        vc_atomic_abort(&k->file); /* not on disk: nothing worth keeping */
    forget_tmp();
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    return 0;
}

void sink_abort(struct trace_sink *k)
{
    if (k->is_socket) {
        if (k->fd >= 0) {
            /* Reset rather than close: the listener must not take a cut stream for a whole one. */
            struct linger reset = {.l_onoff = 1, .l_linger = 0};
            setsockopt(k->fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
            close(k->fd);
        }
    } else {
        vc_atomic_abort(&k->file); /* closes k->fd, its fd */
    }
    k->fd = -1;
    forget_tmp();
}

int sink_check_remote_file(const char *out, uid_t target_uid, int force, char *abs, size_t cap,
                           char *err, size_t errlen)
{
    if (sink_absolute_path(out, abs, cap, err, errlen) < 0 ||
        check_existing(abs, force, err, errlen) < 0)
        return -1;
    char dir[PATH_MAX];
    vc_atomic_dirname(abs, dir, sizeof dir);
    struct stat st;
    if (stat(dir, &st) < 0) {
        snprintf(err, errlen, "cannot check %s: %s", dir, strerror(errno));
        return -1;
    }
    /* The agent writes as the target's user; group membership is not resolved (owner or
     * others only), root writes anywhere. */
    int writable = target_uid == 0 || (st.st_uid == target_uid && (st.st_mode & S_IWUSR)) ||
                   (st.st_mode & S_IWOTH);
    if (!writable) {
        snprintf(err, errlen,
                 "the target's user (uid %u) cannot write in %s, and with `start` the target "
                 "writes the trace itself: choose a directory it can write to with -o",
                 (unsigned)target_uid, dir);
        return -1;
    }
    return 0;
}

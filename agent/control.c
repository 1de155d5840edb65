/* control.c — the agent's side of the control channel (common/protocol.h) and of the
 * abstract status socket that later `vcattach status|stop` connect to.
 *
 * Runs on the agent thread, and while tracing on a socket thread of its own (below), never
 * with the GIL held; every blocking step is bounded.  It reads the session (session.h) and the
 * life cycle (lifecycle.h) and calls nothing in agent.c: poll results go back to the agent
 * thread as stop reasons.
 */
#include "control.h"
#include "channel.h"
#include "backend.h"
#include "emit.h"
#include "lifecycle.h"
#include "session.h"
#include "protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define VC_AGENT_VERSION "0.1"
#define VC_CONNECT_TIMEOUT_MS 5000
#define VC_CONFIG_TIMEOUT_MS 10000
#define VC_SEND_TIMEOUT_MS 10000
#define VC_STATUS_RECV_TIMEOUT_MS 1000
#define VC_FIRST_SEND_MS 50

/* Connects to the controller's socket: "@name" is an abstract name (what vcattach uses: no
 * file anywhere, see SECURITY.md; a '#' after the name starts the session's token, not part
 * of the name), anything else a path.  A full backlog (EAGAIN: other
 * processes may be connecting to a name they saw in /proc/net/unix, and are turned away) is
 * retried until timeout_ms. */
static int connect_unix(const char *path, int timeout_ms)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    socklen_t alen = sizeof addr;
    size_t n = path[0] == '@' ? strcspn(path, "#") : strlen(path);
    if (n >= sizeof addr.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (path[0] == '@') {
        memcpy(addr.sun_path + 1, path + 1, n - 1);
        alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    } else {
        memcpy(addr.sun_path, path, n + 1);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    for (int waited = 0;; waited += 20) {
        if (connect(fd, (struct sockaddr *)&addr, alen) == 0)
            return fd;
        if (errno == EAGAIN && waited < timeout_ms) {
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (errno != EINPROGRESS) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t len = sizeof err;
        if (poll(&p, 1, timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err) {
            close(fd);
            errno = err ? err : ETIMEDOUT;
            return -1;
        }
        return fd;
    }
}

/* The token after '#' in an abstract control path ("" when there is none: a controller of
 * our own making, e.g. the tests' or an older vcattach's, is not asked for one). */
static const char *control_token(const vc_session *s)
{
    const char *hash = s->control_path[0] == '@' ? strchr(s->control_path, '#') : NULL;
    return hash ? hash + 1 : "";
}

/* Does CONFIG carry the token we were given?  Compared in constant time: whoever is at the
 * other end learns nothing from how fast a wrong guess is turned down. */
static int token_matches(const char *expected, const char *got)
{
    size_t n = strlen(expected);
    if (strlen(got) != n)
        return 0;
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(expected[i] ^ got[i]);
    return diff == 0;
}

/* A fork child's session goes on with its parent's hooks, filters and window size (follow.c):
 * its hooks read them at this very moment, so CONFIG may only say where the trace goes
 * (control: the same controller), its fallback, its deadline, and a smaller window. */
static int continued_config(vc_session *s, const char *cfg, char *err, size_t errlen)
{
    char val[64];
    if (strcmp(s->output, "control") != 0) {
        snprintf(err, errlen, "a fork child's session sends its trace to the controller only");
        return -EINVAL;
    }
    if (vc_kv_get(cfg, "fallback", s->fallback, sizeof s->fallback) < 0)
        s->fallback[0] = '\0';
    if (vc_kv_get(cfg, "duration_ms", val, sizeof val) > 0)
        s->duration_ms = strtoull(val, NULL, 10);
    if (vc_kv_get(cfg, "buffer_mb", val, sizeof val) > 0)
        vc_pool_shrink(&s->pool, (uint32_t)strtoul(val, NULL, 10));
    return 0;
}

int vc_control_hello(vc_session *s, int timeout_ms, char *err, size_t errlen)
{
    if (s->hello_sent)
        return 0;
    int fd = connect_unix(s->control_path, timeout_ms);
    if (fd < 0) {
        snprintf(err, errlen, "cannot connect to the control socket %.*s: %s",
                 (int)strcspn(s->control_path, "#"), s->control_path, strerror(errno));
        return -errno;
    }
    s->control_fd = fd;
    char text[512];
    size_t used = 0;
    char num[32];
    text[0] = '\0';
    snprintf(num, sizeof num, "%d", (int)getpid());
    vc_kv_append(text, sizeof text, &used, "pid", num);
    vc_kv_append(text, sizeof text, &used, "python", vc_compat_python_version());
    vc_kv_append(text, sizeof text, &used, "agent", VC_AGENT_VERSION);
    if (s->continued) /* a fork child, tracing since its fork (follow.c) */
        vc_kv_append(text, sizeof text, &used, "forked", "1");
    /* Its window goes along when it has one already (a fork child's): vcattach can then read
     * its records even if the process ends before STARTED. */
    int window = vc_pool_window_fd(&s->pool);
    s->window_passed = window >= 0;
    /* a new connection's buffer takes a small frame at once: a bound, never a wait */
    if (vc_msg_send_fd(fd, VC_MSG_HELLO, text, used, window,
                       timeout_ms > 0 ? timeout_ms : VC_FIRST_SEND_MS) != 0) {
        snprintf(err, errlen, "sending HELLO failed: %s", strerror(errno));
        s->window_passed = 0;
        vc_channel_close(s);
        return -EPIPE;
    }
    s->hello_sent = 1;
    return 0;
}

/* A new session's CONFIG (not a fork child continuing its parent's): every key the controller
 * may send, each optional but hook's and the filters' refusing what they do not know. */
static int fresh_config(vc_session *s, const char *cfg, char *err, size_t errlen)
{
    char val[VC_PATH_MAX];
    int rc = 0;
    if (vc_kv_get(cfg, "fallback", s->fallback, sizeof s->fallback) < 0)
        s->fallback[0] = '\0';
    if (vc_kv_get(cfg, "duration_ms", val, sizeof val) > 0)
        s->duration_ms = strtoull(val, NULL, 10);
    if (vc_kv_get(cfg, "buffer_mb", val, sizeof val) > 0) {
        unsigned long mb = strtoul(val, NULL, 10);
        s->buffer_mb = mb ? (uint32_t)mb : 256;
    }
    if (vc_kv_get(cfg, "hook", val, sizeof val) > 0) {
        if (strcmp(val, "profile") == 0)
            s->hook_kind = VC_HOOK_PROFILE;
        else if (strcmp(val, "monitoring") == 0)
            s->hook_kind = VC_HOOK_MONITORING;
        else if (strcmp(val, "eval") == 0)
            s->hook_kind = VC_HOOK_EVAL;
        else if (strcmp(val, "auto") == 0)
            s->hook_kind = VC_HOOK_AUTO;
        else {
            snprintf(err, errlen, "unknown hook=%s (auto, profile, monitoring or eval)", val);
            rc = -EINVAL;
        }
    }
    if (rc == 0 && vc_filter_from_kv(&s->filter, cfg, err, errlen) != 0)
        rc = -EINVAL;
    if (vc_kv_get(cfg, "null_hook", val, sizeof val) > 0)
        s->null_hook = strcmp(val, "1") == 0;
    if (vc_kv_get(cfg, "detach", val, sizeof val) > 0)
        s->detach = strcmp(val, "1") == 0;
    if (vc_kv_get(cfg, "follow_forks", val, sizeof val) > 0)
        s->follow_forks = strcmp(val, "1") == 0;
    /* stream=1 (vcattach trace): records go to the controller while tracing (stream.c) */
    if (vc_kv_get(cfg, "stream", val, sizeof val) > 0)
        s->stream = strcmp(val, "1") == 0;
    /* tasks=0 (--no-tasks): asyncio task steps are not marked (tasks.h) */
    if (vc_kv_get(cfg, "tasks", val, sizeof val) > 0)
        s->no_tasks = strcmp(val, "0") == 0;
    /* last_ms=N (vcattach start --last): its own spool keeps the final N ms (stream.c) */
    if (vc_kv_get(cfg, "last_ms", val, sizeof val) > 0)
        s->last_ns = strtoull(val, NULL, 10) * 1000000ull;
    /* init_wait_ms=N (a young process of a tree): an interpreter not initialized yet is
     * waited for, at most N ms (agent.c), rather than refused */
    if (vc_kv_get(cfg, "init_wait_ms", val, sizeof val) > 0) {
        unsigned long ms = strtoul(val, NULL, 10);
        s->init_wait_ms = ms > 10000 ? 10000 : (uint32_t)ms;
    }
    /* force=1 (vcattach start --force): the output may replace an existing file. */
    if (vc_kv_get(cfg, "force", val, sizeof val) > 0)
        s->force = strcmp(val, "1") == 0;
    return rc;
}

int vc_control_handshake(vc_session *s, char *err, size_t errlen)
{
    int rc = vc_control_hello(s, VC_CONNECT_TIMEOUT_MS, err, errlen);
    if (rc != 0)
        return rc;
    int fd = s->control_fd;
    char *cfg = malloc(VC_MSG_MAX + 1);
    if (cfg == NULL) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    uint32_t type = 0;
    long n = vc_msg_recv(fd, &type, cfg, VC_MSG_MAX + 1, VC_CONFIG_TIMEOUT_MS);
    char val[VC_PATH_MAX];
    if (n < 0) {
        snprintf(err, errlen, "no CONFIG from the controller: %s", strerror(errno));
        rc = -EPROTO;
    } else if (type != VC_MSG_CONFIG) {
        snprintf(err, errlen, "expected CONFIG, got message type %u", type);
        rc = -EPROTO;
    } else if (control_token(s)[0] != '\0' &&
               (vc_kv_get(cfg, "token", val, sizeof val) <= 0 ||
                !token_matches(control_token(s), val))) {
        /* Not the vcattach that loaded us: its name was free and someone else bound it. */
        snprintf(err, errlen, "the controller's CONFIG lacks this session's token: not the "
                              "vcattach that loaded the agent; nothing started");
        rc = -EACCES;
    } else if (vc_kv_get(cfg, "output", s->output, sizeof s->output) <= 0) {
        snprintf(err, errlen, "CONFIG has no output");
        rc = -EINVAL;
    } else if (s->continued) {
        rc = continued_config(s, cfg, err, errlen);
    } else {
        rc = fresh_config(s, cfg, err, errlen);
    }
    free(cfg);
    return rc;
}

static void send_text(int fd, uint32_t type, const char *text)
{
    if (fd >= 0 && vc_msg_send(fd, type, text, strlen(text), VC_SEND_TIMEOUT_MS) != 0)
        (void)0; /* the peer is gone: nothing else to do */
}

void vc_control_send_error(vc_session *s, const char *msg)
{
    send_text(s->control_fd, VC_MSG_ERROR, msg);
}

void vc_control_send_started(vc_session *s)
{
    if (s->control_fd < 0)
        return;
    char text[256];
    snprintf(text, sizeof text, "threads=%u\nbackend=%s\n", s->nthreads,
             s->backend != NULL ? s->backend->name : "profile");
    /* The window (its records, should the process end without sending them), unless HELLO
     * took it already. */
    int window = s->window_passed ? -1 : vc_pool_window_fd(&s->pool);
    s->window_passed |= window >= 0;
    if (vc_msg_send_fd(s->control_fd, VC_MSG_STARTED, text, strlen(text), window,
                       VC_SEND_TIMEOUT_MS) != 0)
        (void)0; /* the controller is gone: its EOF ends the session */
    if (s->detach) {
        /* The controller goes away now; the session runs to its deadline on its own. */
        close(s->control_fd);
        s->control_fd = -1;
    }
}

static void status_text(vc_session *s, char *text, size_t cap)
{
    uint64_t el = vc_session_elapsed_ms(s);
    uint64_t remaining = s->duration_ms ? (s->duration_ms > el ? s->duration_ms - el : 0) : 0;
    int st = vc_life_state();
    /* How much of the buffer the hooks have taken so far (chunks handed out at least once,
     * read without the GIL: an atomic counter) and its size: `vcattach trace` turns them
     * into a call rate and warns when the buffer will fill before the deadline. */
    unsigned long long used = __atomic_load_n(&s->pool.carved, __ATOMIC_RELAXED);
    snprintf(text, cap, "state=%s\nelapsed_ms=%llu\nremaining_ms=%llu\nthreads=%u\noutput=%s\npid=%d\n"
                        "buffer_chunks_used=%llu\nbuffer_chunks=%llu\nbuffer_mb=%u\n",
             st == VC_RUNNING ? "running" : st == VC_STOPPING ? "stopping" : "starting",
             (unsigned long long)el, (unsigned long long)remaining, s->nthreads, s->output,
             (int)getpid(), used, (unsigned long long)s->pool.nchunks, s->buffer_mb);
}

/* Binds and listens on the abstract `name`: the fd, or -1 with errno. */
static int listen_abstract(const char *name)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    if (len + 1 >= sizeof addr.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(addr.sun_path + 1, name, len);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
    if (bind(fd, (struct sockaddr *)&addr, alen) != 0 || listen(fd, 4) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

void vc_status_open(vc_session *s)
{
    char name[96];
    snprintf(name, sizeof name, VC_AGENT_SOCKET_FMT, (int)getpid());
    int fd = listen_abstract(name);
    /* Taken: any local user can bind our well-known name first (squatting).  Then the
     * session listens on the name with a random suffix, which `vcattach status|stop` find in
     * /proc/net/unix (control_client.c checks every candidate's peer pid). */
    for (int tries = 0; fd < 0 && errno == EADDRINUSE && tries < 4; tries++) {
        unsigned char rnd[8];
        if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
            break;
        size_t n = strlen(name);
        if (tries == 0)
            name[n++] = '-';
        else
            n = strrchr(name, '-') - name + 1;
        for (size_t i = 0; i < sizeof rnd; i++)
            n += (size_t)snprintf(name + n, sizeof name - n, "%02x", rnd[i]);
        fd = listen_abstract(name);
    }
    if (fd >= 0) /* else no permission, or out of names: status is optional */
        s->status_fd = fd;
}

void vc_status_close(vc_session *s)
{
    if (s->status_fd >= 0)
        close(s->status_fd);
    if (s->status_client_fd >= 0)
        close(s->status_client_fd);
    s->status_fd = s->status_client_fd = -1;
}

/* One client of the status socket: uid check, one request, one answer. */
static int serve_status_client(vc_session *s)
{
    int fd = accept4(s->status_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return VC_STOP_NONE;
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        (cred.uid != 0 && cred.uid != geteuid())) {
        close(fd);
        return VC_STOP_NONE;
    }
    char buf[256];
    uint32_t type = 0;
    long n = vc_msg_recv(fd, &type, buf, sizeof buf, VC_STATUS_RECV_TIMEOUT_MS);
    if (n < 0) {
        close(fd);
        return VC_STOP_NONE;
    }
    if (type == VC_MSG_STATUS) {
        char text[VC_PATH_MAX + 256];
        status_text(s, text, sizeof text);
        send_text(fd, VC_MSG_STATUS, text);
        close(fd);
        return VC_STOP_NONE;
    }
    if (type == VC_MSG_STOP) {
        if (s->status_client_fd >= 0)
            close(s->status_client_fd);
        s->status_client_fd = fd; /* answered with END once the trace is written */
        return VC_STOP_STATUS;
    }
    send_text(fd, VC_MSG_ERROR, "expected STATUS or STOP");
    close(fd);
    return VC_STOP_NONE;
}

int vc_control_poll(vc_session *s, int timeout_ms, unsigned what)
{
    struct pollfd p[3];
    int n = 0, iw = -1, ic = -1, is = -1;
    int wake = (what & VC_POLL_WAKE) ? vc_life_wake_fd() : -1;
    if (wake >= 0)
        iw = n, p[n++] = (struct pollfd){.fd = wake, .events = POLLIN};
    if ((what & VC_POLL_SOCKETS) && s->control_fd >= 0)
        ic = n, p[n++] = (struct pollfd){.fd = s->control_fd, .events = POLLIN};
    if ((what & VC_POLL_SOCKETS) && s->status_fd >= 0)
        is = n, p[n++] = (struct pollfd){.fd = s->status_fd, .events = POLLIN};
    int r = poll(p, (nfds_t)n, timeout_ms < 0 ? 0 : timeout_ms);
    if (r <= 0)
        return VC_STOP_NONE;
    if (iw >= 0 && (p[iw].revents & POLLIN)) {
        char drain[64];
        while (read(p[iw].fd, drain, sizeof drain) > 0)
            ;
    }
    if (ic >= 0 && p[ic].revents) {
        char buf[512];
        uint32_t type = 0;
        long m = vc_msg_recv(s->control_fd, &type, buf, sizeof buf, 1000);
        if (m < 0) {
            if (errno == ETIMEDOUT)
                return VC_STOP_NONE;
            vc_channel_close(s);
            /* Without `detach`, the controller's exit ends the session (to the fallback). */
            return s->detach ? VC_STOP_NONE : VC_STOP_CONTROL_EOF;
        }
        if (type == VC_MSG_STOP)
            return VC_STOP_CONTROL;
        if (type == VC_MSG_STATUS) {
            char text[VC_PATH_MAX + 256];
            status_text(s, text, sizeof text);
            vc_channel_send(s, VC_MSG_STATUS, text, strlen(text), VC_SEND_TIMEOUT_MS);
        }
    }
    if (is >= 0 && (p[is].revents & POLLIN))
        return serve_status_client(s);
    return VC_STOP_NONE;
}

/* ---- the socket thread ----
 * While tracing, the sockets are served by a thread of their own that never touches Python.
 * The agent thread visits the GIL every tick, and on a busy or loaded target that visit can
 * wait for seconds (every thread of the target wants the GIL as much); STATUS, STOP and the
 * controller must be answered meanwhile (a `vcattach status` unanswered in 2 s reports no
 * session, and the buffer warning of `vcattach trace` never comes).  The agent thread still
 * owns every stop: this thread only records the reason (vc_life_request_stop, which wakes the
 * agent thread) and goes on answering STATUS until vc_control_serve_stop.  Its signals are
 * blocked (inherited from the agent thread); a fork child has no such thread, and forgets it. */
#define VC_SERVE_SLICE_MS 50

static pthread_t g_server;
static int g_server_on, g_server_quit;

static void *serve_sockets(void *arg)
{
    vc_session *s = arg;
    while (!__atomic_load_n(&g_server_quit, __ATOMIC_ACQUIRE)) {
        int r = vc_control_poll(s, VC_SERVE_SLICE_MS, VC_POLL_SOCKETS);
        if (r != VC_STOP_NONE)
            vc_life_request_stop(r);
    }
    return NULL;
}

static void forget_server_in_child(void)
{
    g_server_on = 0;
}

int vc_control_serve_start(vc_session *s)
{
    static int atfork_done;
    if (!atfork_done && pthread_atfork(NULL, NULL, forget_server_in_child) == 0)
        atfork_done = 1;
    if (!atfork_done || g_server_on)
        return -1;
    __atomic_store_n(&g_server_quit, 0, __ATOMIC_RELEASE);
    g_server_on = pthread_create(&g_server, NULL, serve_sockets, s) == 0;
    return g_server_on ? 0 : -1;
}

void vc_control_serve_stop(void)
{
    if (!g_server_on)
        return;
    __atomic_store_n(&g_server_quit, 1, __ATOMIC_RELEASE);
    pthread_join(g_server, NULL);
    g_server_on = 0;
}

/* ---- trace as DATA frames ---- */

typedef struct data_sink {
    int fd;
    size_t used;
    unsigned char buf[256 * 1024];
} data_sink;

static int data_flush(data_sink *d)
{
    if (d->used == 0)
        return 0;
    if (vc_msg_send(d->fd, VC_MSG_DATA, d->buf, d->used, VC_SEND_TIMEOUT_MS) != 0)
        return -1;
    d->used = 0;
    return 0;
}

static int data_write(void *ctx, const void *data, size_t len)
{
    data_sink *d = ctx;
    const unsigned char *p = data;
    while (len > 0) {
        size_t room = sizeof d->buf - d->used;
        size_t k = len < room ? len : room;
        memcpy(d->buf + d->used, p, k);
        d->used += k;
        p += k;
        len -= k;
        if (d->used == sizeof d->buf && data_flush(d) != 0)
            return -1;
    }
    return 0;
}

int vc_control_emit_data(vc_session *s, struct vc_result *res, char *err, size_t errlen)
{
    data_sink *d = malloc(sizeof *d);
    if (d == NULL) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    d->fd = s->control_fd;
    d->used = 0;
    int rc = vc_emit_stream(s, data_write, d, res, err, errlen);
    if (rc == 0 && data_flush(d) != 0) {
        snprintf(err, errlen, "sending the trace to the controller failed: %s", strerror(errno));
        rc = -EPIPE;
    }
    free(d);
    return rc == 0 ? 0 : -EPIPE;
}

void vc_control_prepare_end(vc_session *s, const struct vc_result *res, const char *err,
                            vc_end_msg *out)
{
    snprintf(out->text, sizeof out->text,
             "events=%llu\nthreads=%llu\ndrops=%llu\nbytes=%llu\ngil_us=%llu\noutput=%s\nstatus=%d\n",
             (unsigned long long)res->events, (unsigned long long)res->threads,
             (unsigned long long)res->dropped, (unsigned long long)res->bytes,
             (unsigned long long)res->gil_hold_us, s->output, res->status);
    size_t used = strlen(out->text);
    if (res->status != 0 && err != NULL && err[0] != '\0')
        vc_kv_append(out->text, sizeof out->text, &used, "error", err);
    if (s->kept_tmp[0] != '\0')
        vc_kv_append(out->text, sizeof out->text, &used, "kept", s->kept_tmp);
    if (s->interps_untraced > 0) {
        char n[24];
        snprintf(n, sizeof n, "%llu", (unsigned long long)s->interps_untraced);
        vc_kv_append(out->text, sizeof out->text, &used, "interps_untraced", n);
        snprintf(n, sizeof n, "%llu", (unsigned long long)s->interps_untraced_shared);
        vc_kv_append(out->text, sizeof out->text, &used, "interps_untraced_shared", n);
    }
    if (vc_filter_active(&s->filter)) {
        char desc[800];
        vc_filter_describe(&s->filter, desc, sizeof desc);
        vc_kv_append(out->text, sizeof out->text, &used, "filters", desc);
    }
    out->control_fd = s->control_fd;
    out->status_client_fd = s->status_client_fd;
    s->control_fd = s->status_client_fd = -1;
}

void vc_control_send_end(vc_end_msg *m)
{
    send_text(m->control_fd, VC_MSG_END, m->text);
    send_text(m->status_client_fd, VC_MSG_END, m->text);
    if (m->control_fd >= 0)
        close(m->control_fd);
    if (m->status_client_fd >= 0)
        close(m->status_client_fd);
    m->control_fd = m->status_client_fd = -1;
}

/* tree_catch.c — a process of the tree that exec'd an interpreter during the trace, held at
 * the start of its initialization (injector/catch.c) and injected there by the very process
 * that holds it.
 *
 * Why: a pool's spawned worker that lives 100 ms ran its first tasks before its agent was in
 * on a loaded machine.  Between the kernel's word of its exec and the injection's first stop
 * came this loop's own work (frames drained, the look at /proc, the preflight: the word was
 * read 20–100 ms late under two CPU hogs) and, once it was let go for a helper to inject it,
 * the worker's own slices.  So:
 *
 *   - a child of ours, the watcher, does nothing but read the kernel's exec news (its own
 *     proc connector socket) and, for a descendant of the root that runs an interpreter, fork
 *     a catcher at once, within a millisecond or two of the exec;
 *   - the catcher seizes it and keeps it at the start of its initialization; the watcher
 *     hands this loop the catcher's pipes and a pidfd of it (SCM_RIGHTS on a seqpacket pair);
 *   - when this loop would inject the process (preflight done, listener and share chosen), it
 *     sends the catcher what the injection needs (tree_catch_inject), and the catcher injects
 *     the thread where it holds it (inject_request.caught), holds it after until its hooks are
 *     in (hold.c), and reports as any injecting helper does;
 *   - any other end lets it go: this loop kills the catcher through its pidfd (never a pid
 *     that may be another's by then), or the catcher's own budgets end it.
 *
 * A catcher dies with the watcher, the watcher with vcattach (PDEATHSIG): a kill of vcattach
 * at any instant lets every held process go on, as the kernel detaches it.  A catcher handed
 * an injection no longer dies with them (like any helper it finishes, within its bounds).
 * --method remote-exec never ptraces a member: nothing is caught then. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "monotonic.h"
#include "receive_priority.h"
#include "say.h"
#include "test_seam.h"
#include "tree_run.h"
#include "vcinject.h"

#define CATCH_STEP_MS 1500 /* the loader and libc's start, on a loaded machine */
#define CATCH_HOLD_MS 1000 /* held for this loop's preflight */

int tree_exe_names_python(const char *exe)
{
    const char *base = strrchr(exe, '/');
    return strstr(base ? base + 1 : exe, "python") != NULL;
}

/* What this loop sends a catcher when it would inject its process (tree_catch_inject): the
 * preflight's judgment and the listener.  One write into an empty pipe: it fits the pipe's
 * buffer. */
struct catch_go {
    struct target_info t;
    struct ctl_conn ctl;
    enum inject_method method;
};
_Static_assert(sizeof(struct catch_go) <= 65536, "a go must fit a pipe's default buffer");

/* What the watcher tells this loop of a catcher it started (with 3 descriptors: the go
 * pipe's write end, the report pipe's read end, a pidfd of the catcher). */
struct catch_note {
    pid_t pid;      /* the process caught */
    pid_t catcher;
};

/* ---- in the catcher ------------------------------------------------------------------- */

struct catcher {
    const struct tree_run *r;
    pid_t pid;
    int pidfd;     /* the process's */
    int go_fd;     /* read end */
    int rep_fd;    /* write end */
    int64_t exec_ms;
};

/* Reads a whole go within ms.  0, or -1 (none came: released, or the hold's end). */
static int read_go(int fd, struct catch_go *go, int ms)
{
    int64_t end = vc_monotonic_ms() + ms;
    size_t got = 0;
    while (got < sizeof *go) {
        int64_t left = end - vc_monotonic_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return -1;
        ssize_t n = read(fd, (char *)go + got, sizeof *go - got);
        if (n <= 0)
            return -1; /* EOF: this loop let it go (or ended) */
        got += (size_t)n;
    }
    return 0;
}

/* Kept at the start of its initialization: injected here when this loop says so within the
 * hold's budget (the thread handed over as it stands), else let go on return. */
static void caught(void *arg, struct inject_catch *res)
{
    struct catcher *c = arg;
    if (c->r->opt->verbose)
        say("vcattach: pid %d caught at its interpreter's start (%lld ms after its exec, at %d "
            "system calls: %s; %d such calls passed over, not at a safe point)\n", (int)c->pid,
            (long long)(vc_monotonic_ms() - c->exec_ms), res->stops, res->at, res->unsafe);
    static struct catch_go go; /* large: not on the stack */
    if (read_go(c->go_fd, &go, res->hold_ms) < 0)
        return;
    /* an injecting helper from now on: it finishes (bounded) whatever becomes of vcattach */
    prctl(PR_SET_PDEATHSIG, 0);
    go.t.f.pidfd = c->pidfd; /* our own of the same process (checked after the seize) */
    go.t.held_by = 0;
    go.t.caught = res->held;
    go.ctl.listen_fd = -1; /* the name is what the agent is told; the socket stays the loop's */
    go.ctl.fd = -1;
    tree_inject_report(c->r, c->pid, c->exec_ms, &go.t, &go.ctl, go.method, c->rep_fd);
}

static void catcher_main(const struct tree_run *r, pid_t pid, int pidfd, int go_fd, int rep_fd,
                         int64_t exec_ms)
{
    struct inject_catch res;
    struct catcher me = {r, pid, pidfd, go_fd, rep_fd, exec_ms};
    int rc = inject_catch_at_start(pid, pidfd, CATCH_STEP_MS, CATCH_HOLD_MS, &res, caught, &me);
    if (r->opt->verbose && (rc < 0 || !res.caught))
        say("vcattach: pid %d not caught at its interpreter's start: %s (%d system calls, %lld "
            "ms after its exec)\n", (int)pid, res.ended, res.stops,
            (long long)(vc_monotonic_ms() - exec_ms));
}

/* ---- in the watcher ------------------------------------------------------------------- */

struct watcher {
    const struct tree_run *r;
    pid_t root, self;
    int sock;
    int pev_fd;
};

static int send_note(int sock, const struct catch_note *n, const int fds[3])
{
    char ctl[CMSG_SPACE(3 * sizeof(int))];
    memset(ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = (void *)n, .iov_len = sizeof *n};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                         .msg_controllen = sizeof ctl};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(3 * sizeof(int));
    memcpy(CMSG_DATA(c), fds, 3 * sizeof(int));
    return sendmsg(sock, &msg, MSG_NOSIGNAL) == (ssize_t)sizeof *n ? 0 : -1;
}

/* pid exec'd an interpreter (exec_ms: the kernel's time of it): a catcher, at once. */
static void start_catcher(struct watcher *w, pid_t pid, int64_t exec_ms)
{
    char exe[256];
    target_exe(pid, exe, sizeof exe);
    if (!tree_exe_names_python(exe))
        return;
    int pidfd = target_pidfd_open(pid);
    if (pidfd < 0)
        return;
    int go[2], rep[2];
    if (pipe2(go, O_CLOEXEC) != 0) {
        close(pidfd);
        return;
    }
    if (pipe2(rep, O_CLOEXEC) != 0) {
        close(go[0]);
        close(go[1]);
        close(pidfd);
        return;
    }
    fflush(NULL); /* nothing buffered twice */
    pid_t c = fork();
    if (c == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* the watcher's end (vcattach's) lets it go */
        if (getppid() != w->self)
            _exit(0);
        close(w->sock);
        close(w->pev_fd);
        close(go[1]);
        close(rep[0]);
        catcher_main(w->r, pid, pidfd, go[0], rep[1], exec_ms);
        _exit(0);
    }
    close(pidfd);
    close(go[0]);
    close(rep[1]);
    int cfd = c > 0 ? target_pidfd_open(c) : -1;
    struct catch_note n = {pid, c};
    int fds[3] = {go[1], rep[0], cfd};
    if (c > 0 && (cfd < 0 || send_note(w->sock, &n, fds) < 0)) {
        kill(c, SIGKILL); /* ours, unreaped: the pid is still its */
        waitpid(c, NULL, 0);
    }
    if (cfd >= 0)
        close(cfd);
    close(go[1]);
    close(rep[0]);
}

static void on_news(void *ctx, const struct proc_event_info *e)
{
    struct watcher *w = ctx;
    if (e->what != PROC_EV_EXEC || e->pid == w->root || !target_descends_from(e->pid, w->root))
        return;
    start_catcher(w, e->pid, (int64_t)(e->ts_ns / 1000000));
}

static void watcher_main(const struct tree_run *r, int sock, pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* vcattach's end, or its kill: ours */
    if (getppid() != parent)
        _exit(0);
    signal(SIGINT, SIG_IGN); /* a Ctrl-C is vcattach's to act on: it ends us when it stops */
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    /* at vcattach's receiving priority from the start (it raises its own only once attached):
     * a word of an exec read late is a worker caught late; its catchers inherit it */
    int want = r->opt->nice_set ? r->opt->nice : CLI_RECEIVE_NICE;
    errno = 0;
    int cur = getpriority(PRIO_PROCESS, 0);
    if (!(cur == -1 && errno != 0) && cur > want)
        setpriority(PRIO_PROCESS, 0, want); /* (not permitted: as it is) */
    /* Even at nice -10 it woke 20-60 ms after an exec with two CPU hogs on two cores (and a
     * catcher forked then ran 20-40 ms later): it sleeps but for a few /proc reads and a
     * fork per exec, so it runs SCHED_FIFO at the lowest real-time priority where permitted
     * (root), and so does a catcher until it has seized its process (catch.c puts it back). */
    struct sched_param sp = {.sched_priority = 1};
    sched_setscheduler(0, SCHED_FIFO, &sp);
    struct proc_events *pev = NULL;
    char err[256];
    if (proc_events_open(&pev, err, sizeof err) < 0)
        _exit(0);
    struct watcher w = {r, r->opt->pid, getpid(), sock, proc_events_fd(pev)};
    for (;;) {
        struct pollfd p[2] = {{.fd = w.pev_fd, .events = POLLIN}, {.fd = sock, .events = POLLIN}};
        int k = poll(p, 2, 100);
        if (k > 0 && p[1].revents)
            break; /* this loop closed its end: the trace stops */
        if (k > 0 && p[0].revents)
            proc_events_read(pev, on_news, &w, 4096);
        while (waitpid(-1, NULL, WNOHANG) > 0) /* catchers that ended */
            ;
    }
    proc_events_close(pev);
    _exit(0);
}

/* ---- in this loop ---------------------------------------------------------------------- */

void tree_catch_start(struct tree_run *r)
{
    r->catch_sock = -1;
    if (r->opt->method == CLI_METHOD_REMOTE_EXEC || VC_SEAM(CATCH_OFF) != NULL)
        return;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return;
    pid_t parent = getpid();
    fflush(NULL); /* nothing buffered twice */
    pid_t c = fork();
    if (c == 0) {
        close(sv[0]);
        watcher_main(r, sv[1], parent);
        _exit(0);
    }
    close(sv[1]);
    if (c < 0) {
        close(sv[0]);
        return;
    }
    r->catch_watcher = c;
    r->catch_sock = sv[0];
}

static void drop(struct tree_run *r, size_t i)
{
    struct tree_catch *c = &r->catches[i];
    if (c->go >= 0)
        close(c->go);
    if (c->rep >= 0)
        close(c->rep);
    if (c->pidfd >= 0)
        close(c->pidfd);
    r->catches[i] = r->catches[--r->ncatches];
}

/* The watcher's notes so far; catchers that ended by themselves are forgotten. */
static void collect(struct tree_run *r)
{
    for (size_t i = 0; i < r->ncatches;) {
        struct pollfd p = {.fd = r->catches[i].pidfd, .events = POLLIN};
        if (poll(&p, 1, 0) > 0) /* the catcher exited: its process was let go */
            drop(r, i);
        else
            i++;
    }
    while (r->catch_sock >= 0) {
        struct catch_note n;
        char ctl[CMSG_SPACE(3 * sizeof(int))];
        struct iovec iov = {.iov_base = &n, .iov_len = sizeof n};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                             .msg_controllen = sizeof ctl};
        ssize_t got = recvmsg(r->catch_sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (got <= 0)
            return;
        int fds[3] = {-1, -1, -1};
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        if (c != NULL && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
            c->cmsg_len == CMSG_LEN(3 * sizeof(int)))
            memcpy(fds, CMSG_DATA(c), sizeof fds);
        if (got != (ssize_t)sizeof n || fds[2] < 0 || (msg.msg_flags & MSG_CTRUNC) ||
            r->ncatches == TREE_MAX_CATCHES) { /* (never: our own child's words) */
            if (fds[2] >= 0)
                syscall(SYS_pidfd_send_signal, fds[2], SIGKILL, NULL, 0);
            for (int k = 0; k < 3; k++)
                if (fds[k] >= 0)
                    close(fds[k]);
            continue;
        }
        r->catches[r->ncatches++] = (struct tree_catch){n.pid, n.catcher, fds[0], fds[1], fds[2]};
    }
}

static struct tree_catch *catching(struct tree_run *r, pid_t pid)
{
    collect(r);
    for (size_t i = 0; i < r->ncatches; i++)
        if (r->catches[i].pid == pid)
            return &r->catches[i];
    return NULL;
}

void tree_catch_release(struct tree_run *r, pid_t pid)
{
    struct tree_catch *c = catching(r, pid);
    if (c == NULL)
        return;
    /* through its pidfd: never a pid another process may have by now */
    syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
    drop(r, (size_t)(c - r->catches));
}

pid_t tree_catcher_of(struct tree_run *r, pid_t pid)
{
    struct tree_catch *c = catching(r, pid);
    return c != NULL ? c->catcher : 0;
}

int tree_catch_inject(struct tree_run *r, struct member *m, const struct target_info *t,
                      enum inject_method method)
{
    struct tree_catch *c = catching(r, m->pid);
    if (c == NULL || method != INJECT_PTRACE || !tree_same_process(m) ||
        VC_SEAM(HANDOFF_OFF) != NULL) /* test seam: let go, then injected as before */
        return -1;
    static struct catch_go go; /* large: not on the stack */
    memset(&go, 0, sizeof go);
    go.t = *t;
    go.ctl = r->lis[m->lis].ctl;
    go.method = method;
    fcntl(c->go, F_SETFL, O_NONBLOCK); /* into an empty pipe: whole at once, or not at all */
    ssize_t n = write(c->go, &go, sizeof go);
    if (n != (ssize_t)sizeof go)
        return -1; /* gone (EPIPE), or not whole: the caller lets it go (a part is no go) */
    /* from now on the catcher is the member's injecting helper (not our child: its report
     * says how it went, and the watcher reaps it) */
    m->helper = c->catcher;
    m->helper_not_ours = 1;
    m->helper_fd = c->rep;
    c->rep = -1;
    drop(r, (size_t)(c - r->catches));
    return 0;
}

void tree_catch_release_all(struct tree_run *r)
{
    collect(r);
    while (r->ncatches > 0) {
        syscall(SYS_pidfd_send_signal, r->catches[0].pidfd, SIGKILL, NULL, 0);
        drop(r, 0);
    }
}

void tree_catch_end(struct tree_run *r)
{
    if (r->catch_sock >= 0) {
        close(r->catch_sock); /* the watcher ends at this (and with it, its catchers) */
        r->catch_sock = -1;
    }
    tree_catch_release_all(r);
    if (r->catch_watcher > 0) {
        kill(r->catch_watcher, SIGKILL); /* ours, unreaped: the pid is still its */
        while (waitpid(r->catch_watcher, NULL, 0) < 0 && errno == EINTR)
            ;
        r->catch_watcher = 0;
    }
}

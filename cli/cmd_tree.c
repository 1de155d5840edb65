/* cmd_tree.c — `vcattach --pid PID --subprocesses`: one trace of a process tree.
 *
 * One controller, one listening control socket, many sessions:
 *   1. discovery (tree.c): PID and its descendants; each is preflighted like a single target
 *      (its own CPython version and agent build, its own permission checks); a process that
 *      is not Python is skipped, one that refuses (permissions, stopped, unsupported version)
 *      is reported, the rest are traced; at most --max-processes;
 *   2. every Python process is injected with the same control path; each agent connects on
 *      its own, and the controller tells them apart by SO_PEERCRED (a peer must be PID or a
 *      descendant of it);
 *   3. while tracing, a poll of /proc every 100 ms finds processes born meanwhile: a fork
 *      child of a traced process already has the agent and connects by itself (agent/follow.c);
 *      a new interpreter (exec, multiprocessing spawn/forkserver, subprocess) is injected;
 *   4. each session's .cvf stream goes to its own unlinked temporary file as it arrives — a
 *      process that ends during the trace sends its trace at its exit (atexit, os._exit) and
 *      the others go on; at the end the parts are merged (trace/merge.c) into OUT, atomically.
 * Every process is on one clock: each agent maps its raw timestamps to CLOCK_MONOTONIC.
 * The record budget (--buffer-mb) is shared: see the --help text and share_for().
 */
#include "cmd_tree.h"
#include "monotonic.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "control_client.h"
#include "merge.h"
#include "preflight.h"
#include "trace_sink.h"
#include "vcinject.h"

#define TREE_POLL_MS 100           /* how soon a process born during the trace is found */
#define INJECT_TIMEOUT_MS 10000
#define CONNECT_WAIT_MS 10000      /* an injected agent must connect within this */
#define FORK_JOIN_WAIT_MS 3000     /* a fork child with the agent mapped must connect */
#define STARTED_WAIT_MS 15000
#define YOUNG_MS 1000              /* a non-Python process this young may still exec Python */
#define INIT_RETRIES 40            /* "interpreter not initialized yet": inject again later */
#define RETRY_MS 50                /* ... this much later (a new interpreter starts in ~50 ms) */
#define DEFAULT_BUDGET_MB 256
#define MIN_SHARE_MB 2

enum mstate {
    M_CONNECT,   /* injected (or forked with the agent): waiting for its connection */
    M_STARTING,  /* CONFIG sent, waiting for STARTED */
    M_RUNNING,
    M_STOPPING,  /* STOP sent (or the agent stopped by itself): DATA until END */
    M_RETRY,     /* its interpreter was not initialized yet: inject again at retry_at */
    M_DONE,      /* its trace is in its part file */
    M_LOST,      /* traced or about to be, but no trace came: why says why */
    M_SKIPPED,   /* not traced: not Python, refused, over the bound or the budget */
};

struct member {
    pid_t pid;
    enum mstate st;
    int fd;                  /* its control connection */
    int part_fd;             /* its .cvf stream (an unlinked file next to OUT) */
    int forked;              /* joined by itself (a fork child) */
    int python;              /* preflight said CPython (for M_SKIPPED: refused, not foreign) */
    int retries;
    unsigned share_mb;
    int share_returned;      /* its share went back to the reserve */
    int64_t since;           /* when it entered its state (ms) */
    uint64_t bytes;
    char exe[256];           /* for skipped ones: re-examined when it execs */
    char name[160];
    char why[320];
    char end[512];           /* END text */
};

struct tree_run {
    const struct cli_options *opt;
    struct ctl_conn ctl;      /* the listening socket (its fd is the listener, never accepted) */
    struct member *m;
    size_t n, cap;
    unsigned budget_mb, reserve_mb;
    unsigned initial_share_mb; /* what each process found at attach gets */
    int stopping;
    int64_t t0;
    char out_dir[PATH_MAX];
    char out_abs[PATH_MAX];
    char fallback_base[PATH_MAX];
    char hook[16];
    char *buf;               /* one frame (VC_MSG_MAX + 1) */
    uint64_t received;       /* trace bytes from every process: capped by --max-trace-mb */
};

static volatile sig_atomic_t interrupts;
static volatile sig_atomic_t abandon;

static void on_interrupt(int sig)
{
    (void)sig;
    if (++interrupts >= 2)
        abandon = 1;
}

static struct member *find(struct tree_run *r, pid_t pid)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->m[i].pid == pid)
            return &r->m[i];
    return NULL;
}

static struct member *add(struct tree_run *r, pid_t pid)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        struct member *bigger = realloc(r->m, cap * sizeof *bigger);
        if (bigger == NULL)
            return NULL;
        r->m = bigger;
        r->cap = cap;
    }
    struct member *m = &r->m[r->n++];
    memset(m, 0, sizeof *m);
    m->pid = pid;
    m->fd = m->part_fd = -1;
    m->since = vc_monotonic_ms();
    target_cmdline(pid, m->name, sizeof m->name);
    return m;
}

static void set_state(struct member *m, enum mstate st)
{
    m->st = st;
    m->since = vc_monotonic_ms();
}

static int active(const struct member *m)
{
    return m->st == M_CONNECT || m->st == M_STARTING || m->st == M_RUNNING ||
           m->st == M_STOPPING || m->st == M_RETRY;
}

/* Processes counted against --max-processes: every one traced or being traced. */
static size_t traced_count(const struct tree_run *r)
{
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++)
        k += active(&r->m[i]) || r->m[i].st == M_DONE ||
             (r->m[i].st == M_LOST && r->m[i].share_mb);
    return k;
}

/* Ends a member's connection; its budget share goes back to the reserve. */
static void finish(struct tree_run *r, struct member *m, enum mstate st, const char *why)
{
    if (m->fd >= 0)
        close(m->fd);
    m->fd = -1;
    if (why)
        snprintf(m->why, sizeof m->why, "%s", why);
    if (m->share_mb && !m->share_returned && st != M_RETRY) {
        r->reserve_mb += m->share_mb;
        m->share_returned = 1;
    }
    if (st == M_LOST && m->part_fd >= 0) {
        close(m->part_fd);
        m->part_fd = -1;
    }
    set_state(m, st);
}

/* A newcomer's share of the budget, taken from the reserve; 0 if the reserve is spent. */
static unsigned share_for(struct tree_run *r)
{
    unsigned want = r->budget_mb / 8 > MIN_SHARE_MB ? r->budget_mb / 8 : MIN_SHARE_MB;
    if (want > r->reserve_mb)
        want = r->reserve_mb;
    if (want < MIN_SHARE_MB)
        return 0;
    r->reserve_mb -= want;
    return want;
}

/* ---- configuring a connected agent -------------------------------------------------------- */

static int send_config(struct tree_run *r, struct member *m)
{
    static char cfg[VC_MSG_MAX / 4];
    char fallback[PATH_MAX + 64];
    snprintf(fallback, sizeof fallback, "%s.%d.partial.cvf", r->fallback_base, (int)m->pid);
    /* The single-target config (deadline with grace, hook, filters) with this process's
     * share of the budget, and follow_forks. */
    struct cli_options one = *r->opt;
    one.mode = CLI_TRACE;
    one.buffer_mb = m->share_mb;
    int rc = attach_build_config(&one, "control", fallback, cfg, sizeof cfg);
    size_t used = strlen(cfg);
    rc |= vc_kv_append(cfg, sizeof cfg, &used, "follow_forks", "1");
    rc |= ctl_add_token(&r->ctl, cfg, sizeof cfg, &used);
    if (rc || vc_msg_send(m->fd, VC_MSG_CONFIG, cfg, used, 5000) < 0)
        return -1;
    set_state(m, M_STARTING);
    return 0;
}

/* A new connection: whose it is (SO_PEERCRED), its HELLO, its CONFIG. */
static void accept_one(struct tree_run *r)
{
    int fd = accept4(r->ctl.listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        close(fd);
        return;
    }
    pid_t pid = cred.pid;
    struct member *m = find(r, pid);
    if (m == NULL && pid != r->opt->pid && !target_descends_from(pid, r->opt->pid)) {
        fprintf(stderr, "vcattach: ignoring a connection from pid %d: not in the tree of %d\n",
                (int)pid, (int)r->opt->pid);
        close(fd);
        return;
    }
    if (m == NULL || m->st == M_SKIPPED) { /* a fork child joining by itself */
        if (m == NULL && (m = add(r, pid)) == NULL) {
            close(fd);
            return;
        }
        m->forked = 1;
        m->python = 1;
        if (r->stopping) {
            finish(r, m, M_SKIPPED, "born as the trace was ending");
            close(fd);
            return;
        }
        if (traced_count(r) >= r->opt->max_processes) {
            close(fd);
            finish(r, m, M_SKIPPED, "over --max-processes");
            return;
        }
        if ((m->share_mb = share_for(r)) == 0) {
            close(fd);
            finish(r, m, M_SKIPPED, "the --buffer-mb budget was spent (raise it)");
            return;
        }
        set_state(m, M_CONNECT);
    } else if (m->st != M_CONNECT) {
        fprintf(stderr, "vcattach: pid %d connected twice; ignoring the second connection\n",
                (int)pid);
        close(fd);
        return;
    }
    m->fd = fd;
    char hello[512];
    uint32_t type;
    long n = vc_msg_recv(fd, &type, hello, sizeof hello, 2000);
    if (n < 0 || type != VC_MSG_HELLO) {
        finish(r, m, M_LOST, "its agent connected but sent no greeting");
        return;
    }
    if (send_config(r, m) < 0)
        finish(r, m, M_LOST, "the configuration could not be sent to its agent");
}

/* ---- a member's frames -------------------------------------------------------------------- */

static int part_open(struct tree_run *r, struct member *m)
{
    m->part_fd = open(r->out_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (m->part_fd < 0) { /* no O_TMPFILE on this filesystem: a name, removed at once */
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/.vcattach-part-XXXXXX", r->out_dir);
        m->part_fd = mkostemp(path, O_CLOEXEC);
        if (m->part_fd >= 0)
            unlink(path);
    }
    return m->part_fd >= 0 ? 0 : -1;
}

static void on_frame(struct tree_run *r, struct member *m, char *buf, size_t cap)
{
    uint32_t type;
    long n = vc_msg_recv(m->fd, &type, buf, cap, 10000);
    if (n < 0) {
        static const char *const when[] = {"connecting", "starting", "tracing", "sending"};
        char why[200];
        snprintf(why, sizeof why, "%s while %s (%llu bytes of its trace received)",
                 target_alive(m->pid) ? "its agent closed the connection"
                                    : "exited (or was killed)",
                 m->st <= M_STOPPING ? when[m->st] : "?", (unsigned long long)m->bytes);
        finish(r, m, M_LOST, why);
        return;
    }
    switch (type) {
    case VC_MSG_STARTED:
        set_state(m, M_RUNNING);
        if (r->stopping && vc_msg_send(m->fd, VC_MSG_STOP, NULL, 0, 5000) == 0)
            set_state(m, M_STOPPING);
        return;
    case VC_MSG_ERROR:
        buf[n] = '\0';
        ctl_sanitize(buf, (size_t)n); /* the target's user's text, printed later */
        if (strstr(buf, "not initialized") && m->retries < INIT_RETRIES && !m->forked &&
            !r->stopping) {
            finish(r, m, M_RETRY, buf); /* a new interpreter still starting: later */
            m->retries++;
            return;
        }
        {
            char why[400];
            snprintf(why, sizeof why, "its agent refused: %.300s", buf);
            finish(r, m, M_LOST, why);
        }
        return;
    case VC_MSG_DATA:
        if (m->st != M_STOPPING)
            set_state(m, M_STOPPING); /* it stopped by itself: its process is exiting */
        if ((m->part_fd < 0 && part_open(r, m) < 0) ||
            write(m->part_fd, buf, (size_t)n) != (ssize_t)n) {
            char why[400];
            snprintf(why, sizeof why, "cannot store its trace in %.200s: %s", r->out_dir,
                     strerror(errno));
            finish(r, m, M_LOST, why);
            return;
        }
        m->bytes += (uint64_t)n;
        r->received += (uint64_t)n;
        if (r->received > (uint64_t)r->opt->max_trace_mb << 20) {
            /* the agents (the targets' users' code) decide how much they send: the tree as a
             * whole gets what one target would (--max-trace-mb) */
            char why[200];
            snprintf(why, sizeof why, "the tree's traces passed --max-trace-mb %u MiB: this "
                     "one is dropped", r->opt->max_trace_mb);
            finish(r, m, M_LOST, why);
        }
        return;
    case VC_MSG_END: {
        buf[n] = '\0';
        ctl_sanitize(buf, (size_t)n);
        snprintf(m->end, sizeof m->end, "%s", buf);
        char v[32] = "0";
        vc_kv_get(buf, "status", v, sizeof v);
        if (atol(v) != 0 || m->part_fd < 0)
            finish(r, m, M_LOST, "its agent failed to send its trace (see its fallback file)");
        else
            finish(r, m, M_DONE, NULL);
        return;
    }
    default:
        return; /* STATUS answers are not for us */
    }
}

/* ---- injecting ---------------------------------------------------------------------------- */

/* Preflight and injection of one process; *m's state says what came of it. */
static void inject_member(struct tree_run *r, struct member *m, int at_attach)
{
    char err[1024] = "";
    struct target_info t;
    target_exe(m->pid, m->exe, sizeof m->exe);
    if (preflight_target(m->pid, &t, err, sizeof err) < 0) {
        /* Not Python (yet), or refused: target_python_detect tells which. */
        struct target_python py;
        char e2[256];
        m->python = target_python_detect(m->pid, &py, e2, sizeof e2) == 1;
        finish(r, m, M_SKIPPED, m->python ? err : "not a CPython process");
        return;
    }
    m->python = 1;
    if (t.f.other_mnt_ns || t.agent_needs_copy) {
        finish(r, m, M_SKIPPED, "runs in another mount namespace: trace it on its own");
        preflight_release(&t);
        return;
    }
    if (!strcmp(r->hook, "monitoring") && t.f.py.minor < 12) {
        finish(r, m, M_SKIPPED, "--hook monitoring needs Python 3.12+");
        preflight_release(&t);
        return;
    }
    if (!at_attach && m->share_mb == 0 && (m->share_mb = share_for(r)) == 0) {
        finish(r, m, M_SKIPPED, "the --buffer-mb budget was spent (raise it)");
        preflight_release(&t);
        return;
    }
    struct inject_request req = {
        .target = &t.f,
        .method = r->opt->method == CLI_METHOD_GDB ? INJECT_GDB : INJECT_PTRACE,
        .agent_path = t.agent_in_target,
        .control_path = r->ctl.target_path,
        .timeout_ms = INJECT_TIMEOUT_MS,
        .verbose = r->opt->verbose,
    };
    struct inject_result res;
    int st = inject(&req, &res, err, sizeof err); /* signals blocked inside */
    preflight_release(&t);
    if (st != INJECT_OK) {
        char why[1100];
        snprintf(why, sizeof why, "injection failed: %s", err);
        finish(r, m, M_LOST, why);
        m->share_mb = 0;
        return;
    }
    if (r->opt->verbose)
        fprintf(stderr, "vcattach: pid %d (%s) is Python %d.%d: injected %s\n", (int)m->pid,
                t.f.comm, t.f.py.major, t.f.py.minor, t.agent);
    set_state(m, M_CONNECT);
}

/* ---- the loop ----------------------------------------------------------------------------- */

/* Waits up to ms for connections and frames, handling them. */
static void pump(struct tree_run *r, int ms, char *buf, size_t cap)
{
    size_t nfds = 1;
    struct pollfd *p = calloc(r->n + 1, sizeof *p);
    size_t *who = calloc(r->n + 1, sizeof *who);
    if (p == NULL || who == NULL) {
        free(p);
        free(who);
        struct timespec ts = {0, (long)ms * 1000000L};
        nanosleep(&ts, NULL);
        return;
    }
    p[0] = (struct pollfd){.fd = r->ctl.listen_fd, .events = POLLIN};
    for (size_t i = 0; i < r->n; i++)
        if (r->m[i].fd >= 0) {
            who[nfds] = i;
            p[nfds++] = (struct pollfd){.fd = r->m[i].fd, .events = POLLIN};
        }
    int k = poll(p, (nfds_t)nfds, ms);
    if (k > 0) {
        for (size_t j = 1; j < nfds; j++)
            if (p[j].revents)
                on_frame(r, &r->m[who[j]], buf, cap);
        if (p[0].revents & POLLIN)
            accept_one(r);
    }
    free(p);
    free(who);
}

/* Time-outs of members waiting for something, and members whose process is gone. */
static void check_waits(struct tree_run *r)
{
    int64_t now = vc_monotonic_ms();
    for (size_t i = 0; i < r->n; i++) {
        struct member *m = &r->m[i];
        if (m->st == M_CONNECT && m->forked && m->fd < 0 && now - m->since > FORK_JOIN_WAIT_MS &&
            !r->stopping && target_alive(m->pid)) {
            /* The agent was mapped but nobody connected: an agent left loaded by an earlier
             * trace, or a fork the agent did not see (fork() from C): inject it like any
             * process (the loaded agent is reused). */
            m->forked = 0;
            inject_member(r, m, 0);
        } else if (m->st == M_CONNECT && now - m->since > (m->forked ? FORK_JOIN_WAIT_MS : CONNECT_WAIT_MS))
            finish(r, m, M_LOST, "its agent did not connect (see its stderr)");
        else if (m->st == M_STARTING && now - m->since > STARTED_WAIT_MS)
            finish(r, m, M_LOST, "its agent did not start in time (GIL held?)");
        else if (m->st == M_CONNECT && m->fd < 0 && !target_alive(m->pid))
            finish(r, m, M_LOST, "exited before its agent connected");
        else if (m->st == M_RETRY && !target_alive(m->pid))
            finish(r, m, M_LOST, "exited while its interpreter was starting");
    }
}

/* New descendants since the last look; retries of starting interpreters; skipped processes
 * that exec'd. */
static void discover(struct tree_run *r, int at_attach)
{
    pid_t *pids = NULL;
    long n = target_descendants(r->opt->pid, &pids);
    int64_t now = vc_monotonic_ms();
    for (long i = 0; i < n && !interrupts; i++) {
        struct member *m = find(r, pids[i]);
        if (m != NULL) {
            if (m->st == M_RETRY && now - m->since >= RETRY_MS && !r->stopping)
                inject_member(r, m, 0);
            else if (m->st == M_CONNECT && m->forked && m->fd < 0 && !r->stopping &&
                     target_has_agent(m->pid) == 0) {
                /* A fork child that exec'd (subprocess, spawn): a new image, maybe a new
                 * interpreter, to examine like any newcomer (its share is kept). */
                m->forked = 0;
                inject_member(r, m, 0);
                if (m->st == M_SKIPPED && !m->python && target_age_ms(m->pid) < YOUNG_MS)
                    m->exe[0] = '\0';
            }
            else if (m->st == M_SKIPPED && !m->python && !r->stopping) {
                char exe[256];
                target_exe(m->pid, exe, sizeof exe);
                if (strcmp(exe, m->exe) != 0) /* it exec'd: look again */
                    goto examine;
            }
            continue;
        }
        if (r->stopping)
            continue;
        if ((m = add(r, pids[i])) == NULL)
            break;
    examine:
        if (!at_attach && target_has_agent(m->pid) == 1) {
            /* A fork child of a traced process: it connects by itself (or execs soon). */
            m->forked = 1;
            set_state(m, M_CONNECT);
            if (m->share_mb == 0)
                m->share_mb = share_for(r);
            continue;
        }
        if (traced_count(r) >= r->opt->max_processes) {
            struct target_python py;
            char e2[256];
            m->python = target_python_detect(m->pid, &py, e2, sizeof e2) == 1;
            target_exe(m->pid, m->exe, sizeof m->exe);
            finish(r, m, M_SKIPPED, m->python ? "over --max-processes" : "not a CPython process");
            continue;
        }
        if (at_attach) {
            m->share_mb = r->initial_share_mb;
            inject_member(r, m, 1); /* a refusal returns its share to the reserve */
            pump(r, 0, r->buf, VC_MSG_MAX + 1); /* the ones injected so far connect */
            continue;
        }
        inject_member(r, m, 0);
        if (m->st == M_SKIPPED && !m->python && target_age_ms(m->pid) < YOUNG_MS)
            m->exe[0] = '\0'; /* young: may still exec Python; look again next time */
    }
    free(pids);
}

/* 3/4 of the budget split evenly among the Python processes there are at attach (at most
 * --max-processes of them), 1/4 kept as the reserve of the ones born later. */
static void plan_budget(struct tree_run *r)
{
    pid_t *pids = NULL;
    long n = target_descendants(r->opt->pid, &pids);
    unsigned python = 1; /* the root */
    for (long i = 0; i < n; i++) {
        struct target_python py;
        char e[256];
        if (target_python_detect(pids[i], &py, e, sizeof e) == 1)
            python++;
    }
    free(pids);
    if (python > r->opt->max_processes)
        python = r->opt->max_processes;
    r->reserve_mb = r->budget_mb / 4;
    unsigned each = (r->budget_mb - r->reserve_mb) / python;
    r->initial_share_mb = each < MIN_SHARE_MB ? MIN_SHARE_MB : each;
}

/* ---- the result --------------------------------------------------------------------------- */

static const char *state_word(const struct member *m)
{
    switch (m->st) {
    case M_DONE: return "traced";
    case M_LOST: return "lost";
    case M_SKIPPED: return m->python ? "not traced" : "skipped";
    default: return "unfinished";
    }
}

static unsigned long long end_u64(const struct member *m, const char *key)
{
    char v[32];
    return vc_kv_get(m->end, key, v, sizeof v) > 0 ? strtoull(v, NULL, 10) : 0;
}

/* The merged file from every part; 0, or -1 after printing why. */
static int write_merged(struct tree_run *r, struct trace_sink *sink, size_t *nparts)
{
    char err[1024];
    const char **paths = calloc(r->n ? r->n : 1, sizeof *paths);
    char (*names)[48] = calloc(r->n ? r->n : 1, sizeof *names);
    size_t k = 0;
    if (paths == NULL || names == NULL) {
        free(paths);
        free(names);
        fprintf(stderr, "vcattach: out of memory while merging\n");
        return -1;
    }
    for (size_t i = 0; i < r->n; i++)
        if (r->m[i].st == M_DONE && r->m[i].part_fd >= 0) {
            snprintf(names[k], sizeof names[k], "/proc/self/fd/%d", r->m[i].part_fd);
            paths[k] = names[k];
            k++;
        }
    *nparts = k;
    int rc = vct_cvf_merge(paths, k, cvf_sink_fd, (void *)(intptr_t)sink->fd, err, sizeof err);
    free(paths);
    free(names);
    if (rc != 0) {
        fprintf(stderr, "vcattach: merging the traces of the tree failed: %s\n", err);
        return -1;
    }
    off_t size = lseek(sink->fd, 0, SEEK_CUR);
    sink->bytes = size > 0 ? (uint64_t)size : 0;
    if (sink_commit(sink, err, sizeof err) < 0) {
        fprintf(stderr, "vcattach: %s\n", err);
        return -1;
    }
    return 0;
}

static void print_result(struct tree_run *r, const struct trace_sink *sink, int64_t traced)
{
    unsigned long long events = 0, threads = 0, drops = 0;
    size_t done = 0, lost = 0, skipped = 0, refused = 0;
    for (size_t i = 0; i < r->n; i++) {
        const struct member *m = &r->m[i];
        if (m->st == M_DONE) {
            done++;
            events += end_u64(m, "events");
            threads += end_u64(m, "threads");
            drops += end_u64(m, "drops");
        } else if (m->st == M_SKIPPED && !m->python) {
            skipped++;
        } else if (m->st == M_SKIPPED) {
            refused++;
        } else {
            lost++;
        }
    }
    char size[32];
    cli_format_bytes(sink->bytes, size, sizeof size);
    if (!r->opt->quiet) {
        printf("vcattach: pid %d and its subprocesses in %.1fs: %zu process%s traced", (int)r->opt->pid,
               (double)traced / 1000.0, done, done == 1 ? "" : "es");
        if (lost)
            printf(", %zu lost", lost);
        if (refused)
            printf(", %zu not traced", refused);
        if (skipped)
            printf(", %zu non-Python skipped", skipped);
        printf(": %llu events, %llu threads, %llu dropped%s, %s -> %s\n", events, threads, drops,
               drops ? " (buffer full: raise --buffer-mb)" : "", size, sink->path);
    }
    for (size_t i = 0; i < r->n; i++) {
        const struct member *m = &r->m[i];
        int always = m->st != M_DONE && !(m->st == M_SKIPPED && !m->python);
        if (r->opt->quiet || (!always && !r->opt->verbose))
            continue;
        printf("  pid %d %s%s: %s", (int)m->pid, m->forked ? "(forked) " : "", state_word(m),
               m->name);
        if (m->st == M_DONE)
            printf(" — %llu events, %llu threads, %u MiB buffer", end_u64(m, "events"),
                   end_u64(m, "threads"), m->share_mb);
        if (m->why[0] && m->st != M_DONE)
            printf(" — %s", m->why);
        putchar('\n');
    }
    fflush(stdout);
}

/* ---- the command -------------------------------------------------------------------------- */

int run_tree(const struct cli_options *opt)
{
    const char *cmd = "vcattach";
    char err[1024];
    struct target_info t;
    if (opt->method == CLI_METHOD_REMOTE_EXEC) {
        /* auto means ptrace here: remote-exec goes through the single-target path only */
        fprintf(stderr, "%s: --subprocesses injects with ptrace (or --method gdb): drop "
                        "--method remote-exec\n", cmd);
        return VC_EXIT_USAGE;
    }
    if (preflight_target(opt->pid, &t, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return VC_EXIT_USAGE;
    }
    int foreign = t.f.other_mnt_ns || t.agent_needs_copy;
    preflight_release(&t); /* only judged here: each member is preflighted again */
    if (foreign) {
        fprintf(stderr, "%s: --subprocesses does not follow a tree in another mount namespace "
                        "yet: trace its processes one by one\n", cmd);
        return VC_EXIT_USAGE;
    }
    static struct tree_run r;
    memset(&r, 0, sizeof r);
    r.opt = opt;
    r.budget_mb = opt->buffer_mb ? opt->buffer_mb : DEFAULT_BUDGET_MB;
    snprintf(r.hook, sizeof r.hook, "%s", opt->hook);
    ctl_init(&r.ctl);

    static struct trace_sink sink;
    memset(&sink, 0, sizeof sink);
    sink.fd = -1;
    char name[96];
    const char *out = opt->output;
    if (!out) {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        snprintf(name, sizeof name, "vcattach-%d-tree-%s.cvf", (int)opt->pid, stamp);
        out = name;
    }
    if (sink_open_file(&sink, out, opt->force, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return VC_EXIT_USAGE;
    }
    snprintf(r.out_abs, sizeof r.out_abs, "%s", sink.path);
    snprintf(r.out_dir, sizeof r.out_dir, "%s", sink.path);
    char *slash = strrchr(r.out_dir, '/');
    if (slash)
        slash[slash == r.out_dir ? 1 : 0] = '\0';
    size_t olen = strlen(r.out_abs);
    if (olen > 4 && !strcmp(r.out_abs + olen - 4, ".cvf"))
        olen -= 4;
    snprintf(r.fallback_base, sizeof r.fallback_base, "%.*s", (int)olen, r.out_abs);

    struct sigaction sa, old[3], ign, old_pipe;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++)
        sigaction(sigs[i], &sa, &old[i]);
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &old_pipe);
    interrupts = abandon = 0;

    int rc = VC_EXIT_FAIL;
    char *buf = malloc(VC_MSG_MAX + 1);
    if (buf == NULL) {
        fprintf(stderr, "%s: out of memory\n", cmd);
        goto out;
    }
    r.buf = buf;
    if (ctl_listen(&r.ctl, opt->pid, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        goto out;
    }
    /* Many agents connect at once (a tree attached in one go): a deeper backlog than the
     * single-target socket's, or later connects would time out in the agents. */
    listen(r.ctl.listen_fd, 256);
    plan_budget(&r);

    /* Attach: the root, then every descendant there is now. */
    int64_t t_attach = vc_monotonic_ms();
    struct member *root = add(&r, opt->pid);
    if (root == NULL)
        goto out;
    root->share_mb = r.initial_share_mb;
    inject_member(&r, root, 1);
    if (root->st != M_CONNECT) {
        fprintf(stderr, "%s: pid %d: %s\n", cmd, (int)opt->pid, root->why);
        goto out;
    }
    pump(&r, 0, buf, VC_MSG_MAX + 1);
    discover(&r, 1);
    /* Every process found at attach started (or given up) before the clock runs. */
    while (!interrupts) {
        int waiting = 0;
        for (size_t i = 0; i < r.n; i++)
            waiting += r.m[i].st == M_CONNECT || r.m[i].st == M_STARTING;
        if (!waiting)
            break;
        pump(&r, TREE_POLL_MS, buf, VC_MSG_MAX + 1);
        check_waits(&r);
    }
    r.t0 = vc_monotonic_ms();
    if (opt->verbose)
        fprintf(stderr, "%s: %zu processes attached in %lld ms\n", cmd, traced_count(&r),
                (long long)(r.t0 - t_attach));

    /* Trace: frames, newcomers, until the duration or Ctrl-C. */
    int64_t last_scan = 0;
    int show = !opt->quiet && isatty(STDERR_FILENO);
    while (!interrupts) {
        int64_t el = vc_monotonic_ms() - r.t0;
        if (opt->duration_ms && el >= (int64_t)opt->duration_ms)
            break;
        pump(&r, TREE_POLL_MS / 2, buf, VC_MSG_MAX + 1);
        check_waits(&r);
        if (vc_monotonic_ms() - last_scan >= TREE_POLL_MS) {
            last_scan = vc_monotonic_ms();
            discover(&r, 0);
        }
        if (show) {
            char e[32];
            cli_format_duration((uint64_t)el, e, sizeof e);
            size_t running = 0;
            for (size_t i = 0; i < r.n; i++)
                running += r.m[i].st == M_RUNNING;
            fprintf(stderr, "\rvcattach: tracing %zu processes of pid %d: %s elapsed (Ctrl-C to "
                            "stop)\033[K", running, (int)opt->pid, e);
        }
        int any = 0;
        for (size_t i = 0; i < r.n; i++)
            any |= active(&r.m[i]);
        if (!any && !target_alive(opt->pid))
            break;
    }
    if (show)
        fprintf(stderr, "\r\033[K");
    int64_t traced = vc_monotonic_ms() - r.t0;

    /* Stop: STOP to every running session, then collect until every trace is in. */
    r.stopping = 1;
    for (size_t i = 0; i < r.n; i++)
        if (r.m[i].st == M_RUNNING && vc_msg_send(r.m[i].fd, VC_MSG_STOP, NULL, 0, 5000) == 0)
            set_state(&r.m[i], M_STOPPING);
    int64_t collect_end = vc_monotonic_ms() + (int64_t)opt->collect_timeout_ms; /* --collect-timeout */
    while (!abandon && vc_monotonic_ms() < collect_end) {
        int any = 0;
        for (size_t i = 0; i < r.n; i++)
            any |= active(&r.m[i]) && r.m[i].st != M_RETRY;
        if (!any)
            break;
        pump(&r, TREE_POLL_MS, buf, VC_MSG_MAX + 1);
        check_waits(&r);
    }
    for (size_t i = 0; i < r.n; i++)
        if (active(&r.m[i]))
            finish(&r, &r.m[i], M_LOST, abandon ? "abandoned (interrupted twice): its agent "
                                                  "writes its fallback file"
                                                : "its trace did not arrive in time");
    if (abandon) {
        fprintf(stderr, "%s: interrupted twice: trace abandoned; each agent writes what it has "
                        "to %s.PID.partial.cvf\n", cmd, r.fallback_base);
        goto out;
    }
    size_t nparts = 0;
    if (write_merged(&r, &sink, &nparts) < 0)
        goto out;
    print_result(&r, &sink, traced);
    rc = nparts ? VC_EXIT_OK : VC_EXIT_FAIL;
out:
    for (size_t i = 0; i < r.n; i++) {
        if (r.m[i].fd >= 0)
            close(r.m[i].fd);
        if (r.m[i].part_fd >= 0)
            close(r.m[i].part_fd);
    }
    free(r.m);
    free(buf);
    ctl_close(&r.ctl);
    sink_abort(&sink);
    for (int i = 0; i < 3; i++)
        sigaction(sigs[i], &old[i], NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    return rc;
}

/* ---- start / stop / status of a tree ------------------------------------------------------ */

/* "/d/out.cvf" → "/d/out" (the parts are /d/out.PID.cvf, the merge /d/out.cvf). */
static void out_base(const char *out, char *base, size_t cap)
{
    size_t n = strlen(out);
    if (n > 4 && !strcmp(out + n - 4, ".cvf"))
        n -= 4;
    snprintf(base, cap, "%.*s", (int)n, out);
}

int start_tree(const struct cli_options *opt)
{
    char base[PATH_MAX], name[96], part[PATH_MAX + 32];
    if (opt->output) {
        out_base(opt->output, base, sizeof base);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        snprintf(name, sizeof name, "vcattach-%d-tree-%s", (int)opt->pid, stamp);
        snprintf(base, sizeof base, "%s", name);
    }
    pid_t *kids = NULL;
    long n = target_descendants(opt->pid, &kids);
    if (n < 0)
        n = 0;
    pid_t *all = malloc(((size_t)n + 1) * sizeof *all);
    if (all == NULL) {
        free(kids);
        fprintf(stderr, "vcattach start: out of memory\n");
        return VC_EXIT_FAIL;
    }
    all[0] = opt->pid;
    size_t total = 1;
    for (long i = 0; i < n; i++) {
        struct target_python py;
        char e[256];
        if (target_python_detect(kids[i], &py, e, sizeof e) == 1)
            all[total++] = kids[i];
        else if (opt->verbose)
            fprintf(stderr, "vcattach start: pid %d skipped: not a CPython process\n",
                    (int)kids[i]);
    }
    free(kids);
    size_t over = total > opt->max_processes ? total - opt->max_processes : 0;
    if (over)
        total = opt->max_processes;
    unsigned budget = opt->buffer_mb ? opt->buffer_mb : DEFAULT_BUDGET_MB;
    unsigned share = budget / (unsigned)total;
    size_t started = 0;
    int root_rc = VC_EXIT_FAIL;
    for (size_t i = 0; i < total; i++) {
        struct cli_options one = *opt;
        one.pid = all[i];
        one.subprocesses = 0;
        one.quiet = 1;
        one.buffer_mb = share < MIN_SHARE_MB ? MIN_SHARE_MB : share;
        snprintf(part, sizeof part, "%s.%d.cvf", base, (int)all[i]);
        one.output = part;
        int rc = attach_one(CLI_START, &one);
        if (i == 0)
            root_rc = rc;
        if (rc == VC_EXIT_OK)
            started++;
        else
            fprintf(stderr, "vcattach start: pid %d not traced (see above); the others go on\n",
                    (int)all[i]);
    }
    free(all);
    if (root_rc != VC_EXIT_OK && started == 0)
        return root_rc;
    if (!opt->quiet) {
        char dur[32];
        cli_format_duration(opt->duration_ms, dur, sizeof dur);
        printf("vcattach: tracing pid %d and %zu Python subprocess%s for %s (%u MiB buffer "
               "each), each writing %s.PID.cvf; `vcattach stop --pid %d --subprocesses` stops "
               "them and merges the traces into %s.cvf%s\n",
               (int)opt->pid, started - (root_rc == VC_EXIT_OK), started - (root_rc == VC_EXIT_OK) == 1 ? "" : "es", dur,
               share < MIN_SHARE_MB ? MIN_SHARE_MB : share, base, (int)opt->pid, base,
               over ? " (processes over --max-processes not traced)" : "");
    }
    return VC_EXIT_OK;
}

int stop_tree(const struct cli_options *opt, unsigned request)
{
    const char *cmd = request == VC_MSG_STOP ? "vcattach stop" : "vcattach status";
    if (!target_alive(opt->pid)) {
        fprintf(stderr, "%s: no such process: pid %d\n", cmd, (int)opt->pid);
        return VC_EXIT_FAIL;
    }
    pid_t *kids = NULL;
    long n = target_descendants(opt->pid, &kids);
    if (n < 0)
        n = 0;
    size_t found = 0, nparts = 0;
    char (*parts)[PATH_MAX] = calloc((size_t)n + 1, sizeof *parts);
    char base[PATH_MAX] = "";
    int same_base = 1, failed = 0;
    unsigned long long events = 0, threads = 0, drops = 0;
    for (long i = -1; i < n && parts; i++) {
        pid_t pid = i < 0 ? opt->pid : kids[i];
        char reply[1024], err[512], output[PATH_MAX] = "?";
        int r = ctl_query(pid, request, reply, sizeof reply,
                              request == VC_MSG_STOP ? 60000 : 2000, err, sizeof err);
        if (r < 0) {
            fprintf(stderr, "%s: pid %d: %s\n", cmd, (int)pid, err);
            failed = 1;
            continue;
        }
        if (r == 0)
            continue;
        found++;
        vc_kv_get(reply, "output", output, sizeof output);
        char v[32];
        if (request == VC_MSG_STATUS) {
            char state[32] = "running";
            vc_kv_get(reply, "state", state, sizeof state);
            if (!opt->quiet)
                printf("vcattach: session %s in pid %d: %s threads, output %s\n", state,
                       (int)pid, vc_kv_get(reply, "threads", v, sizeof v) > 0 ? v : "?",
                       output);
            continue;
        }
        long status = vc_kv_get(reply, "status", v, sizeof v) > 0 ? atol(v) : 0;
        if (status) {
            fprintf(stderr, "%s: the agent in pid %d could not write %s (%s)\n", cmd, (int)pid,
                    output, strerror((int)-status));
            failed = 1;
            continue;
        }
        events += vc_kv_get(reply, "events", v, sizeof v) > 0 ? strtoull(v, NULL, 10) : 0;
        threads += vc_kv_get(reply, "threads", v, sizeof v) > 0 ? strtoull(v, NULL, 10) : 0;
        drops += vc_kv_get(reply, "drops", v, sizeof v) > 0 ? strtoull(v, NULL, 10) : 0;
        /* OUT.PID.cvf: the common base of a `start --subprocesses` */
        char suffix[48], b[PATH_MAX];
        snprintf(suffix, sizeof suffix, ".%d.cvf", (int)pid);
        size_t ol = strlen(output), sl = strlen(suffix);
        if (ol > sl && !strcmp(output + ol - sl, suffix)) {
            snprintf(b, sizeof b, "%.*s", (int)(ol - sl), output);
            if (!base[0])
                snprintf(base, sizeof base, "%s", b);
            else if (strcmp(base, b))
                same_base = 0;
        } else {
            same_base = 0;
        }
        snprintf(parts[nparts++], PATH_MAX, "%s", output);
    }
    free(kids);
    if (!found) {
        free(parts);
        if (!opt->quiet)
            printf("vcattach: no session is running in pid %d or its subprocesses\n",
                   (int)opt->pid);
        return VC_EXIT_FAIL;
    }
    int rc = failed ? VC_EXIT_FAIL : VC_EXIT_OK;
    if (request == VC_MSG_STOP && nparts) {
        if (!same_base || !base[0]) {
            printf("vcattach: stopped %zu sessions; their traces: ", nparts);
            for (size_t i = 0; i < nparts; i++)
                printf("%s%s", i ? ", " : "", parts[i]);
            printf(" (`vcattach convert A B ... -o ONE.cvf` merges them)\n");
        } else {
            char merged[PATH_MAX + 8], err[1024];
            snprintf(merged, sizeof merged, "%s.cvf", base);
            struct trace_sink sink;
            memset(&sink, 0, sizeof sink);
            sink.fd = -1;
            const char **paths = calloc(nparts, sizeof *paths);
            for (size_t i = 0; paths && i < nparts; i++)
                paths[i] = parts[i];
            if (paths == NULL || sink_open_file(&sink, merged, 1, err, sizeof err) < 0 ||
                vct_cvf_merge(paths, nparts, cvf_sink_fd, (void *)(intptr_t)sink.fd, err,
                              sizeof err) < 0 ||
                sink_commit(&sink, err, sizeof err) < 0) {
                fprintf(stderr, "%s: merging the traces into %s failed: %s; the parts stay\n",
                        cmd, merged, paths ? err : "out of memory");
                sink_abort(&sink);
                rc = VC_EXIT_FAIL;
            } else {
                for (size_t i = 0; i < nparts; i++)
                    unlink(parts[i]);
                if (!opt->quiet)
                    printf("vcattach: pid %d and its subprocesses: %zu processes traced: %llu "
                           "events, %llu threads, %llu dropped -> %s\n", (int)opt->pid, nparts,
                           events, threads, drops, sink.path);
            }
            free(paths);
        }
    }
    free(parts);
    return rc;
}

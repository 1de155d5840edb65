/* tree_trace.c — `vcattach --pid PID --subprocesses`: one trace of a process tree.
 *
 * One controller, one listening control socket, many sessions:
 *   1. discovery (injector's target_descendants): PID and its descendants; each is attached
 *      with the steps of a single target (attach.c: its own preflight, CPython version, agent
 *      build, permission and --hook checks); a process that is not Python is skipped, one that
 *      refuses (permissions, stopped, unsupported version) is reported, the rest are traced;
 *      at most --max-processes;
 *   2. every Python process is injected with the same control path; each agent connects on
 *      its own, and the controller tells them apart by SO_PEERCRED (a peer must be PID or a
 *      descendant of it);
 *   3. while tracing, a poll of /proc every 100 ms finds processes born meanwhile: a fork
 *      child of a traced process already has the agent and connects by itself (agent/follow.c);
 *      a new interpreter (exec, multiprocessing spawn/forkserver, subprocess) is injected;
 *   4. each session streams what it records (docs/protocol.md "Streaming") into its own spool,
 *      OUT.PID.spool (common/spool.h), as it arrives — a process that ends during the trace
 *      keeps what it streamed (SIGTERM'd pool workers, a SIGKILLed gunicorn worker), a member
 *      whose frames break the protocol is lost, the others go on; at the end one pass over
 *      every spool builds OUT, atomically (spool_build_processes).
 * Members may live in other mount, pid, network and user namespaces (a container seen from
 * the host): each is attached as a single target is (attach.c: the agent copied into its own
 * root as its user, remote-exec with --method remote-exec), gets a listener in its network
 * namespace (one per namespace: struct listener), and is shown by our pid with its own beside
 * it (ns_pid.c).
 * Every process is on one clock: each agent maps its raw timestamps to CLOCK_MONOTONIC.
 * The record budget (--buffer-mb) is shared: see the --help text and share_for().
 */
#include "tree_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "commands.h"
#include "control_client.h"
#include "monotonic.h"
#include "ns_pid.h"
#include "receive_priority.h"
#include "spool.h"
#include "trace_sink.h"
#include "vcinject.h"

#define TREE_POLL_MS 100           /* how soon a process born during the trace is found */
#define CONNECT_WAIT_MS 10000      /* an injected agent must connect within this */
#define FORK_JOIN_WAIT_MS 3000     /* a fork child with the agent mapped must connect */
#define STARTED_WAIT_MS 15000
#define YOUNG_MS 1000              /* a non-Python process this young may still exec Python */
#define INIT_RETRIES 40            /* "interpreter not initialized yet": inject again later */
#define RETRY_MS 50                /* ... this much later (a new interpreter starts in ~50 ms) */
#define INIT_GRACE_MS 3000         /* older and still not initialized: an embedding host */
#define DEFAULT_BUDGET_MB 256
#define MIN_SHARE_MB 2
#define DEFAULT_SHARE_MAX_MB CLI_WINDOW_MB /* without --buffer-mb, no process gets more */
#define VERBOSE_KEEP 4096          /* -v lists skipped processes: kept up to this many members */
#define MAX_NETNS 16               /* listening sockets: one per network namespace of the tree */

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
    pid_t pid;               /* as we (the host) see it: SO_PEERCRED's, /proc's */
    pid_t own_pid;           /* as it sees itself (last NSpid field): differs in a container */
    int lis;                 /* the listener (network namespace) its agent was told of */
    uint64_t start_time;     /* with pid, the process's identity: a reused pid is a stranger */
    enum mstate st;
    int fd;                  /* its control connection */
    struct spool *sp;        /* what it streams while it traces: OUT.PID.spool (spool.h) */
    int ended_early;         /* its connection ended before END: its trace up to then is kept */
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

/* A listening control socket in one network namespace: an agent connects to an abstract
 * name, which exists only in the namespace the socket was made in (control_client.c), so a
 * tree whose processes live in several (the containers of a pod, a process that entered a new
 * one) gets one per namespace, made when its first member there is injected. */
struct listener {
    struct ctl_conn ctl;      /* its fd is the listener, never accepted through ctl_accept */
    dev_t dev;                /* the namespace: /proc/PID/ns/net's identity */
    ino_t ino;
};

struct tree_run {
    const struct cli_options *opt;
    struct listener lis[MAX_NETNS]; /* [0]: the root's namespace */
    size_t nlis;
    struct member *m;
    size_t n, cap;
    unsigned budget_mb, reserve_mb;
    unsigned initial_share_mb; /* what each process found at attach gets */
    int stopping;
    int64_t t0;
    char out_dir[PATH_MAX];
    char out_abs[PATH_MAX];
        char *buf;               /* one frame (VC_MSG_MAX + 1) */
    uint64_t received;       /* spool bytes of every process: capped by --max-trace-mb */
    size_t skipped_gone;     /* non-Python members dropped from m[] once their process ended */
    size_t peak;             /* the most members m[] held at once (reported with -v) */
};

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
    m->fd = -1;
    m->since = vc_monotonic_ms();
    m->start_time = target_start_time(pid);
    m->own_pid = target_own_pid(pid);
    target_cmdline(pid, m->name, sizeof m->name);
    return m;
}

/* Whether the process now behind m->pid is the one m was made for (same start time; a
 * member stays itself when it is reparented). */
static int same_process(const struct member *m)
{
    return m->start_time != 0 && target_start_time(m->pid) == m->start_time;
}

/* A member that holds nothing (no connection, no part, no budget share) and whose process is
 * gone takes the slot of a newcomer with its pid: the old one is forgotten. */
static int holds_nothing(const struct member *m)
{
    return m->fd < 0 && m->sp == NULL && (m->st == M_SKIPPED || m->st == M_LOST) &&
           (m->share_mb == 0 || m->share_returned);
}

/* The slot of a member that holds nothing, for the new process that has its pid (as a skipped
 * one: the caller examines it like a newcomer). */
static void rebind(struct member *m)
{
    pid_t pid = m->pid;
    memset(m, 0, sizeof *m);
    m->pid = pid;
    m->fd = -1;
    m->since = vc_monotonic_ms();
    m->start_time = target_start_time(pid);
    m->own_pid = target_own_pid(pid);
    target_cmdline(pid, m->name, sizeof m->name);
    m->st = M_SKIPPED;
}

/* How many members -v keeps before compact() forgets the gone ones: VERBOSE_KEEP, or the
 * test-only VCATTACH_TEST_VERBOSE_KEEP=N (tests/test_security_tree.py), so that a test
 * reaches the bound with a few dozen helpers instead of 4096. */
static size_t verbose_keep(void)
{
    const char *v = getenv("VCATTACH_TEST_VERBOSE_KEEP");
    long n = v ? atol(v) : 0;
    return n > 0 && n < VERBOSE_KEEP ? (size_t)n : VERBOSE_KEEP;
}

/* Drops the skipped non-Python members whose process is gone: the table would otherwise grow
 * by one slot for every short-lived helper (a shell, `sleep`) ever seen in the tree.  Only
 * their count is kept, for the summary line; members print_result always lists (lost,
 * refused) stay.  With -v (which lists them) only beyond verbose_keep() members. */
static void compact(struct tree_run *r)
{
    if (r->n > r->peak)
        r->peak = r->n;
    if (r->opt->verbose && r->n < verbose_keep())
        return;
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++) {
        struct member *m = &r->m[i];
        if (i > 0 && m->st == M_SKIPPED && !m->python && holds_nothing(m) &&
            !same_process(m)) {
            r->skipped_gone++;
            continue;
        }
        if (k != i)
            r->m[k] = *m;
        k++;
    }
    r->n = k;
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
    if (st == M_LOST) { /* a done member's spool waits for the final build */
        spool_close(m->sp, 1);
        m->sp = NULL;
    }
    set_state(m, st);
}

/* A newcomer's share of the budget, taken from the reserve; 0 if the reserve is spent. */
static unsigned share_for(struct tree_run *r)
{
    unsigned want = r->budget_mb / 8 > MIN_SHARE_MB ? r->budget_mb / 8 : MIN_SHARE_MB;
    if (!r->opt->buffer_mb && want > DEFAULT_SHARE_MAX_MB)
        want = DEFAULT_SHARE_MAX_MB;
    if (want > r->reserve_mb)
        want = r->reserve_mb;
    if (want < MIN_SHARE_MB)
        return 0;
    r->reserve_mb -= want;
    return want;
}

/* ---- configuring a connected agent -------------------------------------------------------- */

static int spool_open_member(struct tree_run *r, struct member *m);
static void ended_early(struct tree_run *r, struct member *m, const char *why);

static int send_config(struct tree_run *r, struct member *m)
{
    static char cfg[VC_MSG_MAX / 4];
    char fallback[PATH_MAX + 64];
    int moved;
    /* In another mount namespace or root, the agent writes its fallback in its own /tmp. */
    if (attach_fallback_for(m->pid, r->out_abs, m->pid, fallback, sizeof fallback, &moved) < 0)
        return -1;
    /* The single-target config (deadline with grace, hook, filters) with this process's
     * share of the budget, and follow_forks. */
    struct cli_options one = *r->opt;
    one.mode = CLI_TRACE;
    one.buffer_mb = m->share_mb;
    int rc = attach_build_config(&one, "control", fallback, cfg, sizeof cfg);
    size_t used = strlen(cfg);
    rc |= vc_kv_append(cfg, sizeof cfg, &used, "follow_forks", "1");
    if (rc == 0 && m->sp == NULL && spool_open_member(r, m) != 0)
        return -1;
    rc |= ctl_add_token(&r->lis[m->lis].ctl, cfg, sizeof cfg, &used);
    if (rc || vc_msg_send(m->fd, VC_MSG_CONFIG, cfg, used, 5000) < 0)
        return -1;
    set_state(m, M_STARTING);
    return 0;
}

/* A new connection on listener li: whose it is (SO_PEERCRED: the pid as we see it, whatever
 * pid namespace the agent is in), its HELLO, its CONFIG. */
static void accept_one(struct tree_run *r, size_t li)
{
    int fd = accept4(r->lis[li].ctl.listen_fd, NULL, NULL, SOCK_CLOEXEC);
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
    /* Judged now, at accept: a member's pid whose process is not the member's any more (it
     * exited and someone else got the pid) is a stranger, checked like any unknown pid. */
    int stranger = m != NULL && !same_process(m);
    if ((m == NULL || stranger) && pid != r->opt->pid &&
        !target_descends_from(pid, r->opt->pid)) {
        fprintf(stderr, "vcattach: ignoring a connection from pid %d: not in the tree of %d\n",
                (int)pid, (int)r->opt->pid);
        close(fd);
        return;
    }
    if (stranger && !holds_nothing(m)) {
        fprintf(stderr, "vcattach: ignoring a connection from pid %d: a new process with the "
                        "pid of a member whose trace is still held\n", (int)pid);
        close(fd);
        return;
    }
    if (stranger) /* a new descendant with an old member's pid: that slot is its own now */
        rebind(m);
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
    m->lis = (int)li; /* its CONFIG carries that listener's token, which its agent knows */
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

/* The member's spool, OUT.PID.spool next to OUT: made by vcattach, never named by the member
 * (a stale one of an earlier run is replaced only with --force, as OUT is). */
static int spool_open_member(struct tree_run *r, struct member *m)
{
    char path[PATH_MAX + 32], err[512];
    snprintf(path, sizeof path, "%s.%d.spool", r->out_abs, (int)m->pid);
    if (r->opt->force)
        unlink(path);
    if (spool_create(&m->sp, path, (uint64_t)m->pid, err, sizeof err) != 0) {
        fprintf(stderr, "vcattach: pid %d: %s\n", (int)m->pid, err);
        return -1;
    }
    return 0;
}

/* The calls a member lost: its agent counts them all in END (those it dropped at the source
 * among them); a member that ended without END has only its spool's count. */
static uint64_t end_drops(const struct member *m, uint64_t spooled)
{
    char v[32];
    return vc_kv_get(m->end, "drops", v, sizeof v) > 0 ? strtoull(v, NULL, 10) : spooled;
}

/* Its spool is complete (END, or its connection ended): it stays open for the final build;
 * its END text gets the counts the summary prints. */
static void spool_done(struct member *m)
{
    uint64_t records = 0, dropped = 0, disk = 0;
    spool_progress(m->sp, &records, &dropped, &disk);
    char end[sizeof m->end + 96];
    snprintf(end, sizeof end, "events=%llu\nthreads=%llu\ndrops=%llu\n%s",
             (unsigned long long)records, (unsigned long long)spool_thread_count(m->sp),
             (unsigned long long)end_drops(m, dropped), m->end);
    end[sizeof m->end - 1] = '\0'; /* cut if need be: the counts come first */
    memcpy(m->end, end, sizeof m->end);
}

/* A streaming frame of a member: into its spool.  The tree as a whole takes what one target
 * would (--max-trace-mb, counted on the spools' size on disk: a member that passes it keeps
 * what it had, and the members after it too). */
static void spool_frame(struct tree_run *r, struct member *m, uint32_t type, const char *buf,
                        size_t n)
{
    char err[512];
    if (m->sp == NULL) {
        finish(r, m, M_LOST, "its agent streamed before it was configured");
        return;
    }
    m->bytes += n;
    uint64_t records, dropped, before, after;
    spool_progress(m->sp, &records, &dropped, &before);
    int rc = spool_add(m->sp, type, buf, n, err, sizeof err);
    spool_progress(m->sp, &records, &dropped, &after);
    r->received += after - before; /* what the tree's spools hold on disk */
    if (rc == 0 && r->received > (uint64_t)r->opt->max_trace_mb << 20) {
        snprintf(m->why, sizeof m->why, "the tree's spools passed --max-trace-mb %u MiB: its "
                 "trace ends there", r->opt->max_trace_mb);
        ended_early(r, m, m->why);
        return;
    }
    if (rc == -1) {
        char why[600];
        snprintf(why, sizeof why, "its agent broke the protocol: %.500s", err);
        finish(r, m, M_LOST, why);
    } else if (rc == -2) {
        snprintf(m->why, sizeof m->why, "%.300s", err);
        ended_early(r, m, m->why); /* the disk: what was spooled is its trace */
    }
}

static int in_other_pid_ns(const struct member *m)
{
    return m->own_pid > 0 && m->own_pid != m->pid;
}

/* A member's streaming frame; what a member in another pid namespace says about its process
 * (META, EVENTS) names it by our pid, with its own beside it (ns_pid.c). */
static void on_stream_frame(struct tree_run *r, struct member *m, uint32_t type, const char *buf,
                            size_t n)
{
    void *rewritten = NULL;
    size_t rn = 0;
    if (in_other_pid_ns(m) && type == VC_MSG_META)
        rewritten = ns_pid_meta(buf, n, m->pid, m->own_pid, &rn);
    else if (in_other_pid_ns(m) && type == VC_MSG_EVENTS)
        rewritten = ns_pid_events(buf, n, m->pid, m->own_pid, &rn);
    if (rewritten != NULL)
        spool_frame(r, m, type, rewritten, rn);
    else
        spool_frame(r, m, type, buf, n);
    free(rewritten);
}

/* A member in another pid namespace gets its name in its spool as it starts (our pid, its
 * command line, its own pid): a process killed before its agent's META keeps a named track
 * under our pid.  Its agent's own META replaces it at the end. */
static void spool_initial_name(struct tree_run *r, struct member *m)
{
    if (!in_other_pid_ns(m) || m->sp == NULL)
        return;
    unsigned char meta[8 + sizeof m->name];
    size_t len = strnlen(m->name, sizeof m->name);
    uint64_t pid = (uint64_t)m->own_pid; /* ns_pid_meta puts ours in */
    memcpy(meta, &pid, 8);
    memcpy(meta + 8, m->name, len);
    on_stream_frame(r, m, VC_MSG_META, (const char *)meta, 8 + len);
}

/* A member whose connection ended without END (killed, or exited without its atexit stop):
 * what it streamed before is its trace. */
static void ended_early(struct tree_run *r, struct member *m, const char *why)
{
    uint64_t records = 0, dropped, disk;
    if (m->sp != NULL)
        spool_progress(m->sp, &records, &dropped, &disk);
    if ((m->st == M_RUNNING || m->st == M_STOPPING) && records == 0) {
        char note[400];
        snprintf(note, sizeof note, "%.300s, before any of its calls reached vcattach", why);
        finish(r, m, M_LOST, note);
        return;
    }
    if ((m->st == M_RUNNING || m->st == M_STOPPING) && records > 0) {
        m->ended_early = 1;
        m->end[0] = '\0';
        spool_done(m);
        char note[400];
        snprintf(note, sizeof note, "%s: its trace up to then is kept", why);
        finish(r, m, M_DONE, note);
        return;
    }
    finish(r, m, M_LOST, why);
}

/* Its agent found Python loaded but not initialized.  A young process is an interpreter still
 * starting (a new `python`, a spawn child): inject again later.  An older one, or one that
 * stays so, is a host that embeds libpython and has not initialized it, or never will in that
 * process: Apache's master under mod_wsgi (lazy initialization: only its children run Python),
 * uWSGI's master with --lazy-apps.  Nothing to trace there: it is skipped with that reason at
 * once, not re-injected nor waited for (it used to end as "lost" after the trace). */
static void not_initialized(struct tree_run *r, struct member *m, const char *msg)
{
    long age = target_age_ms(m->pid);
    if (age >= 0 && age < INIT_GRACE_MS && m->retries < INIT_RETRIES && !m->forked &&
        !r->stopping) {
        finish(r, m, M_RETRY, msg);
        m->retries++;
        return;
    }
    m->python = 1;
    finish(r, m, M_SKIPPED,
           "Python is loaded but not initialized in it (an embedding host's process that runs "
           "no Python, e.g. Apache's master under mod_wsgi): nothing to trace");
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
        ended_early(r, m, why);
        return;
    }
    if (spool_frame_type(type)) {
        on_stream_frame(r, m, type, buf, (size_t)n);
        return;
    }
    switch (type) {
    case VC_MSG_STARTED:
        set_state(m, M_RUNNING);
        spool_initial_name(r, m);
        if (m->st != M_RUNNING)
            return;
        if (r->stopping && vc_msg_send(m->fd, VC_MSG_STOP, NULL, 0, 5000) == 0)
            set_state(m, M_STOPPING);
        return;
    case VC_MSG_ERROR:
        buf[n] = '\0';
        ctl_sanitize(buf, (size_t)n); /* the target's user's text, printed later */
        if (strstr(buf, "not initialized")) {
            not_initialized(r, m, buf);
            return;
        }
        {
            char why[400];
            snprintf(why, sizeof why, "its agent refused: %.300s", buf);
            finish(r, m, M_LOST, why);
        }
        return;
    case VC_MSG_DATA: /* a streaming session sends no .cvf: the agent is not to be trusted */
        finish(r, m, M_LOST, "its agent broke the protocol: a whole trace in a streaming session");
        return;
    case VC_MSG_END: {
        buf[n] = '\0';
        ctl_sanitize(buf, (size_t)n);
        snprintf(m->end, sizeof m->end, "%s", buf);
        char v[32] = "0";
        vc_kv_get(buf, "status", v, sizeof v);
        if (atol(v) != 0 || m->sp == NULL) {
            finish(r, m, M_LOST, "its agent failed to send its trace (see its fallback file)");
        } else {
            spool_done(m);
            finish(r, m, M_DONE, NULL);
        }
        return;
    }
    default:
        return; /* STATUS answers are not for us */
    }
}

/* ---- injecting ---------------------------------------------------------------------------- */

/* The network namespace of pid (what /proc/PID/ns/net names).  0, or -1 if it is gone. */
static int net_ns_of(pid_t pid, dev_t *dev, ino_t *ino)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    if (stat(path, &st) < 0)
        return -1;
    *dev = st.st_dev;
    *ino = st.st_ino;
    return 0;
}

/* The listener in pid's network namespace, made there (ctl_listen enters it for the socket)
 * when it is the first member in it.  Its index, or -1 with err. */
static int listener_for(struct tree_run *r, pid_t pid, char *err, size_t errlen)
{
    dev_t dev;
    ino_t ino;
    if (net_ns_of(pid, &dev, &ino) < 0) {
        snprintf(err, errlen, "cannot read its network namespace (gone?)");
        return -1;
    }
    for (size_t i = 0; i < r->nlis; i++)
        if (r->lis[i].dev == dev && r->lis[i].ino == ino)
            return (int)i;
    if (r->nlis == MAX_NETNS) {
        snprintf(err, errlen, "the tree spans more than %d network namespaces: trace this "
                              "process on its own", MAX_NETNS);
        return -1;
    }
    struct listener *l = &r->lis[r->nlis];
    ctl_init(&l->ctl);
    if (ctl_listen(&l->ctl, pid, err, errlen) < 0)
        return -1;
    /* Many agents connect at once (a tree attached in one go): a deeper backlog than the
     * single-target socket's, or later connects would time out in the agents. */
    listen(l->ctl.listen_fd, 256);
    l->dev = dev;
    l->ino = ino;
    if (r->opt->verbose && r->nlis > 0)
        fprintf(stderr, "vcattach: pid %d is in another network namespace: a control socket "
                        "made there for it\n", (int)pid);
    return (int)r->nlis++;
}

/* The method of a member: an explicit --method for each (remote-exec where the member
 * accepts it: 3.14+, remote debugging on; else it is skipped with the reason); auto is ptrace
 * in a tree: remote-exec waits for a thread of the member to run Python, up to 2 s for an
 * idle one, and the members are injected one after the other.  0, or -1 with err. */
static int member_method(const struct tree_run *r, const struct target_info *t,
                         enum inject_method *m, char *err, size_t errlen)
{
    if (r->opt->method == CLI_METHOD_REMOTE_EXEC)
        return attach_choose_method("vcattach", r->opt, t, m, err, errlen);
    *m = r->opt->method == CLI_METHOD_GDB ? INJECT_GDB : INJECT_PTRACE;
    return 0;
}

static void pump(struct tree_run *r, int ms, char *buf, size_t cap);

/* remote-exec's wait for a member's agent: the tree's loop (every listener, every member's
 * frames) for the slice, then whether that member's connection came.  The member is found
 * again by pid each time: the loop may add members (fork children), moving the table. */
struct member_wait {
    struct tree_run *r;
    pid_t pid;
};

static int wait_member(void *ctx, int wait_ms)
{
    struct member_wait *w = ctx;
    if (attach_interrupts)
        return -1;
    pump(w->r, wait_ms, w->r->buf, VC_MSG_MAX + 1);
    struct member *m = find(w->r, w->pid);
    if (m == NULL)
        return -1;
    if (m->fd >= 0 || m->st != M_CONNECT) /* connected (and configured, or given up on) */
        return 1;
    return target_alive(w->pid) ? 0 : -1;
}

/* Preflight and injection of one process (attach.c, as for a single target: a process in
 * another mount namespace or root gets the agent copied into its /tmp as its own user, its
 * control socket in its network namespace); the member's state says what came of it.
 * Returns the member (the table may have moved while remote-exec waited). */
static struct member *inject_member(struct tree_run *r, struct member *m, int at_attach)
{
    char err[1024] = "";
    static struct target_info t; /* large (paths): not on the stack */
    m->forked = 0; /* injected: whatever it was, it joins through this injection now */
    target_exe(m->pid, m->exe, sizeof m->exe);
    if (attach_preflight(r->opt, m->pid, &t, err, sizeof err) < 0) {
        /* Not Python (yet), or refused: target_python_detect tells which. */
        struct target_python py;
        char e2[256];
        m->python = target_python_detect(m->pid, &py, e2, sizeof e2) == 1;
        finish(r, m, M_SKIPPED, m->python ? err : "not a CPython process");
        return m;
    }
    m->python = 1;
    enum inject_method method;
    int li = member_method(r, &t, &method, err, sizeof err) < 0
                 ? -1
                 : listener_for(r, m->pid, err, sizeof err);
    if (li < 0) {
        preflight_release(&t);
        finish(r, m, M_SKIPPED, err);
        return m;
    }
    if (!at_attach && m->share_mb == 0 && (m->share_mb = share_for(r)) == 0) {
        preflight_release(&t);
        finish(r, m, M_SKIPPED, "the --buffer-mb budget was spent (raise it)");
        return m;
    }
    /* Waiting for its connection from now on (remote-exec's connection may come while the
     * injector waits: accept_one takes it as this member's). */
    pid_t pid = m->pid;
    m->lis = li;
    m->fd = -1;
    set_state(m, M_CONNECT);
    struct member_wait w = {r, pid};
    int st = attach_inject_waiting(r->opt, &t, &r->lis[li].ctl, method, wait_member, &w, err,
                                   sizeof err);
    preflight_release(&t);
    if ((m = find(r, pid)) == NULL) /* cannot be: members leave the table only in compact() */
        return &r->m[0];
    if (st < 0) {
        char why[1100];
        snprintf(why, sizeof why, "injection failed: %s", err);
        if (m->fd >= 0 || m->st != M_CONNECT) /* its agent came after all: it is traced */
            return m;
        finish(r, m, M_LOST, why);
        m->share_mb = 0;
        return m;
    }
    if (r->opt->verbose) {
        char label[96];
        ns_pid_label(pid, m->own_pid, label, sizeof label);
        fprintf(stderr, "vcattach: pid %s (%s) is Python %d.%d: injected %s%s\n", label,
                t.f.comm, t.f.py.major, t.f.py.minor, t.agent_in_target,
                method == INJECT_REMOTE_EXEC ? " (remote-exec)" : "");
    }
    if (m->st == M_CONNECT && m->fd < 0)
        set_state(m, M_CONNECT); /* its connection wait starts now */
    return m;
}

/* ---- the loop ----------------------------------------------------------------------------- */

/* Waits up to ms for connections and frames, handling them. */
/* A member's frames while they keep coming (up to a bound, so that the others and the
 * listener get their turn): a streaming member sends a chunk every few milliseconds. */
#define DRAIN_MAX 64
static void drain(struct tree_run *r, struct member *m, char *buf, size_t cap)
{
    for (int i = 0; i < DRAIN_MAX && m->fd >= 0; i++) {
        on_frame(r, m, buf, cap);
        struct pollfd q = {.fd = m->fd, .events = POLLIN};
        if (m->fd < 0 || poll(&q, 1, 0) <= 0)
            return;
    }
}

static void pump(struct tree_run *r, int ms, char *buf, size_t cap)
{
    size_t nl = r->nlis, nfds = nl;
    struct pollfd *p = calloc(r->n + nl, sizeof *p);
    size_t *who = calloc(r->n + nl, sizeof *who);
    if (p == NULL || who == NULL) {
        free(p);
        free(who);
        struct timespec ts = {0, (long)ms * 1000000L};
        nanosleep(&ts, NULL);
        return;
    }
    for (size_t l = 0; l < nl; l++)
        p[l] = (struct pollfd){.fd = r->lis[l].ctl.listen_fd, .events = POLLIN};
    for (size_t i = 0; i < r->n; i++)
        if (r->m[i].fd >= 0) {
            who[nfds] = i;
            p[nfds++] = (struct pollfd){.fd = r->m[i].fd, .events = POLLIN};
        }
    int k = poll(p, (nfds_t)nfds, ms);
    if (k > 0) {
        for (size_t j = nl; j < nfds; j++)
            if (p[j].revents)
                drain(r, &r->m[who[j]], buf, cap);
        for (size_t l = 0; l < nl; l++)
            if (p[l].revents & POLLIN)
                accept_one(r, l);
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
            inject_member(r, m, 0);
        } else if (m->st == M_CONNECT && now - m->since > (m->forked ? FORK_JOIN_WAIT_MS : CONNECT_WAIT_MS))
            finish(r, m, M_LOST, "its agent did not connect (see its stderr)");
        else if (m->st == M_STARTING && now - m->since > STARTED_WAIT_MS)
            finish(r, m, M_LOST, "its agent did not start in time (GIL held?)");
        else if (m->st == M_CONNECT && m->fd < 0 && !target_alive(m->pid))
            finish(r, m, M_LOST, "exited before its agent connected");
        else if (m->st == M_RETRY && !target_alive(m->pid))
            finish(r, m, M_LOST, "exited while its interpreter was starting");
        else if (m->st == M_RETRY && m->pid == r->opt->pid && now - m->since >= RETRY_MS &&
                 !r->stopping)
            inject_member(r, m, 0); /* the root: discover() walks only its descendants */
    }
}

/* New descendants since the last look; retries of starting interpreters; skipped processes
 * that exec'd. */
static void discover(struct tree_run *r, int at_attach)
{
    pid_t *pids = NULL;
    compact(r);
    long n = target_descendants(r->opt->pid, &pids);
    int64_t now = vc_monotonic_ms();
    for (long i = 0; i < n && !attach_interrupts; i++) {
        struct member *m = find(r, pids[i]);
        if (m != NULL && !r->stopping && !same_process(m) && holds_nothing(m)) {
            rebind(m); /* the pid of a gone member, reused by a new descendant */
            goto examine;
        }
        if (m != NULL) {
            if (m->st == M_RETRY && now - m->since >= RETRY_MS && !r->stopping)
                m = inject_member(r, m, 0);
            else if (m->st == M_CONNECT && m->forked && m->fd < 0 && !r->stopping &&
                     target_has_agent(m->pid) == 0) {
                /* A fork child that exec'd (subprocess, spawn): a new image, maybe a new
                 * interpreter, to examine like any newcomer (its share is kept). */
                m = inject_member(r, m, 0);
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
        m = inject_member(r, m, 0);
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
    if (!r->opt->buffer_mb && each > DEFAULT_SHARE_MAX_MB)
        each = DEFAULT_SHARE_MAX_MB; /* streaming: a small window each, whatever the tree */
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

/* OUT from every done member's spool, then the spools go.  0, or -1 after printing why (the
 * spools stay, for `vcattach recover`). */
static int write_merged(struct tree_run *r, struct trace_sink *sink, size_t *nparts)
{
    char err[1024];
    struct spool **sps = calloc(r->n ? r->n : 1, sizeof *sps);
    if (sps == NULL) {
        fprintf(stderr, "vcattach: out of memory while merging\n");
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++)
        if (r->m[i].st == M_DONE && r->m[i].sp != NULL)
            sps[k++] = r->m[i].sp;
    *nparts = k;
    struct spool_stats st;
    int rc = k ? spool_build_processes(sps, k, cvf_sink_fd, (void *)(intptr_t)sink->fd, &st,
                                       err, sizeof err)
               : 0;
    free(sps);
    if (rc != 0) {
        fprintf(stderr, "vcattach: building the trace of the tree failed: %s\n", err);
        return -1;
    }
    off_t size = lseek(sink->fd, 0, SEEK_CUR);
    sink->bytes = size > 0 ? (uint64_t)size : 0;
    if (sink_commit(sink, err, sizeof err) < 0) {
        fprintf(stderr, "vcattach: %s\n", err);
        return -1;
    }
    for (size_t i = 0; i < r->n; i++) { /* written: the spools go */
        spool_close(r->m[i].sp, 1);
        r->m[i].sp = NULL;
    }
    return 0;
}

static void print_result(struct tree_run *r, const struct trace_sink *sink, int64_t traced)
{
    unsigned long long events = 0, threads = 0, drops = 0, interps = 0;
    size_t done = 0, lost = 0, skipped = 0, refused = 0;
    for (size_t i = 0; i < r->n; i++) {
        const struct member *m = &r->m[i];
        if (m->st == M_DONE) {
            done++;
            events += end_u64(m, "events");
            threads += end_u64(m, "threads");
            drops += end_u64(m, "drops");
            interps += end_u64(m, "interps_untraced"); /* 3.12+: agent/interps.c */
        } else if (m->st == M_SKIPPED && !m->python) {
            skipped++;
        } else if (m->st == M_SKIPPED) {
            refused++;
        } else {
            lost++;
        }
    }
    skipped += r->skipped_gone;
    char size[32];
    cli_format_bytes(sink->bytes, size, sizeof size);
    if (!r->opt->quiet) {
        char root[96];
        ns_pid_label(r->opt->pid, r->n ? r->m[0].own_pid : 0, root, sizeof root);
        printf("vcattach: pid %s and its subprocesses in %.1fs: %zu process%s traced", root,
               (double)traced / 1000.0, done, done == 1 ? "" : "es");
        if (lost)
            printf(", %zu lost", lost);
        if (refused)
            printf(", %zu not traced", refused);
        if (skipped)
            printf(", %zu non-Python skipped", skipped);
        printf(": %llu events, %llu threads, %llu dropped%s", events, threads, drops,
               drops ? " (vcattach did not keep up: see the \"vcattach dropped\" instants)" : "");
        if (interps) /* before ", SIZE -> OUT": what follows the arrow is where the trace is */
            printf("; %llu sub-interpreter%s not traced (CPython 3.12+: ended before hooked, or "
                   "--hook profile)", interps, interps == 1 ? "" : "s");
        printf(", %s -> %s\n", size, sink->path);
    }
    for (size_t i = 0; i < r->n; i++) {
        const struct member *m = &r->m[i];
        int always = (m->st != M_DONE || m->ended_early) && !(m->st == M_SKIPPED && !m->python);
        if (r->opt->quiet || (!always && !r->opt->verbose))
            continue;
        char label[96];
        ns_pid_label(m->pid, m->own_pid, label, sizeof label);
        printf("  pid %s %s%s: %s", label, m->forked ? "(forked) " : "", state_word(m),
               m->name);
        if (m->st == M_DONE)
            printf(" — %llu events, %llu threads, %u MiB buffer", end_u64(m, "events"),
                   end_u64(m, "threads"), m->share_mb);
        if (m->why[0] && (m->st != M_DONE || m->ended_early))
            printf(" — %s", m->why);
        putchar('\n');
    }
    if (r->opt->verbose && !r->opt->quiet)
        printf("  (member table: %zu entries at most; %zu more non-Python processes skipped, "
               "gone, not listed)\n", r->n > r->peak ? r->n : r->peak, r->skipped_gone);
    fflush(stdout);
}

/* ---- the command -------------------------------------------------------------------------- */

/* OUT opened (OUT.tmp) and the names derived from it.  0, or -1 after printing why. */
static int open_output(const char *cmd, struct tree_run *r, struct trace_sink *sink)
{
    char err[1024], name[96];
    memset(sink, 0, sizeof *sink);
    sink->fd = -1;
    const char *out = r->opt->output;
    if (!out) {
        attach_default_output(r->opt->pid, 1, name, sizeof name);
        out = name;
    }
    if (sink_open_file(sink, out, r->opt->force, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return -1;
    }
    snprintf(r->out_abs, sizeof r->out_abs, "%s", sink->path);
    snprintf(r->out_dir, sizeof r->out_dir, "%s", sink->path);
    char *slash = strrchr(r->out_dir, '/');
    if (slash)
        slash[slash == r->out_dir ? 1 : 0] = '\0';
    return 0;
}

/* The root's own checks before anything is touched: a tree is refused as a whole when its
 * root is (exit 2): its preflight, and with --method remote-exec whether it accepts a PEP 768
 * request.  A root in another mount, pid or user namespace is traced like any member.  0, or
 * -1 after printing why. */
static int preflight_root(const char *cmd, const struct cli_options *opt)
{
    char err[1024];
    static struct target_info t; /* large (paths): not on the stack */
    if (attach_preflight(opt, opt->pid, &t, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return -1;
    }
    enum inject_method m;
    int rc = opt->method == CLI_METHOD_REMOTE_EXEC
                 ? attach_choose_method(cmd, opt, &t, &m, err, sizeof err)
                 : 0;
    preflight_release(&t);
    if (rc < 0) /* an explicit remote-exec the root does not accept */
        fprintf(stderr, "%s: %s\n", cmd, err);
    return rc;
}

/* Attach: the root, then every descendant there is now, each started (or given up) before
 * the clock runs.  0, or -1 after printing why the root could not be attached. */
static int attach_all(const char *cmd, struct tree_run *r)
{
    int64_t t_attach = vc_monotonic_ms();
    struct member *root = add(r, r->opt->pid);
    if (root == NULL)
        return -1;
    root->share_mb = r->initial_share_mb;
    root = inject_member(r, root, 1);
    if (root->st != M_CONNECT && root->st != M_STARTING && root->st != M_RUNNING) {
        fprintf(stderr, "%s: pid %d: %s\n", cmd, (int)r->opt->pid, root->why);
        return -1;
    }
    pump(r, 0, r->buf, VC_MSG_MAX + 1);
    discover(r, 1);
    while (!attach_interrupts) {
        int waiting = 0;
        for (size_t i = 0; i < r->n; i++)
            waiting += r->m[i].st == M_CONNECT || r->m[i].st == M_STARTING;
        if (!waiting)
            break;
        pump(r, TREE_POLL_MS, r->buf, VC_MSG_MAX + 1);
        check_waits(r);
    }
    r->t0 = vc_monotonic_ms();
    if (r->opt->verbose)
        fprintf(stderr, "%s: %zu processes attached in %lld ms\n", cmd, traced_count(r),
                (long long)(r->t0 - t_attach));
    return 0;
}

/* Trace: frames, newcomers, until the duration, Ctrl-C, or the whole tree is gone. */
static void trace_until_done(struct tree_run *r)
{
    const struct cli_options *opt = r->opt;
    int64_t last_scan = 0;
    int show = !opt->quiet && isatty(STDERR_FILENO);
    while (!attach_interrupts) {
        int64_t el = vc_monotonic_ms() - r->t0;
        if (opt->duration_ms && el >= (int64_t)opt->duration_ms)
            break;
        pump(r, TREE_POLL_MS / 2, r->buf, VC_MSG_MAX + 1);
        check_waits(r);
        if (vc_monotonic_ms() - last_scan >= TREE_POLL_MS) {
            last_scan = vc_monotonic_ms();
            discover(r, 0);
        }
        int any = 0;
        size_t running = 0;
        for (size_t i = 0; i < r->n; i++) {
            any |= active(&r->m[i]);
            running += r->m[i].st == M_RUNNING;
        }
        if (show) {
            char e[32];
            cli_format_duration((uint64_t)el, e, sizeof e);
            fprintf(stderr, "\rvcattach: tracing %zu processes of pid %d: %s elapsed (Ctrl-C to "
                            "stop)\033[K", running, (int)opt->pid, e);
        }
        if (!any && !target_alive(opt->pid))
            break;
    }
    if (show)
        fprintf(stderr, "\r\033[K");
}

/* Stop: STOP to every running session, then collect until every trace is in, or
 * --collect-timeout, or a second Ctrl-C. */
static void stop_and_collect(struct tree_run *r)
{
    r->stopping = 1;
    for (size_t i = 0; i < r->n; i++)
        if (r->m[i].st == M_RUNNING && vc_msg_send(r->m[i].fd, VC_MSG_STOP, NULL, 0, 5000) == 0)
            set_state(&r->m[i], M_STOPPING);
    int64_t collect_end = vc_monotonic_ms() + (int64_t)r->opt->collect_timeout_ms;
    while (!attach_abandon && vc_monotonic_ms() < collect_end) {
        int any = 0;
        for (size_t i = 0; i < r->n; i++)
            any |= active(&r->m[i]) && r->m[i].st != M_RETRY;
        if (!any)
            break;
        pump(r, TREE_POLL_MS, r->buf, VC_MSG_MAX + 1);
        check_waits(r);
    }
    for (size_t i = 0; i < r->n; i++)
        if (active(&r->m[i]))
            finish(r, &r->m[i], M_LOST, attach_abandon ? "abandoned (interrupted twice): its "
                                                         "agent writes its fallback file"
                                                       : "its trace did not arrive in time");
}

/* The whole run once OUT is open and the signals counted.  An exit code. */
static int run(const char *cmd, struct tree_run *r, struct trace_sink *sink)
{
    char err[1024];
    if ((r->buf = malloc(VC_MSG_MAX + 1)) == NULL) {
        fprintf(stderr, "%s: out of memory\n", cmd);
        return VC_EXIT_FAIL;
    }
    if (listener_for(r, r->opt->pid, err, sizeof err) < 0) { /* the root's: lis[0] */
        fprintf(stderr, "%s: %s\n", cmd, err);
        return VC_EXIT_FAIL;
    }
    plan_budget(r);
    if (attach_all(cmd, r) < 0)
        return VC_EXIT_FAIL;
    struct receive_priority prio;
    receive_priority_raise(&prio, r->opt, cmd);
    trace_until_done(r);
    receive_priority_restore(&prio); /* the agents record no more: the build can wait */
    int64_t traced = vc_monotonic_ms() - r->t0;
    stop_and_collect(r);
    if (attach_abandon) {
        char stem[PATH_MAX];
        attach_output_stem(r->out_abs, stem, sizeof stem);
        fprintf(stderr, "%s: interrupted twice: trace abandoned; each agent writes what it has "
                        "to %s.PID.partial.cvf\n", cmd, stem);
        return VC_EXIT_FAIL;
    }
    size_t nparts = 0;
    if (write_merged(r, sink, &nparts) < 0)
        return VC_EXIT_FAIL;
    print_result(r, sink, traced);
    return nparts ? VC_EXIT_OK : VC_EXIT_FAIL;
}

int tree_trace(const struct cli_options *opt)
{
    const char *cmd = "vcattach";
    if (preflight_root(cmd, opt) < 0)
        return VC_EXIT_USAGE;
    static struct tree_run r;
    memset(&r, 0, sizeof r);
    r.opt = opt;
    r.budget_mb = opt->buffer_mb ? opt->buffer_mb : DEFAULT_BUDGET_MB;
    static struct trace_sink sink;
    if (open_output(cmd, &r, &sink) < 0)
        return VC_EXIT_USAGE;
    struct attach_signals saved;
    attach_signals_install(&saved);
    int rc = run(cmd, &r, &sink);
    for (size_t i = 0; i < r.n; i++) {
        if (r.m[i].fd >= 0)
            close(r.m[i].fd);
        if (r.m[i].sp != NULL) /* kept for `vcattach recover` (vcattach gave up on it) */
            spool_close(r.m[i].sp, 0);
    }
    free(r.m);
    free(r.buf);
    for (size_t i = 0; i < r.nlis; i++)
        ctl_close(&r.lis[i].ctl);
    sink_abort(&sink);
    attach_signals_restore(&saved);
    return rc;
}

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
 * The record budget (--buffer-mb) is shared: see the --help text and tree_share_for().
 * Here: the loop (discovery, injection, each member's frames); the member table and budget
 * shares are tree_members.c's, the listeners tree_listeners.c's, OUT and the printed account
 * tree_result.c's (tree_run.h).
 */
#include "tree_trace.h"
#include "tree_run.h"
#include "trace_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "commands.h"
#include "control_client.h"
#include "monotonic.h"
#include "ns_pid.h"
#include "proc_events.h"
#include "receive_priority.h"
#include "spool.h"
#include "term.h"
#include "trace_sink.h"
#include "tree_budget.h"
#include "tree_kin.h"
#include "vcinject.h"
#include "human.h"
#include "say.h"
#include "test_seam.h"

#define TREE_POLL_MS 100           /* how soon a process born during the trace is found */
#define CONNECT_WAIT_MS 10000      /* an injected agent must connect within this */
#define FORK_JOIN_WAIT_MS 3000     /* a fork child with the agent mapped must connect */
#define FORK_UNSURE_WAIT_MS 50     /* ... forked while its parent's session was starting: it
                                      may have none, and is injected */
#define STARTED_WAIT_MS 15000
#define HELLO_WAIT_MS 2000         /* a connected agent's HELLO must come within this */
#define YOUNG_MS 1000              /* a non-Python process this young may still exec Python */
#define INIT_RETRIES 40            /* "interpreter not initialized yet": inject again later */
#define RETRY_MS 50                /* ... this much later (a new interpreter starts in ~50 ms) */
#define EXEC_RETRY_MS 5            /* a new interpreter still being loaded: look again soon */
#define EXEC_RETRIES 100           /* ... at most this often (its first second) */
#define INIT_WAIT_MS 3000          /* a young interpreter's agent waits this long for its init */
#define INIT_GRACE_MS 3000         /* older and still not initialized: an embedding host */
#define HOLD_BUDGET_MS 1500        /* the longest a young process is held for its agent */
#define COLLECT_SILENCE_MS 30000   /* after STOP, an agent that sends nothing this long (its
                                      process stopped, or a thread holding the GIL for good) is
                                      given up: what it sent, and its window, are its trace */
#define COLLECT_SAY_FIRST_MS 2000  /* collecting longer than this: say who is awaited, */
#define COLLECT_SAY_MS 10000       /* ... and again this often */

/* ---- configuring a connected agent -------------------------------------------------------- */

static int spool_open_member(struct tree_run *r, struct member *m);
static void spool_initial_name(struct tree_run *r, struct member *m);
static void ended_early(struct tree_run *r, struct member *m, const char *why);
static void on_hello(struct tree_run *r, struct member *m);

/* Test seams: sleeps the milliseconds the seam's value says (none when it is unset). */
static void seam_sleep(const char *ms_text)
{
    if (ms_text == NULL)
        return;
    int ms = atoi(ms_text);
    struct timespec d = {ms / 1000, ms % 1000 * 1000000L};
    nanosleep(&d, NULL);
}

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
    /* A young interpreter may be injected before it is initialized (a spawned worker found
     * at its exec): its agent waits for it rather than being injected again. */
    long age = target_age_ms(m->pid);
    if (age >= 0 && age < INIT_GRACE_MS && !m->forked) {
        if (m->late) /* a vcattach too busy to answer soon */
            seam_sleep(VC_SEAM(CONFIG_DELAY_MS));
        char ms[16];
        snprintf(ms, sizeof ms, "%d", INIT_WAIT_MS);
        rc |= vc_kv_append(cfg, sizeof cfg, &used, "init_wait_ms", ms);
    }
    if (rc == 0 && m->sp == NULL) {
        if (spool_open_member(r, m) != 0)
            return -1;
        spool_initial_name(r, m);
    }
    rc |= ctl_add_token(&r->lis[m->lis].ctl, cfg, sizeof cfg, &used);
    if (rc || vc_msg_send(m->fd, VC_MSG_CONFIG, cfg, used, 5000) < 0)
        return -1;
    tree_set_state(m, M_STARTING);
    return 0;
}

/* The memfd a member's agent passed (HELLO or STARTED): what it records, readable after it
 * ended (read_window).  Only the first is kept. */
static void keep_window(struct member *m, int fd)
{
    if (fd < 0)
        return;
    if (m->window_fd >= 0) {
        close(fd);
        return;
    }
    m->window_fd = fd;
}

/* Whose a connection is, judged at accept: 1 the tree's (the root, a member or a
 * descendant), 0 not, -1 it cannot be told (it is gone and vcattach never saw it).  With
 * pidfds (tree_kin.h) the peer is the very process that connected, whatever became of its
 * pid: a member's identity matches, any other is judged by its parents.  Without them, by pid
 * and start time: a member's pid whose process is not the member's any more (it exited and
 * someone else got the pid) is a stranger, checked like any unknown pid.  *stranger: the pid
 * is a member's but the process is not. */
static int judge_peer(struct tree_run *r, int sock, pid_t pid, const struct member *m,
                      uint64_t *id, int *stranger)
{
    int pfd = r->kin.on ? target_peer_pidfd(sock) : -1;
    *id = target_pidfd_id(pfd);
    if (*id != 0) {
        int reaped = 0;
        *stranger = m != NULL && m->ino != *id && (m->ino != 0 || !tree_same_process(m));
        int kin = (m != NULL && m->ino == *id) || kin_judge(&r->kin, pfd, *id, &reaped);
        close(pfd);
        return kin ? 1 : reaped ? -1 : 0;
    }
    if (pfd >= 0)
        close(pfd);
    *stranger = m != NULL && !tree_same_process(m);
    if ((m == NULL || *stranger) && pid != r->opt->pid &&
        !target_descends_from(pid, r->opt->pid))
        return 0;
    return 1;
}

/* A fork child that connected by itself (m: its member, NULL if none yet): its member in
 * M_CONNECT with a share of the budget, or NULL when it is not traced (said in the summary).
 * The caller closes the connection on NULL. */
static struct member *admit_newcomer(struct tree_run *r, struct member *m, pid_t pid,
                                     uint64_t id)
{
    if (m == NULL && (m = tree_add(r, pid)) == NULL)
        return NULL;
    if (id != 0)
        m->ino = id;
    m->forked = 1;
    m->python = 1;
    /* Even while stopping: forked before its parent's agent took the STOP, it has recorded
     * since its fork, inside the trace (a pool worker's whole life can fit in that gap).  It
     * is stopped after the processes running at the stop (first_stops_pending), and its
     * parent, stopped, forks no more followers: the collection still ends. */
    if (tree_traced_count(r) >= r->opt->max_processes) {
        tree_finish(r, m, M_SKIPPED, "over --max-processes");
        return NULL;
    }
    if ((m->share_mb = tree_share_for(r)) == 0) {
        tree_finish(r, m, M_SKIPPED, "the --buffer-mb budget was spent (raise it)");
        return NULL;
    }
    tree_set_state(m, M_CONNECT);
    return m;
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
    struct member *m = tree_find(r, pid);
    uint64_t id = 0;
    int stranger, kin = judge_peer(r, fd, pid, m, &id, &stranger);
    if (!kin) {
        say("vcattach: ignoring a connection from pid %d: %s\n", (int)pid,
                kin < 0 ? "it ended before vcattach could tell whose it was (no process of the "
                          "tree that vcattach saw)"
                        : "not in the tree");
        close(fd);
        return;
    }
    if (stranger && tree_holds_nothing(m)) /* a new descendant with a gone member's pid: its slot */
        tree_rebind(r, m);
    else if (stranger) /* ... whose trace is still held (for the build): a member of its own */
        m = NULL;
    if (m == NULL || m->st == M_SKIPPED) { /* a fork child joining by itself */
        if ((m = admit_newcomer(r, m, pid, id)) == NULL) {
            close(fd);
            return;
        }
    } else if (m->st != M_CONNECT) {
        say("vcattach: pid %d connected twice; ignoring the second connection\n",
                (int)pid);
        close(fd);
        return;
    }
    m->fd = fd;
    m->lis = (int)li; /* its CONFIG carries that listener's token, which its agent knows */
    /* Its HELLO is read when it comes (on_frame), not waited for here: an agent thread on a
     * loaded machine may take tens of ms to send it, and this loop serves every member. */
    m->await_hello = 1;
    m->hello_since = vc_monotonic_ms();
    struct pollfd q = {.fd = fd, .events = POLLIN};
    if (poll(&q, 1, 0) > 0)
        on_hello(r, m);
}

/* A connected agent's HELLO (its frame is readable): then its CONFIG. */
static void on_hello(struct tree_run *r, struct member *m)
{
    char hello[512];
    uint32_t type;
    int window = -1;
    m->await_hello = 0;
    long n = vc_msg_recv_fd(m->fd, &type, hello, sizeof hello, &window, HELLO_WAIT_MS);
    keep_window(m, window); /* a fork child's: it records since its fork */
    if (n < 0 || type != VC_MSG_HELLO) {
        tree_finish(r, m, M_LOST, "its agent connected but sent no greeting");
        return;
    }
    char v[8];
    if (vc_kv_get(hello, "forked", v, sizeof v) > 0 && strcmp(v, "1") == 0)
        m->parent_traced = 1; /* its session goes on from its fork (agent/follow.c) */
    if (send_config(r, m) == 0)
        return;
    if (m->window_fd >= 0 && m->sp != NULL) {
        /* a fork child gone already: what it recorded since its fork is in its window */
        tree_set_state(m, M_STARTING);
        ended_early(r, m, "exited (or was killed) as its session began");
        return;
    }
    tree_finish(r, m, M_LOST, "the configuration could not be sent to its agent");
}

/* ---- a member's frames -------------------------------------------------------------------- */

/* The lane bytes a member's spool holds before they go to its file (a single process's holds
 * 64 MiB): a tree of --max-processes members must not hold that many times 64 MiB in root's
 * memory, and 8 MiB of records is ~2 M calls, flushed at least every 250 ms anyway. */
#define MEMBER_SPOOL_MEM ((uint64_t)16 << 20)

/* The member's spool, OUT.PID.spool next to OUT: made by vcattach, never named by the member
 * (a stale one of an earlier run is replaced only with --force, as OUT is). */
static int spool_in_use(const struct tree_run *r, const char *path)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->m[i].sp != NULL && strcmp(spool_path(r->m[i].sp), path) == 0)
            return 1;
    return 0;
}

static int spool_open_member(struct tree_run *r, struct member *m)
{
    char path[PATH_MAX + 32], err[512];
    snprintf(path, sizeof path, "%s.%d.spool", r->out_abs, (int)m->pid);
    /* A pid the trace met before (pids wrap: 32768 of them on many hosts, a pool churns them
     * by the thousand): the earlier process's spool, kept for the build, has that name. */
    for (int k = 2; spool_in_use(r, path) && k < 1000000; k++)
        snprintf(path, sizeof path, "%s.%d.%d.spool", r->out_abs, (int)m->pid, k);
    if (r->opt->force)
        unlink(path);
    if (spool_create(&m->sp, path, (uint64_t)m->pid, err, sizeof err) != 0) {
        say("vcattach: pid %d: %s\n", (int)m->pid, err);
        return -1;
    }
    spool_set_memory(m->sp, MEMBER_SPOOL_MEM);
    return 0;
}

/* The calls a member lost: its agent counts them all in END (those it dropped at the source
 * among them); a member that ended without END has only its spool's count. */
static uint64_t end_drops(const struct member *m, uint64_t spooled)
{
    char v[32];
    return vc_kv_get(m->end, "drops", v, sizeof v) > 0 ? strtoull(v, NULL, 10) : spooled;
}

/* --last: the member's spool covers the kept duration: it becomes its OUT.PID.spool.prev (the
 * one before is dropped) and a new OUT.PID.spool begins with every name and thread (spool.h's
 * generations, as for one process: trace_stream.c).  0, or -2 with why. */
static int member_rotate(struct tree_run *r, struct member *m, char *why, size_t cap)
{
    uint64_t gone = 0; /* the dropped generation's bytes: off the disk, off --max-trace-mb */
    int rc = spool_next_generation(&m->sp, &m->prev, &m->rotated_records, &gone, why, cap);
    r->received -= gone < r->received ? gone : r->received;
    return rc;
}

/* Its spool is complete (END, or its connection ended): it stays open for the final build;
 * its END text gets the counts the summary prints. */
static void spool_done(struct member *m)
{
    uint64_t dropped = 0, records = tree_member_records(m, &dropped);
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
        tree_finish(r, m, M_LOST, "its agent streamed before it was configured");
        return;
    }
    m->bytes += n;
    trace_watch_frame((unsigned)(m - r->m), (uint64_t)m->pid, type, buf, n);
    uint64_t records, dropped, before, after;
    spool_progress(m->sp, &records, &dropped, &before);
    int rc = spool_add(m->sp, type, buf, n, err, sizeof err);
    spool_progress(m->sp, &records, &dropped, &after);
    r->received += after - before; /* what the tree's spools hold on disk */
    if (rc == 0 && type == VC_MSG_CHUNK && r->last_ns && spool_span_ns(m->sp) >= r->last_ns)
        rc = member_rotate(r, m, err, sizeof err);
    if (rc == 0 && r->received > (uint64_t)r->opt->max_trace_mb << 20) {
        snprintf(m->why, sizeof m->why, "the tree's spools passed --max-trace-mb %u MiB: its "
                 "trace ends there", r->opt->max_trace_mb);
        ended_early(r, m, m->why);
        return;
    }
    if (rc == -1) {
        char why[600];
        snprintf(why, sizeof why, "its agent broke the protocol: %.500s", err);
        tree_finish(r, m, M_LOST, why);
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
    if (type == VC_MSG_CHUNK)
        spool_chunk_mark_of(buf, n, &m->last_chunk);
    if (in_other_pid_ns(m) && type == VC_MSG_META) {
        rewritten = ns_pid_meta(buf, n, m->pid, m->own_pid, &rn);
    } else if (type == VC_MSG_META && n >= 8 && (rewritten = malloc(n)) != NULL) {
        /* a member names its own process only: its pid is the one vcattach knows, whatever
         * it claims (another member's would put its calls on that member's tracks) */
        uint64_t pid = (uint64_t)m->pid;
        memcpy(rewritten, buf, n);
        memcpy(rewritten, &pid, 8);
        rn = n;
    }
    else if (in_other_pid_ns(m) && type == VC_MSG_EVENTS)
        rewritten = ns_pid_events(buf, n, m->pid, m->own_pid, &rn);
    if (rewritten != NULL)
        spool_frame(r, m, type, rewritten, rn);
    else
        spool_frame(r, m, type, buf, n);
    free(rewritten);
}

/* A member gets its name in its spool as its spool is made (its command line, as vcattach
 * read it; in another pid namespace our pid, with its own beside it): a process killed before
 * its agent's META (which replaces it at the end) keeps a named track. */
static void spool_initial_name(struct tree_run *r, struct member *m)
{
    if (m->sp == NULL)
        return;
    unsigned char meta[8 + sizeof m->name];
    size_t len = strnlen(m->name, sizeof m->name);
    uint64_t pid = (uint64_t)(in_other_pid_ns(m) ? m->own_pid : m->pid); /* ns_pid_meta puts
                                                                            ours in */
    memcpy(meta, &pid, 8);
    memcpy(meta + 8, m->name, len);
    on_stream_frame(r, m, VC_MSG_META, (const char *)meta, 8 + len);
}

/* A fork child that ended without a call of its own: killed as it was forked (a pool worker
 * that got no task), before it ran any Python after its fork.  Nothing was lost. */
static void ran_nothing(struct tree_run *r, struct member *m)
{
    m->python = 1;
    tree_finish(r, m, M_SKIPPED, "ended before it ran any Python of its own after its fork: "
                            "nothing to trace");
}

/* What a member whose session ended without END had recorded and not sent: it is in its
 * window (spool_window.c), which its agent passed; read once, then closed.  At most the
 * tree's budget of it (a window is a share of it). */
static void read_window(struct tree_run *r, struct member *m)
{
    if (m->window_fd < 0 || m->sp == NULL)
        return;
    char err[512];
    uint64_t before, after, dropped, disk;
    spool_progress(m->sp, &before, &dropped, &disk);
    struct spool_window_stats got;
    uint64_t limit = ((uint64_t)r->budget_mb + 2) << 20;
    int rc = spool_add_window(m->sp, m->window_fd, limit, &m->last_chunk, &got, err,
                              sizeof err);
    spool_progress(m->sp, &after, &dropped, &disk);
    m->salvaged = after - before;
    m->window_read = rc == 0;
    if (rc != 0 && r->opt->verbose)
        say("vcattach: pid %d: %s\n", (int)m->pid, err);
    close(m->window_fd);
    m->window_fd = -1;
}

/* A member whose connection ended without END (killed, or exited without its atexit stop):
 * what it streamed before, and what its window still holds, is its trace. */
static void ended_early(struct tree_run *r, struct member *m, const char *why)
{
    uint64_t records = 0;
    if (m->st == M_STARTING || m->st == M_RUNNING || m->st == M_STOPPING)
        read_window(r, m);
    if (m->sp != NULL)
        records = tree_member_records(m, NULL);
    if (m->st == M_STARTING && records > 0)
        m->st = M_RUNNING; /* a fork child: it recorded since its fork */
    else if (m->st == M_STARTING && records == 0 && m->parent_traced && m->window_read) {
        ran_nothing(r, m); /* its window was read: it held no call */
        return;
    }
    if ((m->st == M_RUNNING || m->st == M_STOPPING) && records == 0) {
        char note[400];
        snprintf(note, sizeof note, "%.300s, before any of its calls reached vcattach", why);
        tree_finish(r, m, M_LOST, note);
        return;
    }
    if ((m->st == M_RUNNING || m->st == M_STOPPING) && records > 0) {
        m->ended_early = 1;
        m->end[0] = '\0';
        spool_done(m);
        char note[400];
        snprintf(note, sizeof note, "%s: its trace up to then is kept", why);
        tree_finish(r, m, M_DONE, note);
        return;
    }
    tree_finish(r, m, M_LOST, why);
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
        tree_finish(r, m, M_RETRY, msg);
        m->retries++;
        m->retry_ms = RETRY_MS;
        return;
    }
    m->python = 1;
    tree_finish(r, m, M_SKIPPED,
           "Python is loaded but not initialized in it (an embedding host's process that runs "
           "no Python, e.g. Apache's master under mod_wsgi): nothing to trace");
}

/* Whether a process that was running when the tree began to stop is still sending.  Any
 * other one (connecting or starting then, or joining since: forked before its parent took the
 * STOP) is stopped only once none is: it then stops after the process that made it, whose
 * trace covers until then.  (Each of those is bounded: END, its connection's end, or 30 s
 * of silence.) */
static int first_stops_pending(const struct tree_run *r)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->m[i].first_stop && r->m[i].st == M_STOPPING)
            return 1;
    return 0;
}

/* STOP to a running member (once). */
static void send_stop(struct member *m)
{
    m->stop_sent = 1;
    if (vc_msg_send(m->fd, VC_MSG_STOP, NULL, 0, 5000) == 0)
        tree_set_state(m, M_STOPPING);
}

static void on_frame(struct tree_run *r, struct member *m, char *buf, size_t cap)
{
    if (m->await_hello) {
        on_hello(r, m);
        return;
    }
    uint32_t type;
    int passed = -1;
    long n = vc_msg_recv_fd(m->fd, &type, buf, cap, &passed, 10000);
    if (n >= 0)
        m->heard_ms = vc_monotonic_ms();
    if (passed >= 0 && type == VC_MSG_STARTED)
        keep_window(m, passed);
    else if (passed >= 0)
        close(passed); /* with another frame: not what the protocol passes */
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
        tree_set_state(m, M_RUNNING);
        if (r->opt->verbose && m->exec_ms) /* how soon a new interpreter was traced */
            say("vcattach: pid %d traced %lld ms after its exec (injected from "
                    "%lld ms)\n", (int)m->pid, (long long)(m->since - m->exec_ms),
                    (long long)(m->inject_ms - m->exec_ms));
        if (r->stopping && !m->stop_sent && !first_stops_pending(r))
            send_stop(m);
        return;
    case VC_MSG_ERROR:
        buf[n] = '\0';
        vc_term_sanitize(buf, (size_t)n, cap, VC_TERM_KEEP_NEWLINES); /* printed later */
        if (strstr(buf, "not initialized")) {
            not_initialized(r, m, buf);
            return;
        }
        {
            char why[400];
            snprintf(why, sizeof why, "its agent refused: %.300s", buf);
            tree_finish(r, m, M_LOST, why);
        }
        return;
    case VC_MSG_DATA: /* a streaming session sends no .cvf: the agent is not to be trusted */
        tree_finish(r, m, M_LOST, "its agent broke the protocol: a whole trace in a streaming session");
        return;
    case VC_MSG_END: {
        buf[n] = '\0';
        vc_term_sanitize(buf, (size_t)n, cap, VC_TERM_KEEP_NEWLINES);
        snprintf(m->end, sizeof m->end, "%s", buf);
        char v[32] = "0";
        vc_kv_get(buf, "status", v, sizeof v);
        if (m->sp == NULL) {
            tree_finish(r, m, M_LOST, "its agent ended before it was configured");
        } else if (atol(v) != 0) { /* what it sent, and its window, are its trace */
            m->end[0] = '\0';
            ended_early(r, m, "its agent failed to send the rest of its trace (see its "
                              "fallback file)");
        } else {
            spool_done(m);
            tree_finish(r, m, M_DONE, NULL);
        }
        return;
    }
    default:
        return; /* STATUS answers are not for us */
    }
}

/* ---- injecting ---------------------------------------------------------------------------- */

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
    struct member *m = tree_find(w->r, w->pid);
    if (m == NULL)
        return -1;
    if (m->fd >= 0 || m->st != M_CONNECT) /* connected (and configured, or given up on) */
        return 1;
    return target_alive(w->pid) ? 0 : -1;
}

/* ---- injecting aside ----------------------------------------------------------------------
 * An injection (ptrace or gdb) takes a few ms on an idle target and hundreds of ms on a loaded
 * machine or an interpreter still starting (no thread at a safe point for a while, dlopen
 * competing for the CPU): done by this loop, every other member waited meanwhile — the
 * connections, the frames, the other workers of a pool that spawned two at once, whose first
 * calls were then missed.  So a process born during the trace is injected by a child of ours
 * (a fork: it has the target's facts and the listener's name), which reports how it went
 * through a pipe and exits; its agent connects to our listener like any.  The injector is
 * built to be killed at any instant (the target's threads come home by themselves). */
struct aside_report {
    int status;            /* attach_inject_waiting's */
    char err[1024];
};

/* In the helper, right after the injection of a process at its start: held at its system
 * calls until its agent has its hooks in (vcinject.h inject_hold_until_hooked), so that a
 * worker whose first tasks come tens of ms after its exec runs none of them untraced while
 * its agent waits for this loop, for its buffers or for the GIL. */
struct hold_ctx {
    const struct tree_run *r;
    pid_t pid;
    int64_t exec_ms;
    const char *agent_path;
};

static void hold_young(void *arg)
{
    const struct hold_ctx *h = arg;
    pid_t pid = h->pid;
    int64_t injected = vc_monotonic_ms();
    struct inject_hold res;
    char err[512];
    if (inject_hold_until_hooked(pid, h->agent_path, HOLD_BUDGET_MS, &res, err, sizeof err) < 0) {
        if (h->r->opt->verbose)
            say("vcattach: pid %d not held: %s\n", (int)pid, err);
        return;
    }
    if (!h->r->opt->verbose)
        return;
    char since[48] = "";
    if (h->exec_ms)
        snprintf(since, sizeof since, " %lld ms after its exec",
                 (long long)(injected - h->exec_ms));
    say("vcattach: pid %d injected%s, then held %d ms at %d of its %d system calls (%d ms in "
        "all), until %s\n", (int)pid, since, res.held_ms, res.held_stops, res.stops,
        res.total_ms, res.ended);
}

void tree_inject_report(const struct tree_run *r, pid_t pid, int64_t exec_ms,
                        struct target_info *t, struct ctl_conn *ctl, enum inject_method method,
                        int report_fd)
{
    struct aside_report rep;
    memset(&rep, 0, sizeof rep);
    /* young: held from its injection until its hooks are in */
    long age = target_age_ms(pid);
    int young = age >= 0 && age < INIT_GRACE_MS && VC_SEAM(HOLD_OFF) == NULL;
    struct hold_ctx hold = {r, pid, exec_ms, t->agent_in_target};
    if (t->caught == NULL) /* test seam: a helper slow to start (test_tree_hold.py) */
        seam_sleep(VC_SEAM(HELPER_DELAY_MS));
    rep.status = attach_inject_then(r->opt, t, ctl, method, NULL, NULL,
                                    young ? hold_young : NULL, &hold, rep.err, sizeof rep.err);
    ssize_t w = write(report_fd, &rep, sizeof rep);
    (void)w;
}

static int inject_aside(struct tree_run *r, struct member *m, struct target_info *t,
                        enum inject_method method)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    fflush(NULL); /* nothing buffered twice */
    pid_t h = fork();
    if (h < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (h == 0) {
        close(p[0]);
        tree_inject_report(r, m->pid, m->exec_ms, t, &r->lis[m->lis].ctl, method, p[1]);
        _exit(0);
    }
    close(p[1]);
    m->helper = h;
    m->helper_fd = p[0];
    return 0;
}

static int young_retry(struct tree_run *r, struct member *m, const char *why);

/* A helper's report (its pipe is readable, or closed): a failure is the member's unless its
 * agent came meanwhile (then it is traced). */
static void aside_done(struct tree_run *r, struct member *m)
{
    struct aside_report rep;
    memset(&rep, 0, sizeof rep);
    ssize_t n = read(m->helper_fd, &rep, sizeof rep);
    close(m->helper_fd);
    m->helper_fd = -1;
    while (!m->helper_not_ours && waitpid(m->helper, NULL, 0) < 0 && errno == EINTR)
        ;
    m->helper = 0;
    m->helper_not_ours = 0;
    if (n != (ssize_t)sizeof rep) {
        rep.status = -1;
        snprintf(rep.err, sizeof rep.err, "the injecting process ended without a word");
    }
    rep.err[sizeof rep.err - 1] = '\0';
    if (rep.status == 0 || m->fd >= 0 || m->st != M_CONNECT)
        return; /* injected (its connection is awaited), or its agent came after all */
    char why[1100];
    snprintf(why, sizeof why, "injection failed: %s", rep.err);
    if (r->opt->verbose)
        say("vcattach: pid %d: %s\n", (int)m->pid, why);
    if (rep.status != -3 && young_retry(r, m, why)) /* never after a call ran in it */
        return;
    tree_finish(r, m, M_LOST, why);
    m->share_mb = 0;
}

/* Waits for every helper still injecting (each is bounded by the injection's own timeout). */
static void aside_reap_all(struct tree_run *r)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->m[i].helper_fd >= 0)
            aside_done(r, &r->m[i]);
}

/* A process that exec'd an interpreter a moment ago (the kernel says so at once now) is not
 * a CPython yet while the loader maps its libraries, and has no thread at a safe point while
 * it runs its constructors: it is looked at again a few ms later, for its first second, so
 * that a spawned worker is traced from its start (its agent then waits for the interpreter's
 * initialization itself: send_config's init_wait_ms).  1 if m was set to retry. */
static int young_retry(struct tree_run *r, struct member *m, const char *why)
{
    long age = target_age_ms(m->pid);
    if (r->stopping || age < 0 || age >= YOUNG_MS || m->retries >= EXEC_RETRIES)
        return 0;
    tree_finish(r, m, M_RETRY, why);
    m->retries++;
    m->retry_ms = EXEC_RETRY_MS;
    return 1;
}


/* A young process that is no CPython yet but runs an interpreter's executable: retried. */
static int loading_python(struct tree_run *r, struct member *m)
{
    return tree_exe_names_python(m->exe) && young_retry(r, m, "not a CPython process yet");
}

#define GONE_BEFORE_REACHED "ended while its interpreter was starting, before vcattach could " \
                            "reach it: its calls were not recorded (how many is not known)"

/* A step towards injecting m failed with err: a process that has ended meanwhile (its /proc
 * entries went with it, which is what the step failed on) is lost, not refused — a pool's
 * spawned worker can finish its tasks and be terminated before vcattach reaches it. */
static void not_reached(struct tree_run *r, struct member *m, enum mstate st, const char *err)
{
    if (target_alive(m->pid))
        tree_finish(r, m, st, err);
    else
        tree_finish(r, m, M_LOST, GONE_BEFORE_REACHED);
}

/* Its executable and (if it exec'd since) its command line, read again before injecting; a
 * process gone already keeps what it was last seen with. */
static void reread_identity(struct member *m)
{
    char exe[sizeof m->exe];
    target_exe(m->pid, exe, sizeof exe);
    if (exe[0] != '\0')
        memcpy(m->exe, exe, sizeof exe);
    if (m->renamed) { /* a fork child named as its parent that exec'd since */
        m->renamed = 0;
        target_cmdline(m->pid, m->name, sizeof m->name);
    }
}

/* Preflight refused m with err: not Python (yet), or refused — target_python_detect tells
 * which; one that is gone may have been Python (detect fails on it): lost if its executable
 * was an interpreter, counted apart ("ended unseen") if it could not even be read — a shell
 * or `true` that a traced process runs may end as fast, and is no lost Python process. */
static void refused_at_preflight(struct tree_run *r, struct member *m, const char *err)
{
    struct target_python py;
    char e2[256];
    m->python = target_python_detect(m->pid, &py, e2, sizeof e2) == 1;
    if (loading_python(r, m)) /* (detect may have seen the libraries preflight missed) */
        return;
    if (m->python || tree_exe_names_python(m->exe)) {
        not_reached(r, m, M_SKIPPED, m->python ? err : "not a CPython process");
    } else if (m->exe[0] == '\0' && !target_alive(m->pid)) {
        m->unseen = 1;
        tree_finish(r, m, M_SKIPPED, "ended before vcattach could see what it ran");
    } else {
        tree_finish(r, m, M_SKIPPED, "not a CPython process");
    }
}

/* A process born during the trace that this look found exec'd before the kernel's word of its
 * exec was read (the word comes at the exec's end, its new image shows in /proc a moment
 * before): that word, if it comes within EXEC_WORD_MS, catches it at its interpreter's start
 * (on_proc_event) while it is examined and injected. */
#define EXEC_WORD_MS 2
static void on_proc_event(void *ctx, const struct proc_event_info *e);
static void await_exec_word(struct tree_run *r, struct member *m)
{
    pid_t pid = m->pid;
    char exe[256];
    target_exe(pid, exe, sizeof exe);
    if (!tree_exe_names_python(exe))
        return;
    int64_t end = vc_monotonic_ms() + EXEC_WORD_MS;
    while (r->pev != NULL && vc_monotonic_ms() <= end) {
        struct pollfd q = {.fd = proc_events_fd(r->pev), .events = POLLIN};
        if (poll(&q, 1, 1) > 0)
            proc_events_read(r->pev, on_proc_event, r, 4096);
        struct member *now = tree_find(r, pid);
        if (now == NULL || now->exec_ms != 0)
            return;
    }
}

/* Test seam: a vcattach too busy to inject a process born during the trace soon (its loop
 * stalls as long: test_tree_hold.py's catch at the exec). */
static void inject_delay_seam(const struct member *m)
{
    if (m->late)
        seam_sleep(VC_SEAM(INJECT_DELAY_MS));
}

/* Preflight and injection of one process (attach.c, as for a single target: a process in
 * another mount namespace or root gets the agent copied into its /tmp as its own user, its
 * control socket in its network namespace); the member's state says what came of it.
 * Returns the member (the table may have moved while remote-exec waited). */
static struct member *examine_and_inject(struct tree_run *r, struct member *m, int at_attach);

/* A process held at its start (tree_catch.c) is let go by its injection, or here once it is
 * judged not to be injected (but to be looked at again: still loading). */
static struct member *inject_member(struct tree_run *r, struct member *m, int at_attach)
{
    pid_t pid = m->pid;
    m = examine_and_inject(r, m, at_attach);
    if (m->st != M_RETRY)
        tree_catch_release(r, pid);
    return m;
}

static struct member *examine_and_inject(struct tree_run *r, struct member *m, int at_attach)
{
    char err[1024] = "";
    static struct target_info t; /* large (paths): not on the stack */
    m->forked = 0; /* injected: whatever it was, it joins through this injection now */
    reread_identity(m);
    if (!at_attach && m->late && m->exec_ms == 0) {
        pid_t pid = m->pid;
        await_exec_word(r, m); /* (the table may move under the kernel's news) */
        if ((m = tree_find(r, pid)) == NULL)
            return &r->m[0]; /* cannot be: members leave the table only in tree_compact() */
    }
    inject_delay_seam(m);
    if (attach_preflight_held(r->opt, m->pid, tree_catcher_of(r, m->pid), &t, err, sizeof err) < 0) {
        refused_at_preflight(r, m, err);
        return m;
    }
    m->python = 1;
    enum inject_method method;
    int li = member_method(r, &t, &method, err, sizeof err) < 0
                 ? -1
                 : tree_listener_for(r, m->pid, err, sizeof err);
    if (li < 0) {
        preflight_release(&t);
        not_reached(r, m, M_SKIPPED, err);
        return m;
    }
    if (!at_attach && m->share_mb == 0 && (m->share_mb = tree_share_for(r)) == 0) {
        preflight_release(&t);
        tree_finish(r, m, M_SKIPPED, "the --buffer-mb budget was spent (raise it)");
        return m;
    }
    /* Waiting for its connection from now on (remote-exec's connection may come while the
     * injector waits: accept_one takes it as this member's). */
    pid_t pid = m->pid;
    m->lis = li;
    m->fd = -1;
    m->await_hello = 0;
    m->inject_ms = vc_monotonic_ms();
    tree_set_state(m, M_CONNECT);
    if (!at_attach && tree_catch_inject(r, m, &t, method) == 0) {
        if (r->opt->verbose)
            say("vcattach: pid %d is handed to its catcher (pid %d), which injects %s where it "
                "holds it (%s, Python %d.%d)\n", (int)pid, (int)m->helper, t.agent_in_target,
                t.f.comm, t.f.py.major, t.f.py.minor);
        preflight_release(&t);
        return m;
    }
    tree_catch_release(r, m->pid); /* a process has one tracer: the injection's from now on */
    if (!at_attach && method != INJECT_REMOTE_EXEC && inject_aside(r, m, &t, method) == 0) {
        if (r->opt->verbose)
            say("vcattach: pid %d (%s) is Python %d.%d: injecting %s (pid %d)\n",
                    (int)pid, t.f.comm, t.f.py.major, t.f.py.minor, t.agent_in_target,
                    (int)m->helper);
        preflight_release(&t);
        return m;
    }
    struct member_wait w = {r, pid};
    int st = attach_inject_waiting(r->opt, &t, &r->lis[li].ctl, method, wait_member, &w, err,
                                   sizeof err);
    preflight_release(&t);
    if ((m = tree_find(r, pid)) == NULL) /* cannot be: members leave the table only in tree_compact() */
        return &r->m[0];
    if (st < 0) {
        char why[1100];
        snprintf(why, sizeof why, "injection failed: %s", err);
        if (m->fd >= 0 || m->st != M_CONNECT) /* its agent came after all: it is traced */
            return m;
        if (st != -3 && young_retry(r, m, why)) /* still starting: no safe point yet, say */
            return m;
        not_reached(r, m, M_LOST, why);
        m->share_mb = 0;
        return m;
    }
    if (r->opt->verbose) {
        char label[96];
        ns_pid_label(pid, m->own_pid, label, sizeof label);
        say("vcattach: pid %s (%s) is Python %d.%d: injected %s%s\n", label,
                t.f.comm, t.f.py.major, t.f.py.minor, t.agent_in_target,
                method == INJECT_REMOTE_EXEC ? " (remote-exec)" : "");
    }
    if (m->st == M_CONNECT && m->fd < 0)
        tree_set_state(m, M_CONNECT); /* its connection wait starts now */
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

/* A fork child of a member, as the kernel announced it (maybe gone already): a member at
 * once, named as its parent (a fork child has its command line), recorded by identity while
 * it lives (tree_kin.h).  A traced parent's child has the agent: it connects by itself (its
 * share of the budget is taken now); another's is examined by the next look at /proc. */
static void born(struct tree_run *r, const struct member *parent, pid_t pid)
{
    char name[sizeof parent->name];
    memcpy(name, parent->name, sizeof name);
    int traced = parent->st == M_RUNNING || parent->st == M_STARTING;
    int parent_traced = parent->st == M_RUNNING;
    int python = parent->python;
    struct member *m = tree_new_slot(r, pid); /* the table may move: parent is not used again */
    if (m == NULL)
        return;
    m->born_ms = m->since;
    m->late = 1; /* the kernel announced its birth: after the trace began */
    memcpy(m->name, name, sizeof m->name);
    if (traced && tree_traced_count(r) >= r->opt->max_processes) { /* it connects: refused then */
        m->python = python;
        target_exe(pid, m->exe, sizeof m->exe);
        tree_finish(r, m, M_SKIPPED, "over --max-processes");
        return;
    }
    if (traced && (m->share_mb = tree_share_for(r)) != 0) {
        m->forked = 1;
        m->parent_traced = parent_traced;
        m->parent_starting = !parent_traced;
        m->python = python;
        m->st = M_CONNECT;
        return;
    }
    m->st = M_SKIPPED; /* examined by discover(): its exe is not known yet */
}

/* The kernel's news (proc_events.h): a member's fork child joins the table at once; a
 * member's fork or exec makes the next look at /proc come now; an exit is noted. */
static void on_proc_event(void *ctx, const struct proc_event_info *e)
{
    struct tree_run *r = ctx;
    if (e->what == PROC_EV_EXIT) {
        struct member *m = tree_find(r, e->pid);
        if (m != NULL && m->ended_ms == 0)
            m->ended_ms = vc_monotonic_ms();
        return;
    }
    struct member *p = tree_find(r, e->what == PROC_EV_FORK ? e->ppid : e->pid);
    if (e->what == PROC_EV_EXEC && p != NULL) {
        p->parent_traced = 0; /* a new image: no agent of its parent's connects for it */
        p->renamed = 1;       /* ... and a new command line */
        p->execd = p->st == M_DONE || p->st == M_LOST; /* after its session: a new member */
        p->exec_ms = vc_monotonic_ms();
    }
    if (p == NULL || r->stopping)
        return;
    r->discover_now = 1;
    struct member *old = e->what == PROC_EV_FORK ? tree_find(r, e->pid) : NULL;
    if (e->what == PROC_EV_FORK && tree_same_process(p) &&
        (old == NULL || (!tree_same_process(old) && target_start_time(e->pid) != 0)))
        born(r, p, e->pid); /* (not a stranger that got a gone member's pid) */
}

static void pump(struct tree_run *r, int ms, char *buf, size_t cap)
{
    /* (the member table may move under accept_one and the kernel's news: indexes only) */
    size_t nl = r->nlis, nfds = nl;
    struct pollfd *p = calloc(2 * r->n + nl + 1, sizeof *p);
    size_t *who = calloc(2 * r->n + nl + 1, sizeof *who);
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
    size_t hp = nfds;
    for (size_t i = 0; i < r->n; i++)
        if (r->m[i].helper_fd >= 0) {
            who[nfds] = i;
            p[nfds++] = (struct pollfd){.fd = r->m[i].helper_fd, .events = POLLIN};
        }
    size_t ev = nfds;
    if (r->pev != NULL)
        p[nfds++] = (struct pollfd){.fd = proc_events_fd(r->pev), .events = POLLIN};
    int k = poll(p, (nfds_t)nfds, ms);
    if (k > 0) {
        /* The kernel's news first: a spawned worker's exec is caught at once (tree_catch.c),
         * not after every frame queued meanwhile is drained.  It may add members (the table
         * moves, never shrinks here): the others are reached by index. */
        if (ev < nfds && p[ev].revents)
            proc_events_read(r->pev, on_proc_event, r, 4096);
        for (size_t j = nl; j < hp; j++)
            if (p[j].revents)
                drain(r, &r->m[who[j]], buf, cap);
        for (size_t j = hp; j < ev; j++)
            if (p[j].revents)
                aside_done(r, &r->m[who[j]]);
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
    /* Connections already queued first: a process that connected and then exited is judged
     * by what it sent, not taken for one that never connected. */
    pump(r, 0, r->buf, VC_MSG_MAX + 1);
    int64_t now = vc_monotonic_ms();
    for (size_t i = 0; i < r->n; i++) {
        struct member *m = &r->m[i];
        if (m->st == M_CONNECT && m->forked && m->fd < 0 && m->helper_fd < 0 &&
            now - m->since > (m->parent_starting ? FORK_UNSURE_WAIT_MS : FORK_JOIN_WAIT_MS) &&
            !r->stopping && target_alive(m->pid)) {
            /* The agent was mapped but nobody connected: an agent left loaded by an earlier
             * trace, or a fork the agent did not see (fork() from C): inject it like any
             * process (the loaded agent is reused). */
            inject_member(r, m, 0);
        } else if (m->st == M_CONNECT && m->await_hello && now - m->hello_since > HELLO_WAIT_MS)
            tree_finish(r, m, M_LOST, "its agent connected but sent no greeting");
        else if (m->st == M_CONNECT && !m->await_hello &&
                 now - m->since > (m->forked ? FORK_JOIN_WAIT_MS : CONNECT_WAIT_MS))
            tree_finish(r, m, M_LOST, "its agent did not connect (see its stderr)");
        else if (m->st == M_STARTING && now - m->since > STARTED_WAIT_MS)
            tree_finish(r, m, M_LOST, "its agent did not start in time (GIL held?)");
        else if (m->st == M_CONNECT && m->fd < 0 && !target_alive(m->pid) && m->parent_traced)
            ran_nothing(r, m); /* its agent connects at its fork, before any of its code */
        else if (m->st == M_CONNECT && m->fd < 0 && !target_alive(m->pid))
            tree_finish(r, m, M_LOST, "ended before its agent connected: its calls were not "
                                 "recorded (how many is not known)");
        else if (m->st == M_RETRY && !target_alive(m->pid))
            tree_finish(r, m, M_LOST, GONE_BEFORE_REACHED);
        else if (m->st == M_RETRY && now - m->since >= m->retry_ms && !r->stopping)
            m = inject_member(r, m, 0);
    }
}

/* New descendants since the last look; fork children that exec'd; skipped processes that
 * exec'd.  (Retries of starting interpreters: check_waits.) */
static void discover(struct tree_run *r, int at_attach)
{
    pid_t *pids = NULL;
    /* The kernel's news first: a spawned worker's exec is announced right behind its fork,
     * and is caught then (tree_catch.c), before this look finds it exec'd and injects it. */
    if (r->pev != NULL)
        proc_events_read(r->pev, on_proc_event, r, 4096);
    tree_compact(r);
    long n = target_descendants(r->opt->pid, &pids);
    for (long i = 0; i < n && !attach_interrupts; i++) {
        struct member *m = tree_find(r, pids[i]);
        if (m != NULL && !r->stopping && !tree_same_process(m) && tree_holds_nothing(m)) {
            tree_rebind(r, m); /* the pid of a gone member, reused by a new descendant */
            goto examine;
        }
        if (m != NULL && !tree_same_process(m) && target_start_time(pids[i]) != 0)
            m = NULL; /* ... of one whose trace is still held: a member of its own */
        if (m != NULL && m->execd && !r->stopping) {
            m->execd = 0;
            m = NULL; /* its new program, after its traced session: examined anew */
        }
        if (m != NULL) {
            if (m->st == M_CONNECT && m->forked && m->fd < 0 && !r->stopping &&
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
        if ((m = tree_add(r, pids[i])) == NULL)
            break;
    examine:
        if (!at_attach && target_has_agent(m->pid) == 1 &&
            tree_traced_count(r) >= r->opt->max_processes) {
            m->python = 1; /* a traced process's fork child: it connects, and is refused */
            target_exe(m->pid, m->exe, sizeof m->exe);
            tree_finish(r, m, M_SKIPPED, "over --max-processes");
            continue;
        }
        if (!at_attach && target_has_agent(m->pid) == 1) {
            /* A fork child of a traced process: it connects by itself (or execs soon). */
            m->forked = 1;
            tree_set_state(m, M_CONNECT);
            if (m->share_mb == 0)
                m->share_mb = tree_share_for(r);
            continue;
        }
        if (tree_traced_count(r) >= r->opt->max_processes) {
            struct target_python py;
            char e2[256];
            m->python = target_python_detect(m->pid, &py, e2, sizeof e2) == 1;
            target_exe(m->pid, m->exe, sizeof m->exe);
            tree_finish(r, m, M_SKIPPED, m->python ? "over --max-processes" : "not a CPython process");
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
    r->initial_share_mb = each < TREE_MIN_SHARE_MB ? TREE_MIN_SHARE_MB : each;
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
        say("%s: %s\n", cmd, err);
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
        say("%s: %s\n", cmd, err);
        return -1;
    }
    enum inject_method m;
    int rc = opt->method == CLI_METHOD_REMOTE_EXEC
                 ? attach_choose_method(cmd, opt, &t, &m, err, sizeof err)
                 : 0;
    preflight_release(&t);
    if (rc < 0) /* an explicit remote-exec the root does not accept */
        say("%s: %s\n", cmd, err);
    return rc;
}

/* Attach: the root, then every descendant there is now, each started (or given up) before
 * the clock runs.  0, or -1 after printing why the root could not be attached. */
static int attach_all(const char *cmd, struct tree_run *r)
{
    int64_t t_attach = vc_monotonic_ms();
    struct member *root = tree_add(r, r->opt->pid);
    if (root == NULL)
        return -1;
    root->share_mb = r->initial_share_mb;
    root = inject_member(r, root, 1);
    if (root->st != M_CONNECT && root->st != M_STARTING && root->st != M_RUNNING) {
        say("%s: pid %d: %s\n", cmd, (int)r->opt->pid, root->why);
        return -1;
    }
    pump(r, 0, r->buf, VC_MSG_MAX + 1);
    discover(r, 1);
    while (!attach_interrupts) {
        int waiting = 0; /* for the processes there at attach (those born since are traced as
                            during the trace: discover() below) */
        for (size_t i = 0; i < r->n; i++)
            waiting += !r->m[i].late && (r->m[i].st == M_CONNECT || r->m[i].st == M_STARTING);
        if (!waiting)
            break;
        pump(r, TREE_POLL_MS, r->buf, VC_MSG_MAX + 1);
        check_waits(r);
        if (r->discover_now) {
            r->discover_now = 0;
            discover(r, 0);
        }
    }
    r->t0 = vc_monotonic_ms();
    if (r->opt->verbose)
        say("%s: %zu processes attached in %lld ms\n", cmd, tree_traced_count(r),
                (long long)(r->t0 - t_attach));
    return 0;
}

/* Trace: frames, newcomers, until the duration, Ctrl-C, or the whole tree is gone. */
static void trace_until_done(struct tree_run *r)
{
    const struct cli_options *opt = r->opt;
    int64_t last_scan = 0;
    int show = !opt->quiet && isatty(STDERR_FILENO) && !trace_watching();
    while (!attach_interrupts) {
        int64_t el = vc_monotonic_ms() - r->t0;
        if (opt->duration_ms && el >= (int64_t)opt->duration_ms)
            break;
        if (trace_watch_tick()) /* top: q, or --once shown */
            break;
        pump(r, trace_watching() ? 50 : TREE_POLL_MS / 2, r->buf, VC_MSG_MAX + 1);
        check_waits(r);
        if (vc_monotonic_ms() - last_scan >= TREE_POLL_MS || r->discover_now) {
            r->discover_now = 0;
            last_scan = vc_monotonic_ms();
            discover(r, 0);
        }
        int any = 0;
        size_t running = 0;
        for (size_t i = 0; i < r->n; i++) {
            any |= tree_active(&r->m[i]);
            running += r->m[i].st == M_RUNNING;
        }
        if (show) {
            char e[32];
            vc_human_ms((uint64_t)el, e, sizeof e);
            fprintf(stderr, "\rvcattach: tracing %zu processes of pid %d: %s elapsed (Ctrl-C to "
                            "stop)\033[K", running, (int)opt->pid, e);
        }
        if (!any && !target_alive(opt->pid))
            break;
    }
    if (show)
        fprintf(stderr, "\r\033[K");
    trace_watch_leave(); /* top: the terminal is the operator's again */
}

/* A stopping member silent for COLLECT_SILENCE_MS (or --collect-timeout, if shorter): given
 * up at once rather than at the end of --collect-timeout (ten minutes), with what it sent. */
/* When a member was last heard of: its last frame, or its state's start if later. */
static int64_t last_heard(const struct member *m)
{
    return m->heard_ms > m->since ? m->heard_ms : m->since;
}

static void give_up_silent(struct tree_run *r, int64_t now)
{
    int64_t silence = COLLECT_SILENCE_MS;
    if ((uint64_t)silence > r->opt->collect_timeout_ms)
        silence = (int64_t)r->opt->collect_timeout_ms;
    for (size_t i = 0; i < r->n; i++) {
        struct member *m = &r->m[i];
        if (m->st != M_STOPPING || now - last_heard(m) < silence)
            continue;
        char why[200];
        snprintf(why, sizeof why, "its agent sent nothing for %lld s after STOP (%s; %llu "
                 "bytes of its trace received)", (long long)(silence / 1000),
                 target_alive(m->pid) ? "its process is stopped, or holds the GIL"
                                      : "its process is gone",
                 (unsigned long long)m->bytes);
        ended_early(r, m, why);
    }
}

/* STOP to the processes running: first: every one (the tree begins to stop); else each one
 * not sent it yet, once no first one is still sending. */
static void stop_running(struct tree_run *r, int first)
{
    if (!first && first_stops_pending(r))
        return;
    for (size_t i = 0; i < r->n; i++) {
        struct member *m = &r->m[i];
        if (m->st == M_RUNNING && !m->stop_sent) {
            m->first_stop = first;
            send_stop(m);
        }
    }
}

/* Collecting for long: who is awaited, on stderr (the processes the operator waits for). */
static void say_awaited(const struct tree_run *r, int64_t now, int64_t began)
{
    size_t waiting = 0;
    char who[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < r->n; i++) {
        const struct member *m = &r->m[i];
        if (!tree_active(m) || m->st == M_RETRY)
            continue;
        if (waiting++ < 3 && used < sizeof who) {
            char got[32];
            int w = snprintf(who + used, sizeof who - used, "%spid %d: %s received, silent %lld s",
                             used ? "; " : "", (int)m->pid,
                             vc_human_bytes(m->bytes, got, sizeof got),
                             (long long)((now - last_heard(m)) / 1000));
            used = w < 0 ? sizeof who : used + (size_t)w;
        }
    }
    say("vcattach: collecting the traces for %lld s: %zu processes still sending (%s%s)\n",
        (long long)((now - began) / 1000), waiting, who, waiting > 3 ? "; ..." : "");
}

/* Stop: STOP to every running session, then collect until every trace is in, or
 * --collect-timeout, or a second Ctrl-C; a member silent for long is given up alone. */
static void stop_and_collect(struct tree_run *r)
{
    r->stopping = 1;
    tree_catch_end(r); /* nothing is caught any more */
    stop_running(r, 1);
    int64_t began = vc_monotonic_ms(), said = began - COLLECT_SAY_MS + COLLECT_SAY_FIRST_MS;
    int64_t collect_end = began + (int64_t)r->opt->collect_timeout_ms;
    while (!attach_abandon && vc_monotonic_ms() < collect_end) {
        int any = 0;
        for (size_t i = 0; i < r->n; i++)
            any |= tree_active(&r->m[i]) && r->m[i].st != M_RETRY;
        if (!any)
            break;
        pump(r, TREE_POLL_MS, r->buf, VC_MSG_MAX + 1);
        check_waits(r);
        stop_running(r, 0);
        int64_t now = vc_monotonic_ms();
        give_up_silent(r, now);
        if (!r->opt->quiet && now - said >= COLLECT_SAY_MS) {
            said = now;
            say_awaited(r, now, began);
        }
    }
    for (size_t i = 0; i < r->n; i++)
        if (tree_active(&r->m[i]))
            tree_finish(r, &r->m[i], M_LOST, attach_abandon ? "abandoned (interrupted twice): its "
                                                         "agent writes its fallback file"
                                                       : "its trace did not arrive in time");
}

/* The whole run once OUT is open and the signals counted.  An exit code. */
static int run(const char *cmd, struct tree_run *r, struct trace_sink *sink)
{
    char err[1024];
    if ((r->buf = malloc(VC_MSG_MAX + 1)) == NULL) {
        say("%s: out of memory\n", cmd);
        return VC_EXIT_FAIL;
    }
    if (tree_listener_for(r, r->opt->pid, err, sizeof err) < 0) { /* the root's: lis[0] */
        say("%s: %s\n", cmd, err);
        return VC_EXIT_FAIL;
    }
    /* Who is the tree's, by identities never reused; and the kernel's news of its births.
     * Either may be missing (an older kernel, no CAP_NET_ADMIN): pids, start times and the
     * look at /proc every 100 ms judge then, as before. */
    if (kin_init(&r->kin, r->opt->pid) < 0 && r->opt->verbose)
        say("%s: no pidfs identities on this kernel: connections are judged by "
                        "pid and start time\n", cmd);
    if (proc_events_open(&r->pev, err, sizeof err) < 0 && r->opt->verbose)
        say("%s: %s: new processes are found by a look at /proc every %d ms\n",
                cmd, err, TREE_POLL_MS);
    tree_catch_start(r); /* (before any connection: the watcher holds none of them) */
    plan_budget(r);
    if (attach_all(cmd, r) < 0)
        return VC_EXIT_FAIL;
    struct receive_priority prio;
    receive_priority_raise(&prio, r->opt, cmd);
    trace_until_done(r);
    receive_priority_restore(&prio); /* the agents record no more: the build can wait */
    int64_t traced = vc_monotonic_ms() - r->t0;
    stop_and_collect(r);
    aside_reap_all(r);
    tree_catch_end(r);
    if (attach_abandon) {
        char stem[PATH_MAX];
        attach_output_stem(r->out_abs, stem, sizeof stem);
        say("%s: interrupted twice: trace abandoned; each agent writes what it has "
                        "to %s.PID.partial.cvf\n", cmd, stem);
        return VC_EXIT_FAIL;
    }
    size_t nparts = 0;
    uint64_t unnamed = 0;
    if (tree_write_merged(r, sink, &nparts, &unnamed) < 0)
        return VC_EXIT_FAIL;
    tree_print_result(r, sink, traced, unnamed);
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
    r.budget_mb = tree_budget_mb(opt);
    r.last_ns = opt->last_ms * 1000000u;
    r.catch_sock = -1;
    static struct trace_sink sink;
    if (open_output(cmd, &r, &sink) < 0)
        return VC_EXIT_USAGE;
    struct attach_signals saved;
    attach_signals_install(&saved);
    int rc = run(cmd, &r, &sink);
    tree_catch_end(&r); /* (every path of run: a no-op after its own) */
    for (size_t i = 0; i < r.n; i++) {
        if (r.m[i].fd >= 0)
            close(r.m[i].fd);
        if (r.m[i].sp != NULL) /* kept for `vcattach recover` (vcattach gave up on it) */
            spool_close(r.m[i].sp, 0);
        if (r.m[i].prev != NULL)
            spool_close(r.m[i].prev, 0);
    }
    free(r.m);
    free(r.buf);
    tree_listeners_close(&r);
    proc_events_close(r.pev);
    kin_free(&r.kin);
    sink_abort(&sink);
    attach_signals_restore(&saved);
    return rc;
}

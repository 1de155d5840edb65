/* cmd_trace.c — the attach workflow: `vcattach [trace]`, `start`, `stop`, `status`.
 *
 * trace:  parse → preflight (target, agent, output; nothing touched yet) → method (auto:
 *         remote-exec on 3.14+ if the target allows it) → [a copy of the agent in the target's
 *         /tmp, if it lives in a mount namespace that cannot see ours] → control socket →
 *         inject (remote-exec: loader script, request, wait for the agent; withdrawn after a
 *         timeout, then auto falls back to ptrace) → accept the agent → CONFIG → STARTED → wait (status
 *         line, Ctrl-C) → STOP → DATA* into OUT.tmp → END → fsync, rename → summary line.
 * start:  the same up to STARTED with detach=1 and output=OUT: the agent finishes on its own.
 * stop/status: talk to a running session through its abstract status socket.
 *
 * Signals: SIGINT/SIGTERM/SIGHUP only set flags here (no SA_RESTART, every wait is a bounded
 * poll that re-checks them).  The first one stops the trace early and still writes it; the
 * second abandons the transfer: the agent sees the socket close and writes its fallback file
 * itself.  They are blocked during the injection, which must never be cut in half.
 */
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent_locate.h"
#include "monotonic.h"
#include "attach_options.h"
#include "commands.h"
#include "preflight.h"
#include "cmd_tree.h"
#include "control_client.h"
#include "trace_sink.h"
#include "vcinject.h"

/* Bounds of each phase (ms). */
#define INJECT_TIMEOUT_MS 10000
/* remote-exec: how long a thread may take to reach an evaluation breaker before the request
 * is withdrawn (a busy interpreter takes it within its 5 ms switch interval; a thread blocked
 * in C never does) */
#define REXEC_TIMEOUT_MS 2000
#define ACCEPT_TIMEOUT_MS 10000
#define STARTED_TIMEOUT_MS 15000  /* the agent must get the GIL to install its hooks */
#define FRAME_TIMEOUT_MS 60000    /* encoding a large trace may take a while per chunk */
#define STOP_WAIT_MS 60000        /* `vcattach stop`: the agent writes the file first */
/* The agent's own deadline is a backstop behind our STOP (which is the normal stop). */
#define DEADLINE_GRACE_MS 3000
#define STATUS_LINE_MS 200

static volatile sig_atomic_t interrupts; /* Ctrl-C count */
static volatile sig_atomic_t abandon;    /* set by the second one */

static void on_interrupt(int sig)
{
    (void)sig;
    if (++interrupts >= 2)
        abandon = 1;
}

static const int handled_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_HANDLED (sizeof handled_signals / sizeof handled_signals[0])

struct saved_signals {
    struct sigaction old[N_HANDLED];
    struct sigaction old_pipe;
};

static void signals_install(struct saved_signals *saved)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt; /* no SA_RESTART: blocking calls return EINTR */
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_HANDLED; i++)
        sigaction(handled_signals[i], &sa, &saved->old[i]);
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &saved->old_pipe);
}

static void signals_restore(const struct saved_signals *saved)
{
    for (size_t i = 0; i < N_HANDLED; i++)
        sigaction(handled_signals[i], &saved->old[i], NULL);
    sigaction(SIGPIPE, &saved->old_pipe, NULL);
}

static void default_output(pid_t pid, char *buf, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    snprintf(buf, cap, "vcattach-%d-%s.cvf", (int)pid, stamp);
}

/* OUT.cvf → OUT.partial.cvf: where the agent writes if we vanish. */
static void fallback_for(const char *abs_out, char *buf, size_t cap)
{
    size_t n = strlen(abs_out);
    if (n > 4 && !strcmp(abs_out + n - 4, ".cvf"))
        n -= 4;
    snprintf(buf, cap, "%.*s.partial.cvf", (int)n, abs_out);
}

/* Is the directory of the absolute path `file` the same directory for the target? */
static int dir_shared_with_target(pid_t pid, const char *file)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return 0;
    slash[slash == dir ? 1 : 0] = '\0';
    return target_same_file(pid, dir);
}

static unsigned long long kv_u64(const char *text, const char *key)
{
    char v[32];
    return vc_kv_get(text, key, v, sizeof v) >= 0 ? strtoull(v, NULL, 10) : 0;
}

/* The agent's status in END: 0, or a negative errno. */
static long end_status(const char *end_text)
{
    char v[32];
    return vc_kv_get(end_text, "status", v, sizeof v) > 0 ? strtol(v, NULL, 10) : 0;
}

/* Without --subprocesses: "; pid N has 4 Python child processes; --subprocesses traces them
 * all" when it has any (a gunicorn master, a multiprocessing parent), else "". */
static void python_children_hint(pid_t pid, char *buf, size_t cap)
{
    buf[0] = '\0';
    pid_t *pids = NULL;
    long n = target_descendants(pid, &pids);
    long python = 0;
    for (long i = 0; i < n; i++) {
        struct target_python py;
        char e[256];
        python += target_python_detect(pids[i], &py, e, sizeof e) == 1;
    }
    free(pids);
    if (python > 0)
        snprintf(buf, cap, "; pid %d has %ld Python child process%s; --subprocesses traces "
                           "them all", (int)pid, python, python == 1 ? "" : "es");
}

/* One line from an END text: "12345 events, 5 threads, 0 dropped, 1.2 MiB -> OUT". */
static void print_summary(pid_t pid, const char *end_text, const char *where, uint64_t bytes,
                          uint64_t traced_ms)
{
    char hint[160];
    python_children_hint(pid, hint, sizeof hint);
    char size[32], dur[32] = "";
    cli_format_bytes(bytes ? bytes : kv_u64(end_text, "bytes"), size, sizeof size);
    if (traced_ms)
        snprintf(dur, sizeof dur, " in %.1fs", (double)traced_ms / 1000.0);
    unsigned long long drops = kv_u64(end_text, "drops");
    /* A filtered trace says so (the agent reports its filters in END). */
    char filters[1024] = "";
    char fl[900];
    if (vc_kv_get(end_text, "filters", fl, sizeof fl) > 0)
        snprintf(filters, sizeof filters, " [filtered: %s]", fl);
    printf("vcattach: pid %d%s: %llu events, %llu threads, %llu dropped%s, %s -> %s%s%s\n",
           (int)pid, dur, kv_u64(end_text, "events"), kv_u64(end_text, "threads"), drops,
           drops ? " (buffer full: raise --buffer-mb)" : "", size, where, filters, hint);
    fflush(stdout);
}

static void status_line(int show, pid_t pid, int64_t elapsed, uint64_t duration_ms)
{
    if (!show)
        return;
    char e[32], l[32];
    cli_format_duration((uint64_t)elapsed, e, sizeof e);
    if (duration_ms) {
        int64_t left = (int64_t)duration_ms - elapsed;
        cli_format_duration(left > 0 ? (uint64_t)left : 0, l, sizeof l);
        fprintf(stderr, "\rvcattach: tracing pid %d: %s elapsed, %s left (Ctrl-C to stop)\033[K",
                (int)pid, e, l);
    } else {
        fprintf(stderr, "\rvcattach: tracing pid %d: %s elapsed (Ctrl-C to stop)\033[K", (int)pid,
                e);
    }
}

static void status_line_clear(int show)
{
    if (show)
        fprintf(stderr, "\r\033[K");
}

/* From an agent's STATUS text: will its buffer fill within horizon_ms of the session's start,
 * at the rate so far?  1: yes, and it says so on stderr ("before WHEN"), with the --buffer-mb
 * that would hold the whole horizon; 0: no; -1: cannot tell yet (nothing recorded); -2: an
 * agent that does not report its buffer. */
static int buffer_forecast(const char *reply, double horizon_ms, const char *when)
{
    char probe[32];
    if (vc_kv_get(reply, "buffer_chunks", probe, sizeof probe) < 0)
        return -2;
    unsigned long long used = kv_u64(reply, "buffer_chunks_used"),
                       total = kv_u64(reply, "buffer_chunks"), mb = kv_u64(reply, "buffer_mb"),
                       elapsed = kv_u64(reply, "elapsed_ms");
    if (!used || !total || !mb || !elapsed)
        return -1; /* nothing recorded yet: no rate to judge by */
    double fill_ms = (double)elapsed * (double)total / (double)used;
    if (fill_ms >= horizon_ms)
        return 0;
    double need_mb = (double)mb * horizon_ms / fill_ms * 1.25; /* a margin: rates vary */
    char f[32];
    cli_format_duration((uint64_t)fill_ms, f, sizeof f);
    if (need_mb <= 65536)
        fprintf(stderr, "vcattach: warning: at this call rate the %llu MiB buffer fills after ~%s, "
                        "before %s; then the oldest calls are dropped (--buffer-mb %.0f would "
                        "hold them)\n", mb, f, when, ceil(need_mb / 64) * 64);
    else
        fprintf(stderr, "vcattach: warning: at this call rate the %llu MiB buffer fills after ~%s, "
                        "before %s; then the oldest calls are dropped (trace for less time, "
                        "or raise --buffer-mb up to 65536)\n", mb, f, when);
    return 1;
}

/* After the first BUFFER_PROBE_MS of tracing: how fast are the hooks filling the agent's
 * buffer?  When, at that rate, it fills before -t ends (or, without -t, within the first
 * minute), say so now, with the --buffer-mb that would hold the whole trace: the agent keeps
 * the newest calls and drops the oldest, which the operator should not learn only at the end.
 * (`vcattach status` says the same of a running session, a `start`ed one included.)
 * Best effort: a session that does not answer in time (its agent thread waits for the GIL of
 * a busy target, or the machine is loaded) is asked again each status tick until
 * BUFFER_PROBE_LAST_MS; it is never an error.  Returns 1 when the question is settled (warned,
 * or no need to), 0 to ask again later. */
#define BUFFER_PROBE_MS 1000
#define BUFFER_PROBE_LAST_MS 10000
#define BUFFER_PROBE_TIMEOUT_MS 500
static int warn_if_buffer_fills(pid_t pid, const struct cli_options *opt, int show)
{
    char reply[1024], err[256];
    int r = ctl_query(pid, VC_MSG_STATUS, reply, sizeof reply, BUFFER_PROBE_TIMEOUT_MS, err,
                          sizeof err);
    if (r != 1)
        return 0;
    double horizon = opt->duration_ms ? (double)opt->duration_ms : 60000.0;
    char d[32], when[64];
    cli_format_duration((uint64_t)horizon, d, sizeof d);
    snprintf(when, sizeof when, "%s%s", opt->duration_ms ? "-t " : "the first ", d);
    status_line_clear(show);
    return buffer_forecast(reply, horizon, when) != -1;
}

/* Waits for the duration (0: until Ctrl-C).  Returns 0 when it is time to stop (deadline or
 * Ctrl-C), 1 when the agent stopped on its own and is already sending (the target is exiting:
 * the agent flushes at interpreter exit), -1 if the connection broke (err says why). */
static int wait_while_tracing(struct ctl_conn *s, const struct cli_options *opt, int show,
                              int64_t t0, char *err, size_t errlen)
{
    int probe_settled = 0;
    for (;;) {
        int64_t elapsed = vc_monotonic_ms() - t0;
        if (interrupts)
            return 0;
        if (opt->duration_ms && elapsed >= (int64_t)opt->duration_ms)
            return 0;
        if (!probe_settled && elapsed >= BUFFER_PROBE_MS)
            probe_settled = warn_if_buffer_fills(s->pid, opt, show) ||
                            elapsed >= BUFFER_PROBE_LAST_MS;
        status_line(show, s->pid, elapsed, opt->duration_ms);
        int slice = STATUS_LINE_MS;
        if (opt->duration_ms && (int64_t)opt->duration_ms - elapsed < slice)
            slice = (int)((int64_t)opt->duration_ms - elapsed);
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        int r = poll(&p, 1, slice);
        if (r > 0) {
            /* Data before STOP: the agent stopped by itself (or the socket broke). */
            char probe;
            ssize_t n = recv(s->fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
            if (n > 0)
                return 1;
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                if (!target_alive(s->pid))
                    snprintf(err, errlen, "target process %d exited during the trace; no trace "
                                          "was written", (int)s->pid);
                else
                    snprintf(err, errlen, "the agent in pid %d closed the connection during "
                                          "the trace", (int)s->pid);
                return -1;
            }
        }
        if (!target_alive(s->pid)) {
            snprintf(err, errlen, "target process %d exited during the trace; no trace was "
                                  "written", (int)s->pid);
            return -1;
        }
    }
}

/* After the agent stopped by itself: is the target on its way out?  (The agent flushes at
 * interpreter exit; the process disappears shortly after.) */
static int target_exits(pid_t pid)
{
    for (int i = 0; i < 40; i++) {
        if (!target_alive(pid))
            return 1;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

int attach_build_config(const struct cli_options *opt, const char *output, const char *fallback,
                        char *cfg, size_t cap)
{
    size_t used = 0;
    char num[32];
    cfg[0] = '\0';
    uint64_t deadline = 0;
    if (opt->mode == CLI_START)
        deadline = opt->duration_ms;
    else if (opt->duration_ms)
        deadline = opt->duration_ms + DEADLINE_GRACE_MS;
    snprintf(num, sizeof num, "%llu", (unsigned long long)deadline);
    int rc = vc_kv_append(cfg, cap, &used, "output", output);
    rc |= vc_kv_append(cfg, cap, &used, "fallback", fallback);
    rc |= vc_kv_append(cfg, cap, &used, "duration_ms", num);
    if (opt->buffer_mb) {
        snprintf(num, sizeof num, "%u", opt->buffer_mb);
        rc |= vc_kv_append(cfg, cap, &used, "buffer_mb", num);
    }
    rc |= vc_kv_append(cfg, cap, &used, "hook", opt->hook);
    /* The filters: part of the config every process of the session gets. */
    for (unsigned i = 0; i < opt->n_include; i++)
        rc |= vc_kv_append(cfg, cap, &used, "include", opt->include[i]);
    for (unsigned i = 0; i < opt->n_exclude; i++)
        rc |= vc_kv_append(cfg, cap, &used, "exclude", opt->exclude[i]);
    if (opt->no_c_calls)
        rc |= vc_kv_append(cfg, cap, &used, "no_c_calls", "1");
    if (opt->max_depth) {
        snprintf(num, sizeof num, "%u", opt->max_depth);
        rc |= vc_kv_append(cfg, cap, &used, "max_depth", num);
    }
    if (opt->min_dur_ns) {
        snprintf(num, sizeof num, "%llu", (unsigned long long)opt->min_dur_ns);
        rc |= vc_kv_append(cfg, cap, &used, "min_dur_ns", num);
    }
    if (opt->mode == CLI_START)
        rc |= vc_kv_append(cfg, cap, &used, "detach", "1");
    return rc ? -1 : 0;
}

/* remote-exec's wait for the agent: the control socket's accept, in the slices the injector
 * asks for.  A connection that broke after accept() (no greeting) ends the wait for good. */
struct agent_wait {
    struct ctl_conn *s;
    int broken;
    char err[512];
};

static int wait_agent(void *ctx, int wait_ms)
{
    struct agent_wait *w = ctx;
    if (w->broken)
        return -1;
    if (w->s->fd >= 0)
        return 1;
    if (interrupts || !target_alive(w->s->pid))
        return -1;
    if (ctl_accept(w->s, wait_ms, &interrupts, w->err, sizeof w->err) == 0)
        return 1;
    if (w->s->fd >= 0) {
        w->broken = 1;
        return -1;
    }
    return interrupts || !target_alive(w->s->pid) ? -1 : 0;
}

static enum inject_method method_of(const struct cli_options *opt)
{
    switch (opt->method) {
    case CLI_METHOD_REMOTE_EXEC:
        return INJECT_REMOTE_EXEC;
    case CLI_METHOD_PTRACE:
        return INJECT_PTRACE;
    case CLI_METHOD_GDB:
        return INJECT_GDB;
    default:
        return INJECT_AUTO;
    }
}

/* Loads and starts the agent with the chosen method (inject(), vcinject.h).  On success the
 * agent may already be connected (remote-exec waits for that itself): s->fd >= 0 then. */
static int inject_agent(const struct cli_options *opt, const struct target_info *t,
                        struct ctl_conn *s, enum inject_method chosen, char *err, size_t errlen)
{
    struct agent_wait w = {.s = s};
    struct inject_request req = {
        .target = &t->f,
        .method = chosen,
        .fallback = opt->method == CLI_METHOD_AUTO,
        .agent_path = t->agent_in_target,
        .control_path = s->target_path,
        .timeout_ms = INJECT_TIMEOUT_MS,
        .rexec_timeout_ms = REXEC_TIMEOUT_MS,
        .wait_connected = wait_agent,
        .wait_ctx = &w,
        .cancel = &interrupts,
        .verbose = opt->verbose,
    };
    struct inject_result res;
    int st = inject(&req, &res, err, errlen);
    if (res.fell_back[0] && !opt->quiet)
        fprintf(stderr, "vcattach: remote-exec: %s; falling back to ptrace\n", res.fell_back);
    if (w.broken && res.used == INJECT_REMOTE_EXEC) {
        snprintf(err, errlen, "%s", w.err);
        return -1;
    }
    return st == INJECT_OK ? 0 : -1;
}

/* Which method (inject_choose).  Returns 0 with *chosen, or -1 after printing why an
 * explicit --method remote-exec cannot be used (a preflight failure). */
static int choose_method(const char *cmd, const struct cli_options *opt,
                         const struct target_info *t, enum inject_method *chosen)
{
    char note[512], err[512];
    if (inject_choose(&t->f, method_of(opt), chosen, note, sizeof note, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return -1;
    }
    if (note[0] && opt->verbose)
        fprintf(stderr, "%s: not using remote-exec: %s; using ptrace\n", cmd, note);
    return 0;
}

/* Where the trace goes, settled before the target is touched. */
struct output_plan {
    struct trace_sink sink;          /* trace: the file or socket we write (unused by start) */
    char out_abs[PATH_MAX];          /* absolute OUT (start: written by the agent) */
    char fallback[PATH_MAX + 16];    /* what the agent writes if we vanish, in its own view */
    const char *fallback_note;       /* "" or where that path lives */
    char where[PATH_MAX + 8];        /* OUT or unix:/path, for messages */
};

/* Opens the sink (trace) or checks OUT (start), and derives the fallback.  Returns 0, or -1
 * after printing the reason (a preflight failure: nothing was touched). */
static int plan_output(const char *cmd, const struct cli_options *opt, const struct target_info *t,
                       struct output_plan *p)
{
    char err[1024], name[96];
    memset(p, 0, sizeof *p);
    p->sink.fd = -1;
    p->fallback_note = "";
    const char *out = opt->output;
    if (!out) {
        default_output(opt->pid, name, sizeof name);
        out = name;
    }
    int streaming = !strncmp(out, "unix:", 5);
    int ok;
    if (opt->mode == CLI_START)
        ok = sink_check_remote_file(out, t->f.uid[1], opt->force, p->out_abs, sizeof p->out_abs, err,
                                    sizeof err) == 0;
    else if (streaming)
        ok = sink_open_socket(&p->sink, out + 5, err, sizeof err) == 0;
    else
        ok = sink_open_file(&p->sink, out, opt->force, err, sizeof err) == 0;
    if (!ok) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return -1;
    }
    if (streaming) { /* the fallback gets a default name in the current directory */
        default_output(opt->pid, name, sizeof name);
        if (!getcwd(p->out_abs, sizeof p->out_abs - sizeof name - 1))
            snprintf(p->out_abs, sizeof p->out_abs, "/tmp");
        strcat(p->out_abs, "/");
        strcat(p->out_abs, name);
        snprintf(p->where, sizeof p->where, "unix:%s", p->sink.path);
    } else {
        if (opt->mode == CLI_TRACE)
            snprintf(p->out_abs, sizeof p->out_abs, "%s", p->sink.path);
        snprintf(p->where, sizeof p->where, "%s", p->out_abs);
    }
    fallback_for(p->out_abs, p->fallback, sizeof p->fallback);

    /* The agent writes the fallback (and, for start, OUT) in its own mount namespace. */
    if (t->f.other_mnt_ns && !dir_shared_with_target(t->f.pid, p->out_abs)) {
        if (opt->mode == CLI_START) {
            fprintf(stderr, "%s: with start the target writes %s itself, but that directory is "
                            "not the same in its mount namespace: choose a directory shared "
                            "with it\n", cmd, p->out_abs);
            return -1;
        }
        const char *base = strrchr(p->fallback, '/');
        char moved[sizeof p->fallback + 8];
        snprintf(moved, sizeof moved, "/tmp/%s", base ? base + 1 : p->fallback);
        if (strlen(moved) >= sizeof p->fallback) {
            fprintf(stderr, "%s: output name too long: %s\n", cmd, p->out_abs);
            sink_abort(&p->sink);
            return -1;
        }
        memcpy(p->fallback, moved, strlen(moved) + 1);
        p->fallback_note = " (in the target's mount namespace)";
    }
    return 0;
}

/* After STOP (or the agent stopping by itself): DATA into the sink, END, commit, summary.
 * Returns an exit code. */
static int collect_trace(const char *cmd, const struct cli_options *opt, struct ctl_conn *s,
                         struct output_plan *p, int agent_stopped, int64_t traced, int show)
{
    char err[1024], end_text[8192];
    if (show)
        fprintf(stderr, "vcattach: stopping and collecting the trace...");
    if (!agent_stopped) /* EPIPE means the agent just stopped on its own; END still follows */
        vc_msg_send(s->fd, VC_MSG_STOP, NULL, 0, 5000);
    struct receive_limits lim = {
        .frame_timeout_ms = FRAME_TIMEOUT_MS,
        .total_timeout_ms = (int64_t)opt->collect_timeout_ms,
        .max_bytes = (uint64_t)opt->max_trace_mb << 20,
    };
    int received = ctl_receive(s, sink_write, &p->sink, end_text, sizeof end_text, &lim,
                                   &abandon, err, sizeof err);
    status_line_clear(show);
    if (received < 0) {
        if (abandon)
            return VC_EXIT_FAIL; /* the caller reports it */
        int alive = target_alive(s->pid);
        fprintf(stderr, "%s: %s; no trace was written%s%s%s\n", cmd, err,
                alive ? "; the agent writes its fallback " : "", alive ? p->fallback : "",
                alive ? p->fallback_note : "");
        return VC_EXIT_FAIL;
    }
    long agent_status = end_status(end_text);
    if (agent_status) {
        fprintf(stderr, "%s: the agent failed to send the whole trace (%s); nothing was written "
                        "to %s; the agent tried its fallback %s%s\n",
                cmd, strerror((int)-agent_status), p->where, p->fallback, p->fallback_note);
        return VC_EXIT_FAIL;
    }
    if (sink_commit(&p->sink, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return VC_EXIT_FAIL;
    }
    if (!opt->quiet)
        print_summary(s->pid, end_text, p->where, p->sink.bytes, (uint64_t)traced);
    if (agent_stopped && target_exits(s->pid)) {
        fprintf(stderr, "%s: target process %d exited during the trace (after %.1fs); the "
                        "trace up to its exit is in %s\n",
                cmd, (int)s->pid, (double)traced / 1000.0, p->where);
        return VC_EXIT_FAIL;
    }
    return VC_EXIT_OK;
}

int attach_one(enum cli_mode mode, const struct cli_options *given)
{
    struct cli_options opt = *given;
    const char *cmd = mode == CLI_START ? "vcattach start" : "vcattach";

    char err[1024] = "";
    struct target_info t;
    if (preflight_target(opt.pid, &t, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return VC_EXIT_USAGE;
    }
    if (opt.verbose) {
        char version[32];
        int len = snprintf(version, sizeof version, "%d.%d", t.f.py.major, t.f.py.minor);
        if (t.f.py.micro >= 0)
            snprintf(version + len, sizeof version - (size_t)len, ".%d", t.f.py.micro);
        fprintf(stderr, "%s: pid %d (%s) is Python %s (from %s); agent %s\n", cmd, (int)t.f.pid,
                t.f.comm, version, t.f.py.how, t.agent);
    }
    if (!strcmp(opt.hook, "monitoring") && t.f.py.minor < 12) {
        fprintf(stderr, "%s: --hook monitoring needs Python 3.12+ and pid %d runs %d.%d: use "
                        "--hook profile (or auto)\n", cmd, (int)t.f.pid, t.f.py.major, t.f.py.minor);
        preflight_release(&t);
        return VC_EXIT_USAGE;
    }
    if (!strcmp(opt.hook, "eval") && (t.f.py.minor < 9 || t.f.py.minor > 11 || !opt.no_c_calls)) {
        if (!opt.no_c_calls)
            fprintf(stderr, "%s: --hook eval sees Python calls only: add --no-c-calls (or use "
                            "--hook auto to trace C calls too)\n", cmd);
        else
            fprintf(stderr, "%s: --hook eval needs Python 3.9-3.11 and pid %d runs %d.%d: use "
                            "--hook auto\n", cmd, (int)t.f.pid, t.f.py.major, t.f.py.minor);
        preflight_release(&t);
        return VC_EXIT_USAGE;
    }
    enum inject_method chosen;
    if (choose_method(cmd, &opt, &t, &chosen) < 0) {
        preflight_release(&t);
        return VC_EXIT_USAGE;
    }
    static struct output_plan plan; /* large (paths): not on the stack */
    if (plan_output(cmd, &opt, &t, &plan) < 0) {
        preflight_release(&t);
        return VC_EXIT_USAGE;
    }
    char cfg[PATH_MAX * 3];
    if (attach_build_config(&opt, mode == CLI_START ? plan.out_abs : "control", plan.fallback, cfg,
                     sizeof cfg) < 0) {
        fprintf(stderr, "%s: output path too long or contains a newline: %s\n", cmd,
                plan.out_abs);
        sink_abort(&plan.sink);
        preflight_release(&t);
        return VC_EXIT_USAGE;
    }

    struct saved_signals saved;
    interrupts = abandon = 0;
    signals_install(&saved);
    struct ctl_conn s;
    ctl_init(&s);
    int rc = VC_EXIT_FAIL;
    char reply[8192];
    int show = !opt.quiet && isatty(STDERR_FILENO);
    int copy_made = 0; /* a copy of the agent to remove once the target has loaded it */

    /* From here on the target is touched: first its filesystem, when it cannot see our agent. */
    if (t.agent_needs_copy) {
        if (agent_copy_into_target(t.f.pid, t.f.uid[1], t.f.gid[1], t.agent, t.agent_in_target,
                                   sizeof t.agent_in_target, &copy_made, err, sizeof err) < 0) {
            fprintf(stderr, "%s: %s\n", cmd, err);
            goto out;
        }
        if (opt.verbose)
            fprintf(stderr, "%s: agent copied into the target's mount namespace as %s\n", cmd,
                    t.agent_in_target);
    }
    if (ctl_listen(&s, t.f.pid, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        goto out;
    }
    int injected = inject_agent(&opt, &t, &s, chosen, err, sizeof err);
    if (copy_made) { /* loaded (mapped) or not, the copy's name is not needed any more */
        agent_copy_remove(t.f.pid, t.f.uid[1], t.f.gid[1], t.agent_in_target);
        copy_made = 0;
    }
    if (injected < 0) {
        fprintf(stderr, "%s: injection into pid %d failed: %s\n", cmd, (int)t.f.pid, err);
        goto out;
    }
    if (s.fd < 0 && ctl_accept(&s, ACCEPT_TIMEOUT_MS, &interrupts, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        goto out;
    }
    if (interrupts) { /* Ctrl-C during the injection: start nothing */
        fprintf(stderr, "%s: interrupted; the agent was loaded but no trace was started\n", cmd);
        goto out;
    }
    if (ctl_configure(&s, cfg, reply, sizeof reply, STARTED_TIMEOUT_MS, &interrupts, err,
                          sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        goto out;
    }
    int64_t t0 = vc_monotonic_ms();
    char backend[64] = "?";
    vc_kv_get(reply, "backend", backend, sizeof backend);
    if (opt.verbose)
        fprintf(stderr, "%s: agent started (%s), %llu threads\n", cmd, backend,
                kv_u64(reply, "threads"));

    if (mode == CLI_START) {
        char dur[32];
        cli_format_duration(opt.duration_ms, dur, sizeof dur);
        if (!opt.quiet)
            printf("vcattach: tracing pid %d for %s (%llu threads); the agent writes %s at the "
                   "end (`vcattach stop --pid %d` stops it early)\n",
                   (int)t.f.pid, dur, kv_u64(reply, "threads"), plan.out_abs, (int)t.f.pid);
        rc = VC_EXIT_OK;
        goto out;
    }

    int agent_stopped = wait_while_tracing(&s, &opt, show, t0, err, sizeof err);
    status_line_clear(show);
    if (agent_stopped < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        goto out;
    }
    if (!abandon)
        rc = collect_trace(cmd, &opt, &s, &plan, agent_stopped, vc_monotonic_ms() - t0, show);
    if (abandon)
        fprintf(stderr, "%s: interrupted twice: trace abandoned; the agent in pid %d stops and "
                        "writes what it has to %s%s\n",
                cmd, (int)t.f.pid, plan.fallback, plan.fallback_note);
out:
    if (copy_made)
        agent_copy_remove(t.f.pid, t.f.uid[1], t.f.gid[1], t.agent_in_target);
    ctl_close(&s);
    sink_abort(&plan.sink);
    signals_restore(&saved);
    preflight_release(&t);
    return rc;
}

static int run_attach(enum cli_mode mode, int argc, char **argv)
{
    struct cli_options opt;
    int prc = cli_parse(mode, argc, argv, &opt);
    if (prc)
        return prc == 1 ? VC_EXIT_OK : VC_EXIT_USAGE;
    if (opt.subprocesses)
        return mode == CLI_TRACE ? run_tree(&opt) : start_tree(&opt);
    return attach_one(mode, &opt);
}

int cmd_trace(int argc, char **argv)
{
    return run_attach(CLI_TRACE, argc, argv);
}

int cmd_start(int argc, char **argv)
{
    return run_attach(CLI_START, argc, argv);
}

static int check_pid_exists(const char *cmd, pid_t pid)
{
    if (!target_alive(pid)) {
        fprintf(stderr, "%s: no such process: pid %d\n", cmd, (int)pid);
        return -1;
    }
    return 0;
}

int cmd_stop(int argc, char **argv)
{
    struct cli_options opt;
    int prc = cli_parse(CLI_STOP, argc, argv, &opt);
    if (prc)
        return prc == 1 ? VC_EXIT_OK : VC_EXIT_USAGE;
    if (opt.subprocesses)
        return stop_tree(&opt, VC_MSG_STOP);
    if (check_pid_exists("vcattach stop", opt.pid) < 0)
        return VC_EXIT_FAIL;
    char reply[8192], err[512];
    int r = ctl_query(opt.pid, VC_MSG_STOP, reply, sizeof reply, STOP_WAIT_MS, err,
                          sizeof err);
    if (r < 0) {
        fprintf(stderr, "vcattach stop: %s\n", err);
        return VC_EXIT_FAIL;
    }
    if (r == 0) {
        fprintf(stderr, "vcattach stop: no vcattach session is running in pid %d\n",
                (int)opt.pid);
        return VC_EXIT_FAIL;
    }
    char output[PATH_MAX] = "?";
    vc_kv_get(reply, "output", output, sizeof output);
    long agent_status = end_status(reply);
    if (agent_status) {
        fprintf(stderr, "vcattach stop: the agent in pid %d could not write %s (%s); look for "
                        "its fallback file next to it (.partial.cvf)\n",
                (int)opt.pid, output, strerror((int)-agent_status));
        return VC_EXIT_FAIL;
    }
    if (!opt.quiet)
        print_summary(opt.pid, reply, output, 0, 0);
    return VC_EXIT_OK;
}

int cmd_status(int argc, char **argv)
{
    struct cli_options opt;
    int prc = cli_parse(CLI_STATUS, argc, argv, &opt);
    if (prc)
        return prc == 1 ? VC_EXIT_OK : VC_EXIT_USAGE;
    if (opt.subprocesses)
        return stop_tree(&opt, VC_MSG_STATUS);
    if (check_pid_exists("vcattach status", opt.pid) < 0)
        return VC_EXIT_FAIL;
    char reply[8192], err[512];
    int r = ctl_query(opt.pid, VC_MSG_STATUS, reply, sizeof reply, 2000, err, sizeof err);
    if (r < 0) {
        fprintf(stderr, "vcattach status: %s\n", err);
        return VC_EXIT_FAIL;
    }
    if (r == 0) {
        if (!opt.quiet)
            printf("vcattach: no session is running in pid %d\n", (int)opt.pid);
        return VC_EXIT_FAIL;
    }
    char state[32] = "running", output[PATH_MAX] = "?", e[32], l[32], left[48];
    vc_kv_get(reply, "state", state, sizeof state);
    vc_kv_get(reply, "output", output, sizeof output);
    cli_format_duration(kv_u64(reply, "elapsed_ms"), e, sizeof e);
    unsigned long long remaining = kv_u64(reply, "remaining_ms");
    int streamed = !strcmp(output, "control"); /* a `vcattach trace` receives it */
    /* A `vcattach trace -t` session's agent holds the deadline plus DEADLINE_GRACE_MS (its
     * backstop in case that vcattach dies); the vcattach stops it at -t itself, so what is
     * left is the agent's figure minus the grace. */
    int backstop = streamed && remaining > 0;
    if (backstop)
        remaining = remaining > DEADLINE_GRACE_MS ? remaining - DEADLINE_GRACE_MS : 0;
    cli_format_duration(remaining, l, sizeof l);
    snprintf(left, sizeof left, remaining || backstop ? "%s left" : "no deadline", l);
    if (streamed)
        snprintf(output, sizeof output, "streamed to the vcattach that started it");
    if (!opt.quiet) {
        printf("vcattach: session %s in pid %d: %s elapsed, %s, %llu threads, output %s\n",
               state, (int)opt.pid, e, left, kv_u64(reply, "threads"), output);
        fflush(stdout);
        /* A session with a deadline: will the buffer hold until then? */
        if (remaining && !strcmp(state, "running")) {
            char when[64];
            snprintf(when, sizeof when, "the session ends (in %s)", l);
            buffer_forecast(reply, (double)(kv_u64(reply, "elapsed_ms") + remaining), when);
        }
    }
    return VC_EXIT_OK;
}

/* cmd_trace.c — the attach workflow: `vcattach [trace]`, `start`, `stop`, `status`.
 *
 * trace:  parse → preflight (target, agent, output; nothing touched yet) → control socket →
 *         inject → accept the agent → CONFIG → STARTED → wait (status line, Ctrl-C) → STOP →
 *         DATA* into OUT.tmp → END → fsync, rename → one summary line.
 * start:  the same up to STARTED with detach=1 and output=OUT: the agent finishes on its own.
 * stop/status: talk to a running session through its abstract status socket.
 *
 * Signals: SIGINT/SIGTERM/SIGHUP only set flags here (no SA_RESTART, every wait is a bounded
 * poll that re-checks them).  The first one stops the trace early and still writes it; the
 * second abandons the transfer: the agent sees the socket close and writes its fallback file
 * itself.  They are blocked during the injection, which must never be cut in half.
 */
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

#include "cli.h"
#include "commands.h"
#include "inject.h"
#include "preflight.h"
#include "session.h"
#include "trace_sink.h"

/* Bounds of each phase (ms). */
#define INJECT_TIMEOUT_MS 10000
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

static void signals_block(int block, sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < N_HANDLED; i++)
        sigaddset(&set, handled_signals[i]);
    sigprocmask(block ? SIG_BLOCK : SIG_SETMASK, block ? &set : old, block ? old : NULL);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

static unsigned long long kv_u64(const char *text, const char *key)
{
    char v[32];
    return vc_kv_get(text, key, v, sizeof v) >= 0 ? strtoull(v, NULL, 10) : 0;
}

/* One line from an END text: "12345 events, 5 threads, 0 dropped, 1.2 MiB -> OUT". */
static void print_summary(pid_t pid, const char *end_text, const char *where, uint64_t bytes,
                          uint64_t traced_ms)
{
    char size[32], dur[32] = "";
    cli_format_bytes(bytes ? bytes : kv_u64(end_text, "bytes"), size, sizeof size);
    if (traced_ms)
        snprintf(dur, sizeof dur, " in %.1fs", (double)traced_ms / 1000.0);
    unsigned long long drops = kv_u64(end_text, "drops");
    printf("vcattach: pid %d%s: %llu events, %llu threads, %llu dropped%s, %s -> %s\n", (int)pid,
           dur, kv_u64(end_text, "events"), kv_u64(end_text, "threads"), drops,
           drops ? " (buffer full: raise --buffer-mb)" : "", size, where);
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

/* Waits for the duration (0: until Ctrl-C).  Returns 0 when it is time to stop (deadline or
 * Ctrl-C), 1 when the agent stopped on its own and is already sending (the target is exiting:
 * the agent flushes at interpreter exit), -1 if the connection broke (err says why). */
static int wait_while_tracing(struct session *s, const struct cli_options *opt, int show,
                              int64_t t0, char *err, size_t errlen)
{
    for (;;) {
        int64_t elapsed = now_ms() - t0;
        if (interrupts)
            return 0;
        if (opt->duration_ms && elapsed >= (int64_t)opt->duration_ms)
            return 0;
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
                if (!pf_alive(s->pid))
                    snprintf(err, errlen, "target process %d exited during the trace; no trace "
                                          "was written", (int)s->pid);
                else
                    snprintf(err, errlen, "the agent in pid %d closed the connection during "
                                          "the trace", (int)s->pid);
                return -1;
            }
        }
        if (!pf_alive(s->pid)) {
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
        if (!pf_alive(pid))
            return 1;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static int build_config(const struct cli_options *opt, const char *output, const char *fallback,
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
    if (opt->mode == CLI_START)
        rc |= vc_kv_append(cfg, cap, &used, "detach", "1");
    return rc ? -1 : 0;
}

/* The gdb method may be absent from a build (it lands separately): a weak reference keeps the
 * CLI linkable and turns its absence into an error message instead of a link failure. */
#pragma weak inject_gdb

static int inject(const struct cli_options *opt, const struct target_info *t,
                  const struct session *s, char *err, size_t errlen)
{
    struct inject_request req = {
        .pid = t->pid,
        .agent_path = t->agent,
        .control_path = s->path,
        .timeout_ms = INJECT_TIMEOUT_MS,
        .verbose = opt->verbose,
    };
    if (opt->method == CLI_METHOD_GDB && !inject_gdb) {
        snprintf(err, errlen, "this vcattach was built without the gdb method: use --method "
                              "ptrace (the target was not changed)");
        return -1;
    }
    sigset_t old;
    signals_block(1, &old);
    int st = opt->method == CLI_METHOD_GDB ? inject_gdb(&req, err, errlen)
                                           : inject_ptrace(&req, err, errlen);
    signals_block(0, &old);
    if (st == INJECT_UNTOUCHED && strlen(err) + 32 < errlen)
        strcat(err, " (the target was not changed)");
    return st == INJECT_OK ? 0 : -1;
}

static int run_attach(enum cli_mode mode, int argc, char **argv)
{
    struct cli_options opt;
    int prc = cli_parse(mode, argc, argv, &opt);
    if (prc)
        return prc == 1 ? VC_EXIT_OK : VC_EXIT_USAGE;
    const char *cmd = mode == CLI_START ? "vcattach start" : "vcattach";

    char err[1024] = "";
    struct target_info t;
    if (preflight_target(opt.pid, &t, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return VC_EXIT_USAGE;
    }
    if (opt.verbose) {
        char version[32];
        int len = snprintf(version, sizeof version, "%d.%d", t.py.major, t.py.minor);
        if (t.py.micro >= 0)
            snprintf(version + len, sizeof version - (size_t)len, ".%d", t.py.micro);
        fprintf(stderr, "%s: pid %d (%s) is Python %s (from %s); agent %s\n", cmd, (int)t.pid,
                t.comm, version, t.py.how, t.agent);
    }

    /* The output is settled before the target is touched. */
    char out_default[96], out_abs[PATH_MAX], fallback[PATH_MAX + 16], where[PATH_MAX + 8];
    const char *out = opt.output;
    if (!out) {
        default_output(opt.pid, out_default, sizeof out_default);
        out = out_default;
    }
    struct trace_sink sink;
    memset(&sink, 0, sizeof sink);
    sink.fd = -1;
    int streaming = !strncmp(out, "unix:", 5);
    int ok;
    if (mode == CLI_START)
        ok = sink_check_remote_file(out, t.uid, opt.force, out_abs, sizeof out_abs, err,
                                    sizeof err) == 0;
    else if (streaming)
        ok = sink_open_socket(&sink, out + 5, err, sizeof err) == 0;
    else
        ok = sink_open_file(&sink, out, opt.force, err, sizeof err) == 0;
    if (!ok) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return VC_EXIT_USAGE;
    }
    if (streaming) {
        char name[96];
        default_output(opt.pid, name, sizeof name);
        if (!getcwd(out_abs, sizeof out_abs - sizeof name - 1))
            snprintf(out_abs, sizeof out_abs, "/tmp");
        strcat(out_abs, "/");
        strcat(out_abs, name);
        snprintf(where, sizeof where, "unix:%s", sink.path);
    } else if (mode == CLI_TRACE) {
        snprintf(out_abs, sizeof out_abs, "%s", sink.path);
        snprintf(where, sizeof where, "%s", sink.path);
    } else {
        snprintf(where, sizeof where, "%s", out_abs);
    }
    fallback_for(out_abs, fallback, sizeof fallback);

    char cfg[PATH_MAX * 3];
    if (build_config(&opt, mode == CLI_START ? out_abs : "control", fallback, cfg, sizeof cfg) <
        0) {
        fprintf(stderr, "%s: output path too long or contains a newline: %s\n", cmd, out_abs);
        sink_abort(&sink);
        return VC_EXIT_USAGE;
    }

    struct saved_signals saved;
    interrupts = abandon = 0;
    signals_install(&saved);
    struct session s;
    session_init(&s);
    int rc = VC_EXIT_FAIL;
    char reply[1024];
    int show = !opt.quiet && isatty(STDERR_FILENO);

    if (session_listen(&s, t.pid, t.uid, t.gid, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        goto out;
    }
    if (inject(&opt, &t, &s, err, sizeof err) < 0) {
        fprintf(stderr, "%s: injection into pid %d failed: %s\n", cmd, (int)t.pid, err);
        goto out;
    }
    if (session_accept(&s, ACCEPT_TIMEOUT_MS, NULL, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        goto out;
    }
    if (interrupts) { /* Ctrl-C during the injection: start nothing */
        fprintf(stderr, "%s: interrupted; the agent was loaded but no trace was started\n", cmd);
        goto out;
    }
    if (session_configure(&s, cfg, reply, sizeof reply, STARTED_TIMEOUT_MS, err, sizeof err) <
        0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        goto out;
    }
    int64_t t0 = now_ms();
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
                   (int)t.pid, dur, kv_u64(reply, "threads"), out_abs, (int)t.pid);
        rc = VC_EXIT_OK;
        goto out;
    }

    int agent_stopped = wait_while_tracing(&s, &opt, show, t0, err, sizeof err);
    if (agent_stopped < 0) {
        status_line_clear(show);
        fprintf(stderr, "%s: %s\n", cmd, err);
        goto out;
    }
    int64_t traced = now_ms() - t0;
    status_line_clear(show);
    if (abandon)
        goto abandoned;
    if (show)
        fprintf(stderr, "vcattach: stopping and collecting the trace...");
    if (!agent_stopped) /* EPIPE means the agent just stopped on its own; END still follows */
        vc_msg_send(s.fd, VC_MSG_STOP, NULL, 0, 5000);
    if (session_receive(&s, sink_write, &sink, reply, sizeof reply, FRAME_TIMEOUT_MS, &abandon,
                        err, sizeof err) < 0) {
        status_line_clear(show);
        if (abandon)
            goto abandoned;
        fprintf(stderr, "%s: %s; no trace was written%s%s\n", cmd, err,
                pf_alive(t.pid) ? "; the agent writes its fallback " : "",
                pf_alive(t.pid) ? fallback : "");
        goto out;
    }
    status_line_clear(show);
    if (sink_commit(&sink, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        goto out;
    }
    if (!opt.quiet)
        print_summary(t.pid, reply, where, sink.bytes, (uint64_t)traced);
    rc = VC_EXIT_OK;
    if (agent_stopped && target_exits(t.pid)) {
        fprintf(stderr, "%s: target process %d exited during the trace (after %.1fs); the "
                        "trace up to its exit is in %s\n",
                cmd, (int)t.pid, (double)traced / 1000.0, where);
        rc = VC_EXIT_FAIL;
    }
    goto out;

abandoned:
    fprintf(stderr, "%s: interrupted twice: trace abandoned; the agent in pid %d stops and "
                    "writes what it has to %s\n",
            cmd, (int)t.pid, fallback);
out:
    session_close(&s);
    sink_abort(&sink);
    signals_restore(&saved);
    return rc;
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
    if (!pf_alive(pid)) {
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
    if (check_pid_exists("vcattach stop", opt.pid) < 0)
        return VC_EXIT_FAIL;
    char reply[1024], err[512];
    int r = session_query(opt.pid, VC_MSG_STOP, reply, sizeof reply, STOP_WAIT_MS, err,
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
    if (check_pid_exists("vcattach status", opt.pid) < 0)
        return VC_EXIT_FAIL;
    char reply[1024], err[512];
    int r = session_query(opt.pid, VC_MSG_STATUS, reply, sizeof reply, 2000, err, sizeof err);
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
    cli_format_duration(remaining, l, sizeof l);
    snprintf(left, sizeof left, remaining ? "%s left" : "no deadline", l);
    if (!opt.quiet)
        printf("vcattach: session %s in pid %d: %s elapsed, %s, %llu threads, output %s\n",
               state, (int)opt.pid, e, left, kv_u64(reply, "threads"), output);
    return VC_EXIT_OK;
}

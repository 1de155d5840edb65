/* trace_process.c — one process, attached: `vcattach [trace]` and `vcattach start` without
 * --subprocesses (and each member of a `start --subprocesses`).
 *
 * trace:  preflight (target, agent, output; nothing touched yet) → method → control socket →
 *         inject (attach.c: agent copy, remote-exec or ptrace/gdb, auto's fallback) → accept
 *         the agent → CONFIG → STARTED → wait (status line, Ctrl-C) → STOP → DATA* into
 *         OUT.tmp → END → fsync, rename → summary line.
 * start:  the same up to STARTED with detach=1 and output=OUT: the agent finishes on its own.
 *
 * Signals (attach.c) only set flags: the first Ctrl-C stops the trace early and still writes
 * it; the second abandons the transfer: the agent sees the socket close and writes its
 * fallback file itself.  The injector blocks them during the injection, which must never be
 * cut in half.
 */
#include "trace_process.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "commands.h"
#include "monotonic.h"
#include "report.h"
#include "trace_sink.h"

#define FRAME_TIMEOUT_MS 60000 /* encoding a large trace may take a while per chunk */
#define STATUS_LINE_MS 200

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
    report_status_line_clear(show);
    return report_buffer_forecast(reply, horizon, when) != -1;
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
        if (attach_interrupts)
            return 0;
        if (opt->duration_ms && elapsed >= (int64_t)opt->duration_ms)
            return 0;
        if (!probe_settled && elapsed >= BUFFER_PROBE_MS)
            probe_settled = warn_if_buffer_fills(s->pid, opt, show) ||
                            elapsed >= BUFFER_PROBE_LAST_MS;
        report_status_line(show, s->pid, elapsed, opt->duration_ms);
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


/* Where the trace goes, settled before the target is touched. */
struct output_plan {
    struct trace_sink sink;          /* trace: the file or socket we write (unused by start) */
    char out_abs[PATH_MAX];          /* absolute OUT (start: written by the agent) */
    char fallback[PATH_MAX + 16];    /* what the agent writes if we vanish, in its own view */
    const char *fallback_note;       /* "" or where that path lives */
    char where[PATH_MAX + 8];        /* OUT or unix:/path, for messages */
    char config[PATH_MAX * 3];       /* the CONFIG text */
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
        attach_default_output(opt->pid, 0, name, sizeof name);
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
        attach_default_output(opt->pid, 0, name, sizeof name);
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
    attach_fallback_name(p->out_abs, 0, p->fallback, sizeof p->fallback);

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
                                   &attach_abandon, err, sizeof err);
    report_status_line_clear(show);
    if (received < 0) {
        if (attach_abandon)
            return VC_EXIT_FAIL; /* the caller reports it */
        int alive = target_alive(s->pid);
        fprintf(stderr, "%s: %s; no trace was written%s%s%s\n", cmd, err,
                alive ? "; the agent writes its fallback " : "", alive ? p->fallback : "",
                alive ? p->fallback_note : "");
        return VC_EXIT_FAIL;
    }
    long agent_status = report_end_status(end_text);
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
        report_summary(s->pid, end_text, p->where, p->sink.bytes, (uint64_t)traced);
    if (agent_stopped && target_exits(s->pid)) {
        fprintf(stderr, "%s: target process %d exited during the trace (after %.1fs); the "
                        "trace up to its exit is in %s\n",
                cmd, (int)s->pid, (double)traced / 1000.0, p->where);
        return VC_EXIT_FAIL;
    }
    return VC_EXIT_OK;
}

/* Everything decided before the target is touched: preflight, method, output, CONFIG.
 * Returns 0, or -1 after printing the reason (a preflight failure: nothing was touched, and
 * nothing is held). */
static int prepare(const char *cmd, const struct cli_options *opt, struct target_info *t,
                   enum inject_method *method, struct output_plan *plan)
{
    char err[1024] = "";
    if (attach_preflight(opt, opt->pid, t, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return -1;
    }
    if (opt->verbose) {
        char version[32];
        int len = snprintf(version, sizeof version, "%d.%d", t->f.py.major, t->f.py.minor);
        if (t->f.py.micro >= 0)
            snprintf(version + len, sizeof version - (size_t)len, ".%d", t->f.py.micro);
        fprintf(stderr, "%s: pid %d (%s) is Python %s (from %s); agent %s\n", cmd,
                (int)t->f.pid, t->f.comm, version, t->f.py.how, t->agent);
    }
    if (attach_choose_method(cmd, opt, t, method, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        preflight_release(t);
        return -1;
    }
    if (plan_output(cmd, opt, t, plan) < 0) {
        preflight_release(t);
        return -1;
    }
    if (attach_build_config(opt, opt->mode == CLI_START ? plan->out_abs : "control",
                            plan->fallback, plan->config, sizeof plan->config) < 0) {
        fprintf(stderr, "%s: output path too long or contains a newline: %s\n", cmd,
                plan->out_abs);
        sink_abort(&plan->sink);
        preflight_release(t);
        return -1;
    }
    return 0;
}

/* From the injection to STARTED.  Returns 0 with the agent tracing (its STARTED text in
 * reply), or -1 after printing why. */
static int start_agent(const char *cmd, const struct cli_options *opt, struct target_info *t,
                       enum inject_method method, struct output_plan *plan, struct ctl_conn *c,
                       char *reply, size_t cap)
{
    char err[1024] = "";
    if (ctl_listen(c, t->f.pid, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return -1;
    }
    int injected = attach_inject(opt, t, c, method, err, sizeof err);
    if (injected == -2) {
        fprintf(stderr, "%s: injection into pid %d failed: %s\n", cmd, (int)t->f.pid, err);
        return -1;
    }
    if (injected < 0 ||
        (c->fd < 0 && ctl_accept(c, ATTACH_ACCEPT_TIMEOUT_MS, &attach_interrupts, err,
                                 sizeof err) < 0)) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return -1;
    }
    if (attach_interrupts) { /* Ctrl-C during the injection: start nothing */
        fprintf(stderr, "%s: interrupted; the agent was loaded but no trace was started\n", cmd);
        return -1;
    }
    if (ctl_configure(c, plan->config, reply, cap, ATTACH_STARTED_TIMEOUT_MS,
                      &attach_interrupts, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return -1;
    }
    if (opt->verbose) {
        char backend[64] = "?";
        vc_kv_get(reply, "backend", backend, sizeof backend);
        fprintf(stderr, "%s: agent started (%s), %llu threads\n", cmd, backend,
                report_u64(reply, "threads"));
    }
    return 0;
}

/* A started agent: `start` leaves it, `trace` waits, stops and collects.  An exit code. */
static int follow_session(const char *cmd, const struct cli_options *opt, struct ctl_conn *c,
                          struct output_plan *plan, const char *reply, int64_t t0)
{
    if (opt->mode == CLI_START) {
        char dur[32];
        cli_format_duration(opt->duration_ms, dur, sizeof dur);
        if (!opt->quiet)
            printf("vcattach: tracing pid %d for %s (%llu threads); the agent writes %s at the "
                   "end (`vcattach stop --pid %d` stops it early)\n",
                   (int)opt->pid, dur, report_u64(reply, "threads"), plan->out_abs,
                   (int)opt->pid);
        return VC_EXIT_OK;
    }
    char err[1024] = "";
    int show = !opt->quiet && isatty(STDERR_FILENO);
    int agent_stopped = wait_while_tracing(c, opt, show, t0, err, sizeof err);
    report_status_line_clear(show);
    if (agent_stopped < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return VC_EXIT_FAIL;
    }
    int rc = VC_EXIT_FAIL;
    if (!attach_abandon)
        rc = collect_trace(cmd, opt, c, plan, agent_stopped, vc_monotonic_ms() - t0, show);
    if (attach_abandon)
        fprintf(stderr, "%s: interrupted twice: trace abandoned; the agent in pid %d stops and "
                        "writes what it has to %s%s\n",
                cmd, (int)opt->pid, plan->fallback, plan->fallback_note);
    return rc;
}

int trace_process(const struct cli_options *opt)
{
    const char *cmd = opt->mode == CLI_START ? "vcattach start" : "vcattach";
    /* large (paths): not on the stack */
    static struct target_info t;
    static struct output_plan plan;
    enum inject_method method;
    if (prepare(cmd, opt, &t, &method, &plan) < 0)
        return VC_EXIT_USAGE;

    struct attach_signals saved;
    attach_signals_install(&saved);
    struct ctl_conn c;
    ctl_init(&c);
    char reply[8192];
    int rc = VC_EXIT_FAIL;
    if (start_agent(cmd, opt, &t, method, &plan, &c, reply, sizeof reply) == 0)
        rc = follow_session(cmd, opt, &c, &plan, reply, vc_monotonic_ms());
    ctl_close(&c);
    sink_abort(&plan.sink);
    attach_signals_restore(&saved);
    preflight_release(&t);
    return rc;
}

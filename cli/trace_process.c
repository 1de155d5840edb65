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
#include "receive_priority.h"
#include "report.h"
#include "sched_events.h"
#include "trace_sink.h"
#include "trace_stream.h"
#include "trace_watch.h"
#include "human.h"
#include "say.h"

#define FRAME_TIMEOUT_MS 60000 /* encoding a large trace may take a while per chunk */
#define STATUS_LINE_MS 200

/* Waits for the duration (0: until Ctrl-C), spooling what the agent streams meanwhile.
 * Returns 0 when it is time to stop (deadline, Ctrl-C, the spool cannot take more), 1 when
 * the agent stopped on its own and its END came (end_text: the target is exiting, the agent
 * flushed at interpreter exit), 2 when the connection ended without END (the target exited
 * or was killed: what it streamed is kept; err says what happened), -1 when the agent broke
 * the protocol (err). */
static int wait_while_tracing(struct ctl_conn *s, const struct cli_options *opt, int show,
                              int64_t t0, struct trace_stream *ts, char *end_text, size_t cap,
                              char *err, size_t errlen)
{
    for (;;) {
        int64_t elapsed = vc_monotonic_ms() - t0;
        if (attach_interrupts)
            return 0;
        if (opt->duration_ms && elapsed >= (int64_t)opt->duration_ms)
            return 0;
        char extra[160];
        trace_stream_progress(ts, extra, sizeof extra);
        report_status_line(show, s->pid, elapsed, opt->duration_ms, extra);
        int slice = STATUS_LINE_MS;
        if (trace_watching()) { /* top: its keys and screens between frames */
            if (trace_watch_tick())
                return 0;
            slice = 50;
        }
        if (opt->duration_ms && (int64_t)opt->duration_ms - elapsed < slice)
            slice = (int)((int64_t)opt->duration_ms - elapsed);
        int r = trace_stream_pump(ts, s->fd, slice, end_text, cap, err, errlen);
        sched_events_tick(ts->sched);
        if (r == 1)
            return 1;
        if (r == 2) /* the spool is full: stop now (collect_trace says why) */
            return 0;
        if (r < 0 && ts->broken)
            return -1;
        if (r < 0) {
            char how[256];
            snprintf(how, sizeof how, "%s", err);
            if (!target_alive(s->pid))
                snprintf(err, errlen, "target process %d exited during the trace", (int)s->pid);
            else
                snprintf(err, errlen, "the agent in pid %d closed the connection during the "
                                      "trace (%.200s)", (int)s->pid, how);
            return 2;
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
    struct trace_stream stream;      /* trace: what the agent streams, spooled next to OUT */
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
    int watch_only = opt->mode == CLI_TOP && !out; /* top without -o: nothing is written */
    if (!out) {
        attach_default_output(opt->pid, 0, name, sizeof name);
        out = name;
    }
    int streaming = !strncmp(out, "unix:", 5) || watch_only;
    int ok;
    if (opt->mode == CLI_START)
        ok = sink_check_remote_file(out, t->f.uid[1], opt->force, p->out_abs, sizeof p->out_abs, err,
                                    sizeof err) == 0;
    else if (watch_only)
        ok = 1;
    else if (streaming)
        ok = sink_open_socket(&p->sink, out + 5, err, sizeof err) == 0;
    else
        ok = sink_open_file(&p->sink, out, opt->force, err, sizeof err) == 0;
    if (!ok) {
        say("%s: %s\n", cmd, err);
        return -1;
    }
    if (streaming) { /* the fallback gets a default name in the current directory */
        attach_default_output(opt->pid, 0, name, sizeof name);
        if (!getcwd(p->out_abs, sizeof p->out_abs - sizeof name - 1))
            snprintf(p->out_abs, sizeof p->out_abs, "/tmp");
        strcat(p->out_abs, "/");
        strcat(p->out_abs, name);
        snprintf(p->where, sizeof p->where, "unix:%s", watch_only ? "" : p->sink.path);
    } else {
        if (opt->mode == CLI_TRACE || opt->mode == CLI_TOP)
            snprintf(p->out_abs, sizeof p->out_abs, "%s", p->sink.path);
        snprintf(p->where, sizeof p->where, "%s", p->out_abs);
    }
    attach_fallback_name(p->out_abs, 0, p->fallback, sizeof p->fallback);

    /* The agent writes the fallback (and, for start, OUT) in its own mount namespace. */
    if (t->f.other_mnt_ns && !attach_dir_shared(t->f.pid, p->out_abs)) {
        if (opt->mode == CLI_START) {
            say("%s: with start the target writes %s itself, but that directory is "
                            "not the same in its mount namespace: choose a directory shared "
                            "with it\n", cmd, p->out_abs);
            return -1;
        }
        const char *base = strrchr(p->fallback, '/');
        char moved[sizeof p->fallback + 8];
        snprintf(moved, sizeof moved, "/tmp/%s", base ? base + 1 : p->fallback);
        if (strlen(moved) >= sizeof p->fallback) {
            say("%s: output name too long: %s\n", cmd, p->out_abs);
            sink_abort(&p->sink);
            return -1;
        }
        memcpy(p->fallback, moved, strlen(moved) + 1);
        p->fallback_note = " (in the target's mount namespace)";
    }
    if (opt->mode != CLI_START &&
        trace_stream_open(&p->stream, watch_only ? NULL : p->out_abs, t->f.pid, (uint64_t)opt->max_trace_mb << 20,
                          opt->force, opt->last_ms * 1000000u, err, sizeof err) != 0) {
        say("%s: %s\n", cmd, err);
        sink_abort(&p->sink);
        return -1;
    }
    return 0;
}

/* END as the summary line reads it: the counts of the trace built here first (a key is
 * looked up by its first line), with "streamed" for the hint about drops. */
static void end_with_counts(char *end_text, size_t cap, const struct spool_stats *st,
                            uint64_t dropped)
{
    char *copy = strdup(end_text);
    snprintf(end_text, cap, "events=%llu\nthreads=%llu\ndrops=%llu\nstreamed=1\n%s",
             (unsigned long long)st->events, (unsigned long long)st->threads,
             (unsigned long long)dropped, copy ? copy : "");
    free(copy);
}

/* After STOP (or the agent stopping by itself): the rest of the stream, END, the .cvf built
 * from the spool, commit, summary.  how: what wait_while_tracing returned (end_text holds END
 * when it is 1; err why the connection ended when it is 2).  Returns an exit code. */
static int collect_trace(const char *cmd, const struct cli_options *opt, struct ctl_conn *s,
                         struct output_plan *p, int how, char *end_text, size_t cap,
                         const char *ended, int64_t traced, int show)
{
    char err[1024];
    int complete = how != 2;
    if (how < 0) {
        say("%s: %s; nothing was written\n", cmd, ended);
        trace_stream_close(&p->stream, 1); /* a hostile agent's data is not kept */
        return VC_EXIT_FAIL;
    }
    if (how == 0) {
        if (show)
            say("vcattach: stopping and collecting the trace...");
        vc_msg_send(s->fd, VC_MSG_STOP, NULL, 0, 5000); /* EPIPE: it stopped; END follows */
        struct receive_limits lim = {
            .frame_timeout_ms = FRAME_TIMEOUT_MS,
            .total_timeout_ms = (int64_t)opt->collect_timeout_ms,
            .max_bytes = (uint64_t)opt->max_trace_mb << 20,
        };
        int received = ctl_receive(s, trace_stream_on_data, &p->stream, end_text, cap, &lim,
                                   &attach_abandon, err, sizeof err);
        report_status_line_clear(show);
        if (received < 0 && attach_abandon)
            return VC_EXIT_FAIL; /* the caller reports it */
        if (received < 0 && p->stream.broken) {
            say("%s: %s; nothing was written\n", cmd, err);
            trace_stream_close(&p->stream, 1);
            return VC_EXIT_FAIL;
        }
        if (received < 0) {
            say("%s: %s; the trace keeps what came before\n", cmd, err);
            complete = 0;
        }
    } else if (how == 2) {
        say("%s: %s; the trace keeps what it streamed before\n", cmd, ended);
    }
    if (!complete)
        end_text[0] = '\0';
    if (p->stream.sp == NULL) { /* top without -o: nothing to build */
        if (!opt->quiet)
            say("%s: detached from pid %d after %.1fs (%llu calls received; every hook "
                "removed)\n", cmd, (int)s->pid, (double)traced / 1000.0,
                (unsigned long long)p->stream.unspooled);
        if (!complete || (how == 1 && target_exits(s->pid))) {
            say("%s: target process %d exited\n", cmd, (int)s->pid);
            return VC_EXIT_FAIL;
        }
        return VC_EXIT_OK;
    }
    struct spool_stats st;
    if (trace_stream_build(&p->stream, &p->sink, &st, err, sizeof err) != 0 ||
        sink_commit(&p->sink, err, sizeof err) < 0) {
        say("%s: %s\n", cmd, err);
        return VC_EXIT_FAIL;
    }
    trace_stream_close(&p->stream, 1);
    char refused[512];
    if (spool_refusals(&st, refused, sizeof refused))
        say("%s: %s\n", cmd, refused);
    if (p->stream.early_rotations)
        say("%s: --max-trace-mb %u held less than --last of this target's calls: "
                        "the trace keeps the newest that fit\n", cmd, opt->max_trace_mb);
    uint64_t agent_drops = complete ? report_u64(end_text, "drops") : st.dropped;
    end_with_counts(end_text, cap, &st, agent_drops + st.unthreaded + p->stream.lost_here);
    if (!opt->quiet)
        report_summary(s->pid, end_text, p->where, p->sink.bytes, (uint64_t)traced);
    if (p->stream.full) {
        say("%s: %s; the trace up to then is in %s\n", cmd, p->stream.why, p->where);
        return VC_EXIT_FAIL;
    }
    if (!complete && how == 0)
        return VC_EXIT_FAIL; /* said above: the transfer after STOP did not end */
    if (!complete || (how == 1 && target_exits(s->pid))) {
        say("%s: target process %d exited during the trace (after %.1fs); the "
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
        say("%s: %s\n", cmd, err);
        return -1;
    }
    if (opt->verbose) {
        char version[32];
        int len = snprintf(version, sizeof version, "%d.%d", t->f.py.major, t->f.py.minor);
        if (t->f.py.micro >= 0)
            snprintf(version + len, sizeof version - (size_t)len, ".%d", t->f.py.micro);
        say("%s: pid %d (%s) is Python %s (from %s); agent %s\n", cmd,
                (int)t->f.pid, t->f.comm, version, t->f.py.how, t->agent);
    }
    if (attach_choose_method(cmd, opt, t, method, err, sizeof err) < 0) {
        say("%s: %s\n", cmd, err);
        preflight_release(t);
        return -1;
    }
    if (plan_output(cmd, opt, t, plan) < 0) {
        preflight_release(t);
        return -1;
    }
    if (attach_build_config(opt, opt->mode == CLI_START ? plan->out_abs : "control",
                            plan->fallback, plan->config, sizeof plan->config) < 0) {
        say("%s: output path too long or contains a newline: %s\n", cmd,
                plan->out_abs);
        sink_abort(&plan->sink);
        trace_stream_close(&plan->stream, 1);
        preflight_release(t);
        return -1;
    }
    return 0;
}

/* The scheduler's switches of the target's threads while it is traced (sched_events.h),
 * unless --no-sched; where they cannot be had, the trace says why and the split is the CPU
 * samples' estimate. */
static void sched_begin(const char *cmd, const struct cli_options *opt, pid_t pid,
                        struct trace_stream *ts)
{
    if (opt->no_sched)
        return;
    struct spool_sched_info info = {0};
    if (sched_events_open(&ts->sched, pid, trace_stream_sched_sink, ts, info.why,
                          sizeof info.why) != 0) {
        if (!opt->quiet)
            say("%s: no scheduler events: %s; working vs waiting is estimated from CPU "
                "samples (--no-sched silences this)\n", cmd, info.why);
        spool_set_sched_info(ts->sp, &info);
    }
}

/* Stops recording switches: the trace's calls end here too (the agent stops next). */
static void sched_end(const char *cmd, const struct cli_options *opt, struct trace_stream *ts)
{
    if (ts->sched == NULL)
        return;
    struct sched_stats st;
    sched_events_close(ts->sched, &st);
    ts->sched = NULL;
    struct spool_sched_info info = {.recorded = 1, .threads = st.threads,
                                    .switches = st.switches, .lost = st.lost,
                                    .refused = st.refused};
    if (st.bad)
        snprintf(info.why, sizeof info.why, "%llu malformed ring records skipped",
                 (unsigned long long)st.bad);
    spool_set_sched_info(ts->sp, &info);
    if ((st.lost || st.refused || st.bad) && !opt->quiet)
        say("%s: scheduler events: %llu lost (a ring was full), %llu thread%s not covered, "
            "%llu malformed; those stretches are split by the CPU samples\n", cmd,
            (unsigned long long)st.lost, (unsigned long long)st.refused,
            st.refused == 1 ? "" : "s", (unsigned long long)st.bad);
}

/* From the injection to STARTED.  Returns 0 with the agent tracing (its STARTED text in
 * reply), or -1 after printing why. */
static int start_agent(const char *cmd, const struct cli_options *opt, struct target_info *t,
                       enum inject_method method, struct output_plan *plan, struct ctl_conn *c,
                       char *reply, size_t cap)
{
    char err[1024] = "";
    if (ctl_listen(c, t->f.pid, err, sizeof err) < 0) {
        say("%s: %s\n", cmd, err);
        return -1;
    }
    int injected = attach_inject(opt, t, c, method, err, sizeof err);
    if (injected <= -2) {
        say("%s: injection into pid %d failed: %s\n", cmd, (int)t->f.pid, err);
        return -1;
    }
    if (injected < 0 ||
        (c->fd < 0 && ctl_accept(c, ATTACH_ACCEPT_TIMEOUT_MS, &attach_interrupts, err,
                                 sizeof err) < 0)) {
        say("%s: %s\n", cmd, err);
        return -1;
    }
    if (attach_interrupts) { /* Ctrl-C during the injection: start nothing */
        say("%s: interrupted; the agent was loaded but no trace was started\n", cmd);
        return -1;
    }
    if (opt->mode == CLI_TRACE) /* before the agent records: every call is covered */
        sched_begin(cmd, opt, t->f.pid, &plan->stream);
    if (ctl_configure(c, plan->config, reply, cap, ATTACH_STARTED_TIMEOUT_MS,
                      &attach_interrupts, err, sizeof err) < 0) {
        say("%s: %s\n", cmd, err);
        return -1;
    }
    if (opt->verbose) {
        char backend[64] = "?";
        vc_kv_get(reply, "backend", backend, sizeof backend);
        say("%s: agent started (%s), %llu threads\n", cmd, backend,
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
        vc_human_ms(opt->duration_ms, dur, sizeof dur);
        if (!opt->quiet)
            say_out("vcattach: tracing pid %d for %s (%llu threads); the agent writes %s at the "
                   "end, spooling to %s.spool meanwhile (`vcattach stop --pid %d` stops it "
                   "early)\n",
                   (int)opt->pid, dur, report_u64(reply, "threads"), plan->out_abs,
                   plan->out_abs, (int)opt->pid);
        return VC_EXIT_OK;
    }
    char err[1024] = "";
    static char end_text[8192];
    int show = !opt->quiet && isatty(STDERR_FILENO) && opt->mode != CLI_TOP;
    struct receive_priority prio;
    receive_priority_raise(&prio, opt, cmd);
    int how = wait_while_tracing(c, opt, show, t0, &plan->stream, end_text, sizeof end_text, err,
                                 sizeof err);
    sched_end(cmd, opt, &plan->stream);
    receive_priority_restore(&prio); /* the agent records no more: the build can wait */
    report_status_line_clear(show);
    trace_watch_leave(); /* top: the terminal is the operator's again before anything is said */
    int rc = VC_EXIT_FAIL;
    if (!attach_abandon)
        rc = collect_trace(cmd, opt, c, plan, how, end_text, sizeof end_text, err,
                           vc_monotonic_ms() - t0, show);
    if (attach_abandon)
        say("%s: interrupted twice: trace abandoned; the agent in pid %d stops and "
                        "writes what it has to %s%s\n",
                cmd, (int)opt->pid, plan->fallback, plan->fallback_note);
    return rc;
}

int trace_process(const struct cli_options *opt)
{
    const char *cmd = opt->mode == CLI_START ? "vcattach start"
                      : opt->mode == CLI_TOP ? "vcattach top" : "vcattach";
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
    trace_stream_close(&plan.stream, 0); /* kept (and named) unless the trace was built */
    attach_signals_restore(&saved);
    preflight_release(&t);
    return rc;
}

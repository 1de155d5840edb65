/* attach_options.c — the command lines of the attach workflow, `vcattach trace|start|stop|
 * status`: their option tables, --help texts and the checks between options (see
 * attach_options.h).  Parsing itself is options.c's, like every other subcommand's.
 */
#include "attach_options.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The --help of `trace`: data, one string (its options in the order of the table below). */
static const char help_trace_text[] =
            "usage: vcattach [trace] --pid PID [-t DURATION] [-o OUT] [options]\n\n"
            "Attach to the live CPython process PID, record every Python and C call on every\n"
            "thread for DURATION (without -t: until Ctrl-C), detach, and write the trace.\n"
            "The process keeps running throughout; nothing is left behind in it.\n"
            "Sub-interpreters (mod_wsgi's application groups) are traced too, each thread's\n"
            "calls in one of them on a track of its own, also those with their own GIL\n"
            "(concurrent.interpreters, InterpreterPoolExecutor).  One the agent could not\n"
            "hook before it ended (3.12+: at most 100 ms old) is counted in the last line.\n\n"
            "options:\n"
            "  -p, --pid PID         the process to trace (required)\n"
            "  -t, --duration DUR    how long: 10s, 500ms, 2m, 1.5s, 1h (a bare number is\n"
            "                        seconds); without it, trace until Ctrl-C\n"
            "  -o, --output OUT      the .cvf file to write (default vcattach-PID-DATE-TIME.cvf),\n"
            "                        or unix:/path/to/socket to stream it to a listening socket\n"
            "      --method M        how the agent gets in: auto (default): remote-exec on\n"
            "                        Python 3.14+ when the target allows it, else ptrace;\n"
            "                        remote-exec (3.14+, PEP 768: the interpreter runs a small\n"
            "                        loader script at a thread's next evaluation breaker;\n"
            "                        nothing is stopped; withdrawn after 2s if every thread is\n"
            "                        blocked in C, then auto falls back to ptrace); ptrace (stop\n"
            "                        the threads, call dlopen on one at a safe point); gdb\n"
            "                        (the same through gdb)\n"
            "      --buffer-mb N     the target's in-flight window for all threads, in MiB\n"
            "                        (default 32: the target's RSS grows by at most that much,\n"
            "                        however long the trace).  `trace` streams what fills it to\n"
            "                        vcattach, which spools it next to OUT (OUT.spool) and\n"
            "                        builds OUT at the end; calls are dropped (and counted, with\n"
            "                        their time ranges) only when vcattach cannot keep up.\n"
            "                        `start` keeps the whole trace in the target (default 256;\n"
            "                        when full the oldest records are dropped and counted)\n"
            "      --hook H          auto (default), profile (PyEval_SetProfile; on 3.12+ the\n"
            "                        main interpreter only), monitoring (sys.monitoring,\n"
            "                        Python 3.12+), or eval (PEP 523 frame evaluation hook,\n"
            "                        Python 3.9-3.13, needs --no-c-calls; auto's choice with\n"
            "                        --no-c-calls there, except on 3.12/3.13 in a process\n"
            "                        that has sub-interpreters)\n"
            "      --null-hook       for measuring: the hooks are set as for tracing but record\n"
            "                        nothing (the trace has no calls): what the mechanism alone\n"
            "                        costs the target, the floor bench/service prints\n"
            "      --subprocesses    trace PID and every CPython process descending from it\n"
            "                        (a gunicorn master and its workers, multiprocessing pools)\n"
            "                        into one .cvf, on one clock, following the processes born\n"
            "                        during the trace (forked ones reconnect by themselves, new\n"
            "                        interpreters are found within 100 ms and injected); non-\n"
            "                        Python descendants are skipped (named with -v).  With it,\n"
            "                        --buffer-mb is the budget of the whole tree: 3/4 of it is\n"
            "                        split evenly among the processes found at attach, 1/4 is a\n"
            "                        reserve from which each process born later gets a quarter\n"
            "                        of what it holds (at most 1/8 of the budget, at least 2\n"
            "                        MiB: a pool's workers forked at once are all served); an\n"
            "                        ended process's share returns to the reserve, and a process\n"
            "                        the reserve cannot serve is not traced (said in the summary)\n"
            "      --max-processes N at most N processes in the tree trace (default 32); the\n"
            "                        ones beyond are named in the summary\n"
            "\nfilters (recorded in the trace; `vcattach summary` shows them):\n"
            "      --include GLOB    trace only Python functions whose file matches GLOB\n"
            "                        (fnmatch on co_filename; repeatable: any of them)\n"
            "      --exclude GLOB    leave out functions whose file matches GLOB, e.g.\n"
            "                        '*-packages/*' (repeatable); a C call is judged by its\n"
            "                        caller's file.  On 3.12+ excluded code runs untraced\n"
            "      --no-c-calls      trace Python functions only, with PEP 523's frame evaluator\n"
            "                        on 3.9-3.13 (once per call, never per bytecode; cheaper\n"
            "                        than sys.monitoring on 3.12/3.13); 3.14+: sys.monitoring\n"
            "                        without C-call events\n"
            "      --no-tasks        do not mark asyncio task steps (by default each step of a\n"
            "                        task records which task it is: one C call into asyncio per\n"
            "                        step; `requests` and `convert --tasks` use them)\n"
            "      --max-depth N     record calls down to depth N only (deeper ones are not kept)\n"
            "      --min-dur DUR     keep only calls that took at least DUR: 50us, 1ms, 200ns\n"
            "\nlimits on what the agent sends (it runs as the target's user: SECURITY.md):\n"
            "      --last DUR        keep only the final DUR of the trace (a flight recorder:\n"
            "                        trace until the problem shows, then Ctrl-C); the spool on\n"
            "                        disk holds at most about twice DUR (OUT.spool.prev and\n"
            "                        OUT.spool); e.g. `vcattach --pid P --last 30s -o out.cvf`.\n"
            "                        With --subprocesses the final DUR of the whole tree; with\n"
            "                        start, the agent's own spool keeps it (a tree's: each\n"
            "                        process its own final DUR)\n"
            "      --max-trace-mb N  cap the spool at N MiB (default 16384): the trace ends there\n"
            "                        and keeps what came before\n"
            "      --collect-timeout DUR  give up collecting the trace after STOP after DUR\n"
            "                        (default 10m); with --subprocesses, a process that\n"
            "                        sends nothing for 30 s is given up alone, its trace\n"
            "                        up to then kept\n"
            "      --nice N          vcattach's own niceness (-20..19) while the trace streams\n"
            "                        in (default -10 when run as root or with CAP_SYS_NICE):\n"
            "                        a busy target outruns a vcattach that waits for a core,\n"
            "                        and its calls are dropped.  The target is never touched;\n"
            "                        vcattach builds OUT at its own niceness.  --nice 0 keeps\n"
            "                        a normal priority\n"
            "      --no-sched        do not record the scheduler's context switches (root's\n"
            "                        perf_event_open per traced thread, read by vcattach): the\n"
            "                        working/waiting split is then estimated from CPU samples\n\n"
            "  -f, --force           replace OUT if it exists (and the OUT.spool an earlier run\n"
            "                        left: see `vcattach recover`)\n"
            "  -q, --quiet           no status line and no summary\n"
            "  -v, --verbose         progress of the injection on stderr\n"
            "  -h, --help            this text\n\n"
            "Ctrl-C (or SIGTERM) stops early and still writes the trace; a second one abandons\n"
            "it: the agent then writes OUT.partial.cvf itself (OUT without its .cvf suffix), as\n"
            "it does if vcattach is killed.  OUT is written as OUT.tmp, then renamed.\n\n"
            "A target in another mount namespace (a container, a service with PrivateTmp) gets\n"
            "a copy of the agent in its own /tmp (written as its user) when it cannot see this\n"
            "one.  `vcattach status|stop` find a session by the target's own pid.  With\n"
            "--subprocesses each process of the tree is treated so, in whatever mount, pid,\n"
            "network or user namespace it runs; pids are the host's, with the container's\n"
            "beside them.\n\n"
            "exit codes: 0 trace written; 1 failure on the target side (injection, agent, target\n"
            "exited, I/O); 2 usage error or a failed preflight check (nothing was touched)\n";

static void help_trace(FILE *out)
{
    fputs(help_trace_text, out);
}

static void help_start(FILE *out)
{
    fprintf(out,
            "usage: vcattach start --pid PID [-t DURATION] [-o OUT] [options]\n\n"
            "Attach and return at once, leaving the agent tracing: the agent itself writes OUT\n"
            "when DURATION has passed (default 60s, at most 24h) or at `vcattach stop --pid PID`.\n"
            "OUT is written by the target process, as the target's user.\n\n"
            "options: -p/--pid, -t/--duration, -o/--output (a file path; default\n"
            "vcattach-PID-DATE-TIME.cvf), --method, --buffer-mb, --hook, -f/--force, -q, -v, -h,\n"
            "--no-tasks, and the filters --include, --exclude, --no-c-calls, --max-depth, --min-dur\n"
            "(as for `vcattach trace --help`)\n\n"
            "exit codes: 0 tracing; 1 failure on the target side; 2 usage or preflight error\n");
}

static void help_stop(FILE *out)
{
    fprintf(out,
            "usage: vcattach stop --pid PID [--subprocesses] [-q]\n\n"
            "Stop the session started in PID by `vcattach start`, wait for the agent to write its\n"
            "trace (at most 60s), and print one line: events, threads, calls dropped, file size\n"
            "and where the trace is.  `vcattach summary FILE` then shows where the time went.\n"
            "  -q, --quiet  print nothing; the exit code tells\n\n"
            "exit codes: 0 stopped and written; 1 no session running, or the agent failed;\n"
            "2 usage error\n");
}

static void help_status(FILE *out)
{
    fprintf(out,
            "usage: vcattach status --pid PID [--subprocesses] [-q]\n\n"
            "Tell whether a vcattach session is running in PID, with its elapsed and remaining\n"
            "time and its output.\n\n"
            "exit codes: 0 a session is running; 1 no session is running; 2 usage error\n");
}

static void help_top(FILE *out)
{
    fprintf(out,
            "usage: vcattach top --pid PID [--subprocesses] [-o OUT] [--once] [--interval DUR]\n\n"
            "Attach to PID and show, refreshed every second, where its time goes right now, from\n"
            "every call the agent records: the functions by self time (working: the waits of\n"
            "`vcattach summary`'s table are apart, by kind) over the last 5 seconds, with their\n"
            "calls/s and the p99 of one call's duration; the requests (p50/p99) when an entry\n"
            "point of a known server is seen; the threads; and a status line (events/s, calls\n"
            "dropped, processes, threads).  q or Ctrl-C detaches exactly as after a trace: every\n"
            "hook is removed, the target keeps running and can be traced again.\n\n"
            "keys: s/t/c sort by self time, total time, calls; f functions, r requests,\n"
            "      h threads (Tab cycles); q quits\n\n"
            "options:\n"
            "  -p, --pid PID         the process to watch (required)\n"
            "      --subprocesses    PID and its Python descendants, as for `vcattach trace`\n"
            "                        (then -o is required: the tree's spools go next to it)\n"
            "  -o, --output OUT      also keep the trace as OUT (a .cvf), as `vcattach trace`\n"
            "      --interval DUR    refresh every DUR (default 1s; 100ms to 60s)\n"
            "      --once            print one screen after the first interval and detach\n"
            "  -t, --duration DUR    detach after DUR\n"
            "  and the options of `vcattach trace` (--method, --hook, the filters, -f, -v)\n\n"
            "When stdout is not a terminal the screens are plain text, one after another.\n"
            "Memory: the live view holds at most 64 MiB (the calls of functions or threads that\n"
            "found no room are counted on the status line as \"not counted\").\n\n"
            "exit codes: 0 detached; 1 failure on the target side; 2 usage or preflight error\n");
}

enum { OPT_METHOD = 256, OPT_BUFFER, OPT_HOOK, OPT_INCLUDE, OPT_EXCLUDE, OPT_NO_C, OPT_NULL_HOOK, OPT_NO_TASKS, OPT_NO_SCHED, OPT_MAX_DEPTH,
       OPT_MIN_DUR, OPT_MAX_TRACE, OPT_COLLECT_TIMEOUT, OPT_SUBPROCESSES, OPT_MAX_PROCESSES,
       OPT_LAST, OPT_NICE, OPT_INTERVAL, OPT_ONCE };

static const struct opt_spec attach_specs[] = {
    {"pid", 'p', 1, 'p'},
    {"duration", 't', 1, 't'},
    {"output", 'o', 1, 'o'},
    {"method", 0, 1, OPT_METHOD},
    {"buffer-mb", 0, 1, OPT_BUFFER},
    {"hook", 0, 1, OPT_HOOK},
    {"include", 0, 1, OPT_INCLUDE},
    {"exclude", 0, 1, OPT_EXCLUDE},
    {"no-c-calls", 0, 0, OPT_NO_C},
    {"null-hook", 0, 0, OPT_NULL_HOOK},
    {"no-tasks", 0, 0, OPT_NO_TASKS},
    {"no-sched", 0, 0, OPT_NO_SCHED},
    {"max-depth", 0, 1, OPT_MAX_DEPTH},
    {"min-dur", 0, 1, OPT_MIN_DUR},
    {"max-trace-mb", 0, 1, OPT_MAX_TRACE},
    {"collect-timeout", 0, 1, OPT_COLLECT_TIMEOUT},
    {"last", 0, 1, OPT_LAST},
    {"nice", 0, 1, OPT_NICE},
    {"interval", 0, 1, OPT_INTERVAL},
    {"once", 0, 0, OPT_ONCE},
    {"subprocesses", 0, 0, OPT_SUBPROCESSES},
    {"max-processes", 0, 1, OPT_MAX_PROCESSES},
    {"force", 'f', 0, 'f'},
    {"quiet", 'q', 0, 'q'},
    {"verbose", 'v', 0, 'v'},
};

static const struct opt_command commands[] = {
    [CLI_TRACE] = {"trace", attach_specs, sizeof attach_specs / sizeof attach_specs[0], help_trace},
    [CLI_START] = {"start", attach_specs, sizeof attach_specs / sizeof attach_specs[0], help_start},
    [CLI_STOP] = {"stop", attach_specs, sizeof attach_specs / sizeof attach_specs[0], help_stop},
    [CLI_STATUS] = {"status", attach_specs, sizeof attach_specs / sizeof attach_specs[0],
                    help_status},
    [CLI_TOP] = {"top", attach_specs, sizeof attach_specs / sizeof attach_specs[0], help_top},
};

struct parse_state {
    struct cli_options *opt;
    int has_pid;
};

static int parse_method(const char *value, enum cli_method *m, char *err, size_t errlen)
{
    static const struct { const char *name; enum cli_method m; } methods[] = {
        {"auto", CLI_METHOD_AUTO}, {"ptrace", CLI_METHOD_PTRACE}, {"gdb", CLI_METHOD_GDB},
        {"remote-exec", CLI_METHOD_REMOTE_EXEC},
    };
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (!strcmp(value, methods[i].name)) {
            *m = methods[i].m;
            return 0;
        }
    snprintf(err, errlen, "unknown method '%s': use auto, ptrace, gdb or remote-exec", value);
    return -1;
}

static int parse_hook(const char *value, const char **hook, char *err, size_t errlen)
{
    if (strcmp(value, "auto") && strcmp(value, "profile") && strcmp(value, "monitoring") &&
        strcmp(value, "eval")) {
        snprintf(err, errlen, "unknown hook '%s': use auto, profile, monitoring or eval", value);
        return -1;
    }
    *hook = value;
    return 0;
}

/* --include/--exclude: a glob on a Python function's file, at most CLI_MAX_GLOBS of each. */
/* --nice N: an integer in setpriority's range. */
static int parse_nice(const char *value, struct cli_options *opt, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (!*value || *end || errno || v < -20 || v > 19) {
        snprintf(err, errlen, "bad --nice '%s': give an integer from -20 (most favoured) to 19",
                 value);
        return -1;
    }
    opt->nice = (int)v;
    opt->nice_set = 1;
    return 0;
}

static int add_glob(const char *value, const char **globs, unsigned *n, char *err,
                    size_t errlen)
{
    if (!*value || strchr(value, '\n')) {
        snprintf(err, errlen, "empty pattern or one with a newline: give a glob on the file "
                 "path, e.g. '*/site-packages/*'");
        return -1;
    }
    if (*n >= CLI_MAX_GLOBS) {
        snprintf(err, errlen, "more than %d patterns: merge them into fewer globs",
                 CLI_MAX_GLOBS);
        return -1;
    }
    globs[(*n)++] = value;
    return 0;
}

static int on_option(void *ctx, const struct opt_spec *o, const char *value, char *err,
                     size_t errlen)
{
    struct parse_state *ps = ctx;
    struct cli_options *opt = ps->opt;
    /* Only trace and start take the tracing options; stop and status take --pid and -q. */
    int full = opt->mode == CLI_TRACE || opt->mode == CLI_START || opt->mode == CLI_TOP;
    if ((o->id == OPT_INTERVAL || o->id == OPT_ONCE) && opt->mode != CLI_TOP) {
        snprintf(err, errlen, "option '--%s' is top's (vcattach top --help)", o->name);
        return -1;
    }
    if (!full && o->id != 'p' && o->id != 'q' && o->id != OPT_SUBPROCESSES) {
        snprintf(err, errlen, "option '--%s' does not apply to %s", o->name,
                 commands[opt->mode].name);
        return -1;
    }
    switch (o->id) {
    case 'p':
        if (cli_parse_pid(value, &opt->pid, err, errlen) < 0)
            return -1;
        ps->has_pid = 1;
        return 0;
    case 't': return cli_parse_duration(value, &opt->duration_ms, err, errlen);
    case 'o':
        if (!*value) {
            snprintf(err, errlen, "empty output path: give a file name or unix:/path");
            return -1;
        }
        opt->output = value;
        return 0;
    case OPT_METHOD: return parse_method(value, &opt->method, err, errlen);
    case OPT_BUFFER:
        return cli_parse_uint(value, "buffer size (MiB)", 1, 65536, &opt->buffer_mb, err, errlen);
    case OPT_MAX_TRACE:
        return cli_parse_uint(value, "trace size cap (MiB)", 1, 1u << 20, &opt->max_trace_mb,
                              err, errlen);
    case OPT_LAST:
        return cli_parse_duration(value, &opt->last_ms, err, errlen);
    case OPT_NICE: return parse_nice(value, opt, err, errlen);
    case OPT_ONCE: opt->once = 1; return 0;
    case OPT_INTERVAL:
        if (cli_parse_duration(value, &opt->interval_ms, err, errlen) < 0)
            return -1;
        if (opt->interval_ms < CLI_TOP_MIN_INTERVAL_MS || opt->interval_ms > CLI_TOP_MAX_INTERVAL_MS) {
            snprintf(err, errlen, "bad --interval '%s': give 100ms to 60s, e.g. 1s or 500ms",
                     value);
            return -1;
        }
        return 0;
    case OPT_COLLECT_TIMEOUT: /* a parsed duration is never 0 */
        return cli_parse_duration(value, &opt->collect_timeout_ms, err, errlen);
    case OPT_HOOK: return parse_hook(value, &opt->hook, err, errlen);
    case OPT_INCLUDE: return add_glob(value, opt->include, &opt->n_include, err, errlen);
    case OPT_EXCLUDE: return add_glob(value, opt->exclude, &opt->n_exclude, err, errlen);
    case OPT_NO_C: opt->no_c_calls = 1; return 0;
    case OPT_NULL_HOOK: opt->null_hook = 1; return 0;
    case OPT_NO_TASKS: opt->no_tasks = 1; return 0;
    case OPT_NO_SCHED: opt->no_sched = 1; return 0;
    case OPT_MAX_DEPTH:
        return cli_parse_uint(value, "maximum depth", 1, 100000, &opt->max_depth, err, errlen);
    case OPT_MIN_DUR:
        return cli_parse_min_dur(value, &opt->min_dur_ns, err, errlen);
    case OPT_SUBPROCESSES: opt->subprocesses = 1; return 0;
    case OPT_MAX_PROCESSES:
        return cli_parse_uint(value, "--max-processes", 1, 4096, &opt->max_processes, err,
                              errlen);
    case 'f': opt->force = 1; return 0;
    case 'q': opt->quiet = 1; return 0;
    case 'v': opt->verbose = 1; return 0;
    }
    snprintf(err, errlen, "option '--%s' is not handled", o->name);
    return -1;
}

int cli_parse_min_dur(const char *text, uint64_t *ns, char *err, size_t errlen)
{
    static const struct { const char *unit; double scale; } units[] = {
        {"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9},
    };
    char *end;
    double v = (*text >= '0' && *text <= '9') || *text == '.' ? strtod(text, &end) : -1;
    if (v >= 0) {
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            if (!strcmp(end, units[i].unit) && v * units[i].scale < 3.6e12) {
                *ns = (uint64_t)(v * units[i].scale + 0.5);
                return 0;
            }
        }
    }
    snprintf(err, errlen, "bad minimum duration '%s': give a number with a unit, like 50us, 1ms, "
             "200ns or 0.5s (at most 1h)", text);
    return -1;
}

int cli_parse(enum cli_mode mode, int argc, char **argv, struct cli_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->mode = mode;
    opt->hook = "auto";
    opt->method = CLI_METHOD_AUTO;
    opt->max_trace_mb = CLI_MAX_TRACE_MB;
    opt->collect_timeout_ms = CLI_COLLECT_TIMEOUT_MS;
    const struct opt_command *cmd = &commands[mode];
    struct parse_state ps = {opt, 0};
    int first;
    int rc = opt_parse(cmd, argc, argv, on_option, &ps, &first);
    if (rc)
        return rc;
    if (first < argc)
        return opt_usage_error(cmd->name, "unexpected argument '%s'", argv[first]);
    if (!ps.has_pid)
        return opt_usage_error(cmd->name, "which process? give --pid PID");
    if (opt->max_processes && !opt->subprocesses)
        return opt_usage_error(cmd->name, "--max-processes bounds --subprocesses: add "
                                          "--subprocesses");
    if (!opt->max_processes)
        opt->max_processes = CLI_TREE_MAX_DEFAULT;
    if (opt->subprocesses && opt->output && !strncmp(opt->output, "unix:", 5))
        return opt_usage_error(cmd->name, "--subprocesses writes one merged file: give -o "
                                          "FILE.cvf, not a socket");
    if (opt->last_ms && opt->duration_ms && opt->last_ms >= opt->duration_ms)
        return opt_usage_error(cmd->name, "--last keeps the final part of -t: make it shorter "
                                          "than -t (or leave -t out and stop with Ctrl-C)");
    if (mode == CLI_TOP) {
        if (!opt->interval_ms)
            opt->interval_ms = CLI_TOP_INTERVAL_MS;
        if (opt->output && !strncmp(opt->output, "unix:", 5))
            return opt_usage_error(cmd->name, "top keeps a trace in a file: give -o FILE.cvf, "
                                              "not a socket");
        if (opt->subprocesses && !opt->output)
            return opt_usage_error(cmd->name, "--subprocesses spools each process next to the "
                                              "trace: give -o FILE.cvf");
    }
    if (mode == CLI_START) {
        if (opt->nice_set)
            return opt_usage_error(cmd->name, "--nice is vcattach's priority while it receives "
                                              "a trace: start's agent writes its own (drop "
                                              "--nice)");
        if (opt->duration_ms == 0)
            opt->duration_ms = CLI_START_DEFAULT_MS;
        if (opt->output && !strncmp(opt->output, "unix:", 5))
            return opt_usage_error(cmd->name, "start writes a file (the agent writes it "
                                              "itself): use `vcattach trace` to stream to a "
                                              "socket");
    }
    return 0;
}

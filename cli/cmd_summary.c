/* cmd_summary.c — `vcattach summary FILE...`: where the time went, in the terminal.
 *
 * Owns the command line: the options, their checks, the help.  The report itself (loading,
 * the numbers, the printing through the terminal sanitizer) is libvctrace's
 * (vct_summary_report, trace/include/vctrace.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "options.h"
#include "say.h"
#include "vctrace.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vcattach summary FILE... [--top N] [--pid PID] [--thread NAME|TID]\n"
            "                        [--sort self|total|calls] [--merged] [--max-threads N] [--all]\n"
            "                        [--by thread|interp]\n"
            "Top functions of a trace (.cvf or Chrome-trace JSON) by self time, per thread.\n"
            "Time in blocking calls (locks, sleep, select/poll, sockets, queues, child processes,\n"
            "pipe reads: trace/waits.def) and in calls already running when the trace began\n"
            "is waiting: it gets a table of its own under the working one (measured by the\n"
            "CPU clock when the trace has CPU samples: see below).\n"
            "Several files (.cvf or JSON: traces of processes taken separately) are read as one\n"
            "trace; a trace of several processes (--subprocesses) lists them in its header.\n"
            "  -p, --pid PID    only the threads of process PID (--merged: that process merged)\n"
            "  -n, --top N      functions shown per table (default 20)\n"
            "  --thread X       only the thread named X (or with tid X)\n"
            "  --sort KEY       self (default), total (inclusive, recursion counted once), calls,\n"
            "                   cpu (measured on-CPU time, when the trace has CPU samples)\n"
            "  --merged         one table for all threads together\n"
            "  --max-threads N  tables for the N threads with the most calls (default 12; 0: all)\n"
            "  --all            no waiting table: every call ranked together, waits included\n"
            "  --by interp      one table per Python interpreter (the main one, then each\n"
            "                   sub-interpreter: tracks named \"NAME [interp N]\"), its threads\n"
            "                   merged; --by thread (default): one table per thread\n"
            "  -h, --help       this text\n"
            "Columns: self and total (inclusive) time, calls, and the duration of one call:\n"
            "mean, p50 and p99 (nearest rank, from a log-bucketed histogram per function:\n"
            "within " VCT_PERCENTILE_ERROR_TEXT " of the exact value; memory independent of the\n"
            "number of calls), max.\n"
            "A coroutine's resume slices count as durations of their own, not as calls: a\n"
            "coroutine is one call per task (per start).  A trace with asyncio task markers\n"
            "says in its header how many tasks (and steps, a task's first call or a resume)\n"
            "it holds: \"asyncio: N tasks (M steps)\".\n"
            "CPU, measured: a trace taken by this vcattach holds each thread's CPU clock,\n"
            "sampled every 10-100 ms (the header says the median period: the resolution).\n"
            "A call's on-CPU time is its thread's clock advance over it, the clock at its\n"
            "start and end interpolated linearly between the samples around them: a call\n"
            "shorter than a period gets its interval's average rate, an estimate (a 2 ms\n"
            "call inside a 10 ms interval is estimated, not measured).  Then every call's\n"
            "self time is split: on-CPU is working (the working table, each section's\n"
            "\"working\"), off-CPU is waiting (the waiting table).  Off-CPU is waiting\n"
            "whatever the call's name; the names above only label it (kind sleep, pipe,\n"
            "lock...; a function on no list: kind off-CPU).  Off-CPU includes time runnable\n"
            "but not running (waiting for a core or the GIL), so a CPU-bound call on a\n"
            "loaded machine has an off-CPU waiting row too.  Time no sample covers (before a\n"
            "thread's first sample, after its last) is split by names, as without samples.\n"
            "Every table also has on-CPU ms, off-CPU ms and on%%: the function's whole\n"
            "inclusive time (waits inside included, recursion counted once) split the same\n"
            "way.  Without samples (older traces, VizTracer's) the split is by names only.\n"
            "exit codes: 0 printed; 1 the trace cannot be read; 2 usage error\n");
}

enum { OPT_THREAD = 256, OPT_SORT, OPT_MERGED, OPT_MAX_THREADS, OPT_ALL, OPT_PID, OPT_BY };

static const struct opt_spec summary_specs[] = {
    {"top", 'n', 1, 'n'},
    {"thread", 0, 1, OPT_THREAD},
    {"sort", 0, 1, OPT_SORT},
    {"merged", 0, 0, OPT_MERGED},
    {"max-threads", 0, 1, OPT_MAX_THREADS},
    {"pid", 'p', 1, OPT_PID},
    {"all", 0, 0, OPT_ALL},
    {"by", 0, 1, OPT_BY},
};

static const struct opt_command summary_command = {
    "summary", summary_specs, sizeof summary_specs / sizeof summary_specs[0], usage};

static int on_option(void *ctx, const struct opt_spec *o, const char *value, char *err,
                     size_t errlen)
{
    vct_summary_options *a = ctx;
    switch (o->id) {
    case 'n':
    case OPT_MAX_THREADS: {
        char *endp;
        unsigned long long v = strtoull(value, &endp, 10);
        if (!*value || *endp || value[0] == '-' || (v == 0 && o->id == 'n')) {
            snprintf(err, errlen, "--%s needs a %s number, not '%s'", o->name,
                     o->id == 'n' ? "positive" : "whole", value);
            return -1;
        }
        size_t n = v > SIZE_MAX ? SIZE_MAX : (size_t)v;
        if (o->id == 'n')
            a->top = n;
        else
            a->max_threads = n ? n : SIZE_MAX;
        return 0;
    }
    case OPT_THREAD: a->thread = value; return 0;
    case OPT_SORT:
        if (!strcmp(value, "self"))
            a->sort = VCT_SORT_SELF;
        else if (!strcmp(value, "total"))
            a->sort = VCT_SORT_TOTAL;
        else if (!strcmp(value, "calls"))
            a->sort = VCT_SORT_CALLS;
        else if (!strcmp(value, "cpu"))
            a->sort = VCT_SORT_CPU;
        else {
            snprintf(err, errlen, "--sort takes self, total, calls or cpu, not '%s'", value);
            return -1;
        }
        return 0;
    case OPT_MERGED: a->merged = 1; return 0;
    case OPT_PID: {
        pid_t pid;
        if (cli_parse_pid(value, &pid, err, errlen) < 0)
            return -1;
        a->pid = (uint64_t)pid;
        return 0;
    }
    case OPT_ALL: a->all = 1; return 0;
    case OPT_BY:
        if (!strcmp(value, "interp") || !strcmp(value, "thread")) {
            a->by_interp = !strcmp(value, "interp");
            return 0;
        }
        snprintf(err, errlen, "--by takes thread or interp, not '%s'", value);
        return -1;
    }
    snprintf(err, errlen, "option '--%s' is not handled", o->name);
    return -1;
}

/* 0 with *a filled; 1 (--help printed) or 2 (usage error printed): the exit code. */
static int parse_args(int argc, char **argv, vct_summary_options *a)
{
    *a = (vct_summary_options){.top = 20, .max_threads = 12, .sort = VCT_SORT_SELF};
    int rc = opt_parse_operands(&summary_command, argc, argv, on_option, a,
                                "which trace? usage: vcattach summary FILE.cvf [--top N] "
                                "[--thread X] [--sort KEY] [--merged]", &a->paths, &a->npaths);
    if (!rc && a->merged && a->thread)
        return opt_usage_error("summary", "--merged and --thread exclude each other");
    if (!rc && a->by_interp && (a->merged || a->thread))
        return opt_usage_error("summary", "--by interp excludes --merged and --thread");
    return rc;
}

int cmd_summary(int argc, char **argv)
{
    vct_summary_options a;
    char err[8192];
    int prc = parse_args(argc, argv, &a);
    if (prc)
        return prc == 1 ? VC_EXIT_OK : VC_EXIT_USAGE;
    return vc_offline_exit("summary", vct_summary_report(&a, stdout, err, sizeof err), err);
}

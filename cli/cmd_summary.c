/* cmd_summary.c — `vcattach summary FILE`: where the time went, in the terminal.
 *
 * Owns the command line and the printing: the trace's span, call count, threads and drops,
 * then per thread (or merged across threads) the top functions with self time, inclusive
 * time, calls, mean, p50, p99 and max duration.  The numbers themselves are trace/summary.c's
 * (definitions in summary.h); percentages are of the section's time in calls.  It asks for
 * the measured split (summary.h: a thread's CPU samples, not the names, decide working vs
 * waiting) and prints what is off-CPU under its listed kind, or "off-CPU" when no list names
 * the function: the help's promise that names only label a wait.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "model.h"
#include "options.h"
#include "summary.h"
#include "tasks.h"
#include "trace_input.h"

struct summary_args {
    const char *path;        /* the one file, or a label for several */
    char *const *paths;      /* every FILE given */
    size_t npaths;
    uint64_t pid;            /* --pid: only that process (0: all) */
    size_t top, max_threads;
    const char *thread;  /* --thread: a name or a tid, or NULL */
    enum vct_sort_key sort;
    int merged;
    int all; /* --all: waiting ranked with work, as one table */
    int by_interp; /* --by interp: one table per interpreter, its threads merged */
};

/* ---- command line ------------------------------------------------------------------------ */

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
            "Several .cvf files (traces of processes taken separately) are read as one trace;\n"
            "a trace of several processes (--subprocesses) lists them in its header.\n"
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
            "within " VCT_HIST_ERROR_TEXT " of the exact value; memory independent of the\n"
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
    struct summary_args *a = ctx;
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
static int parse_args(int argc, char **argv, struct summary_args *a)
{
    *a = (struct summary_args){.top = 20, .max_threads = 12, .sort = VCT_SORT_SELF};
    int first;
    int rc = opt_parse(&summary_command, argc, argv, on_option, a, &first);
    if (rc)
        return rc;
    if (first == argc)
        return opt_usage_error("summary", "which trace? usage: vcattach summary FILE.cvf "
                                          "[--top N] [--thread X] [--sort KEY] [--merged]");
    if (a->merged && a->thread)
        return opt_usage_error("summary", "--merged and --thread exclude each other");
    if (a->by_interp && (a->merged || a->thread))
        return opt_usage_error("summary", "--by interp excludes --merged and --thread");
    a->path = argv[first];
    a->paths = argv + first;
    a->npaths = (size_t)(argc - first);
    return 0;
}

/* ---- printing ---------------------------------------------------------------------------- */

/* 1234567 -> "1,234,567" */
static const char *grouped(uint64_t v, char *buf, size_t len)
{
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%" PRIu64, v), o = 0;
    for (int i = 0; i < n && (size_t)o + 2 < len; i++) {
        if (i && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

static const char *human_span(int64_t ticks, char *buf, size_t len)
{
    double us = (double)ticks / VCT_TICKS_PER_US;
    if (us >= 1e6)
        snprintf(buf, len, "%.3f s", us / 1e6);
    else if (us >= 1e3)
        snprintf(buf, len, "%.3f ms", us / 1e3);
    else
        snprintf(buf, len, "%.2f µs", us);
    return buf;
}

static double pct(int64_t part, int64_t whole)
{
    return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0;
}

/* A name from the trace, on the terminal: control characters (a newline in a name would
 * break the table, an escape sequence would drive the terminal) are shown as '?'. */
static void put_terminal_text(const char *s)
{
    for (; *s; s++)
        putchar((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s);
}

static void print_row_name(const vct_summary *a, uint32_t func)
{
    put_terminal_text(a->trace->funcs[func]);
    putchar('\n');
}

static void print_more(size_t more)
{
    if (more)
        printf("  … %zu more function%s (--top N shows more)\n", more, more == 1 ? "" : "s");
}

/* mean, p50, p99, max of one function's calls, in µs (p50/p99 within 0.99 %: histogram.h). */
static void print_durations(const vct_func_stats *s)
{
    printf("%11.2f %11.2f %11.2f %11.2f",
           s->calls ? (double)s->sum_dur / (double)s->calls / VCT_TICKS_PER_US : 0.0,
           (double)vct_hist_quantile(&s->durs, 0.50) / VCT_TICKS_PER_US,
           (double)vct_hist_quantile(&s->durs, 0.99) / VCT_TICKS_PER_US,
           (double)s->max_dur / VCT_TICKS_PER_US);
}

/* Measured (a trace with CPU samples): the on-CPU and off-CPU parts of the function's whole
 * inclusive time that the samples cover, and the on-CPU share of it. */
static void print_cpu_cols(const vct_summary *a, const vct_func_stats *s)
{
    if (!a->trace->has_cpu)
        return;
    int64_t off = s->incl > s->on_cpu ? s->incl - s->on_cpu : 0;
    printf(" %11.3f %11.3f %5.1f%%", (double)s->on_cpu / (VCT_TICKS_PER_US * 1000.0),
           (double)off / (VCT_TICKS_PER_US * 1000.0), pct(s->on_cpu, s->incl));
}

static void print_cpu_heads(const vct_summary *a)
{
    if (a->trace->has_cpu)
        printf(" %11s %11s %6s", "on-CPU ms", "off-CPU ms", "on%");
}

/* The waiting table: functions by time waited, most first. */
static void print_waiting(vct_summary *a, size_t top)
{
    char b1[32], b2[32];
    printf("  waiting: %s, %.1f%% of the time in calls (not counted as work above)\n",
           human_span(a->waiting, b1, sizeof b1), pct(a->waiting, a->busy));
    printf("  %11s %6s %11s %12s %12s %12s %12s", "wait ms", "wait%", "calls", "mean µs",
           "p50 µs", "p99 µs", "max µs");
    print_cpu_heads(a);
    printf("  %-9s  %s\n", "kind", "function");
    vct_summary_sort(a, VCT_SORT_WAIT);
    size_t shown = 0, rows = 0;
    for (size_t i = 0; i < a->ntouched; i++) {
        uint32_t f = a->touched[i];
        const vct_func_stats *s = &a->stats[f];
        /* a row for its waits, another for its time in progress at attach: measured, one
         * function can have both (an unlisted frame found running, then blocked) */
        for (int attach = 0; attach < 2; attach++) {
            if (!(attach ? s->at_attach : s->wait))
                continue;
            rows++;
            if (shown == top)
                continue;
            shown++;
            if (!attach) {
                printf("  %11.3f %5.1f%% %11s ", (double)s->wait / (VCT_TICKS_PER_US * 1000.0),
                       pct(s->wait, a->busy), grouped(s->calls, b2, sizeof b2));
                print_durations(s);
                print_cpu_cols(a, s);
                enum vct_wait_kind kind = vct_summary_kind(a, f);
                /* measured off-CPU time of a function on no list: waiting all the same */
                printf("  %-9s  ",
                       vct_wait_kind_name(kind == VCT_WAIT_NONE ? VCT_WAIT_OFFCPU : kind));
            } else {
                printf("  %11.3f %5.1f%% %11s %11s %11s %11s %11s",
                       (double)s->at_attach / (VCT_TICKS_PER_US * 1000.0),
                       pct(s->at_attach, a->busy), "-", "-", "-", "-", "-");
                print_cpu_cols(a, s);
                printf("  %-9s  ", vct_wait_kind_name(VCT_WAIT_AT_ATTACH));
            }
            print_row_name(a, f);
        }
    }
    print_more(rows - shown);
}

/* Prints the section accumulated in `a`, then resets it for the next one.  Split: the
 * working table (waits left out, percentages of working time), then the waiting one. */
static void print_section(vct_summary *a, const char *title, size_t top, enum vct_sort_key sort)
{
    char b1[32], b2[32], b3[32];
    putchar('\n');
    put_terminal_text(title);
    printf(": %s call%s, %s in calls", grouped(a->calls, b1, sizeof b1),
           a->calls == 1 ? "" : "s", human_span(a->busy, b2, sizeof b2));
    int64_t working = a->busy - a->waiting;
    if (a->split)
        printf(" (%s working, %s waiting)", human_span(working, b2, sizeof b2),
               human_span(a->waiting, b3, sizeof b3));
    if (a->trace->has_cpu) {
        printf(" [measured: %s on-CPU, %s off-CPU", human_span(a->busy_cpu, b2, sizeof b2),
               human_span(a->busy_seen - a->busy_cpu, b3, sizeof b3));
        if (a->busy_seen < a->busy) /* a thread never sampled, samples past the bound */
            printf(", %s not sampled", human_span(a->busy - a->busy_seen, b3, sizeof b3));
        putchar(']');
    }
    putchar('\n');
    vct_summary_sort(a, sort);
    /* "µ" is two bytes but one column: its headers get one byte more of width */
    printf("  %11s %6s %11s %6s %11s %12s %12s %12s %12s", "self ms", "self%", "total ms",
           "total%", "calls", "mean µs", "p50 µs", "p99 µs", "max µs");
    print_cpu_heads(a);
    printf("  %s\n", a->split ? "function (working)" : "function");
    size_t shown = 0, rows = 0;
    for (size_t i = 0; i < a->ntouched; i++) {
        uint32_t f = a->touched[i];
        const vct_func_stats *s = &a->stats[f];
        /* a wait (unless measured: its on-CPU part is work), or only time in progress at
         * attach; a function on no list keeps its row (and its calls) even when measured
         * all off-CPU */
        if (vct_summary_kind(a, f) != VCT_WAIT_NONE ? s->self <= 0
                                                    : !s->calls && !s->self && !s->total)
            continue;
        rows++;
        if (shown == top)
            continue;
        shown++;
        printf("  %11.3f %5.1f%% %11.3f %5.1f%% %11s ",
               (double)s->self / (VCT_TICKS_PER_US * 1000.0), pct(s->self, working),
               (double)s->total / (VCT_TICKS_PER_US * 1000.0), pct(s->total, working),
               grouped(s->calls, b1, sizeof b1));
        print_durations(s);
        print_cpu_cols(a, s);
        printf("  ");
        print_row_name(a, f);
    }
    print_more(rows - shown);
    if (a->split && a->waiting > 0)
        print_waiting(a, top);
    vct_summary_reset(a);
}

/* One line per process: pid, threads, calls, name (threads are sorted by pid, tid). */
static void print_processes(const vct_trace *t)
{
    char b1[32];
    for (size_t i = 0; i < t->nthreads;) {
        uint64_t pid = t->threads[i].pid, calls = 0;
        size_t threads = 0;
        for (; i < t->nthreads && t->threads[i].pid == pid; i++)
            threads++, calls += vct_thread_calls(&t->threads[i]);
        const char *name = vct_trace_process_name(t, pid);
        printf("  process %" PRIu64 ": %zu thread%s, %s calls", pid, threads,
               threads == 1 ? "" : "s", grouped(calls, b1, sizeof b1));
        if (name) {
            printf(": ");
            put_terminal_text(name);
        }
        putchar('\n');
    }
}

static void print_header(const char *path, const vct_trace *t)
{
    char b1[32], b2[32], b3[32];
    uint64_t calls = 0;
    for (size_t i = 0; i < t->nthreads; i++)
        calls += vct_thread_calls(&t->threads[i]);
    printf("%s: %s span, %s calls", path, human_span(vct_trace_span(t), b1, sizeof b1),
           grouped(calls, b2, sizeof b2));
    if (calls < t->nevents) /* the rest are slices of coroutines and generators */
        printf(" (+%s resume slices)", grouped(t->nevents - calls, b3, sizeof b3));
    printf(", %zu thread%s", t->nthreads, t->nthreads == 1 ? "" : "s");
    if (t->nprocesses > 1)
        printf(" in %" PRIu64 " processes", t->nprocesses);
    if (t->has_drops)
        printf(", %s calls dropped%s\n", grouped(t->dropped, b3, sizeof b3),
               t->dropped ? " (agent buffers were full: the trace is incomplete)" : "");
    else
        printf(", no drop count recorded\n");
    if (t->interps_untraced) {
        uint64_t shared = t->interps_untraced_shared < t->interps_untraced
                              ? t->interps_untraced_shared : t->interps_untraced;
        printf("%" PRIu64 " sub-interpreter%s not traced (CPython 3.12+, ended before they ran "
               "Python hooked, or --hook profile: their calls are not in this trace)",
               t->interps_untraced, t->interps_untraced == 1 ? "" : "s");
        if (shared < t->interps_untraced)
            printf("; %" PRIu64 " with their own GIL", t->interps_untraced - shared);
        if (shared)
            printf("; %" PRIu64 " under the main GIL", shared);
        putchar('\n');
    }
    if (t->filters)
        printf("FILTERED trace (not every call was kept): %s\n", t->filters);
    uint64_t ntasks = 0, nsteps = 0;
    if (vct_tasks_count(t, 0, &ntasks, &nsteps) == 0 && ntasks) /* trace/tasks.h */
        printf("asyncio: %s task%s (%s step%s)\n", grouped(ntasks, b1, sizeof b1),
               ntasks == 1 ? "" : "s", grouped(nsteps, b2, sizeof b2), nsteps == 1 ? "" : "s");
    if (t->has_cpu)
        printf("CPU measured: each thread's CPU clock sampled every %.0f ms (median); a call's "
               "on-CPU time is its thread's clock advance over it, interpolated between the "
               "samples around its start and end (a call shorter than that is an estimate); "
               "off-CPU = duration - on-CPU; working = self on-CPU, waiting = self off-CPU, "
               "labelled by names (time no sample covers: by names)\n",
               (double)t->cpu_period / (VCT_TICKS_PER_US * 1000.0));
    else
        printf("CPU not measured (no CPU samples in this trace): working vs waiting is from "
               "the names of blocking calls (trace/waits.def)\n");
    if (t->nprocesses > 1)
        print_processes(t);
}

/* The thread --thread names, or -1 for all.  -2 after printing that it does not exist, with
 * the threads there are (the first 20). */
static long resolve_thread(const vct_trace *t, const struct summary_args *a)
{
    if (!a->thread)
        return -1;
    long only = vct_trace_find_thread(t, a->thread);
    if (only >= 0)
        return only;
    fprintf(stderr, "vcattach summary: no thread '%s' in %s; threads:", a->thread, a->path);
    for (size_t i = 0; i < t->nthreads; i++) {
        if (i == 20) {
            fprintf(stderr, " … (%zu more)", t->nthreads - i);
            break;
        }
        char label[64];
        fprintf(stderr, "%s %s (tid %" PRIu64 ")", i ? "," : "",
                vct_thread_label(&t->threads[i], label, sizeof label), t->threads[i].tid);
    }
    fputc('\n', stderr);
    return -2;
}

/* One table per thread (only: that thread; else the busiest --max-threads of them), or one
 * merged table, then the note on hidden threads.  0, or -1 on allocation failure. */
static int print_tables(const vct_trace *t, const struct summary_args *a, long only)
{
    vct_summary acc;
    if (vct_summary_init(&acc, t, !a->all) < 0)
        return -1;
    acc.measure = 1; /* threads with CPU samples: working vs waiting by their clocks */
    int failed = 0;
    unsigned char *shown = NULL; /* threads that get a table, when not all of them do */
    if (!a->merged && only < 0)
        shown = vct_summary_busiest_threads(t, a->max_threads, &failed);
    size_t hidden = 0;
    uint64_t hidden_calls = 0;
    for (size_t i = 0; i < t->nthreads && !failed; i++) {
        const vct_thread *th = &t->threads[i];
        if ((only >= 0 && (long)i != only) || (!th->nevents && only < 0))
            continue;
        if (a->pid && th->pid != a->pid)
            continue;
        if (shown && !shown[i]) {
            hidden++;
            hidden_calls += vct_thread_calls(th);
            continue;
        }
        if (vct_summary_add_thread(&acc, th) < 0) {
            failed = 1;
            break;
        }
        if (!a->merged) {
            char label[600], title[700];
            snprintf(title, sizeof title, "%s (pid %" PRIu64 ", tid %" PRIu64 ")",
                     vct_thread_label(th, label, sizeof label), th->pid, th->tid);
            print_section(&acc, title, a->top, a->sort);
        }
    }
    if (!failed && a->merged) {
        char title[96];
        if (a->pid)
            snprintf(title, sizeof title, "process %" PRIu64 ", all its threads merged", a->pid);
        else if (t->nprocesses > 1)
            snprintf(title, sizeof title, "all %zu threads of %" PRIu64 " processes merged",
                     t->nthreads, t->nprocesses);
        else
            snprintf(title, sizeof title, "all %zu threads merged", t->nthreads);
        print_section(&acc, title, a->top, a->sort);
    }
    if (!failed && hidden) {
        char b1[32];
        printf("\n… %zu more thread%s with %s calls: --thread NAME shows one, --max-threads 0 all, "
               "--merged all in one table\n", hidden, hidden == 1 ? "" : "s",
               grouped(hidden_calls, b1, sizeof b1));
    }
    free(shown);
    vct_summary_free(&acc);
    return failed ? -1 : 0;
}

/* The interpreter a thread's calls ran in: N of a track named "NAME [interp N]" (the agent
 * names a sub-interpreter's tracks so: docs/cvf-format.md), else 0 (the main one). */
static long long thread_interp(const vct_thread *th)
{
    char label[600];
    const char *name = vct_thread_label(th, label, sizeof label);
    const char *p = name ? strstr(name, " [interp ") : NULL;
    const char *last = p;
    while (p != NULL) {
        last = p;
        p = strstr(p + 1, " [interp ");
    }
    if (last == NULL)
        return 0;
    char *end;
    long long id = strtoll(last + 9, &end, 10);
    return end != last + 9 && end[0] == ']' && end[1] == '\0' && id > 0 ? id : 0;
}

static int cmp_ll(const void *x, const void *y)
{
    long long a = *(const long long *)x, b = *(const long long *)y;
    return a < b ? -1 : a > b;
}

/* --by interp: one merged table per interpreter, main first.  0, or -1 (out of memory). */
static int print_by_interp(const vct_trace *t, const struct summary_args *a)
{
    vct_summary acc;
    long long *ids = malloc((t->nthreads ? t->nthreads : 1) * sizeof *ids);
    if (ids == NULL || vct_summary_init(&acc, t, !a->all) < 0) {
        free(ids);
        return -1;
    }
    acc.measure = 1;
    size_t n = 0;
    for (size_t i = 0; i < t->nthreads; i++)
        if (t->threads[i].nevents && (!a->pid || t->threads[i].pid == a->pid))
            ids[n++] = thread_interp(&t->threads[i]);
    qsort(ids, n, sizeof *ids, cmp_ll);
    int failed = 0;
    for (size_t k = 0; k < n && !failed; k++) {
        if (k > 0 && ids[k] == ids[k - 1])
            continue;
        size_t threads = 0;
        for (size_t i = 0; i < t->nthreads && !failed; i++) {
            const vct_thread *th = &t->threads[i];
            if (!th->nevents || (a->pid && th->pid != a->pid) || thread_interp(th) != ids[k])
                continue;
            threads++;
            failed = vct_summary_add_thread(&acc, th) < 0;
        }
        char title[128];
        if (ids[k] == 0)
            snprintf(title, sizeof title, "main interpreter: %zu thread%s merged", threads,
                     threads == 1 ? "" : "s");
        else
            snprintf(title, sizeof title, "interpreter %lld: %zu thread%s merged", ids[k],
                     threads, threads == 1 ? "" : "s");
        if (!failed)
            print_section(&acc, title, a->top, a->sort);
    }
    vct_summary_free(&acc);
    free(ids);
    return failed ? -1 : 0;
}

/* ---- the command ------------------------------------------------------------------------- */

int cmd_summary(int argc, char **argv)
{
    struct summary_args a;
    int prc = parse_args(argc, argv, &a);
    if (prc)
        return prc == 1 ? VC_EXIT_OK : VC_EXIT_USAGE;

    vct_trace *t;
    char label[64];
    if (cli_load_trace("summary", a.paths, a.npaths, VCT_LOAD_COMPACT, &t, label, sizeof label) < 0)
        return VC_EXIT_FAIL;
    if (a.npaths > 1)
        a.path = label;
    if (a.pid && !cli_trace_has_pid(t, a.pid)) {
        fprintf(stderr, "vcattach summary: no process %" PRIu64 " in %s (the header of "
                        "`vcattach summary %s` lists them)\n", a.pid, a.path, a.paths[0]);
        vct_trace_free(t);
        return VC_EXIT_USAGE;
    }
    int rc = VC_EXIT_OK;
    long only = resolve_thread(t, &a);
    if (only == -2) {
        rc = VC_EXIT_USAGE;
    } else {
        print_header(a.path, t);
        if ((a.by_interp ? print_by_interp(t, &a) : print_tables(t, &a, only)) < 0) {
            fprintf(stderr, "vcattach summary: out of memory\n");
            rc = VC_EXIT_FAIL;
        } else {
            if (!t->nevents)
                printf("\n(no complete calls in this trace)\n");
            if (fflush(stdout) != 0) {
                fprintf(stderr, "vcattach summary: cannot write the summary to stdout\n");
                rc = VC_EXIT_FAIL;
            }
        }
    }
    vct_trace_free(t);
    return rc;
}

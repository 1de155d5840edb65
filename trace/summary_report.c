/* summary_report.c — `vcattach summary`'s report (vctrace.h part 2): where the time went, as
 * text.
 *
 * Owns the printing: the trace's span, call count, threads and drops, then per thread (or
 * merged across threads, or per interpreter) the top functions with self time, inclusive
 * time, calls, mean, p50, p99 and max duration.  The numbers themselves are summary.c's
 * (definitions in summary.h); percentages are of the section's time in calls.  It asks for
 * the measured split (summary.h: a thread's CPU samples, not the names, decide working vs
 * waiting) and prints what is off-CPU under its listed kind, or "off-CPU" when no list names
 * the function: the help's promise that names only label a wait.  Every name of the trace
 * goes through the terminal sanitizer (common/term.h), on one row.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vctrace.h"
#include "human.h"
#include "input.h"
#include "load.h"
#include "summary.h"
#include "tasks.h"
#include "term.h"
#include "text.h"

typedef struct summary_report {
    const vct_summary_options *o;
    FILE *out;
    const vct_trace *t;
    const char *name; /* the input's, for the header */
} summary_report;

static const char *span_text(int64_t ticks, char *buf, size_t len)
{
    return vc_human_us((double)ticks / VCT_TICKS_PER_US, 2, buf, len);
}

static double pct(int64_t part, int64_t whole)
{
    return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0;
}

static void print_row_name(const summary_report *r, const vct_summary *a, uint32_t func)
{
    vc_term_fputs(r->out, a->trace->funcs[func], 0);
    fputc('\n', r->out);
}

static void print_more(const summary_report *r, size_t more)
{
    if (more)
        vc_term_printf(r->out, "  … %zu more function%s (--top N shows more)\n", more,
                       more == 1 ? "" : "s");
}

/* mean, p50, p99, max of one function's calls, in µs (p50/p99 within 0.99 %: histogram.h). */
static void print_durations(const summary_report *r, const vct_func_stats *s)
{
    vc_term_printf(r->out, "%11.2f %11.2f %11.2f %11.2f",
                   s->calls ? (double)s->sum_dur / (double)s->calls / VCT_TICKS_PER_US : 0.0,
                   (double)vct_hist_quantile(&s->durs, 0.50) / VCT_TICKS_PER_US,
                   (double)vct_hist_quantile(&s->durs, 0.99) / VCT_TICKS_PER_US,
                   (double)s->max_dur / VCT_TICKS_PER_US);
}

/* Measured (a trace with CPU samples): the on-CPU and off-CPU parts of the function's whole
 * inclusive time that the samples cover, and the on-CPU share of it. */
static void print_cpu_cols(const summary_report *r, const vct_func_stats *s)
{
    if (!r->t->has_cpu)
        return;
    int64_t off = s->incl > s->on_cpu ? s->incl - s->on_cpu : 0;
    vc_term_printf(r->out, " %11.3f %11.3f %5.1f%%",
                   (double)s->on_cpu / (VCT_TICKS_PER_US * 1000.0),
                   (double)off / (VCT_TICKS_PER_US * 1000.0), pct(s->on_cpu, s->incl));
    if (r->t->has_sched) /* self time runnable but not running: CPU starved */
        vc_term_printf(r->out, " %11.3f", (double)s->runnable / (VCT_TICKS_PER_US * 1000.0));
}

static void print_cpu_heads(const summary_report *r)
{
    if (r->t->has_cpu)
        vc_term_printf(r->out, " %11s %11s %6s", "on-CPU ms", "off-CPU ms", "on%");
    if (r->t->has_sched)
        vc_term_printf(r->out, " %11s", "starved ms");
}

/* One row of the waiting table: the function's waits, or (attach) its time in progress at
 * attach. */
static void print_wait_row(const summary_report *r, const vct_summary *a, uint32_t f,
                           int attach)
{
    const vct_func_stats *s = &a->stats[f];
    char b[32];
    if (!attach) {
        vc_term_printf(r->out, "  %11.3f %5.1f%% %11s ",
                       (double)s->wait / (VCT_TICKS_PER_US * 1000.0), pct(s->wait, a->busy),
                       vc_human_count(s->calls, b, sizeof b));
        print_durations(r, s);
        print_cpu_cols(r, s);
        enum vct_wait_kind kind = vct_summary_kind(a, f);
        /* measured off-CPU time of a function on no list: waiting all the same */
        vc_term_printf(r->out, "  %-9s  ",
                       vct_wait_kind_name(kind == VCT_WAIT_NONE ? VCT_WAIT_OFFCPU : kind));
    } else {
        vc_term_printf(r->out, "  %11.3f %5.1f%% %11s %11s %11s %11s %11s",
                       (double)s->at_attach / (VCT_TICKS_PER_US * 1000.0),
                       pct(s->at_attach, a->busy), "-", "-", "-", "-", "-");
        print_cpu_cols(r, s);
        vc_term_printf(r->out, "  %-9s  ", vct_wait_kind_name(VCT_WAIT_AT_ATTACH));
    }
    print_row_name(r, a, f);
}

/* The waiting table: functions by time waited, most first. */
static void print_waiting(const summary_report *r, vct_summary *a)
{
    char b1[32];
    vc_term_printf(r->out, "  waiting: %s, %.1f%% of the time in calls (not counted as work "
                   "above)\n", span_text(a->waiting, b1, sizeof b1), pct(a->waiting, a->busy));
    vc_term_printf(r->out, "  %11s %6s %11s %12s %12s %12s %12s", "wait ms", "wait%", "calls",
                   "mean µs", "p50 µs", "p99 µs", "max µs");
    print_cpu_heads(r);
    vc_term_printf(r->out, "  %-9s  %s\n", "kind", "function");
    vct_summary_sort(a, VCT_SORT_WAIT);
    size_t shown = 0, rows = 0;
    for (size_t i = 0; i < a->ntouched; i++) {
        const vct_func_stats *s = &a->stats[a->touched[i]];
        /* a row for its waits, another for its time in progress at attach: measured, one
         * function can have both (an unlisted frame found running, then blocked) */
        for (int attach = 0; attach < 2; attach++) {
            if (!(attach ? s->at_attach : s->wait))
                continue;
            rows++;
            if (shown == r->o->top)
                continue;
            shown++;
            print_wait_row(r, a, a->touched[i], attach);
        }
    }
    print_more(r, rows - shown);
}

/* The section's title line: calls, time in calls, working and waiting, measured CPU. */
static void print_section_title(const summary_report *r, const vct_summary *a,
                                const char *title)
{
    char b1[32], b2[32], b3[32];
    fputc('\n', r->out);
    vc_term_fputs(r->out, title, 0);
    vc_term_printf(r->out, ": %s call%s, %s in calls", vc_human_count(a->calls, b1, sizeof b1),
                   a->calls == 1 ? "" : "s", span_text(a->busy, b2, sizeof b2));
    if (a->split) /* exact: runnable is neither (below) */
        vc_term_printf(r->out, " (%s working, %s waiting)",
                       span_text(a->busy - a->waiting - a->runnable, b2, sizeof b2),
                       span_text(a->waiting, b3, sizeof b3));
    if (r->t->has_cpu) {
        vc_term_printf(r->out, " [%s: %s on-CPU, %s off-CPU",
                       r->t->has_sched ? "exact" : "measured",
                       span_text(a->busy_cpu, b2, sizeof b2),
                       span_text(a->busy_seen - a->busy_cpu, b3, sizeof b3));
        if (r->t->has_sched)
            vc_term_printf(r->out, ", %s of it runnable: CPU starved",
                           span_text(a->runnable, b3, sizeof b3));
        if (a->busy_seen < a->busy) /* a thread never sampled, samples past the bound */
            vc_term_printf(r->out, ", %s not sampled",
                           span_text(a->busy - a->busy_seen, b3, sizeof b3));
        fputc(']', r->out);
    }
    fputc('\n', r->out);
}

/* Prints the section accumulated in `a`, then resets it for the next one.  Split: the
 * working table (waits left out, percentages of working time), then the waiting one. */
static void print_section(const summary_report *r, vct_summary *a, const char *title)
{
    char b1[32];
    print_section_title(r, a, title);
    int64_t working = a->busy - a->waiting - a->runnable;
    vct_summary_sort(a, r->o->sort);
    /* "µ" is two bytes but one column: its headers get one byte more of width */
    vc_term_printf(r->out, "  %11s %6s %11s %6s %11s %12s %12s %12s %12s", "self ms", "self%",
                   "total ms", "total%", "calls", "mean µs", "p50 µs", "p99 µs", "max µs");
    print_cpu_heads(r);
    vc_term_printf(r->out, "  %s\n", a->split ? "function (working)" : "function");
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
        if (shown == r->o->top)
            continue;
        shown++;
        vc_term_printf(r->out, "  %11.3f %5.1f%% %11.3f %5.1f%% %11s ",
                       (double)s->self / (VCT_TICKS_PER_US * 1000.0), pct(s->self, working),
                       (double)s->total / (VCT_TICKS_PER_US * 1000.0), pct(s->total, working),
                       vc_human_count(s->calls, b1, sizeof b1));
        print_durations(r, s);
        print_cpu_cols(r, s);
        vc_term_printf(r->out, "  ");
        print_row_name(r, a, f);
    }
    print_more(r, rows - shown);
    if (a->split && a->waiting > 0)
        print_waiting(r, a);
    vct_summary_reset(a);
}

/* One line per process: pid, threads, calls, name (threads are sorted by pid, tid). */
static void print_processes(const summary_report *r)
{
    const vct_trace *t = r->t;
    char b1[32];
    for (size_t i = 0; i < t->nthreads;) {
        uint64_t pid = t->threads[i].pid, calls = 0;
        size_t threads = 0;
        for (; i < t->nthreads && t->threads[i].pid == pid; i++)
            threads++, calls += vct_thread_calls(&t->threads[i]);
        const char *name = vct_trace_process_name(t, pid);
        vc_term_printf(r->out, "  process %" PRIu64 ": %zu thread%s, %s calls", pid, threads,
                       threads == 1 ? "" : "s", vc_human_count(calls, b1, sizeof b1));
        if (name) {
            vc_term_printf(r->out, ": ");
            vc_term_fputs(r->out, name, 0);
        }
        fputc('\n', r->out);
    }
}

/* The header's first line: span, calls, slices, threads, processes, drops. */
static void print_totals(const summary_report *r)
{
    const vct_trace *t = r->t;
    char b1[32], b2[32], b3[32];
    uint64_t calls = 0;
    for (size_t i = 0; i < t->nthreads; i++)
        calls += vct_thread_calls(&t->threads[i]);
    vc_term_printf(r->out, "%s: %s span, %s calls", r->name,
                   span_text(vct_trace_span(t), b1, sizeof b1),
                   vc_human_count(calls, b2, sizeof b2));
    if (calls < t->nevents) /* the rest are slices of coroutines and generators */
        vc_term_printf(r->out, " (+%s resume slices)",
                       vc_human_count(t->nevents - calls, b3, sizeof b3));
    vc_term_printf(r->out, ", %zu thread%s", t->nthreads, t->nthreads == 1 ? "" : "s");
    if (t->nprocesses > 1)
        vc_term_printf(r->out, " in %" PRIu64 " processes", t->nprocesses);
    if (t->has_drops)
        vc_term_printf(r->out, ", %s calls dropped%s\n",
                       vc_human_count(t->dropped, b3, sizeof b3),
                       t->dropped ? " (agent buffers were full: the trace is incomplete)" : "");
    else
        vc_term_printf(r->out, ", no drop count recorded\n");
}

/* The sub-interpreters the agent left alone (CPython 3.12+). */
static void print_untraced_interps(const summary_report *r)
{
    const vct_trace *t = r->t;
    uint64_t shared = t->interps_untraced_shared < t->interps_untraced
                          ? t->interps_untraced_shared : t->interps_untraced;
    vc_term_printf(r->out, "%" PRIu64 " sub-interpreter%s not traced (CPython 3.12+, ended "
                   "before they ran Python hooked, or --hook profile: their calls are not in "
                   "this trace)", t->interps_untraced, t->interps_untraced == 1 ? "" : "s");
    if (shared < t->interps_untraced)
        vc_term_printf(r->out, "; %" PRIu64 " with their own GIL", t->interps_untraced - shared);
    if (shared)
        vc_term_printf(r->out, "; %" PRIu64 " under the main GIL", shared);
    fputc('\n', r->out);
}

/* The header's line for a trace whose split comes from the scheduler (sched_split.h). */
static void print_sched_header(const summary_report *r)
{
    const vct_trace *t = r->t;
    char b1[32];
    vc_term_printf(r->out, "CPU exact (scheduler events): every context switch of the traced "
                   "threads, recorded by vcattach (perf_event_open, %s switches); a call's "
                   "span splits into on-CPU, runnable (preempted, waiting for a core: "
                   "\"starved\") and blocked; working = self on-CPU, waiting = self blocked "
                   "(labelled by names), starved apart\n",
                   vc_human_count(t->sched_switches, b1, sizeof b1));
    if (t->sched_lost || t->sched_refused)
        vc_term_printf(r->out, "  scheduler events lost: %" PRIu64 " (a ring was full), %" PRIu64
                       " thread%s not covered: those stretches are split by the CPU samples or "
                       "the names\n", t->sched_lost, t->sched_refused,
                       t->sched_refused == 1 ? "" : "s");
}

static void print_header(const summary_report *r)
{
    const vct_trace *t = r->t;
    char b1[32], b2[32];
    print_totals(r);
    if (t->interps_untraced)
        print_untraced_interps(r);
    if (t->filters)
        vc_term_printf(r->out, "FILTERED trace (not every call was kept): %s\n", t->filters);
    uint64_t ntasks = 0, nsteps = 0;
    if (vct_tasks_count(t, 0, &ntasks, &nsteps) == 0 && ntasks) /* tasks.h */
        vc_term_printf(r->out, "asyncio: %s task%s (%s step%s)\n",
                       vc_human_count(ntasks, b1, sizeof b1), ntasks == 1 ? "" : "s",
                       vc_human_count(nsteps, b2, sizeof b2), nsteps == 1 ? "" : "s");
    if (t->has_sched)
        print_sched_header(r);
    else if (t->has_cpu)
        vc_term_printf(r->out, "CPU estimated (sampled): each thread's CPU clock sampled every %.0f ms "
                       "(median); a call's on-CPU time is its thread's clock advance over it, "
                       "interpolated between the samples around its start and end (a call "
                       "shorter than that is an estimate); off-CPU = duration - on-CPU; "
                       "working = self on-CPU, waiting = self off-CPU, labelled by names (time "
                       "no sample covers: by names)\n",
                       (double)t->cpu_period / (VCT_TICKS_PER_US * 1000.0));
    else
        vc_term_printf(r->out, "CPU not measured (no CPU samples in this trace): working vs "
                       "waiting is from the names of blocking calls (trace/waits.def)\n");
    if (!t->has_sched && t->sched_why) { /* asked for, not had: why (the file's text) */
        vc_term_printf(r->out, "  (no scheduler events: ");
        vc_term_fputs(r->out, t->sched_why, 0);
        vc_term_printf(r->out, ")\n");
    }
    if (t->nprocesses > 1)
        print_processes(r);
}

/* The thread --thread names, or -1 for all.  -2 with err saying that it does not exist, with
 * the threads there are (the first 20). */
static long resolve_thread(const summary_report *r, char *err, size_t errlen)
{
    const vct_trace *t = r->t;
    if (!r->o->thread)
        return -1;
    long only = vct_trace_find_thread(t, r->o->thread);
    if (only >= 0)
        return only;
    vc_text m;
    vc_text_fixed(&m, err, errlen);
    vc_text_printf(&m, "no thread '%s' in %s; threads:", r->o->thread, r->name);
    for (size_t i = 0; i < t->nthreads; i++) {
        if (i == 20) {
            vc_text_printf(&m, " … (%zu more)", t->nthreads - i);
            break;
        }
        char label[64];
        vc_text_printf(&m, "%s %s (tid %" PRIu64 ")", i ? "," : "",
                       vct_thread_label(&t->threads[i], label, sizeof label), t->threads[i].tid);
    }
    return -2;
}

/* The merged table's title. */
static void merged_title(const summary_report *r, char *title, size_t len)
{
    const vct_trace *t = r->t;
    if (r->o->pid)
        snprintf(title, len, "process %" PRIu64 ", all its threads merged", r->o->pid);
    else if (t->nprocesses > 1)
        snprintf(title, len, "all %zu threads of %" PRIu64 " processes merged", t->nthreads,
                 t->nprocesses);
    else
        snprintf(title, len, "all %zu threads merged", t->nthreads);
}

/* One table per thread (only: that thread; else the busiest --max-threads of them), or one
 * merged table, then the note on hidden threads.  0, or -1 on allocation failure. */
static int print_tables(const summary_report *r, vct_summary *acc, long only)
{
    const vct_trace *t = r->t;
    const vct_summary_options *o = r->o;
    int failed = 0;
    unsigned char *shown = NULL; /* threads that get a table, when not all of them do */
    if (!o->merged && only < 0)
        shown = vct_summary_busiest_threads(t, o->max_threads, &failed);
    size_t hidden = 0;
    uint64_t hidden_calls = 0;
    for (size_t i = 0; i < t->nthreads && !failed; i++) {
        const vct_thread *th = &t->threads[i];
        if ((only >= 0 && (long)i != only) || (!th->nevents && only < 0) ||
            (o->pid && th->pid != o->pid))
            continue;
        if (shown && !shown[i]) {
            hidden++;
            hidden_calls += vct_thread_calls(th);
            continue;
        }
        failed = vct_summary_add_thread(acc, th) < 0;
        if (!failed && !o->merged) {
            char label[600], title[700];
            snprintf(title, sizeof title, "%s (pid %" PRIu64 ", tid %" PRIu64 ")",
                     vct_thread_label(th, label, sizeof label), th->pid, th->tid);
            print_section(r, acc, title);
        }
    }
    if (!failed && o->merged) {
        char title[96];
        merged_title(r, title, sizeof title);
        print_section(r, acc, title);
    }
    if (!failed && hidden) {
        char b1[32];
        vc_term_printf(r->out, "\n… %zu more thread%s with %s calls: --thread NAME shows one, "
                       "--max-threads 0 all, --merged all in one table\n", hidden,
                       hidden == 1 ? "" : "s", vc_human_count(hidden_calls, b1, sizeof b1));
    }
    free(shown);
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

/* One merged table: interpreter id's threads.  0, or -1 (memory). */
static int print_interp(const summary_report *r, vct_summary *acc, long long id)
{
    const vct_trace *t = r->t;
    size_t threads = 0;
    for (size_t i = 0; i < t->nthreads; i++) {
        const vct_thread *th = &t->threads[i];
        if (!th->nevents || (r->o->pid && th->pid != r->o->pid) || thread_interp(th) != id)
            continue;
        threads++;
        if (vct_summary_add_thread(acc, th) < 0)
            return -1;
    }
    char title[128];
    if (id == 0)
        snprintf(title, sizeof title, "main interpreter: %zu thread%s merged", threads,
                 threads == 1 ? "" : "s");
    else
        snprintf(title, sizeof title, "interpreter %lld: %zu thread%s merged", id, threads,
                 threads == 1 ? "" : "s");
    print_section(r, acc, title);
    return 0;
}

/* --by interp: one merged table per interpreter, main first.  0, or -1 (out of memory). */
static int print_by_interp(const summary_report *r, vct_summary *acc)
{
    const vct_trace *t = r->t;
    long long *ids = malloc((t->nthreads ? t->nthreads : 1) * sizeof *ids);
    if (ids == NULL)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < t->nthreads; i++)
        if (t->threads[i].nevents && (!r->o->pid || t->threads[i].pid == r->o->pid))
            ids[n++] = thread_interp(&t->threads[i]);
    qsort(ids, n, sizeof *ids, cmp_ll);
    int failed = 0;
    for (size_t k = 0; k < n && !failed; k++)
        if (k == 0 || ids[k] != ids[k - 1])
            failed = print_interp(r, acc, ids[k]) < 0;
    free(ids);
    return failed ? -1 : 0;
}

/* The header, then the tables.  VCT_OK, or VCT_REFUSED / VCT_FAILED with err. */
static int print_report(const summary_report *r, char *err, size_t errlen)
{
    long only = resolve_thread(r, err, errlen);
    if (only == -2)
        return VCT_REFUSED;
    print_header(r);
    vct_summary acc;
    if (vct_summary_init(&acc, r->t, !r->o->all) < 0) {
        snprintf(err, errlen, "out of memory");
        return VCT_FAILED;
    }
    acc.measure = 1; /* threads with CPU samples: working vs waiting by their clocks */
    int rc = r->o->by_interp ? print_by_interp(r, &acc) : print_tables(r, &acc, only);
    vct_summary_free(&acc);
    if (rc < 0) {
        snprintf(err, errlen, "out of memory");
        return VCT_FAILED;
    }
    if (!r->t->nevents)
        vc_term_printf(r->out, "\n(no complete calls in this trace)\n");
    if (fflush(r->out) != 0) {
        snprintf(err, errlen, "cannot write the summary to stdout");
        return VCT_FAILED;
    }
    return VCT_OK;
}

int vct_summary_report(const vct_summary_options *o, FILE *out, char *err, size_t errlen)
{
    vct_input in;
    vct_trace *t;
    if (vct_trace_open(o->paths, o->npaths, VCT_LOAD_COMPACT, &in, &t, err, errlen) < 0)
        return VCT_FAILED;
    summary_report r = {o, out, t, vct_input_name(&in)};
    int rc = VCT_REFUSED;
    if (o->pid && !vct_trace_has_pid(t, o->pid))
        snprintf(err, errlen, "no process %" PRIu64 " in %s (the header of `vcattach summary "
                 "%s` lists them)", o->pid, r.name, o->paths[0]);
    else
        rc = print_report(&r, err, errlen);
    vct_trace_free(t);
    vct_input_close(&in);
    return rc;
}

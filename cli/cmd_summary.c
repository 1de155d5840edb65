/* cmd_summary.c — `vcattach summary FILE`: where the time went, in the terminal.
 *
 * Prints the trace's span, call count, threads and drops, then per thread (or merged across
 * threads) the top functions with self time, inclusive time, calls, mean and max duration.
 * Times come from one nesting walk per thread (trace_model.h):
 *   self  = a call's duration minus its direct children's (clipped) durations;
 *   total = inclusive time, counting recursion once: only calls with no active call of the
 *           same function below them on the stack add their duration, so f→g→f is not
 *           counted twice for f;
 *   mean, max over every call (recursive ones included).
 * Percentages are of the section's time in calls (the sum of its root calls' durations).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "model.h"

enum sort_key { SORT_SELF, SORT_TOTAL, SORT_CALLS };

typedef struct func_stats {
    uint64_t calls;
    int64_t self, total, sum_dur, max_dur;
} func_stats;

/* Accumulates one section (a thread, or all threads when merged). */
typedef struct summary_acc {
    const vct_trace *trace;
    func_stats *stats;  /* [nfuncs], zero outside `touched` */
    uint32_t *active;   /* [nfuncs]: calls of the function open on the current stack */
    uint32_t *touched;  /* functions with calls in this section */
    size_t ntouched;
    uint64_t calls;
    int64_t busy;       /* time in calls: the sum of root call durations */
    enum sort_key sort;
} summary_acc;

static void on_open(void *ctx, const vct_event *ev, int64_t start, int64_t end, size_t depth)
{
    summary_acc *a = ctx;
    func_stats *s = &a->stats[ev->func];
    int64_t dur = end - start;
    if (!s->calls++)
        a->touched[a->ntouched++] = ev->func;
    if (!a->active[ev->func]++)
        s->total += dur; /* outermost call of this function on the stack */
    s->sum_dur += dur;
    if (dur > s->max_dur)
        s->max_dur = dur;
    if (!depth)
        a->busy += dur;
    a->calls++;
}

static void on_close(void *ctx, const vct_event *ev, int64_t start, int64_t end, int64_t self,
                     size_t depth)
{
    summary_acc *a = ctx;
    a->stats[ev->func].self += self;
    a->active[ev->func]--;
}

static int cmp_funcs(const void *x, const void *y, void *ctx)
{
    const summary_acc *a = ctx;
    const func_stats *p = &a->stats[*(const uint32_t *)x], *q = &a->stats[*(const uint32_t *)y];
    int64_t kp, kq;
    switch (a->sort) {
    case SORT_TOTAL: kp = p->total, kq = q->total; break;
    case SORT_CALLS: kp = (int64_t)p->calls, kq = (int64_t)q->calls; break;
    default: kp = p->self, kq = q->self; break;
    }
    if (kp != kq)
        return kp > kq ? -1 : 1;
    return strcmp(a->trace->funcs[*(const uint32_t *)x], a->trace->funcs[*(const uint32_t *)y]);
}

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

/* Prints the section accumulated in `a`, then resets it for the next one. */
static void print_section(summary_acc *a, const char *title, size_t top)
{
    char b1[32], b2[32];
    putchar('\n');
    put_terminal_text(title);
    printf(": %s call%s, %s in calls\n", grouped(a->calls, b1, sizeof b1),
           a->calls == 1 ? "" : "s", human_span(a->busy, b2, sizeof b2));
    qsort_r(a->touched, a->ntouched, sizeof *a->touched, cmp_funcs, a);
    size_t shown = a->ntouched < top ? a->ntouched : top;
    /* "µ" is two bytes but one column: its headers get one byte more of width */
    printf("  %11s %6s %11s %6s %11s %12s %12s  %s\n", "self ms", "self%", "total ms", "total%",
           "calls", "mean µs", "max µs", "function");
    for (size_t i = 0; i < shown; i++) {
        const func_stats *s = &a->stats[a->touched[i]];
        printf("  %11.3f %5.1f%% %11.3f %5.1f%% %11s %11.2f %11.2f  ",
               (double)s->self / (VCT_TICKS_PER_US * 1000.0), pct(s->self, a->busy),
               (double)s->total / (VCT_TICKS_PER_US * 1000.0), pct(s->total, a->busy),
               grouped(s->calls, b1, sizeof b1),
               (double)s->sum_dur / (double)s->calls / VCT_TICKS_PER_US,
               (double)s->max_dur / VCT_TICKS_PER_US);
        put_terminal_text(a->trace->funcs[a->touched[i]]);
        putchar('\n');
    }
    if (a->ntouched > shown)
        printf("  … %zu more function%s (--top N shows more)\n", a->ntouched - shown,
               a->ntouched - shown == 1 ? "" : "s");
    for (size_t i = 0; i < a->ntouched; i++)
        memset(&a->stats[a->touched[i]], 0, sizeof(func_stats));
    a->ntouched = 0;
    a->calls = 0;
    a->busy = 0;
}

/* Which threads get a table when there are more than --max-threads: the ones with the most
 * calls (a thread-per-request server has hundreds of tiny threads).  Returns a malloc'd flag
 * per thread (1 = shown), or NULL with *failed set on allocation failure; NULL and !*failed
 * when every thread fits. */
static int cmp_busiest(const void *x, const void *y, void *ctx)
{
    const vct_trace *t = ctx;
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    size_t na = t->threads[a].nevents, nb = t->threads[b].nevents;
    if (na != nb)
        return na > nb ? -1 : 1;
    return a < b ? -1 : a > b;
}

static unsigned char *pick_busiest_threads(const vct_trace *t, size_t max_threads, int *failed)
{
    *failed = 0;
    if (t->nthreads <= max_threads)
        return NULL;
    size_t *order = malloc(t->nthreads * sizeof *order);
    unsigned char *shown = calloc(t->nthreads, 1);
    if (!order || !shown) {
        free(order);
        free(shown);
        *failed = 1;
        return NULL;
    }
    for (size_t i = 0; i < t->nthreads; i++)
        order[i] = i;
    qsort_r(order, t->nthreads, sizeof *order, cmp_busiest, (void *)t);
    for (size_t i = 0; i < max_threads; i++)
        shown[order[i]] = 1;
    free(order);
    return shown;
}

static void print_header(const char *path, const vct_trace *t)
{
    char b1[32], b2[32], b3[32];
    printf("%s: %s span, %s calls, %zu thread%s", path,
           human_span(t->nevents ? t->max_end - t->min_ts : 0, b1, sizeof b1),
           grouped(t->nevents, b2, sizeof b2), t->nthreads, t->nthreads == 1 ? "" : "s");
    if (t->nprocesses > 1)
        printf(" in %" PRIu64 " processes", t->nprocesses);
    if (t->has_drops)
        printf(", %s calls dropped%s\n", grouped(t->dropped, b3, sizeof b3),
               t->dropped ? " (agent buffers were full: the trace is incomplete)" : "");
    else
        printf(", no drop count recorded\n");
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vcattach summary FILE [--top N] [--thread NAME|TID] [--sort self|total|calls]"
            " [--merged] [--max-threads N]\n"
            "Top functions of a trace (.cvf or Chrome-trace JSON) by self time, per thread.\n"
            "  --top N          functions shown per thread (default 20)\n"
            "  --thread X       only the thread named X (or with tid X)\n"
            "  --sort KEY       self (default), total (inclusive, recursion counted once), calls\n"
            "  --merged         one table for all threads together\n"
            "  --max-threads N  tables for the N threads with the most calls (default 12; 0: all)\n");
}

int cmd_summary(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"top", required_argument, NULL, 'n'},    {"thread", required_argument, NULL, 't'},
        {"sort", required_argument, NULL, 's'},   {"merged", no_argument, NULL, 'm'},
        {"max-threads", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    size_t top = 20, max_threads = 12;
    const char *thread_arg = NULL;
    enum sort_key sort = SORT_SELF;
    int merged = 0, opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "hn:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n':
        case 'T': {
            char *endp;
            unsigned long long v = strtoull(optarg, &endp, 10);
            if (!*optarg || *endp || optarg[0] == '-' || (v == 0 && opt == 'n')) {
                fprintf(stderr, "vcattach summary: %s needs a %s number, not '%s'\n",
                        opt == 'n' ? "--top" : "--max-threads",
                        opt == 'n' ? "positive" : "whole", optarg);
                return VC_EXIT_USAGE;
            }
            size_t value = v > SIZE_MAX ? SIZE_MAX : (size_t)v;
            if (opt == 'n')
                top = value;
            else
                max_threads = value ? value : SIZE_MAX;
            break;
        }
        case 't': thread_arg = optarg; break;
        case 's':
            if (!strcmp(optarg, "self"))
                sort = SORT_SELF;
            else if (!strcmp(optarg, "total"))
                sort = SORT_TOTAL;
            else if (!strcmp(optarg, "calls"))
                sort = SORT_CALLS;
            else {
                fprintf(stderr, "vcattach summary: --sort takes self, total or calls, not '%s'\n",
                        optarg);
                return VC_EXIT_USAGE;
            }
            break;
        case 'm': merged = 1; break;
        case 'h': usage(stdout); return VC_EXIT_OK;
        default:
            fprintf(stderr, "vcattach summary: unknown or incomplete option '%s' "
                            "(see vcattach summary --help)\n", argv[optind - 1]);
            return VC_EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, optind == argc ? "vcattach summary: which trace? usage: vcattach summary "
                                         "FILE.cvf [--top N] [--thread X] [--sort KEY] [--merged]\n"
                                       : "vcattach summary: one trace file at a time\n");
        return VC_EXIT_USAGE;
    }
    if (merged && thread_arg) {
        fprintf(stderr, "vcattach summary: --merged and --thread exclude each other\n");
        return VC_EXIT_USAGE;
    }
    const char *path = argv[optind];

    char err[512];
    vct_trace *t;
    if (vct_trace_load(path, &t, err, sizeof err) < 0) {
        fprintf(stderr, "vcattach summary: %s\n", err);
        return VC_EXIT_FAIL;
    }
    long only = -1;
    if (thread_arg && (only = vct_trace_find_thread(t, thread_arg)) < 0) {
        fprintf(stderr, "vcattach summary: no thread '%s' in %s; threads:", thread_arg, path);
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
        vct_trace_free(t);
        return VC_EXIT_USAGE;
    }

    summary_acc acc = {.trace = t, .sort = sort};
    unsigned char *shown = NULL; /* threads that get a table, when not all of them do */
    size_t nf = t->nfuncs ? t->nfuncs : 1;
    acc.stats = calloc(nf, sizeof *acc.stats);
    acc.active = calloc(nf, sizeof *acc.active);
    acc.touched = malloc(nf * sizeof *acc.touched);
    int rc = VC_EXIT_OK;
    if (!acc.stats || !acc.active || !acc.touched) {
        fprintf(stderr, "vcattach summary: out of memory\n");
        rc = VC_EXIT_FAIL;
        goto out;
    }
    static const vct_walk_ops ops = {on_open, on_close};
    print_header(path, t);
    size_t hidden = 0;
    uint64_t hidden_calls = 0;
    int failed = 0;
    if (!merged && only < 0)
        shown = pick_busiest_threads(t, max_threads, &failed);
    if (failed) {
        fprintf(stderr, "vcattach summary: out of memory\n");
        rc = VC_EXIT_FAIL;
        goto out;
    }
    for (size_t i = 0; i < t->nthreads; i++) {
        const vct_thread *th = &t->threads[i];
        if ((only >= 0 && (long)i != only) || (!th->nevents && only < 0))
            continue;
        if (shown && !shown[i]) {
            hidden++;
            hidden_calls += th->nevents;
            continue;
        }
        if (vct_thread_walk(th, &ops, &acc) < 0) {
            fprintf(stderr, "vcattach summary: out of memory\n");
            rc = VC_EXIT_FAIL;
            goto out;
        }
        if (!merged) {
            char label[600], title[700];
            snprintf(title, sizeof title, "%s (pid %" PRIu64 ", tid %" PRIu64 ")",
                     vct_thread_label(th, label, sizeof label), th->pid, th->tid);
            print_section(&acc, title, top);
        }
    }
    if (merged) {
        char title[64];
        snprintf(title, sizeof title, "all %zu threads merged", t->nthreads);
        print_section(&acc, title, top);
    }
    if (hidden) {
        char b1[32];
        printf("\n… %zu more thread%s with %s calls: --thread NAME shows one, --max-threads 0 all, "
               "--merged all in one table\n", hidden, hidden == 1 ? "" : "s",
               grouped(hidden_calls, b1, sizeof b1));
    }
    if (!t->nevents)
        printf("\n(no complete calls in this trace)\n");
    if (fflush(stdout) != 0) {
        fprintf(stderr, "vcattach summary: cannot write the summary to stdout\n");
        rc = VC_EXIT_FAIL;
    }
out:
    free(shown);
    free(acc.stats);
    free(acc.active);
    free(acc.touched);
    vct_trace_free(t);
    return rc;
}

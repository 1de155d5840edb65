/* cmd_requests.c — `vcattach requests FILE...`: every request of a trace, slowest first.
 *
 * Owns the command line and the printing: the first line (how many requests, how they were
 * recognised), the latency percentiles and histogram of the complete requests, then the
 * slowest ones, each with its heaviest path, top functions by self time and waiting by
 * kind, and apart from them the requests the trace's start or end cut.  What a request is
 * lives in trace/requests.[ch] (+ requests.def), its breakdown in trace/request_profile.c.
 * Percentiles here are exact (nearest rank over the requests' durations, all in memory).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attach_options.h"
#include "commands.h"
#include "histogram.h"
#include "options.h"
#include "request_profile.h"
#include "requests.h"
#include "trace_input.h"

struct requests_args {
    char *const *paths;
    size_t npaths;
    const char *entry;  /* --entry GLOB, or NULL: requests.def */
    size_t top;         /* requests listed (and functions per request's self-time line) */
    int64_t min_dur;    /* ticks: list only requests at least this long */
    uint64_t pid;       /* 0: every process */
};

#define SELF_TOP 5 /* functions on a request's self-time line */

/* ---- command line ------------------------------------------------------------------------ */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vcattach requests FILE... [--entry GLOB] [--top N] [--min-dur DUR]\n"
            "                         [--pid PID]\n"
            "Every request (unit of work) of a trace, slowest first, with where its time went.\n"
            "A request is the outermost call, on one thread, of a server's request function:\n"
            "  WSGI    gunicorn (sync, gthread) handle_request, werkzeug, wsgiref, waitress,\n"
            "          or the app itself (Flask.__call__/wsgi_app, Django's WSGIHandler, …)\n"
            "          for servers that call it from C (uWSGI, mod_wsgi)\n"
            "  ASGI    uvicorn's RequestResponseCycle.run_asgi, hypercorn, or the app\n"
            "          (Starlette, FastAPI, Django's ASGIHandler)\n"
            "  Celery  one task execution (trace_task, Task.__call__)\n"
            "(the list: trace/requests.def), or any function --entry names.  A match inside\n"
            "another is part of it.  A coroutine's slices (its resumes after each await) are one\n"
            "request.  When the trace has asyncio task markers (agents that record them), the\n"
            "task is the unit: a task whose coroutine is an entry is one request, from its\n"
            "first step to the end of its last, and the steps of the tasks it created\n"
            "(create_task, gather, TaskGroup; transitively) are its slices too, so requests\n"
            "overlapping on one event loop are told apart (its entry line names the task and\n"
            "counts the tasks it created).  Without markers, overlapping ASGI requests on\n"
            "one event loop cannot be told apart (their slices go to the latest).\n"
            "Per request: its start (seconds into the trace), duration, pid/tid; the heaviest\n"
            "path (from the entry, the callee with the largest inclusive time, down to a leaf\n"
            "or a blocking call); the top functions by self time; its waiting by kind\n"
            "(trace/waits.def, as in `vcattach summary`) and, when the trace holds the\n"
            "threads' CPU clock samples, its measured on-CPU and off-CPU time (the thread's\n"
            "clock advance over its calls, interpolated between samples).  Latency: exact p50/p90/p99/max\n"
            "(nearest rank) and a histogram of the complete requests.  Requests that were\n"
            "already running when the trace began, or still running when it stopped, are\n"
            "listed apart: their durations are not latencies.\n"
            "  --entry GLOB   the function that is one request: a glob on its name, with or\n"
            "                 without its \" (file:line)\" (e.g. 'handle', '*views.py:*')\n"
            "  -n, --top N    requests listed, slowest first (default 10)\n"
            "  --min-dur DUR  list only requests of at least DUR (50us, 20ms, 1s)\n"
            "  -p, --pid PID  only the requests of process PID\n"
            "  -h, --help     this text\n"
            "exit codes: 0 printed (also with no request found); 1 the trace cannot be read;\n"
            "2 usage error\n");
}

enum { OPT_ENTRY = 256, OPT_MIN_DUR, OPT_PID };

static const struct opt_spec requests_specs[] = {
    {"entry", 0, 1, OPT_ENTRY},
    {"top", 'n', 1, 'n'},
    {"min-dur", 0, 1, OPT_MIN_DUR},
    {"pid", 'p', 1, OPT_PID},
};

static const struct opt_command requests_command = {
    "requests", requests_specs, sizeof requests_specs / sizeof requests_specs[0], usage};

static int on_option(void *ctx, const struct opt_spec *o, const char *value, char *err,
                     size_t errlen)
{
    struct requests_args *a = ctx;
    switch (o->id) {
    case OPT_ENTRY:
        if (!*value) {
            snprintf(err, errlen, "--entry needs a glob naming a function, like 'handle*'");
            return -1;
        }
        a->entry = value;
        return 0;
    case 'n': {
        unsigned n;
        if (cli_parse_uint(value, "--top", 1, 1000000, &n, err, errlen) < 0)
            return -1;
        a->top = n;
        return 0;
    }
    case OPT_MIN_DUR: {
        uint64_t ns;
        if (cli_parse_min_dur(value, &ns, err, errlen) < 0)
            return -1;
        a->min_dur = (int64_t)(ns / 10);
        return 0;
    }
    case OPT_PID: {
        pid_t pid;
        if (cli_parse_pid(value, &pid, err, errlen) < 0)
            return -1;
        a->pid = (uint64_t)pid;
        return 0;
    }
    }
    snprintf(err, errlen, "option '--%s' is not handled", o->name);
    return -1;
}

/* 0 with *a filled; 1 (--help printed) or 2 (usage error printed): the exit code. */
static int parse_args(int argc, char **argv, struct requests_args *a)
{
    *a = (struct requests_args){.top = 10};
    int first;
    int rc = opt_parse(&requests_command, argc, argv, on_option, a, &first);
    if (rc)
        return rc;
    if (first == argc)
        return opt_usage_error("requests", "which trace? usage: vcattach requests FILE.cvf "
                                           "[--entry GLOB] [--top N] [--min-dur DUR]");
    a->paths = argv + first;
    a->npaths = (size_t)(argc - first);
    return 0;
}

/* ---- printing helpers -------------------------------------------------------------------- */

/* "53.310 ms", "812.4 µs", "2.104 s" */
static const char *human(int64_t ticks, char *buf, size_t len)
{
    double us = (double)ticks / VCT_TICKS_PER_US;
    if (us >= 1e6)
        snprintf(buf, len, "%.3f s", us / 1e6);
    else if (us >= 1e3)
        snprintf(buf, len, "%.3f ms", us / 1e3);
    else
        snprintf(buf, len, "%.1f µs", us);
    return buf;
}

/* A name from the trace on the terminal: control characters shown as '?'. */
static void put_text(const char *s)
{
    for (; *s; s++)
        putchar((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s);
}

static void put_short(const vct_trace *t, uint32_t func)
{
    char buf[512];
    put_text(vct_short_name(t->funcs[func], buf, sizeof buf));
}

static int64_t req_dur(const vct_request *q)
{
    return vct_sat_diff(q->end, q->ts);
}

/* ---- the first line ---------------------------------------------------------------------- */

/* Entry functions with their request counts, in order of first appearance. */
typedef struct entry_count {
    uint32_t func;
    size_t n;
} entry_count;

static void print_first_line(const char *label, const vct_trace *t, const vct_requests *r,
                             const unsigned char *entries, size_t complete,
                             const struct requests_args *a)
{
    printf("%s: %zu request%s", label, complete, complete == 1 ? "" : "s");
    if (a->pid)
        printf(" in process %" PRIu64, a->pid);
    if (!r->n) {
        if (a->entry) {
            printf(": no call of a function matching --entry '");
            put_text(a->entry);
            printf("'\n");
        } else
            printf(": no call of a known server's request function (WSGI, ASGI, Celery: "
                   "trace/requests.def); name yours with --entry GLOB\n");
        return;
    }
    entry_count counts[8];
    size_t ncounts = 0, other = 0;
    for (size_t i = 0; i < r->n; i++) {
        size_t k = 0;
        while (k < ncounts && counts[k].func != r->reqs[i].func)
            k++;
        if (k == ncounts && ncounts == sizeof counts / sizeof counts[0]) {
            other++;
            continue;
        }
        if (k == ncounts)
            counts[ncounts++] = (entry_count){r->reqs[i].func, 0};
        counts[k].n++;
    }
    printf(", recognised as ");
    if (a->entry) {
        printf("the outermost calls of --entry '");
        put_text(a->entry);
        putchar('\'');
    }
    for (size_t k = 0; k < ncounts; k++) {
        const char *name = t->funcs[counts[k].func], *server = vct_req_server_of(name);
        printf("%s", k ? ", " : a->entry ? ": " : "");
        if (!a->entry)
            printf("%s ", vct_req_kind_name((enum vct_req_kind)(entries[counts[k].func] - 1)));
        put_short(t, counts[k].func);
        if (server)
            printf(" (%s)", server);
        printf(" ×%zu", counts[k].n);
    }
    if (other)
        printf(", … ×%zu", other);
    if (r->n > complete)
        printf("; %zu more cut by the trace's start or end, listed apart", r->n - complete);
    putchar('\n');
}

/* ---- latency ----------------------------------------------------------------------------- */

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* 1-2-5 bucket edges in ticks: 10 µs, 20 µs, 50 µs, 100 µs, … */
static int64_t edge(int i)
{
    static const int64_t m[3] = {1, 2, 5};
    int64_t v = 1000 * m[i % 3]; /* 10 µs */
    for (int k = 0; k < i / 3 && v < INT64_MAX / 10; k++)
        v *= 10;
    return v;
}

static int bucket_index(int64_t d)
{
    int i = 0;
    while (i < 60 && d > edge(i))
        i++;
    return i;
}

/* s right- (right) or left-aligned in `width` columns; "µ" is two bytes, one column. */
static void put_padded(const char *s, int width, int right)
{
    int cols = 0;
    for (const char *p = s; *p; p++)
        cols += ((unsigned char)*p & 0xC0) != 0x80;
    for (int i = cols; right && i < width; i++)
        putchar(' ');
    fputs(s, stdout);
    for (int i = cols; !right && i < width; i++)
        putchar(' ');
}

static void print_histogram(const int64_t *sorted, size_t n)
{
    size_t counts[61] = {0}, most = 0;
    for (size_t i = 0; i < n; i++)
        counts[bucket_index(sorted[i])]++;
    int lo = bucket_index(sorted[0]), hi = bucket_index(sorted[n - 1]);
    for (int b = lo; b <= hi; b++)
        most = counts[b] > most ? counts[b] : most;
    for (int b = lo; b <= hi; b++) {
        char e1[32], e2[32];
        int bar = (int)((counts[b] * 40 + most - 1) / most);
        put_padded(b ? human(edge(b - 1), e1, sizeof e1) : "0", 12, 1);
        printf(" – ");
        put_padded(human(edge(b), e2, sizeof e2), 11, 0);
        putchar(' ');
        for (int k = 0; k < bar; k++)
            printf("█");
        printf("%s%zu\n", bar ? " " : "", counts[b]);
    }
}

/* The latency line and histogram of the complete requests. */
static int print_latency(const vct_requests *r, size_t complete)
{
    if (!complete)
        return 0;
    int64_t *d = malloc(complete * sizeof *d);
    if (!d)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++)
        if (!r->reqs[i].cut)
            d[n++] = req_dur(&r->reqs[i]);
    qsort(d, n, sizeof *d, cmp_i64);
    char b1[32], b2[32], b3[32], b4[32];
    printf("\nlatency of the %zu complete request%s (exact, nearest rank): p50 %s, p90 %s, "
           "p99 %s, max %s\n", n, n == 1 ? "" : "s",
           human(vct_quantile_sorted(d, n, 0.50), b1, sizeof b1),
           human(vct_quantile_sorted(d, n, 0.90), b2, sizeof b2),
           human(vct_quantile_sorted(d, n, 0.99), b3, sizeof b3), human(d[n - 1], b4, sizeof b4));
    print_histogram(d, n);
    free(d);
    return 0;
}

/* ---- one request ------------------------------------------------------------------------- */

static void print_path(const vct_trace *t, const vct_req_profile *p)
{
    char b[32];
    printf("      heaviest path: ");
    for (size_t i = 0; i < p->npath; i++) {
        if (i)
            printf(" → ");
        put_short(t, p->path[i].func);
        printf(" %s", human(p->path[i].incl, b, sizeof b));
        enum vct_wait_kind kind = vct_wait_kind_of(t->funcs[p->path[i].func]);
        if (kind != VCT_WAIT_NONE)
            printf(" [%s]", vct_wait_kind_name(kind));
    }
    putchar('\n');
}

static void print_self_and_waits(const vct_trace *t, const vct_req_profile *p)
{
    char b[32], b2[32], b3[32];
    printf("      self time: ");
    for (size_t i = 0; i < p->ntop; i++) {
        printf("%s", i ? ", " : "");
        put_short(t, p->top[i].func);
        printf(" %s", human(p->top[i].incl, b, sizeof b));
    }
    printf("%s\n", p->ntop ? "" : "(none)");
    printf("      waiting: %s of %s in calls", human(p->waiting, b, sizeof b),
           human(p->busy, b2, sizeof b2));
    const char *sep = ": ";
    int shown[VCT_WAIT_NKINDS] = {0};
    for (;;) { /* kinds by time waited, most first */
        int best = -1;
        for (int k = VCT_WAIT_NONE + 1; k < VCT_WAIT_NKINDS; k++)
            if (!shown[k] && p->wait[k] > 0 && (best < 0 || p->wait[k] > p->wait[best]))
                best = k;
        if (best < 0)
            break;
        shown[best] = 1;
        printf("%s%s %s", sep, vct_wait_kind_name((enum vct_wait_kind)best),
               human(p->wait[best], b, sizeof b));
        sep = ", ";
    }
    if (p->suspended > 0)
        printf("; suspended (awaiting) %s between its slices", human(p->suspended, b, sizeof b));
    putchar('\n');
    if (p->measured && p->cpu_seen == 0) /* a thread shorter-lived than a sample period */
        printf("      measured: not sampled (its thread's CPU clock has no sample around it)\n");
    else if (p->measured) /* the thread's CPU clock over the request's slices (trace/cpu.h) */
        printf("      measured: %s on-CPU, %s off-CPU of %s in calls%s\n",
               human(p->on_cpu, b, sizeof b), human(p->cpu_seen - p->on_cpu, b2, sizeof b2),
               human(p->busy, b3, sizeof b3),
               p->cpu_seen < p->busy ? " (part of it not sampled)" : "");
}

static const char *cut_text(unsigned cut)
{
    if (cut == (VCT_REQ_CUT_START | VCT_REQ_CUT_END))
        return "began before the trace and ran past its end";
    return cut & VCT_REQ_CUT_START ? "began before the trace"
                                   : "still running when the trace stopped";
}

/* One request's block.  rank: 1-based, 0 for a cut one.  0, or -1 (memory). */
static int print_request(vct_req_profiler *pr, const vct_requests *r, const vct_request *q,
                         size_t rank)
{
    const vct_trace *t = pr->trace;
    const vct_thread *th = &t->threads[q->thread];
    char b1[32], label[600];
    vct_req_profile prof;
    if (vct_req_profile_compute(pr, r, q, SELF_TOP, &prof) < 0)
        return -1;
    if (rank)
        printf("  #%-3zu %s", rank, human(req_dur(q), b1, sizeof b1));
    else
        printf("  %s+ (%s)", human(req_dur(q), b1, sizeof b1), cut_text(q->cut));
    printf("  at %.6f s  pid %" PRIu64 " tid %" PRIu64 " (", (double)(q->ts - t->min_ts) / 1e8,
           th->pid, th->tid);
    put_text(vct_thread_label(th, label, sizeof label));
    printf(")\n      ");
    put_text(t->funcs[q->func]);
    if (q->nslices > 1)
        printf("  (%zu slices: a coroutine%s", q->nslices, q->task_id ? "; " : ")");
    else if (q->task_id)
        printf("  (");
    if (q->task_id) { /* by asyncio task (trace/tasks.h) */
        printf("asyncio task ");
        if (q->task_name)
            put_text(q->task_name);
        else
            printf("Task-%" PRIu32, q->task_id);
        if (q->ntasks > 1)
            printf(" + %zu task%s it created", q->ntasks - 1, q->ntasks == 2 ? "" : "s");
        putchar(')');
    }
    putchar('\n');
    print_path(t, &prof);
    print_self_and_waits(t, &prof);
    vct_req_profile_free(&prof);
    return 0;
}

/* ---- the lists --------------------------------------------------------------------------- */

static int cmp_slowest(const void *x, const void *y, void *ctx)
{
    const vct_requests *r = ctx;
    const vct_request *a = &r->reqs[*(const size_t *)x], *b = &r->reqs[*(const size_t *)y];
    int64_t da = req_dur(a), db = req_dur(b);
    if (da != db)
        return da > db ? -1 : 1;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    return *(const size_t *)x < *(const size_t *)y ? -1 : 1;
}

/* The complete (cut = 0) or cut (cut = 1) requests, slowest first, --min-dur and --top
 * applied.  0, or -1 (memory). */
static int print_list(vct_req_profiler *pr, const vct_requests *r, int cut,
                      const struct requests_args *a)
{
    size_t *order = malloc((r->n ? r->n : 1) * sizeof *order), n = 0, listed = 0;
    if (!order)
        return -1;
    for (size_t i = 0; i < r->n; i++)
        if (!r->reqs[i].cut == !cut && req_dur(&r->reqs[i]) >= a->min_dur)
            order[n++] = i;
    qsort_r(order, n, sizeof *order, cmp_slowest, (void *)r);
    char b[32];
    if (cut && n)
        printf("\ncut by the trace's start or end (%zu; only the part the trace saw):\n", n);
    else if (!cut && n)
        printf("\nslowest %zu of %zu%s%s:\n", n < a->top ? n : a->top, n,
               a->min_dur ? " of at least " : "", a->min_dur ? human(a->min_dur, b, sizeof b) : "");
    int rc = 0;
    for (size_t i = 0; i < n && listed < a->top && !rc; i++, listed++)
        rc = print_request(pr, r, &r->reqs[order[i]], cut ? 0 : i + 1);
    if (!rc && n > listed)
        printf("  … %zu more (--top N lists more)\n", n - listed);
    free(order);
    return rc;
}

/* Everything after the trace is loaded.  0, or -1 (memory). */
static int report(const char *label, const vct_trace *t, const struct requests_args *a)
{
    unsigned char *entries = vct_requests_entries(t, a->entry);
    vct_requests r = {0};
    vct_req_profiler pr = {0};
    int rc = entries && vct_requests_find(t, entries, a->pid, &r) == 0 &&
                     vct_req_profiler_init(&pr, t) == 0 ? 0 : -1;
    size_t complete = 0;
    for (size_t i = 0; !rc && i < r.n; i++)
        complete += !r.reqs[i].cut;
    if (!rc) {
        print_first_line(label, t, &r, entries, complete, a);
        rc = print_latency(&r, complete);
    }
    if (!rc)
        rc = print_list(&pr, &r, 0, a);
    if (!rc)
        rc = print_list(&pr, &r, 1, a);
    vct_req_profiler_free(&pr);
    vct_requests_free(&r);
    free(entries);
    return rc;
}

int cmd_requests(int argc, char **argv)
{
    struct requests_args a;
    int prc = parse_args(argc, argv, &a);
    if (prc)
        return prc == 1 ? VC_EXIT_OK : VC_EXIT_USAGE;
    vct_trace *t;
    char label[4096];
    if (cli_load_trace("requests", a.paths, a.npaths, 0, &t, label, sizeof label) < 0)
        return VC_EXIT_FAIL;
    int rc = VC_EXIT_OK;
    if (a.pid && !cli_trace_has_pid(t, a.pid)) {
        fprintf(stderr, "vcattach requests: no process %" PRIu64 " in %s (`vcattach summary` "
                        "lists the processes of a trace)\n", a.pid, label);
        rc = VC_EXIT_USAGE;
    } else if (report(label, t, &a) < 0) {
        fprintf(stderr, "vcattach requests: out of memory\n");
        rc = VC_EXIT_FAIL;
    } else if (fflush(stdout) != 0) {
        fprintf(stderr, "vcattach requests: cannot write to stdout\n");
        rc = VC_EXIT_FAIL;
    }
    vct_trace_free(t);
    return rc;
}

/* requests_report.c — `vcattach requests`'s report (vctrace.h part 3): every request of a
 * trace, slowest first, as text.
 *
 * Owns the printing: the first line (how many requests, how they were recognised), the
 * latency percentiles and histogram of the complete requests, then the slowest ones, each
 * with its heaviest path, top functions by self time and waiting by kind, and apart from them
 * the requests the trace's start or end cut.  What a request is lives in requests.[ch] (+
 * requests.def), its breakdown in request_profile.c.  Percentiles here are exact (nearest
 * rank over the requests' durations, all in memory).  Every name of the trace goes through
 * the terminal sanitizer (common/term.h), on one row.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vctrace.h"
#include "histogram.h"
#include "human.h"
#include "input.h"
#include "load.h"
#include "pyname.h"
#include "request_profile.h"
#include "requests.h"
#include "term.h"

#define SELF_TOP 5 /* functions on a request's self-time line */

typedef struct requests_report {
    const vct_requests_options *o;
    FILE *out;
    const vct_trace *t;
    const char *name;          /* the input's, for the first line */
    const unsigned char *entries;
    vct_requests r;
    vct_req_profiler pr;
    size_t complete;           /* requests the trace did not cut */
} requests_report;

/* "53.310 ms", "812.4 µs", "2.104 s" */
static const char *human(int64_t ticks, char *buf, size_t len)
{
    return vc_human_us((double)ticks / VCT_TICKS_PER_US, 1, buf, len);
}

static void put_short(const requests_report *rr, uint32_t func)
{
    char buf[512];
    vc_term_fputs(rr->out, vct_pyname_short(rr->t->funcs[func], buf, sizeof buf), 0);
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

/* No request at all: say what was looked for. */
static void print_none(const requests_report *rr)
{
    if (rr->o->entry) {
        vc_term_printf(rr->out, ": no call of a function matching --entry '");
        vc_term_fputs(rr->out, rr->o->entry, 0);
        vc_term_printf(rr->out, "'\n");
    } else
        vc_term_printf(rr->out, ": no call of a known server's request function (WSGI, ASGI, "
                       "Celery: trace/requests.def); name yours with --entry GLOB\n");
}

/* The entry functions (the first 8; *other: the requests of the rest), in order of first
 * appearance, with their counts.  Returns how many. */
static size_t count_entries(const vct_requests *r, entry_count *counts, size_t cap,
                            size_t *other)
{
    size_t ncounts = 0;
    *other = 0;
    for (size_t i = 0; i < r->n; i++) {
        size_t k = 0;
        while (k < ncounts && counts[k].func != r->reqs[i].func)
            k++;
        if (k == ncounts && ncounts == cap) {
            (*other)++;
            continue;
        }
        if (k == ncounts)
            counts[ncounts++] = (entry_count){r->reqs[i].func, 0};
        counts[k].n++;
    }
    return ncounts;
}

static void print_first_line(const requests_report *rr)
{
    const vct_requests_options *o = rr->o;
    FILE *out = rr->out;
    vc_term_printf(out, "%s: %zu request%s", rr->name, rr->complete,
                   rr->complete == 1 ? "" : "s");
    if (o->pid)
        vc_term_printf(out, " in process %" PRIu64, o->pid);
    if (!rr->r.n) {
        print_none(rr);
        return;
    }
    entry_count counts[8];
    size_t other, ncounts = count_entries(&rr->r, counts, 8, &other);
    vc_term_printf(out, ", recognised as ");
    if (o->entry) {
        vc_term_printf(out, "the outermost calls of --entry '");
        vc_term_fputs(out, o->entry, 0);
        fputc('\'', out);
    }
    for (size_t k = 0; k < ncounts; k++) {
        const char *server = vct_req_server_of(rr->t->funcs[counts[k].func]);
        vc_term_printf(out, "%s", k ? ", " : o->entry ? ": " : "");
        if (!o->entry)
            vc_term_printf(out, "%s ", vct_req_kind_name(
                                           (enum vct_req_kind)(rr->entries[counts[k].func] - 1)));
        put_short(rr, counts[k].func);
        if (server)
            vc_term_printf(out, " (%s)", server);
        vc_term_printf(out, " ×%zu", counts[k].n);
    }
    if (other)
        vc_term_printf(out, ", … ×%zu", other);
    if (rr->r.n > rr->complete)
        vc_term_printf(out, "; %zu more cut by the trace's start or end, listed apart",
                       rr->r.n - rr->complete);
    fputc('\n', out);
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
static void put_padded(FILE *out, const char *s, int width, int right)
{
    int cols = 0;
    for (const char *p = s; *p; p++)
        cols += ((unsigned char)*p & 0xC0) != 0x80;
    for (int i = cols; right && i < width; i++)
        fputc(' ', out);
    fputs(s, out);
    for (int i = cols; !right && i < width; i++)
        fputc(' ', out);
}

static void print_histogram(FILE *out, const int64_t *sorted, size_t n)
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
        put_padded(out, b ? human(edge(b - 1), e1, sizeof e1) : "0", 12, 1);
        vc_term_printf(out, " – ");
        put_padded(out, human(edge(b), e2, sizeof e2), 11, 0);
        fputc(' ', out);
        for (int k = 0; k < bar; k++)
            vc_term_printf(out, "█");
        vc_term_printf(out, "%s%zu\n", bar ? " " : "", counts[b]);
    }
}

/* The latency line and histogram of the complete requests.  0, or -1 (memory). */
static int print_latency(const requests_report *rr)
{
    if (!rr->complete)
        return 0;
    int64_t *d = malloc(rr->complete * sizeof *d);
    if (!d)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < rr->r.n; i++)
        if (!rr->r.reqs[i].cut)
            d[n++] = req_dur(&rr->r.reqs[i]);
    qsort(d, n, sizeof *d, cmp_i64);
    char b1[32], b2[32], b3[32], b4[32];
    vc_term_printf(rr->out, "\nlatency of the %zu complete request%s (exact, nearest rank): "
                   "p50 %s, p90 %s, p99 %s, max %s\n", n, n == 1 ? "" : "s",
                   human(vct_quantile_sorted(d, n, 0.50), b1, sizeof b1),
                   human(vct_quantile_sorted(d, n, 0.90), b2, sizeof b2),
                   human(vct_quantile_sorted(d, n, 0.99), b3, sizeof b3),
                   human(d[n - 1], b4, sizeof b4));
    print_histogram(rr->out, d, n);
    free(d);
    return 0;
}

/* ---- one request ------------------------------------------------------------------------- */

static void print_step(const requests_report *rr, const vct_req_step *st)
{
    char b[32];
    put_short(rr, st->func);
    vc_term_printf(rr->out, " %s", human(st->incl, b, sizeof b));
    enum vct_wait_kind kind = vct_wait_kind_of(rr->t->funcs[st->func]);
    if (kind != VCT_WAIT_NONE)
        vc_term_printf(rr->out, " [%s]", vct_wait_kind_name(kind));
}

/* How often the block of k frames at path[at] repeats back to back (1: not). */
static size_t repeats(const vct_req_profile *p, size_t at, size_t k)
{
    size_t n = 1;
    while (at + (n + 1) * k <= p->npath) {
        size_t j = 0;
        while (j < k && p->path[at + n * k + j].func == p->path[at + j].func)
            j++;
        if (j < k)
            break;
        n++;
    }
    return n;
}

/* Middleware, decorators and recursion repeat a few frames many times (a Django stack holds
 * `inner → MiddlewareMixin.__call__` once per middleware): a block of up to FOLD_MAX frames
 * repeated back to back is printed once, with its first times, as "(a → b) ×7". */
#define FOLD_MAX 8

static void print_path(const requests_report *rr, const vct_req_profile *p)
{
    vc_term_printf(rr->out, "      heaviest path: ");
    for (size_t i = 0; i < p->npath;) {
        if (i)
            vc_term_printf(rr->out, " → ");
        size_t best_k = 1, best_n = 1;
        for (size_t k = 1; k <= FOLD_MAX && i + 2 * k <= p->npath; k++) {
            size_t n = repeats(p, i, k);
            if (n > 1 && n * k > best_n * best_k) {
                best_k = k;
                best_n = n;
            }
        }
        if (best_n == 1) {
            print_step(rr, &p->path[i++]);
            continue;
        }
        fputc('(', rr->out);
        for (size_t j = 0; j < best_k; j++) {
            if (j)
                vc_term_printf(rr->out, " → ");
            print_step(rr, &p->path[i + j]);
        }
        vc_term_printf(rr->out, ") ×%zu", best_n);
        i += best_k * best_n;
    }
    fputc('\n', rr->out);
}

/* ": lock 2.0 ms, sleep 1.0 ms": the kinds by time waited, most first. */
static void print_wait_kinds(FILE *out, const vct_req_profile *p)
{
    char b[32];
    const char *sep = ": ";
    int shown[VCT_WAIT_NKINDS] = {0};
    for (;;) {
        int best = -1;
        for (int k = VCT_WAIT_NONE + 1; k < VCT_WAIT_NKINDS; k++)
            if (!shown[k] && p->wait[k] > 0 && (best < 0 || p->wait[k] > p->wait[best]))
                best = k;
        if (best < 0)
            break;
        shown[best] = 1;
        vc_term_printf(out, "%s%s %s", sep, vct_wait_kind_name((enum vct_wait_kind)best),
                       human(p->wait[best], b, sizeof b));
        sep = ", ";
    }
}

static void print_self_and_waits(const requests_report *rr, const vct_req_profile *p)
{
    FILE *out = rr->out;
    char b[32], b2[32], b3[32];
    vc_term_printf(out, "      self time: ");
    for (size_t i = 0; i < p->ntop; i++) {
        vc_term_printf(out, "%s", i ? ", " : "");
        put_short(rr, p->top[i].func);
        vc_term_printf(out, " %s", human(p->top[i].incl, b, sizeof b));
    }
    vc_term_printf(out, "%s\n", p->ntop ? "" : "(none)");
    vc_term_printf(out, "      waiting: %s of %s in calls", human(p->waiting, b, sizeof b),
                   human(p->busy, b2, sizeof b2));
    print_wait_kinds(out, p);
    if (p->suspended > 0)
        vc_term_printf(out, "; suspended (awaiting) %s between its slices",
                       human(p->suspended, b, sizeof b));
    fputc('\n', out);
    if (p->measured && p->cpu_seen == 0) /* a thread shorter-lived than a sample period */
        vc_term_printf(out, "      measured: not sampled (its thread's CPU clock has no "
                       "sample around it)\n");
    else if (p->measured) /* the thread's CPU clock over the request's slices (cpu.h) */
        vc_term_printf(out, "      measured: %s on-CPU, %s off-CPU of %s in calls%s\n",
                       human(p->on_cpu, b, sizeof b),
                       human(p->cpu_seen - p->on_cpu, b2, sizeof b2),
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

/* The entry's line: its function, its slices, its asyncio task (tasks.h). */
static void print_entry(const requests_report *rr, const vct_request *q)
{
    FILE *out = rr->out;
    vc_term_printf(out, "      ");
    vc_term_fputs(out, rr->t->funcs[q->func], 0);
    if (q->nslices > 1)
        vc_term_printf(out, "  (%zu slices: a coroutine%s", q->nslices, q->task_id ? "; " : ")");
    else if (q->task_id)
        vc_term_printf(out, "  (");
    if (q->task_id) {
        vc_term_printf(out, "asyncio task ");
        if (q->task_name)
            vc_term_fputs(out, q->task_name, 0);
        else
            vc_term_printf(out, "Task-%" PRIu32, q->task_id);
        if (q->ntasks > 1)
            vc_term_printf(out, " + %zu task%s it created", q->ntasks - 1,
                           q->ntasks == 2 ? "" : "s");
        fputc(')', out);
    }
    fputc('\n', out);
}

/* One request's block.  rank: 1-based, 0 for a cut one.  0, or -1 (memory). */
static int print_request(requests_report *rr, const vct_request *q, size_t rank)
{
    const vct_thread *th = &rr->t->threads[q->thread];
    char b1[32], label[600];
    vct_req_profile prof;
    if (vct_req_profile_compute(&rr->pr, &rr->r, q, SELF_TOP, &prof) < 0)
        return -1;
    if (rank)
        vc_term_printf(rr->out, "  #%-3zu %s", rank, human(req_dur(q), b1, sizeof b1));
    else
        vc_term_printf(rr->out, "  %s+ (%s)", human(req_dur(q), b1, sizeof b1),
                       cut_text(q->cut));
    vc_term_printf(rr->out, "  at %.6f s  pid %" PRIu64 " tid %" PRIu64 " (",
                   (double)(q->ts - rr->t->min_ts) / 1e8, th->pid, th->tid);
    vc_term_fputs(rr->out, vct_thread_label(th, label, sizeof label), 0);
    vc_term_printf(rr->out, ")\n");
    print_entry(rr, q);
    /* where its time concentrates (self, waits) first, then the path that leads there */
    print_self_and_waits(rr, &prof);
    print_path(rr, &prof);
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

/* The complete (cut = 0) or cut (cut = 1) requests, slowest first, min_dur and top applied.
 * 0, or -1 (memory). */
static int print_list(requests_report *rr, int cut)
{
    const vct_requests_options *o = rr->o;
    const vct_requests *r = &rr->r;
    size_t *order = malloc((r->n ? r->n : 1) * sizeof *order), n = 0, listed = 0;
    if (!order)
        return -1;
    for (size_t i = 0; i < r->n; i++)
        if (!r->reqs[i].cut == !cut && req_dur(&r->reqs[i]) >= o->min_dur)
            order[n++] = i;
    qsort_r(order, n, sizeof *order, cmp_slowest, (void *)r);
    char b[32];
    if (cut && n)
        vc_term_printf(rr->out, "\ncut by the trace's start or end (%zu; only the part the "
                       "trace saw):\n", n);
    else if (!cut && n)
        vc_term_printf(rr->out, "\nslowest %zu of %zu%s%s:\n", n < o->top ? n : o->top, n,
                       o->min_dur ? " of at least " : "",
                       o->min_dur ? human(o->min_dur, b, sizeof b) : "");
    int rc = 0;
    for (size_t i = 0; i < n && listed < o->top && !rc; i++, listed++)
        rc = print_request(rr, &r->reqs[order[i]], cut ? 0 : i + 1);
    if (!rc && n > listed)
        vc_term_printf(rr->out, "  … %zu more (--top N lists more)\n", n - listed);
    free(order);
    return rc;
}

/* Everything after the trace is loaded.  0, or -1 (memory). */
static int print_report(requests_report *rr)
{
    unsigned char *entries = vct_requests_entries(rr->t, rr->o->entry);
    rr->entries = entries;
    int rc = entries && vct_requests_find(rr->t, entries, rr->o->pid, &rr->r) == 0 &&
                     vct_req_profiler_init(&rr->pr, rr->t) == 0 ? 0 : -1;
    for (size_t i = 0; !rc && i < rr->r.n; i++)
        rr->complete += !rr->r.reqs[i].cut;
    if (!rc) {
        print_first_line(rr);
        rc = print_latency(rr);
    }
    if (!rc)
        rc = print_list(rr, 0);
    if (!rc)
        rc = print_list(rr, 1);
    vct_req_profiler_free(&rr->pr);
    vct_requests_free(&rr->r);
    free(entries);
    return rc;
}

int vct_requests_report(const vct_requests_options *o, FILE *out, char *err, size_t errlen)
{
    vct_input in;
    vct_trace *t;
    if (vct_trace_open(o->paths, o->npaths, 0, &in, &t, err, errlen) < 0)
        return VCT_FAILED;
    requests_report rr = {.o = o, .out = out, .t = t, .name = vct_input_name(&in)};
    int rc = VCT_FAILED;
    if (o->pid && !vct_trace_has_pid(t, o->pid)) {
        snprintf(err, errlen, "no process %" PRIu64 " in %s (`vcattach summary` lists the "
                 "processes of a trace)", o->pid, rr.name);
        rc = VCT_REFUSED;
    } else if (print_report(&rr) < 0)
        snprintf(err, errlen, "out of memory");
    else if (fflush(out) != 0)
        snprintf(err, errlen, "cannot write to stdout");
    else
        rc = VCT_OK;
    vct_trace_free(t);
    vct_input_close(&in);
    return rc;
}

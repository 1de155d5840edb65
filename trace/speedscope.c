/* speedscope.c — a trace as speedscope's own file format.
 *
 * speedscope reads Chrome traces too, but its own format states the nesting explicitly
 * ("evented" profiles of open/close events), is smaller, and loads without the heuristics
 * its Chrome importer applies to overlapping events.  One profile per thread; frames are the
 * trace's interned functions, with file and line split out of VizTracer's
 * "qualname (path:line)" names so speedscope can show where a function lives.
 * Events come from the shared nesting walk, so every O has its C, children close before their
 * parent, and `at` never goes backwards — what speedscope's importer requires.
 * Weighed by work (`--working`), each thread is a "sampled" profile instead: its distinct
 * stacks (vct_fold_stacks, collapsed.h) weighted by their self on-CPU µs, which speedscope's
 * left-heavy and sandwich views then rank by work, not by wall time.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "version.h"
#include "collapsed.h"
#include "speedscope.h"
#include "pyname.h"

/* Writes s as a JSON string body (no quotes).  Invalid UTF-8 bytes (a name cut by a broken
 * writer) become U+FFFD so the output always parses. */
static void put_json_chars(FILE *out, const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str, *e = s + len;
    while (s < e) {
        unsigned char c = *s;
        if (c == '"' || c == '\\') {
            fputc('\\', out);
            fputc(c, out);
            s++;
        } else if (c < 0x20) {
            fprintf(out, "\\u%04x", c);
            s++;
        } else if (c < 0x80) {
            fputc(c, out);
            s++;
        } else {
            /* length of a well-formed sequence starting here, or 0 */
            size_t n = 0;
            if (c >= 0xC2 && c <= 0xDF)
                n = 2;
            else if (c >= 0xE0 && c <= 0xEF)
                n = 3;
            else if (c >= 0xF0 && c <= 0xF4)
                n = 4;
            if (n && (size_t)(e - s) >= n) {
                unsigned char c1 = s[1];
                int ok = (c1 & 0xC0) == 0x80;
                if (c == 0xE0 && c1 < 0xA0)
                    ok = 0; /* overlong */
                if (c == 0xED && c1 > 0x9F)
                    ok = 0; /* surrogate */
                if (c == 0xF0 && c1 < 0x90)
                    ok = 0; /* overlong */
                if (c == 0xF4 && c1 > 0x8F)
                    ok = 0; /* > U+10FFFF */
                for (size_t k = 2; k < n && ok; k++)
                    ok = (s[k] & 0xC0) == 0x80;
                if (!ok)
                    n = 0;
            } else {
                n = 0;
            }
            if (n) {
                fwrite(s, 1, n, out);
                s += n;
            } else {
                fputs("\\ufffd", out);
                s++;
            }
        }
    }
}

static void put_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    put_json_chars(out, s, strlen(s));
    fputc('"', out);
}

/* ticks (10 ns) as decimal microseconds, exactly: 123456 -> 1234.56 */
static void put_us(FILE *out, int64_t ticks)
{
    uint64_t mag = ticks < 0 ? (uint64_t)0 - (uint64_t)ticks : (uint64_t)ticks;
    fprintf(out, "%s%" PRIu64, ticks < 0 ? "-" : "", mag / VCT_TICKS_PER_US);
    if (mag % VCT_TICKS_PER_US)
        fprintf(out, ".%02" PRIu64, mag % VCT_TICKS_PER_US);
}

/* One frame object.  "f (path/x.py:12)" -> name "f (path/x.py:12)", file, line 12. */
static void put_frame(FILE *out, const char *name)
{
    fputs("{\"name\":", out);
    put_json_string(out, name);
    vct_pyname py;
    if (vct_pyname_split(name, &py) && py.path_len && py.line >= 0) {
        fputs(",\"file\":\"", out);
        put_json_chars(out, py.path, py.path_len);
        fprintf(out, "\",\"line\":%ld", py.line);
    }
    fputc('}', out);
}

typedef struct speedscope_ctx {
    FILE *out;
    int first;
} speedscope_ctx;

static void put_event(speedscope_ctx *c, char type, uint32_t frame, int64_t at)
{
    fprintf(c->out, "%s{\"type\":\"%c\",\"frame\":%" PRIu32 ",\"at\":", c->first ? "" : ",",
            type, frame);
    put_us(c->out, at);
    fputc('}', c->out);
    c->first = 0;
}

static void on_open(void *ctx, const vct_event *ev, int64_t start, int64_t end, size_t depth)
{
    put_event(ctx, 'O', ev->func, start);
}

static void on_close(void *ctx, const vct_event *ev, int64_t start, int64_t end, int64_t self,
                     size_t depth)
{
    put_event(ctx, 'C', ev->func, end);
}

/* --working: one thread's stacks as the samples of a "sampled" profile; their weights are
 * kept to follow them. */
typedef struct sampled_ctx {
    FILE *out;
    int64_t *weights;
    size_t n, cap;
    int64_t total;
} sampled_ctx;

static int put_sample(void *ctx, const uint32_t *funcs, size_t n, int64_t us)
{
    sampled_ctx *c = ctx;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        int64_t *w = realloc(c->weights, cap * sizeof *w);
        if (w == NULL)
            return -1;
        c->weights = w;
        c->cap = cap;
    }
    c->weights[c->n++] = us;
    c->total = vct_sat_add(c->total, us);
    fputs(c->n > 1 ? ",[" : "[", c->out);
    for (size_t k = 0; k < n; k++)
        fprintf(c->out, "%s%" PRIu32, k ? "," : "", funcs[k]);
    fputc(']', c->out);
    return ferror(c->out) ? -1 : 0;
}

/* The samples and weights of th's profile (after its name and unit). */
static int put_sampled(const vct_trace *t, const vct_thread *th, FILE *out, char *err,
                       size_t errlen)
{
    sampled_ctx c = {out, NULL, 0, 0, 0};
    fputs(",\"samples\":[", out);
    int rc = vct_fold_stacks(t, th, 1, put_sample, &c, err, errlen);
    if (rc == 0) {
        fputs("],\"weights\":[", out);
        for (size_t k = 0; k < c.n; k++)
            fprintf(out, "%s%" PRId64, k ? "," : "", c.weights[k]);
        fprintf(out, "],\"startValue\":0,\"endValue\":%" PRId64 "}", c.total);
    }
    free(c.weights);
    return rc;
}

int export_speedscope(const vct_trace *t, const char *name, int working, FILE *out, char *err,
                      size_t errlen)
{
    static const vct_walk_ops ops = {on_open, on_close};
    /* open on the busiest thread, the one a reader most likely wants first */
    size_t active = 0, busiest = 0, nprofiles = 0;
    for (size_t i = 0; i < t->nthreads; i++) {
        if (!t->threads[i].nevents)
            continue;
        if (t->threads[i].nevents > busiest) {
            busiest = t->threads[i].nevents;
            active = nprofiles;
        }
        nprofiles++;
    }
    fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",", out);
    fputs("\"exporter\":\"vcattach " VC_VERSION_STRING "\",\"name\":", out);
    put_json_string(out, name ? name : "vcattach trace");
    fprintf(out, ",\"activeProfileIndex\":%zu,\n\"shared\":{\"frames\":[", active);
    for (size_t f = 0; f < t->nfuncs; f++) {
        if (f)
            fputc(',', out);
        put_frame(out, t->funcs[f]);
        fputc('\n', out);
    }
    fputs("]},\n\"profiles\":[", out);
    int first_profile = 1;
    for (size_t i = 0; i < t->nthreads; i++) {
        const vct_thread *th = &t->threads[i];
        if (!th->nevents)
            continue;
        int64_t start = th->events[0].ts, end = start;
        for (size_t k = 0; k < th->nevents; k++)
            if (th->events[k].end > end)
                end = th->events[k].end;
        char label[600], title[700];
        if (t->nprocesses > 1)
            snprintf(title, sizeof title, "%s (pid %" PRIu64 ", tid %" PRIu64 ")",
                     vct_thread_label(th, label, sizeof label), th->pid, th->tid);
        else
            snprintf(title, sizeof title, "%s (tid %" PRIu64 ")",
                     vct_thread_label(th, label, sizeof label), th->tid);
        fputs(first_profile ? "\n{" : ",\n{", out);
        first_profile = 0;
        fputs(working ? "\"type\":\"sampled\",\"name\":" : "\"type\":\"evented\",\"name\":",
              out);
        put_json_string(out, title);
        if (working) {
            fputs(",\"unit\":\"microseconds\"", out);
            if (put_sampled(t, th, out, err, errlen) < 0)
                return -1;
            continue;
        }
        fputs(",\"unit\":\"microseconds\",\"startValue\":", out);
        put_us(out, start);
        fputs(",\"endValue\":", out);
        put_us(out, end);
        fputs(",\"events\":[", out);
        speedscope_ctx c = {out, 1};
        if (vct_thread_walk(th, &ops, &c) < 0) {
            snprintf(err, errlen, "out of memory while exporting thread %" PRIu64, th->tid);
            return -1;
        }
        fputs("]}", out);
    }
    fputs("]}\n", out);
    if (fflush(out) != 0 || ferror(out)) {
        snprintf(err, errlen, "write error while writing the speedscope file");
        return -1;
    }
    return 0;
}

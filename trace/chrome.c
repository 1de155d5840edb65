/* chrome.c — .cvf → Chrome trace event JSON, as VizTracer's decompressor returns it:
 *     {"traceEvents": [M names, FEE groups, counters, other events], "file_info": ...}
 * with FEE events laid out as ph,name,cat("FEE"),pid,tid,ts,dur[,args] and counters as
 * name,pid,tid,ph,args,ts (spec §6, Q12).
 *
 * Speed matters (a million events should take well under a second), so no JSON tree is built:
 * numbers are formatted by hand (ticks → exact decimals, which parse to the same double as
 * the reference's ticks / 100.0), strings are escaped in one pass, and the JSON parts stored
 * in the file (args, other events, file_info) are spliced in verbatim; the reader has already
 * checked that they are valid JSON and found each element.  The output is strict JSON: the
 * NaN/Infinity tokens Python may have written become null, non-finite counters too.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chrome.h"
#include "cvf_reader.h"
#include "json_scan.h"
#include "window.h"

#define OUT_CAP (1 << 20)

typedef struct chrome {
    FILE *out;
    char *buf;
    size_t len;
    bool io_error;
    bool first_event;
    char *file_info; /* copy of the last FILE_INFO text */
    size_t file_info_len;
    const convert_ctx *cc;
    const uint8_t *base;
    size_t size;
    cvf_error *err;
} chrome;

static void out_flush(chrome *c)
{
    if (c->len && fwrite(c->buf, 1, c->len, c->out) != c->len)
        c->io_error = true;
    c->len = 0;
}

/* Room for n bytes; n may exceed OUT_CAP only through out_raw. */
static inline void out_need(chrome *c, size_t n)
{
    if (OUT_CAP - c->len < n)
        out_flush(c);
}

static void out_raw(chrome *c, const void *p, size_t n)
{
    if (n > OUT_CAP / 2) {
        out_flush(c);
        if (fwrite(p, 1, n, c->out) != n)
            c->io_error = true;
        return;
    }
    out_need(c, n);
    memcpy(c->buf + c->len, p, n);
    c->len += n;
}

#define OUT_LIT(c, s) out_raw((c), (s), sizeof(s) - 1)

/* Decimal of an unsigned integer; returns the length written at p (<= 20). */
static inline size_t fmt_u64(char *p, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

static size_t fmt_double(char *p, double d);

/* v / 10^decimals as the reference computes it, (double)v / 100.0 (or 1000.0).  Below 2^53
 * the int → double conversion is exact, and the exact decimal ("1.0", "0.28", "-5.5") parses
 * to that same double, so it is printed by hand; above, the conversion rounds, so we do the
 * same double arithmetic and print the shortest text of the result. */
static inline size_t fmt_fixed(char *p, int64_t v, unsigned decimals)
{
    if (v >= (INT64_C(1) << 53) || v <= -(INT64_C(1) << 53))
        return fmt_double(p, (double)v / (decimals == 2 ? 100.0 : 1000.0));
    size_t n = 0;
    uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (v < 0)
        p[n++] = '-';
    uint64_t scale = decimals == 2 ? 100 : 1000;
    n += fmt_u64(p + n, m / scale);
    uint64_t frac = m % scale;
    p[n++] = '.';
    if (frac == 0) {
        p[n++] = '0';
        return n;
    }
    char d[3];
    for (unsigned i = decimals; i-- > 0;) {
        d[i] = (char)('0' + frac % 10);
        frac /= 10;
    }
    unsigned last = decimals;
    while (last > 1 && d[last - 1] == '0')
        last--;
    memcpy(p + n, d, last);
    return n + last;
}

/* Shortest text that parses back to d (like Python's repr), always with '.' or 'e'. */
static size_t fmt_double(char *p, double d)
{
    if (!isfinite(d)) { /* not representable in strict JSON; viewers reject NaN tokens */
        memcpy(p, "null", 4);
        return 4;
    }
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(p, 32, "%.*g", prec, d);
        if (strtod(p, NULL) == d)
            break;
    }
    if (!strpbrk(p, ".eEn")) {
        memcpy(p + n, ".0", 2);
        n += 2;
    }
    return (size_t)n;
}

/* JSON string literal of a UTF-8 string (already validated by the reader). */
static void out_str(chrome *c, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = strlen(s);
    if (n > OUT_CAP / 8) { /* huge: escape in pieces */
        OUT_LIT(c, "\"");
        for (; *s; s++) {
            unsigned char ch = (unsigned char)*s;
            char e[6] = {'\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15]};
            if (ch == '"' || ch == '\\') {
                e[1] = (char)ch;
                out_raw(c, e, 2);
            } else if (ch < 0x20)
                out_raw(c, e, 6);
            else
                out_raw(c, s, 1);
        }
        OUT_LIT(c, "\"");
        return;
    }
    out_need(c, n * 6 + 2);
    char *p = c->buf + c->len;
    *p++ = '"';
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            *p++ = '\\';
            *p++ = (char)ch;
        } else if (ch < 0x20) {
            if (ch == '\n')
                *p++ = '\\', *p++ = 'n';
            else if (ch == '\t')
                *p++ = '\\', *p++ = 't';
            else if (ch == '\r')
                *p++ = '\\', *p++ = 'r';
            else {
                memcpy(p, "\\u00", 4);
                p[4] = hex[ch >> 4];
                p[5] = hex[ch & 15];
                p += 6;
            }
        } else
            *p++ = (char)ch;
    }
    *p++ = '"';
    c->len = (size_t)(p - c->buf);
}

static void begin_event(chrome *c)
{
    if (c->first_event) {
        c->first_event = false;
        OUT_LIT(c, "\n");
    } else
        OUT_LIT(c, ",\n");
}

static void progress(chrome *c, uint64_t offset)
{
    if (c->cc && c->cc->progress)
        c->cc->progress(c->cc->progress_ctx, (size_t)offset, c->size);
}

static int on_name(chrome *c, const char *kind, uint64_t pid, uint64_t tid, const char *name)
{
    char num[48];
    begin_event(c);
    OUT_LIT(c, "{\"ph\":\"M\",\"name\":\"");
    out_raw(c, kind, strlen(kind));
    OUT_LIT(c, "\",\"pid\":");
    out_raw(c, num, fmt_u64(num, pid));
    OUT_LIT(c, ",\"tid\":");
    out_raw(c, num, fmt_u64(num, tid));
    OUT_LIT(c, ",\"args\":{\"name\":");
    out_str(c, name);
    OUT_LIT(c, "}}");
    return c->io_error ? -1 : 0;
}

static int on_process_name(void *ctx, uint64_t pid, uint64_t tid, const char *name)
{
    return on_name(ctx, "process_name", pid, tid, name);
}

static int on_thread_name(void *ctx, uint64_t pid, uint64_t tid, const char *name)
{
    return on_name(ctx, "thread_name", pid, tid, name);
}

/* ---- strict JSON ---------------------------------------------------------------------------
 * Python's json writes NaN / Infinity / -Infinity for non-finite floats, so VizTracer's args
 * and other events may hold them; strict parsers (Perfetto, chrome://tracing, JSON.parse)
 * reject the whole file for one such token.  A blob that is not strict JSON is copied with
 * those tokens turned into null; the reader has already validated everything else. */

typedef struct strict_copy {
    char *text;
    size_t len;
    cvf_span *items;
    size_t n;
} strict_copy;

static bool is_strict(const char *json, size_t len)
{
    if (!memchr(json, 'N', len) && !memchr(json, 'I', len))
        return true; /* no token can start with anything else */
    size_t end;
    if (cvf_json_skip(json, len, 0, &end) != 0)
        return false;
    while (end < len && (json[end] == ' ' || json[end] == '\n' || json[end] == '\r' ||
                         json[end] == '\t'))
        end++;
    return end == len;
}

static int make_strict(chrome *c, const char *in, size_t len, bool list, strict_copy *sc)
{
    memset(sc, 0, sizeof *sc);
    char *out = malloc(len / 3 * 4 + 16); /* "NaN" -> "null" grows by 4/3 at most */
    if (!out)
        goto oom;
    size_t o = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        char ch = in[i];
        if (in_str) {
            if (ch == '\\') {
                out[o++] = ch;
                ch = in[++i];
            } else if (ch == '"')
                in_str = false;
        } else if (ch == '"') {
            in_str = true;
        } else if (ch == 'N' || ch == 'I' || (ch == '-' && i + 1 < len && in[i + 1] == 'I')) {
            i += ch == 'N' ? 2 : ch == 'I' ? 7 : 8; /* NaN, Infinity, -Infinity */
            memcpy(out + o, "null", 4);
            o += 4;
            continue;
        }
        out[o++] = ch;
    }
    out[o] = 0;
    sc->text = out;
    sc->len = o;
    if (list) {
        size_t epos;
        const char *what;
        if (cvf_json_scan(out, o, &sc->items, &sc->n, &epos, &what) != 0) {
            snprintf(c->err->msg, sizeof c->err->msg, "internal error making JSON strict: %s",
                     what);
            free(out);
            sc->text = NULL;
            return -1;
        }
    }
    return 0;
oom:
    snprintf(c->err->msg, sizeof c->err->msg, "out of memory");
    return -1;
}

/* JSON string literal of s at dst (room: 6 * strlen(s) + 2); returns its length. */
static size_t escape_into(char *dst, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    char *p = dst;
    *p++ = '"';
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            *p++ = '\\';
            *p++ = (char)ch;
        } else if (ch < 0x20) {
            memcpy(p, "\\u00", 4);
            p[4] = hex[ch >> 4];
            p[5] = hex[ch & 15];
            p += 6;
        } else
            *p++ = (char)ch;
    }
    *p++ = '"';
    return (size_t)(p - dst);
}

/* The part every event of a FEE group shares, {"ph":"X","name":…,"cat":"FEE","pid":…,"tid":…,
 * "ts":, built once: the tid may change per event (--tasks moves an event to another track). */
typedef struct fee_prefix {
    char *text;    /* room for the name escaped, 128 bytes more */
    size_t len;
    size_t tid_at; /* where the tid goes */
    uint64_t tid;  /* the tid written there */
} fee_prefix;

static int prefix_init(chrome *c, fee_prefix *px, const cvf_fee_group *g)
{
    px->text = malloc(strlen(g->name) * 6 + 128);
    if (!px->text) {
        snprintf(c->err->msg, sizeof c->err->msg, "out of memory");
        return -1;
    }
    char *p = px->text;
    memcpy(p, "{\"ph\":\"X\",\"name\":", 17);
    p += 17;
    p += escape_into(p, g->name);
    memcpy(p, ",\"cat\":\"FEE\",\"pid\":", 19);
    p += 19;
    p += fmt_u64(p, g->pid);
    memcpy(p, ",\"tid\":", 7);
    p += 7;
    px->tid_at = (size_t)(p - px->text);
    px->tid = g->tid;
    p += fmt_u64(p, g->tid);
    memcpy(p, ",\"ts\":", 6);
    px->len = (size_t)(p + 6 - px->text);
    return 0;
}

/* The prefix with tid in its place (the room: a tid has at most 20 digits). */
static void prefix_tid(fee_prefix *px, uint64_t tid)
{
    if (tid == px->tid)
        return;
    px->tid = tid;
    px->len = px->tid_at + fmt_u64(px->text + px->tid_at, tid);
    memcpy(px->text + px->len, ",\"ts\":", 6);
    px->len += 6;
}

/* One event, rare: a huge name or args, through out_raw. */
static void put_fee_big(chrome *c, const fee_prefix *px, int64_t ts, uint64_t dur,
                        const char *args, size_t alen)
{
    char nums[96];
    size_t nl = fmt_fixed(nums, ts, 2);
    memcpy(nums + nl, ",\"dur\":", 7);
    nl += 7;
    nl += fmt_fixed(nums + nl, (int64_t)dur, 2);
    begin_event(c);
    out_raw(c, px->text, px->len);
    out_raw(c, nums, nl);
    if (args) {
        OUT_LIT(c, ",\"args\":");
        out_raw(c, args, alen);
    }
    OUT_LIT(c, "}");
}

/* One event, the usual way: straight into the buffer. */
static void put_fee(chrome *c, const fee_prefix *px, int64_t ts, uint64_t dur, const char *args,
                    size_t alen)
{
    out_need(c, px->len + 128 + alen);
    char *p = c->buf + c->len;
    if (c->first_event) {
        c->first_event = false;
        *p++ = '\n';
    } else {
        *p++ = ',';
        *p++ = '\n';
    }
    memcpy(p, px->text, px->len);
    p += px->len;
    p += fmt_fixed(p, ts, 2);
    memcpy(p, ",\"dur\":", 7);
    p += 7;
    p += fmt_fixed(p, (int64_t)dur, 2); /* < 2^62: the varint cannot hold more */
    if (args) {
        memcpy(p, ",\"args\":", 8);
        p += 8;
        memcpy(p, args, alen);
        p += alen;
    }
    *p++ = '}';
    c->len = (size_t)(p - c->buf);
}

static int on_fee(void *ctx, const cvf_fee_group *g)
{
    chrome *c = ctx;
    fee_prefix px;
    if (prefix_init(c, &px, g) != 0)
        return -1;
    uint64_t (*retid)(void *, uint64_t, uint64_t, int64_t) = c->cc ? c->cc->retid : NULL;
    /* the inline path needs prefix + numbers + args to fit the buffer at once */
    bool prefix_fits = px.len + 256 <= OUT_CAP / 2;
    const char *args_json = g->args_json;
    const cvf_span *spans = g->args;
    strict_copy sc = {0};
    if (args_json && !is_strict(args_json, g->args_len)) {
        if (make_strict(c, args_json, g->args_len, true, &sc) != 0) {
            free(px.text);
            return -1;
        }
        args_json = sc.text;
        spans = sc.items;
    }
    const vct_window *win = c->cc ? c->cc->window : NULL;
    for (size_t i = 0; i < g->count; i++) {
        int64_t ts = g->ts[i];
        uint64_t dur = g->dur[i];
        if (win && !vct_window_clip(win, &ts, &dur))
            continue;
        prefix_tid(&px, retid ? retid(c->cc->retid_ctx, g->pid, g->tid, g->ts[i]) : g->tid);
        size_t alen = spans ? spans[i].len : 0;
        const char *args = spans ? args_json + spans[i].off : NULL;
        if (!prefix_fits || alen > OUT_CAP / 4)
            put_fee_big(c, &px, ts, dur, args, alen);
        else
            put_fee(c, &px, ts, dur, args, alen);
    }
    free(px.text);
    free(sc.text);
    free(sc.items);
    progress(c, g->offset);
    return c->io_error ? -1 : 0;
}

static int on_counter(void *ctx, const cvf_counter_group *g)
{
    chrome *c = ctx;
    char num[48];
    const vct_window *win = c->cc ? c->cc->window : NULL;
    for (size_t i = 0; i < g->nts; i++) {
        if (win && !vct_window_has(win, g->ts_ns[i] / 10)) /* ns -> ticks */
            continue;
        begin_event(c);
        OUT_LIT(c, "{\"name\":");
        out_str(c, g->name);
        OUT_LIT(c, ",\"pid\":");
        out_raw(c, num, fmt_u64(num, g->pid));
        OUT_LIT(c, ",\"tid\":");
        out_raw(c, num, fmt_u64(num, g->tid));
        OUT_LIT(c, ",\"ph\":\"C\",\"args\":{");
        bool first = true;
        for (size_t k = 0; k < g->nkeys; k++) {
            const cvf_counter_value *v = &g->values[i * g->nkeys + k];
            if (v->tag == CVF_COUNTER_UNKNOWN)
                continue;
            if (!first)
                OUT_LIT(c, ",");
            first = false;
            out_str(c, g->keys[k]);
            OUT_LIT(c, ":");
            if (v->tag == CVF_COUNTER_LONG) {
                size_t n = 0;
                if (v->v.i < 0)
                    num[n++] = '-';
                n += fmt_u64(num + n, v->v.i < 0 ? (uint64_t)0 - (uint64_t)v->v.i
                                                 : (uint64_t)v->v.i);
                out_raw(c, num, n);
            } else if (v->tag == CVF_COUNTER_FLOAT)
                out_raw(c, num, fmt_double(num, v->v.f));
            else
                out_raw(c, v->v.s, strlen(v->v.s));
        }
        OUT_LIT(c, "},\"ts\":");
        out_raw(c, num, fmt_fixed(num, g->ts_ns[i], 3));
        OUT_LIT(c, "}");
    }
    progress(c, g->offset);
    return c->io_error ? -1 : 0;
}

static int on_other(void *ctx, const cvf_json_record *r)
{
    chrome *c = ctx;
    strict_copy sc = {0};
    const char *json = r->json;
    const cvf_span *items = r->items;
    if (!is_strict(r->json, r->len)) {
        if (make_strict(c, r->json, r->len, true, &sc) != 0)
            return -1;
        json = sc.text;
        items = sc.items;
    }
    for (size_t i = 0; i < r->nitems; i++) {
        begin_event(c);
        out_raw(c, json + items[i].off, items[i].len);
    }
    free(sc.text);
    free(sc.items);
    progress(c, r->offset);
    return c->io_error ? -1 : 0;
}

static int on_file_info(void *ctx, const cvf_json_record *r)
{
    chrome *c = ctx;
    strict_copy sc;
    if (is_strict(r->json, r->len)) {
        sc.text = malloc(r->len + 1);
        if (!sc.text) {
            snprintf(c->err->msg, sizeof c->err->msg, "out of memory for file_info");
            return -1;
        }
        memcpy(sc.text, r->json, r->len);
        sc.len = r->len;
    } else if (make_strict(c, r->json, r->len, false, &sc) != 0)
        return -1;
    free(c->file_info); /* a later FILE_INFO replaces an earlier one, as in the reference */
    c->file_info = sc.text;
    c->file_info_len = sc.len;
    return 0;
}

int convert_cvf_to_chrome(const void *cvf, size_t size, FILE *out, const convert_ctx *cc,
                          cvf_error *err)
{
    chrome c;
    memset(&c, 0, sizeof c);
    c.out = out;
    c.first_event = true;
    c.cc = cc;
    c.base = cvf;
    c.size = size;
    c.err = err;
    c.buf = malloc(OUT_CAP);
    if (!c.buf) {
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return -1;
    }
    static const cvf_visitor v = {
        .process_name = on_process_name,
        .thread_name = on_thread_name,
        .fee_group = on_fee,
        .counter_group = on_counter,
        .other_events = on_other,
        .file_info = on_file_info,
    };
    err->msg[0] = 0;
    OUT_LIT(&c, "{\"traceEvents\":[");
    int rc = cvf_read(cvf, size, &v, &c, 0, err);
    if (rc == 0 && cc && cc->extra_len) {
        begin_event(&c);
        out_raw(&c, cc->extra_events, cc->extra_len);
    }
    if (rc == 0) {
        OUT_LIT(&c, "\n]");
        if (c.file_info) {
            OUT_LIT(&c, ",\n\"file_info\":");
            out_raw(&c, c.file_info, c.file_info_len);
        }
        OUT_LIT(&c, "}\n");
        out_flush(&c);
    }
    if (c.io_error) {
        snprintf(err->msg, sizeof err->msg, "writing the output failed");
        rc = -1;
    }
    free(c.buf);
    free(c.file_info);
    return rc ? -1 : 0;
}

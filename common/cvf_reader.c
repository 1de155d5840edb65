/* cvf_reader.c — the bounded .cvf decoder (API and safety contract: cvf_reader.h).
 *
 * Owns the reading side of the format (docs/cvf-format.md).  The input is one buffer
 * (usually a read-only mapping of the file); a cursor walks it and every read goes through
 * `need()`, which checks the bytes are really there, so a hostile file can at worst produce an
 * error message.  Counts are checked against the smallest encoding their items could have
 * before anything is allocated for them, and zlib blobs are inflated only up to a size their
 * compressed length can justify.
 *
 * Where the reference is lenient we are strict, because a silent skip hides corruption:
 * unknown header bytes, an args_offset that does not follow the ts/dur stream, an args list
 * of the wrong length, trailing garbage inside a zlib blob, invalid UTF-8 in names.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cvf_reader.h"
#include "json_scan.h"
#include "utf8.h"

/* deflate's best case is about 1032:1; allow a little slack for the stream overhead. */
#define ZLIB_MAX_RATIO 1032
#define ZLIB_SLACK 64

typedef struct reader {
    const uint8_t *base;
    size_t size;
    size_t pos;
    unsigned flags;
    cvf_error *err;
    /* scratch reused across records */
    int64_t *ts;
    uint64_t *dur;
    size_t fee_cap;
    char *json;          /* last inflated blob */
    cvf_span *spans;
    const char **keys;
    size_t keys_cap;
    int64_t *cts;
    cvf_counter_value *vals;
    cvf_counter_value *cache;
} reader;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int bad(reader *r, size_t at, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->err->offset = at;
    snprintf(r->err->msg, sizeof r->err->msg, "offset %zu: %s", at, msg);
    for (char *m = r->err->msg; *m; m++) /* one line, even if a quoted name holds '\n' */
        if ((unsigned char)*m < 0x20)
            *m = ' ';
    return -1;
}

static inline size_t left(const reader *r) { return r->size - r->pos; }

static inline int need(reader *r, size_t n, const char *what)
{
    if (left(r) < n)
        return bad(r, r->pos, "truncated: %s needs %zu bytes, %zu left", what, n, left(r));
    return 0;
}

static int rd_u64(reader *r, uint64_t *v, const char *what)
{
    if (need(r, 8, what))
        return -1;
    memcpy(v, r->base + r->pos, 8);
    r->pos += 8;
    return 0;
}

/* A NUL-terminated UTF-8 string inside the buffer. */
static int rd_cstr(reader *r, const char **s, const char *what)
{
    const uint8_t *p = r->base + r->pos;
    const uint8_t *nul = memchr(p, 0, left(r));
    if (!nul)
        return bad(r, r->pos, "truncated: %s has no terminating NUL before the end of the file",
                   what);
    size_t n = (size_t)(nul - p);
    if (!cvf_utf8_valid((const char *)p, n))
        return bad(r, r->pos, "%s is not valid UTF-8", what);
    *s = (const char *)p;
    r->pos += n + 1;
    return 0;
}

/* Reads a zblob header and body.  With `inflate_it`, *out gets a NUL-terminated malloc'd
 * buffer (stored in r->json, replaced at the next blob) of exactly the declared length. */
static int rd_zblob(reader *r, const char *what, bool inflate_it, char **out, size_t *out_len)
{
    size_t at = r->pos;
    uint64_t ulen = 0, clen = 0;
    if (rd_u64(r, &ulen, what) || rd_u64(r, &clen, what))
        return -1;
    if (clen > left(r))
        return bad(r, at, "%s compressed length %" PRIu64 " exceeds the %zu bytes left", what,
                   clen, left(r));
    if (ulen > clen * ZLIB_MAX_RATIO + ZLIB_SLACK || ulen >= SIZE_MAX / 2)
        return bad(r, at, "%s uncompressed length %" PRIu64 " is impossible for %" PRIu64
                          " compressed bytes", what, ulen, clen);
    const uint8_t *src = r->base + r->pos;
    r->pos += (size_t)clen;
    if (!inflate_it) {
        *out = NULL;
        *out_len = 0;
        return 0;
    }
    free(r->json);
    r->json = malloc((size_t)ulen + 2);
    if (!r->json)
        return bad(r, at, "out of memory inflating %s (%" PRIu64 " bytes)", what, ulen);
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit(&zs) != Z_OK)
        return bad(r, at, "zlib inflateInit failed");
    /* zlib counts in uInt; feed and drain in chunks of at most 1 GiB */
    size_t in_left = (size_t)clen, out_room = (size_t)ulen + 1;
    const uint8_t *in = src;
    uint8_t *o = (uint8_t *)r->json;
    int zr = Z_OK;
    while (zr == Z_OK) {
        uInt ci = in_left > (1u << 30) ? (1u << 30) : (uInt)in_left;
        uInt co = out_room > (1u << 30) ? (1u << 30) : (uInt)out_room;
        zs.next_in = (Bytef *)in;
        zs.avail_in = ci;
        zs.next_out = o;
        zs.avail_out = co;
        zr = inflate(&zs, Z_NO_FLUSH);
        in += ci - zs.avail_in;
        in_left -= ci - zs.avail_in;
        o += co - zs.avail_out;
        out_room -= co - zs.avail_out;
        if (zr == Z_OK && zs.avail_out != 0 && zs.avail_in == 0 && in_left == 0)
            zr = Z_BUF_ERROR; /* input exhausted before the end of the stream */
        if (zr == Z_OK && out_room == 0)
            break; /* produced more than declared */
    }
    const char *zmsg = zs.msg;
    inflateEnd(&zs);
    size_t produced = (size_t)(o - (uint8_t *)r->json);
    if (zr != Z_STREAM_END) {
        if (produced > ulen)
            return bad(r, at, "%s inflates to more than its declared %" PRIu64 " bytes", what,
                       ulen);
        return bad(r, at, "%s is not a valid zlib stream (%s)", what,
                   zr == Z_BUF_ERROR ? "truncated" : zmsg ? zmsg : "corrupt data");
    }
    if (produced != ulen)
        return bad(r, at, "%s inflates to %zu bytes, but declares %" PRIu64, what, produced,
                   ulen);
    if (in_left != 0)
        return bad(r, at, "%s has %zu bytes of garbage after its zlib stream", what, in_left);
    r->json[produced] = 0;
    *out = r->json;
    *out_len = produced;
    return 0;
}

/* Inflates a zblob and checks it is JSON (a list with its element spans if want_list). */
static int rd_json(reader *r, const char *what, bool want_list, cvf_json_record *rec)
{
    size_t at = r->pos;
    char *text = NULL;
    size_t len = 0;
    if (rd_zblob(r, what, !(r->flags & CVF_READ_SKIP_JSON), &text, &len))
        return -1;
    memset(rec, 0, sizeof *rec);
    rec->offset = at;
    if (!text)
        return 0;
    free(r->spans);
    r->spans = NULL;
    size_t epos;
    const char *ewhat;
    if (cvf_json_scan(text, len, want_list ? &r->spans : NULL, &rec->nitems, &epos, &ewhat))
        return bad(r, at, "%s is not valid JSON: %s at byte %zu of the inflated text", what,
                   ewhat, epos);
    rec->json = text;
    rec->len = len;
    rec->items = r->spans;
    return 0;
}

static int grow(void **p, size_t *cap, size_t want, size_t elem)
{
    if (want <= *cap)
        return 0;
    void *n = realloc(*p, want * elem);
    if (!n)
        return -1;
    *p = n;
    *cap = want;
    return 0;
}

/* Varint of spec §4: the width flag is in the low 2 bits of the first byte (little-endian). */
static inline int rd_varint(reader *r, uint64_t *v, const char *what)
{
    if (r->pos >= r->size)
        return bad(r, r->pos, "truncated: %s needs 1 byte, 0 left", what);
    size_t w = (size_t)1 << (r->base[r->pos] & 3);
    if (left(r) < w)
        return bad(r, r->pos, "truncated: %s needs %zu bytes, %zu left", what, w, left(r));
    uint64_t x = 0;
    memcpy(&x, r->base + r->pos, w);
    r->pos += w;
    *v = x >> 2;
    return 0;
}

static int rd_fee(reader *r, const cvf_visitor *v, void *ctx)
{
    cvf_fee_group g;
    memset(&g, 0, sizeof g);
    g.offset = r->pos - 1;
    uint64_t count = 0, args_offset = 0;
    if (rd_u64(r, &g.pid, "FEE pid") || rd_u64(r, &g.tid, "FEE tid") ||
        rd_cstr(r, &g.name, "FEE name"))
        return -1;
    size_t count_at = r->pos;
    if (rd_u64(r, &count, "FEE count") || rd_u64(r, &args_offset, "FEE args_offset"))
        return -1;
    /* smallest stream: i64 ts + 1-byte dur, then 2 bytes per further event */
    if (count == 0)
        return bad(r, count_at, "FEE group '%.60s' has count 0", g.name);
    if (left(r) < 9 || count - 1 > (left(r) - 9) / 2)
        return bad(r, count_at, "FEE count %" PRIu64 " exceeds the %zu bytes left", count,
                   left(r));
    size_t n = (size_t)count;
    if (args_offset && (args_offset > r->size || args_offset < r->pos + 9))
        return bad(r, count_at + 8, "FEE args_offset %" PRIu64 " is outside the group's data "
                                    "(%zu..%zu)", args_offset, r->pos + 9, r->size);
    if (r->fee_cap < n) {
        size_t cap = r->fee_cap;
        if (grow((void **)&r->ts, &cap, n, sizeof *r->ts))
            return bad(r, count_at, "out of memory for %zu FEE events", n);
        cap = r->fee_cap;
        if (grow((void **)&r->dur, &cap, n, sizeof *r->dur))
            return bad(r, count_at, "out of memory for %zu FEE events", n);
        r->fee_cap = n;
    }
    int64_t *ts = r->ts;
    uint64_t *dur = r->dur;
    uint64_t first = 0;
    if (rd_u64(r, &first, "FEE first ts") || rd_varint(r, &dur[0], "FEE dur"))
        return -1;
    ts[0] = (int64_t)first;
    for (size_t i = 1; i < n; i++) {
        uint64_t delta = 0;
        size_t at = r->pos;
        if (rd_varint(r, &delta, "FEE ts delta") || rd_varint(r, &dur[i], "FEE dur"))
            return -1;
        if (ts[i - 1] >= 0 && delta > (uint64_t)(INT64_MAX - ts[i - 1]))
            return bad(r, at, "FEE group '%.60s' event %zu: timestamp overflows", g.name, i);
        ts[i] = ts[i - 1] + (int64_t)delta;
    }
    g.count = n;
    g.ts = ts;
    g.dur = dur;
    if (args_offset) {
        if (args_offset != r->pos)
            return bad(r, count_at + 8, "FEE args_offset %" PRIu64 " does not point right after "
                                        "the ts/dur stream (which ends at %zu)", args_offset,
                       r->pos);
        g.has_args = 1;
        cvf_json_record rec;
        if (rd_json(r, "FEE args", true, &rec))
            return -1;
        if (rec.json && rec.nitems != n)
            return bad(r, (size_t)args_offset, "FEE group '%.60s': args list has %zu items for "
                                               "%zu events", g.name, rec.nitems, n);
        g.args_json = rec.json;
        g.args_len = rec.len;
        g.args = rec.items;
    }
    return v->fee_group ? v->fee_group(ctx, &g) : 0;
}

/* Decimal integer as JSON allows it: -?(0|[1-9][0-9]*). */
static bool json_int_text(const char *s)
{
    if (*s == '-')
        s++;
    if (*s == '0')
        return s[1] == 0;
    if (*s < '1' || *s > '9')
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* One value of a counter row: its tag and what follows it, the key's cache (SAME repeats
 * it) updated.  0 or -1. */
static int rd_counter_value(reader *r, cvf_counter_value *c, cvf_counter_value *out)
{
    size_t tag_at = r->pos;
    if (need(r, 1, "counter value tag"))
        return -1;
    uint8_t tag = r->base[r->pos++];
    uint64_t x = 0;
    switch (tag) {
    case CVF_COUNTER_UNKNOWN:
        c->tag = CVF_COUNTER_UNKNOWN;
        out->tag = CVF_COUNTER_UNKNOWN;
        return 0;
    case CVF_COUNTER_SAME:
        *out = *c;
        return 0;
    case CVF_COUNTER_LONG:
    case CVF_COUNTER_FLOAT:
        if (rd_u64(r, &x, tag == CVF_COUNTER_LONG ? "counter LONG value" : "counter FLOAT value"))
            return -1;
        c->tag = tag;
        if (tag == CVF_COUNTER_LONG)
            c->v.i = (int64_t)x;
        else
            memcpy(&c->v.f, &x, 8);
        *out = *c;
        return 0;
    case CVF_COUNTER_LONG_STRING:
        if (rd_cstr(r, &c->v.s, "counter LONG_STRING value"))
            return -1;
        if (!json_int_text(c->v.s))
            return bad(r, tag_at + 1, "counter LONG_STRING value '%.40s' is not a decimal "
                                      "integer", c->v.s);
        c->tag = tag;
        *out = *c;
        return 0;
    default:
        return bad(r, tag_at, "unknown counter value tag 0x%02x (expected 0x21..0x25)", tag);
    }
}

/* The keys of a counter group into r->keys.  Their number, or -1. */
static long rd_counter_keys(reader *r)
{
    uint64_t nkeys = 0;
    size_t at = r->pos;
    if (rd_u64(r, &nkeys, "counter key count"))
        return -1;
    if (nkeys > left(r)) /* each key is at least its NUL */
        return bad(r, at, "counter key count %" PRIu64 " exceeds the %zu bytes left", nkeys,
                   left(r));
    size_t nk = (size_t)nkeys;
    if (grow((void **)&r->keys, &r->keys_cap, nk ? nk : 1, sizeof *r->keys))
        return bad(r, at, "out of memory for %zu counter keys", nk);
    for (size_t k = 0; k < nk; k++)
        if (rd_cstr(r, &r->keys[k], "counter key"))
            return -1;
    return (long)nk;
}

static int rd_counter(reader *r, const cvf_visitor *v, void *ctx)
{
    cvf_counter_group g;
    memset(&g, 0, sizeof g);
    g.offset = r->pos - 1;
    if (rd_u64(r, &g.pid, "counter pid") || rd_u64(r, &g.tid, "counter tid") ||
        rd_cstr(r, &g.name, "counter name"))
        return -1;
    long keys = rd_counter_keys(r);
    if (keys < 0)
        return -1;
    size_t nk = (size_t)keys, at = r->pos;
    uint64_t nts = 0;
    if (rd_u64(r, &nts, "counter event count"))
        return -1;
    if (nts > left(r) / (8 + nk)) /* each row: i64 ts + one tag byte per key */
        return bad(r, at, "counter event count %" PRIu64 " exceeds the %zu bytes left", nts,
                   left(r));
    size_t nt = (size_t)nts;
    free(r->cts);
    free(r->vals);
    free(r->cache);
    r->cts = malloc((nt ? nt : 1) * sizeof *r->cts);
    r->vals = malloc((nt * nk > 0 ? nt * nk : 1) * sizeof *r->vals);
    r->cache = calloc(nk ? nk : 1, sizeof *r->cache);
    if (!r->cts || !r->vals || !r->cache)
        return bad(r, at, "out of memory for %zu counter events", nt);
    for (size_t k = 0; k < nk; k++)
        r->cache[k].tag = CVF_COUNTER_UNKNOWN; /* nothing cached yet */
    for (size_t i = 0; i < nt; i++) {
        uint64_t t = 0;
        if (rd_u64(r, &t, "counter ts"))
            return -1;
        r->cts[i] = (int64_t)t;
        for (size_t k = 0; k < nk; k++)
            if (rd_counter_value(r, &r->cache[k], &r->vals[i * nk + k]) != 0)
                return -1;
    }
    g.nkeys = nk;
    g.keys = r->keys;
    g.nts = nt;
    g.ts_ns = r->cts;
    g.values = r->vals;
    return v->counter_group ? v->counter_group(ctx, &g) : 0;
}

/* One record whose header byte h (at `at`) was just read; *saw_other when it was the
 * other-events record.  0, or nonzero (the visitor's, or -1 with r->err). */
static int rd_record(reader *r, uint8_t h, size_t at, const cvf_visitor *v, void *ctx,
                     bool *saw_other)
{
    const char *name = NULL;
    uint64_t pid = 0, tid = 0;
    cvf_json_record rec;
    int rc;
    switch (h) {
    case CVF_REC_PROCESS_NAME:
    case CVF_REC_THREAD_NAME:
        if (rd_u64(r, &pid, "name record pid") || rd_u64(r, &tid, "name record tid") ||
            rd_cstr(r, &name, h == CVF_REC_PROCESS_NAME ? "process name" : "thread name"))
            return -1;
        if (h == CVF_REC_PROCESS_NAME)
            return v->process_name ? v->process_name(ctx, pid, tid, name) : 0;
        return v->thread_name ? v->thread_name(ctx, pid, tid, name) : 0;
    case CVF_REC_FEE:
        return rd_fee(r, v, ctx);
    case CVF_REC_COUNTER_EVENTS:
        return rd_counter(r, v, ctx);
    case CVF_REC_OTHER_EVENTS:
        *saw_other = true;
        rc = rd_json(r, "other events", true, &rec);
        return rc == 0 && rec.json && v->other_events ? v->other_events(ctx, &rec) : rc;
    case CVF_REC_FILE_INFO:
        rc = rd_json(r, "file_info", false, &rec);
        return rc == 0 && rec.json && v->file_info ? v->file_info(ctx, &rec) : rc;
    default:
        return bad(r, at, "unknown record header byte 0x%02x (the file is corrupt or not a "
                          ".cvf)", h);
    }
}

/* The file's records after its version header.  0 or nonzero. */
static int rd_records(reader *r, const cvf_visitor *v, void *ctx)
{
    bool saw_other = false;
    while (r->pos < r->size) {
        size_t at = r->pos;
        uint8_t h = r->base[r->pos++];
        int rc = rd_record(r, h, at, v, ctx, &saw_other);
        if (rc != 0) {
            if (r->err->msg[0] == 0) /* a callback stopped the walk without saying why */
                bad(r, at, "stopped by the caller");
            return rc;
        }
    }
    /* Every writer (the reference's and ours) emits exactly one OTHER_EVENTS record, after
     * the names, FEE and counter groups: without it the file was cut at a record boundary. */
    if (!saw_other)
        return bad(r, r->size, "the file ends without the other-events record (0x05) every "
                               ".cvf has: it is truncated");
    return 0;
}

int cvf_read(const void *data, size_t size, const cvf_visitor *v, void *ctx, unsigned flags,
             cvf_error *err)
{
    static const cvf_visitor none;
    reader r;
    memset(&r, 0, sizeof r);
    r.base = data;
    r.size = data ? size : 0;
    r.flags = flags;
    r.err = err;
    err->offset = 0;
    err->msg[0] = 0;
    uint64_t version = 0;
    int rc;
    if (r.size < 8) {
        rc = bad(&r, 0, "not a .cvf file: %zu bytes, shorter than the 8-byte version header",
                 r.size);
    } else if (memcpy(&version, r.base, 8), version != CVF_VERSION) {
        rc = bad(&r, 0, "unsupported .cvf version %" PRIu64 " (only version 1 exists)",
                 version);
    } else {
        r.pos = 8;
        rc = rd_records(&r, v ? v : &none, ctx);
    }
    free(r.ts);
    free(r.dur);
    free(r.json);
    free(r.spans);
    free(r.keys);
    free(r.cts);
    free(r.vals);
    free(r.cache);
    return rc;
}

/* ---- the input: a read-only mapping of the file -------------------------------------- */

int cvf_map_file(const char *path, void **data, size_t *size, cvf_error *err)
{
    *data = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err->msg, sizeof err->msg, "cannot open: %s", strerror(errno));
        err->offset = 0;
        return -1;
    }
    struct stat st = {0};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        /* a directory is the likely slip (a trace's folder for its file): say so */
        snprintf(err->msg, sizeof err->msg, "%s",
                 S_ISDIR(st.st_mode) ? "a directory, not a file" : "not a regular file");
        err->offset = 0;
        close(fd);
        return -1;
    }
    if (st.st_size == 0) {
        close(fd);
        *data = NULL;
        return 0;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(err->msg, sizeof err->msg, "cannot map the file: %s", strerror(e));
        err->offset = 0;
        return -1;
    }
    *data = p;
    *size = (size_t)st.st_size;
    return 0;
}

void cvf_unmap_file(void *data, size_t size)
{
    if (data && size)
        munmap(data, size);
}

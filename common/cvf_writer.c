/* cvf_writer.c — streaming writer of VizTracer's .cvf ("vcompressor" v1) format.
 *
 * Owns every byte the project writes in that format (layout: docs/cvf-format.md).  It is
 * linked into the agent, which runs inside a production process, so it depends on zlib and libc
 * only, allocates little, and never seeks: records go through one output buffer to a sink
 * function (an fd, a socket, a memory buffer).
 *
 * Where the reference needs to seek (the args_offset of an FEE group points past the ts/dur
 * stream, which the reference back-patches), we compute the stream's encoded size first: it is
 * a cheap pass over the events that also validates them (sorted, deltas and durations below
 * 2^62, so the varint cannot overflow silently like the reference's quirk Q4).  A group is
 * therefore either written whole or not at all.
 *
 * The per-event encode loop does one buffer-space check per event and no calls through
 * pointers; it is the hot path of both the agent's emit and `vcattach convert`.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "cvf.h"
#include "utf8.h"
#include "fd_io.h"

#define OUTBUF_SIZE (64 * 1024)
/* Largest encoding of one FEE event: two 8-byte varints. */
#define FEE_EVENT_MAX 16
/* Values the varint can hold: 62 bits (the low 2 bits of the first byte are the width flag). */
#define VARINT_LIMIT (UINT64_C(1) << 62)

/* Records must come in this order (the reference's, which every reader accepts). */
enum writer_stage {
    STAGE_NAMES = 0,
    STAGE_FEE,
    STAGE_COUNTERS,
    STAGE_OTHER,     /* the single OTHER_EVENTS record has been written */
    STAGE_FILE_INFO, /* FILE_INFO has been written */
    STAGE_FINISHED,
};

static const char *const stage_names[] = {
    "process/thread names", "FEE groups", "counter groups", "other events", "file_info",
    "finish",
};

struct cvf_writer {
    cvf_sink_fn sink;
    void *sink_ctx;
    uint8_t *buf; /* OUTBUF_SIZE bytes; buf[0 .. len) not yet handed to the sink */
    size_t len;
    uint64_t flushed;   /* bytes handed to the sink */
    bool version_done;  /* the u64 version word is in buf or flushed */
    bool failed;        /* a sink error happened: the output is unusable */
    enum writer_stage stage;
    cvf_error err;
};

/* ---- units ------------------------------------------------------------------------------ */

/* Rounding half away from zero, written without libm so the agent's link needs only zlib and
 * libc.  Values outside the int64 range (and NaN) are clamped first: converting them to an
 * integer would be undefined behaviour.  2^63 and 2^64 are exact doubles, so the comparisons
 * are exact too.  For |t| < 2^52, t - trunc(t) is computed exactly; above, t is integral. */
int64_t cvf_us_to_ticks(double us)
{
    double t = us * 100.0;
    if (t != t) /* NaN */
        return 0;
    if (t >= 9223372036854775808.0)
        return INT64_MAX;
    if (t <= -9223372036854775808.0)
        return INT64_MIN;
    int64_t r = (int64_t)t; /* truncates toward zero */
    double frac = t - (double)r;
    if (frac >= 0.5)
        r++;
    else if (frac <= -0.5)
        r--;
    return r;
}

uint64_t cvf_dur_us_to_ticks(double us)
{
    double t = us * 100.0;
    if (!(t > 0.0)) /* negative, zero or NaN */
        return 0;
    if (t >= 18446744073709551616.0) /* 2^64 */
        return UINT64_MAX;
    uint64_t r = (uint64_t)t;
    if (t - (double)r >= 0.5 && r < UINT64_MAX)
        r++;
    return r;
}

/* ---- sorting ---------------------------------------------------------------------------- */

static int fee_cmp(const void *a, const void *b)
{
    const cvf_fee_event *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    if (x->dur != y->dur)
        return x->dur < y->dur ? -1 : 1;
    return 0;
}

/* Events equal in (ts, dur) are indistinguishable in this struct, so stability cannot matter
 * here; callers that carry per-event args sort (ts, dur, original index) themselves. */
void cvf_fee_sort(cvf_fee_event *events, size_t n)
{
    /* Traces are usually already nearly sorted (events complete in end order): check first. */
    size_t i;
    for (i = 1; i < n; i++)
        if (fee_cmp(&events[i - 1], &events[i]) > 0)
            break;
    if (i < n)
        qsort(events, n, sizeof *events, fee_cmp);
}

/* ---- errors and output ------------------------------------------------------------------ */

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int fail(cvf_writer *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err.msg, sizeof w->err.msg, fmt, ap);
    va_end(ap);
    w->err.offset = w->flushed + w->len;
    return -1;
}

static int flush(cvf_writer *w)
{
    if (w->len == 0)
        return 0;
    if (w->sink(w->sink_ctx, w->buf, w->len) != 0) {
        int e = errno;
        w->failed = true;
        return fail(w, "writing the trace failed after %llu bytes: %s",
                    (unsigned long long)w->flushed, strerror(e ? e : EIO));
    }
    w->flushed += w->len;
    w->len = 0;
    return 0;
}

/* Makes room for n bytes (n <= OUTBUF_SIZE). */
static inline int reserve(cvf_writer *w, size_t n)
{
    if (OUTBUF_SIZE - w->len < n)
        return flush(w);
    return 0;
}

static int put_bytes(cvf_writer *w, const void *data, size_t n)
{
    const uint8_t *p = data;
    while (n > 0) {
        if (w->len == OUTBUF_SIZE && flush(w) != 0)
            return -1;
        size_t room = OUTBUF_SIZE - w->len;
        if (w->len == 0 && n >= OUTBUF_SIZE) {
            /* large payload: hand it to the sink directly, no copy */
            if (w->sink(w->sink_ctx, p, n) != 0) {
                int e = errno;
                w->failed = true;
                return fail(w, "writing the trace failed after %llu bytes: %s",
                            (unsigned long long)w->flushed, strerror(e ? e : EIO));
            }
            w->flushed += n;
            return 0;
        }
        size_t k = n < room ? n : room;
        memcpy(w->buf + w->len, p, k);
        w->len += k;
        p += k;
        n -= k;
    }
    return 0;
}

static inline void store_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static int put_u64(cvf_writer *w, uint64_t v)
{
    if (reserve(w, 8) != 0)
        return -1;
    store_u64(w->buf + w->len, v);
    w->len += 8;
    return 0;
}

static int put_u8(cvf_writer *w, uint8_t v)
{
    if (reserve(w, 1) != 0)
        return -1;
    w->buf[w->len++] = v;
    return 0;
}

/* Length of `s` cut to CVF_NAME_MAX bytes without splitting a UTF-8 sequence. */
static size_t name_len(const char *s)
{
    return vc_utf8_cut(s, strnlen(s, CVF_NAME_MAX + 1), CVF_NAME_MAX);
}

static int put_cstr_n(cvf_writer *w, const char *s, size_t n)
{
    if (put_bytes(w, s, n) != 0)
        return -1;
    return put_u8(w, 0);
}

/* Checks that a record of `stage` may come now; moves the writer to that stage. */
static int enter_stage(cvf_writer *w, enum writer_stage stage, const char *what)
{
    if (w->failed)
        return fail(w, "the writer already failed; no more records can be written");
    if (stage < w->stage || (stage == w->stage && stage >= STAGE_OTHER))
        return fail(w, "%s written after %s: records must come in the order names, FEE "
                       "groups, counter groups, other events (once), file_info (once)",
                    what, stage_names[w->stage]);
    if (!w->version_done) {
        if (put_u64(w, CVF_VERSION) != 0)
            return -1;
        w->version_done = true;
    }
    w->stage = stage;
    return 0;
}

/* ---- zblob: u64 uncompressed_len | u64 compressed_len | zlib(level 6) bytes -------------- */

/* Compresses into a growing heap buffer (memory proportional to the compressed size, which the
 * header needs before the bytes), then writes header and bytes. */
static int put_zblob(cvf_writer *w, const char *data, size_t len)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit(&zs, Z_DEFAULT_COMPRESSION) != Z_OK)
        return fail(w, "zlib deflateInit failed (out of memory?)");
    size_t cap = len / 4 + 64, used = 0;
    uint8_t *out = malloc(cap);
    if (!out) {
        deflateEnd(&zs);
        return fail(w, "out of memory compressing %zu bytes", len);
    }
    const uint8_t *in = (const uint8_t *)data;
    size_t left = len;
    int zr;
    do {
        if (used == cap) {
            size_t ncap = cap * 2;
            uint8_t *n = realloc(out, ncap);
            if (!n) {
                free(out);
                deflateEnd(&zs);
                return fail(w, "out of memory compressing %zu bytes", len);
            }
            out = n;
            cap = ncap;
        }
        /* zlib counts in uInt: feed at most 1 GiB per call */
        uInt chunk_in = left > (1u << 30) ? (1u << 30) : (uInt)left;
        size_t room = cap - used;
        uInt chunk_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
        zs.next_in = (Bytef *)in;
        zs.avail_in = chunk_in;
        zs.next_out = out + used;
        zs.avail_out = chunk_out;
        zr = deflate(&zs, chunk_in == left ? Z_FINISH : Z_NO_FLUSH);
        size_t consumed = chunk_in - zs.avail_in;
        in += consumed;
        left -= consumed;
        used += chunk_out - zs.avail_out;
        if (zr == Z_STREAM_ERROR) {
            free(out);
            deflateEnd(&zs);
            return fail(w, "zlib deflate failed");
        }
    } while (zr != Z_STREAM_END);
    deflateEnd(&zs);
    int rc = -1;
    if (put_u64(w, (uint64_t)len) == 0 && put_u64(w, (uint64_t)used) == 0 &&
        put_bytes(w, out, used) == 0)
        rc = 0;
    free(out);
    return rc;
}

/* ---- public API ------------------------------------------------------------------------- */

cvf_writer *cvf_writer_new(cvf_sink_fn sink, void *sink_ctx)
{
    if (!sink)
        return NULL;
    cvf_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->buf = malloc(OUTBUF_SIZE);
    if (!w->buf) {
        free(w);
        return NULL;
    }
    w->sink = sink;
    w->sink_ctx = sink_ctx;
    w->stage = STAGE_NAMES;
    return w;
}

int cvf_sink_fd(void *ctx, const void *data, size_t len)
{
    return vc_write_all((int)(intptr_t)ctx, data, len);
}

static int write_name(cvf_writer *w, uint8_t header, uint64_t pid, uint64_t tid,
                      const char *name, const char *what)
{
    if (!name)
        return fail(w, "%s: name is NULL", what);
    if (enter_stage(w, STAGE_NAMES, what) != 0)
        return -1;
    if (put_u8(w, header) || put_u64(w, pid) || put_u64(w, tid) ||
        put_cstr_n(w, name, name_len(name)))
        return -1;
    return 0;
}

int cvf_write_process_name(cvf_writer *w, uint64_t pid, uint64_t tid, const char *name)
{
    return write_name(w, CVF_REC_PROCESS_NAME, pid, tid, name, "process name");
}

int cvf_write_thread_name(cvf_writer *w, uint64_t pid, uint64_t tid, const char *name)
{
    return write_name(w, CVF_REC_THREAD_NAME, pid, tid, name, "thread name");
}

static inline size_t varint_size(uint64_t v)
{
    return v <= 0x3F ? 1 : v <= 0x3FFF ? 2 : v <= 0x3FFFFFFF ? 4 : 8;
}

/* Stores v (< 2^62) as the smallest native-LE integer holding (v << 2) | width flag. */
static inline uint8_t *store_varint(uint8_t *p, uint64_t v)
{
    if (v <= 0x3F) {
        *p = (uint8_t)(v << 2);
        return p + 1;
    }
    if (v <= 0x3FFF) {
        uint16_t x = (uint16_t)((v << 2) | 1);
        memcpy(p, &x, 2);
        return p + 2;
    }
    if (v <= 0x3FFFFFFF) {
        uint32_t x = (uint32_t)((v << 2) | 2);
        memcpy(p, &x, 4);
        return p + 4;
    }
    uint64_t x = (v << 2) | 3;
    memcpy(p, &x, 8);
    return p + 8;
}

int cvf_write_fee_group(cvf_writer *w, uint64_t pid, uint64_t tid, const char *name,
                        const cvf_fee_event *events, size_t n, const char *args_json,
                        size_t args_len)
{
    if (!name || !events || n == 0)
        return fail(w, "FEE group: needs a name and at least one event");
    if (w->failed || w->stage > STAGE_FEE)
        return enter_stage(w, STAGE_FEE, "FEE group"); /* reports the order error */

    /* Pass 1: validate and size the ts/dur stream (needed for args_offset). */
    if (events[0].dur >= VARINT_LIMIT)
        return fail(w, "FEE group '%.80s': event 0 dur %llu ticks does not fit the format "
                       "(limit 2^62)", name, (unsigned long long)events[0].dur);
    uint64_t stream = 8 + varint_size(events[0].dur);
    for (size_t i = 1; i < n; i++) {
        if (events[i].ts < events[i - 1].ts)
            return fail(w, "FEE group '%.80s': events not sorted by ts at index %zu "
                           "(call cvf_fee_sort first)", name, i);
        uint64_t delta = (uint64_t)events[i].ts - (uint64_t)events[i - 1].ts;
        if (delta >= VARINT_LIMIT || events[i].dur >= VARINT_LIMIT)
            return fail(w, "FEE group '%.80s': event %zu ts delta or dur does not fit the "
                           "format (limit 2^62 ticks)", name, i);
        stream += varint_size(delta) + varint_size(events[i].dur);
    }
    if (enter_stage(w, STAGE_FEE, "FEE group") != 0)
        return -1;

    size_t nlen = name_len(name);
    uint64_t header_size = 1 + 8 + 8 + nlen + 1 + 8 + 8;
    uint64_t args_offset = 0;
    if (args_json)
        args_offset = w->flushed + w->len + header_size + stream;
    if (put_u8(w, CVF_REC_FEE) || put_u64(w, pid) || put_u64(w, tid) ||
        put_cstr_n(w, name, nlen) || put_u64(w, (uint64_t)n) || put_u64(w, args_offset))
        return -1;

    /* Pass 2: the hot loop.  One space check per event; the position is a local pointer. */
    if (reserve(w, FEE_EVENT_MAX) != 0)
        return -1;
    uint8_t *p = w->buf + w->len;
    store_u64(p, (uint64_t)events[0].ts);
    p = store_varint(p + 8, events[0].dur);
    int64_t prev = events[0].ts;
    uint8_t *const limit = w->buf + OUTBUF_SIZE - FEE_EVENT_MAX;
    for (size_t i = 1; i < n; i++) {
        if (__builtin_expect(p > limit, 0)) {
            w->len = (size_t)(p - w->buf);
            if (flush(w) != 0)
                return -1;
            p = w->buf;
        }
        int64_t ts = events[i].ts;
        p = store_varint(p, (uint64_t)ts - (uint64_t)prev);
        p = store_varint(p, events[i].dur);
        prev = ts;
    }
    w->len = (size_t)(p - w->buf);

    if (args_json) {
        if (w->flushed + w->len != args_offset)
            return fail(w, "internal error: FEE args offset %llu != position %llu",
                        (unsigned long long)args_offset,
                        (unsigned long long)(w->flushed + w->len));
        if (put_zblob(w, args_json, args_len) != 0)
            return -1;
    }
    return 0;
}

/* Checks a LONG_STRING payload: an optional '-' and decimal digits, as the reference's
 * PyLong_FromString expects. */
static bool valid_long_string(const char *s)
{
    if (!s)
        return false;
    if (*s == '-')
        s++;
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

int cvf_write_counter_group(cvf_writer *w, uint64_t pid, uint64_t tid, const char *name,
                            const char *const *keys, size_t nkeys, const int64_t *ts_ns,
                            size_t nts, const cvf_counter_value *values)
{
    if (!name || (nkeys && !keys) || (nts && !ts_ns) || (nts && nkeys && !values))
        return fail(w, "counter group: NULL name, keys, timestamps or values");
    if (w->failed || w->stage > STAGE_COUNTERS)
        return enter_stage(w, STAGE_COUNTERS, "counter group");
    for (size_t k = 0; k < nkeys; k++)
        if (!keys[k])
            return fail(w, "counter group '%.80s': key %zu is NULL", name, k);
    for (size_t i = 0; i < nts * nkeys; i++) {
        uint8_t tag = values[i].tag;
        if (tag < CVF_COUNTER_UNKNOWN || tag > CVF_COUNTER_LONG_STRING)
            return fail(w, "counter group '%.80s': value %zu has unknown tag 0x%02x", name, i,
                        tag);
        if (tag == CVF_COUNTER_LONG_STRING && !valid_long_string(values[i].v.s))
            return fail(w, "counter group '%.80s': value %zu is not a decimal integer", name,
                        i);
    }
    for (size_t i = 1; i < nts; i++)
        if (ts_ns[i] < ts_ns[i - 1])
            return fail(w, "counter group '%.80s': timestamps not ascending at %zu",
                        name, i);
    if (enter_stage(w, STAGE_COUNTERS, "counter group") != 0)
        return -1;
    if (put_u8(w, CVF_REC_COUNTER_EVENTS) || put_u64(w, pid) || put_u64(w, tid) ||
        put_cstr_n(w, name, name_len(name)) || put_u64(w, (uint64_t)nkeys))
        return -1;
    for (size_t k = 0; k < nkeys; k++)
        if (put_cstr_n(w, keys[k], name_len(keys[k])))
            return -1;
    if (put_u64(w, (uint64_t)nts))
        return -1;
    for (size_t i = 0; i < nts; i++) {
        if (put_u64(w, (uint64_t)ts_ns[i]))
            return -1;
        for (size_t k = 0; k < nkeys; k++) {
            const cvf_counter_value *v = &values[i * nkeys + k];
            if (put_u8(w, v->tag))
                return -1;
            int rc = 0;
            if (v->tag == CVF_COUNTER_LONG)
                rc = put_u64(w, (uint64_t)v->v.i);
            else if (v->tag == CVF_COUNTER_FLOAT) {
                uint64_t bits;
                memcpy(&bits, &v->v.f, 8);
                rc = put_u64(w, bits);
            } else if (v->tag == CVF_COUNTER_LONG_STRING)
                rc = put_cstr_n(w, v->v.s, strlen(v->v.s));
            if (rc)
                return -1;
        }
    }
    return 0;
}

int cvf_write_other_events(cvf_writer *w, const char *json_list, size_t len)
{
    if (!json_list)
        return fail(w, "other events: JSON text is NULL");
    if (enter_stage(w, STAGE_OTHER, "other events") != 0)
        return -1;
    if (put_u8(w, CVF_REC_OTHER_EVENTS))
        return -1;
    return put_zblob(w, json_list, len);
}

int cvf_write_file_info(cvf_writer *w, const char *json, size_t len)
{
    if (!json)
        return fail(w, "file_info: JSON text is NULL");
    if (!w->failed && w->stage < STAGE_OTHER && cvf_write_other_events(w, "[]", 2) != 0)
        return -1;
    if (enter_stage(w, STAGE_FILE_INFO, "file_info") != 0)
        return -1;
    if (put_u8(w, CVF_REC_FILE_INFO))
        return -1;
    return put_zblob(w, json, len);
}

int cvf_writer_finish(cvf_writer *w)
{
    if (w->failed)
        return fail(w, "the writer already failed; the output is incomplete");
    if (w->stage == STAGE_FINISHED)
        return fail(w, "cvf_writer_finish called twice");
    if (w->stage < STAGE_OTHER && cvf_write_other_events(w, "[]", 2) != 0)
        return -1;
    if (flush(w) != 0)
        return -1;
    w->stage = STAGE_FINISHED;
    return 0;
}

uint64_t cvf_writer_bytes(const cvf_writer *w) { return w->flushed; }

const cvf_error *cvf_writer_error(const cvf_writer *w) { return &w->err; }

void cvf_writer_free(cvf_writer *w)
{
    if (!w)
        return;
    free(w->buf);
    free(w);
}

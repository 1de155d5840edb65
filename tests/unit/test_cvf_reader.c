/* test_cvf_reader.c — unit checks of common/cvf_reader.c, json_scan.c and utf8.c: a writer → reader
 * round trip of every record type (counter SAME/UNKNOWN resolution included), one crafted
 * file per error the reader must name (with its offset), the JSON scanner, and callbacks
 * that stop the walk. */
#include <math.h>
#include <zlib.h>

#include "cvf.h"
#include "cvf_reader.h"
#include "cvf_test.h"
#include "json_scan.h"

typedef struct seen {
    int names, fee_groups, fee_events, counters, others, infos;
    char last_name[64];
    int64_t ts_sum;
    uint64_t dur_sum;
    size_t args_items;
    char args0[64];
    char counter_dump[512];
    size_t other_items;
    char file_info[64];
    int stop_after;
} seen;

static int on_pname(void *ctx, uint64_t pid, uint64_t tid, const char *name)
{
    seen *s = ctx;
    s->names++;
    snprintf(s->last_name, sizeof s->last_name, "%s", name);
    return s->stop_after && s->names >= s->stop_after ? 7 : 0;
}

static int on_fee(void *ctx, const cvf_fee_group *g)
{
    seen *s = ctx;
    s->fee_groups++;
    for (size_t i = 0; i < g->count; i++) {
        s->fee_events++;
        s->ts_sum += g->ts[i];
        s->dur_sum += g->dur[i];
    }
    if (g->args) {
        s->args_items += g->count;
        snprintf(s->args0, sizeof s->args0, "%.*s", (int)g->args[0].len,
                 g->args_json + g->args[0].off);
    }
    return 0;
}

static int on_counter(void *ctx, const cvf_counter_group *g)
{
    seen *s = ctx;
    s->counters++;
    char *p = s->counter_dump;
    size_t room = sizeof s->counter_dump;
    for (size_t i = 0; i < g->nts; i++) {
        int n = snprintf(p, room, "@%lld{", (long long)g->ts_ns[i]);
        p += n, room -= (size_t)n;
        for (size_t k = 0; k < g->nkeys; k++) {
            const cvf_counter_value *v = &g->values[i * g->nkeys + k];
            if (v->tag == CVF_COUNTER_LONG)
                n = snprintf(p, room, "%s=%lld;", g->keys[k], (long long)v->v.i);
            else if (v->tag == CVF_COUNTER_FLOAT)
                n = snprintf(p, room, "%s=%g;", g->keys[k], v->v.f);
            else if (v->tag == CVF_COUNTER_LONG_STRING)
                n = snprintf(p, room, "%s=%s;", g->keys[k], v->v.s);
            else
                n = 0;
            p += n, room -= (size_t)n;
        }
        n = snprintf(p, room, "}");
        p += n, room -= (size_t)n;
    }
    return 0;
}

static int on_other(void *ctx, const cvf_json_record *r)
{
    seen *s = ctx;
    s->others++;
    s->other_items += r->nitems;
    return 0;
}

static int on_info(void *ctx, const cvf_json_record *r)
{
    seen *s = ctx;
    s->infos++;
    snprintf(s->file_info, sizeof s->file_info, "%s", r->json);
    return 0;
}

static const cvf_visitor visitor = {on_pname, on_pname, on_fee, on_counter, on_other, on_info};

/* A file with every record type; returns it in m. */
static void build_full(membuf *m)
{
    cvf_writer *w = cvf_writer_new(membuf_sink, m);
    cvf_write_process_name(w, (uint64_t)-1, 1, "proc");
    cvf_write_thread_name(w, (uint64_t)-1, 2, "thr");
    cvf_fee_event ev[3] = {{-10, 5}, {0, 7}, {100000, 9}};
    cvf_write_fee_group(w, 1, 2, "f", ev, 3, NULL, 0);
    const char *args = "[{\"x\": 1}, {\"y\": [1, 2, {\"z\": null}]}, \"s\"]";
    cvf_write_fee_group(w, 1, 2, "g", ev, 3, args, strlen(args));
    /* a: 1, SAME, UNKNOWN (gone), SAME (still gone), 2.5 ; b: SAME (never seen), big */
    const char *keys[2] = {"a", "b"};
    int64_t ts[4] = {1000, 2000, 3000, 4000};
    cvf_counter_value vals[8] = {
        {CVF_COUNTER_LONG, {.i = 1}},   {CVF_COUNTER_SAME, {.i = 0}},
        {CVF_COUNTER_SAME, {.i = 0}},   {CVF_COUNTER_LONG_STRING, {.s = "99999999999999999999"}},
        {CVF_COUNTER_UNKNOWN, {.i = 0}}, {CVF_COUNTER_SAME, {.i = 0}},
        {CVF_COUNTER_FLOAT, {.f = 2.5}}, {CVF_COUNTER_UNKNOWN, {.i = 0}},
    };
    cvf_write_counter_group(w, 1, 1, "mem", keys, 2, ts, 4, vals);
    const char *other = "[{\"ph\": \"i\"}, {\"ph\": \"B\", \"v\": NaN}]";
    cvf_write_other_events(w, other, strlen(other));
    cvf_write_file_info(w, "{\"files\": {}}", 13);
    CHECK(cvf_writer_finish(w) == 0);
    cvf_writer_free(w);
}

static void test_roundtrip(void)
{
    membuf m = {0};
    build_full(&m);
    seen s = {0};
    cvf_error err;
    CHECK(cvf_read(m.data, m.len, &visitor, &s, 0, &err) == 0);
    CHECK_EQ_U64(s.names, 2);
    CHECK(strcmp(s.last_name, "thr") == 0);
    CHECK_EQ_U64(s.fee_groups, 2);
    CHECK_EQ_U64(s.fee_events, 6);
    CHECK(s.ts_sum == 2 * (-10 + 0 + 100000));
    CHECK_EQ_U64(s.dur_sum, 2 * 21);
    CHECK_EQ_U64(s.args_items, 3);
    CHECK(strcmp(s.args0, "{\"x\": 1}") == 0);
    CHECK_EQ_U64(s.counters, 1);
    CHECK(strcmp(s.counter_dump,
                 "@1000{a=1;}@2000{a=1;b=99999999999999999999;}@3000{b=99999999999999999999;}"
                 "@4000{a=2.5;}") == 0);
    if (strcmp(s.counter_dump, "@1000{a=1;}@2000{a=1;b=99999999999999999999;}"
                               "@3000{b=99999999999999999999;}@4000{a=2.5;}"))
        fprintf(stderr, "counter dump: %s\n", s.counter_dump);
    CHECK_EQ_U64(s.others, 1);
    CHECK_EQ_U64(s.other_items, 2);
    CHECK_EQ_U64(s.infos, 1);
    CHECK(strcmp(s.file_info, "{\"files\": {}}") == 0);

    /* SKIP_JSON: timings only */
    seen s2 = {0};
    CHECK(cvf_read(m.data, m.len, &visitor, &s2, CVF_READ_SKIP_JSON, &err) == 0);
    CHECK_EQ_U64(s2.fee_events, 6);
    CHECK_EQ_U64(s2.args_items, 0);
    CHECK_EQ_U64(s2.others, 0);

    /* a callback stops the walk */
    seen s3 = {.stop_after = 1};
    CHECK(cvf_read(m.data, m.len, &visitor, &s3, 0, &err) == 7);
    CHECK(strstr(err.msg, "stopped by the caller") != NULL);
    free(m.data);
}

/* Reads `len` bytes and expects an error containing `want`. */
static void expect_error(const uint8_t *d, size_t len, const char *want, const char *label)
{
    cvf_error err;
    seen s = {0};
    int rc = cvf_read(d, len, &visitor, &s, 0, &err);
    CHECK(rc == -1);
    if (rc != -1 || !strstr(err.msg, want) || strncmp(err.msg, "offset ", 7)) {
        test_failures++;
        fprintf(stderr, "%s: expected an error with '%s', got rc %d '%s'\n", label, want, rc,
                err.msg);
    }
}

static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static void test_errors(void)
{
    membuf m = {0};
    build_full(&m);
    uint8_t *d = malloc(m.len + 64);
    size_t n = m.len;

    memcpy(d, m.data, n);
    d[0] = 2;
    expect_error(d, n, "unsupported .cvf version 2", "version");
    expect_error(d, 5, "shorter than the 8-byte version", "short");

    memcpy(d, m.data, n);
    d[n] = 0x07;
    expect_error(d, n + 1, "unknown record header byte 0x07", "header");
    d[n] = 0x00; /* trailing zero byte: the reference prints and skips; we reject */
    expect_error(d, n + 1, "unknown record header byte 0x00", "trailing zero");

    /* process name record at 8: 0x02 pid tid "proc\0"; thread name next; FEE at 8+22+21 */
    size_t fee = 8 + 22 + 21;
    CHECK_EQ_U64(m.data[fee], 0x01);
    size_t count_at = fee + 1 + 16 + 2;
    memcpy(d, m.data, n);
    put64(d + count_at, 9999999);
    expect_error(d, n, "FEE count 9999999 exceeds", "fee count");
    put64(d + count_at, 0);
    expect_error(d, n, "count 0", "fee count 0");

    memcpy(d, m.data, n);
    d[fee + 17] = 0xff; /* name "f" → invalid UTF-8 */
    expect_error(d, n, "not valid UTF-8", "utf8");

    /* the second group (args) */
    size_t g2 = count_at + 16 + 8 + 1 + 2 + 4; /* ts0, dur 5 (1B), delta 10 (1B) dur 7 (1B),
                                                  delta 100000 (4B) dur 9 (1B) */
    g2 = count_at + 16 + 8 + 1 + 1 + 1 + 4 + 1;
    CHECK_EQ_U64(m.data[g2], 0x01);
    size_t off_at = g2 + 1 + 16 + 2 + 8;
    uint64_t args_off;
    memcpy(&args_off, m.data + off_at, 8);
    memcpy(d, m.data, n);
    put64(d + off_at, args_off + 1);
    expect_error(d, n, "args_offset", "args offset");
    put64(d + off_at, UINT64_MAX);
    expect_error(d, n, "args_offset", "args offset huge");

    memcpy(d, m.data, n);
    put64(d + args_off + 8, UINT64_C(1) << 60); /* compressed length */
    expect_error(d, n, "compressed length 1152921504606846976 exceeds", "clen");
    memcpy(d, m.data, n);
    put64(d + args_off, UINT64_C(1) << 40); /* uncompressed length */
    expect_error(d, n, "is impossible", "ulen ratio");
    memcpy(d, m.data, n);
    uint64_t ulen;
    memcpy(&ulen, m.data + args_off, 8);
    put64(d + args_off, ulen + 1);
    expect_error(d, n, "inflates to", "ulen wrong");
    memcpy(d, m.data, n);
    put64(d + args_off, ulen - 1);
    expect_error(d, n, "inflates to", "ulen short");
    memcpy(d, m.data, n);
    d[args_off + 16 + 5] ^= 0x55; /* corrupt deflate data */
    expect_error(d, n, "FEE args", "zlib corrupt");

    /* args list with the wrong number of items */
    {
        membuf m2 = {0};
        cvf_writer *w = cvf_writer_new(membuf_sink, &m2);
        cvf_fee_event ev[2] = {{0, 1}, {1, 1}};
        cvf_write_fee_group(w, 1, 1, "f", ev, 2, "[1]", 3);
        cvf_writer_finish(w);
        cvf_writer_free(w);
        expect_error(m2.data, m2.len, "args list has 1 items for 2 events", "args count");
        m2.len = 0;
        w = cvf_writer_new(membuf_sink, &m2);
        cvf_write_other_events(w, "[1, }", 5);
        cvf_writer_finish(w);
        cvf_writer_free(w);
        expect_error(m2.data, m2.len, "not valid JSON", "bad json");
        m2.len = 0;
        w = cvf_writer_new(membuf_sink, &m2);
        cvf_write_other_events(w, "{}", 2);
        cvf_writer_finish(w);
        cvf_writer_free(w);
        expect_error(m2.data, m2.len, "expected a JSON list", "other not list");
        free(m2.data);
    }

    /* counter record: find it after the second FEE group's zblob */
    uint64_t clen;
    memcpy(&clen, m.data + args_off + 8, 8);
    size_t ctr = (size_t)(args_off + 16 + clen);
    CHECK_EQ_U64(m.data[ctr], 0x04);
    size_t nkeys_at = ctr + 1 + 16 + 4;
    memcpy(d, m.data, n);
    put64(d + nkeys_at, UINT64_C(1) << 62);
    expect_error(d, n, "counter key count", "nkeys");
    size_t nts_at = nkeys_at + 8 + 4;
    memcpy(d, m.data, n);
    put64(d + nts_at, 123456789);
    expect_error(d, n, "counter event count 123456789 exceeds", "nts");
    memcpy(d, m.data, n);
    d[nts_at + 8 + 8] = 0x30;
    expect_error(d, n, "unknown counter value tag 0x30", "tag");
    /* the LONG_STRING digits: make one a letter */
    memcpy(d, m.data, n);
    size_t ls = nts_at + 8 + (8 + 9 + 1) + 8 + 1 + 1;
    CHECK_EQ_U64(m.data[ls - 1], 0x25);
    d[ls + 3] = 'x';
    expect_error(d, n, "not a decimal integer", "long string");

    /* cut at a record boundary, before the 0x05 record: the counter record is the last
     * before it, and ends where the other-events record starts */
    {
        seen s = {0};
        cvf_error e;
        size_t boundary = n;
        for (size_t k = ctr + 1; k < n; k++)
            if (m.data[k] == 0x05 && cvf_read(m.data, k, &visitor, &s, 0, &e) == -1 &&
                strstr(e.msg, "without the other-events record")) {
                boundary = k;
                break;
            }
        CHECK(boundary < n);
    }

    /* every truncation fails with an offset (except right before the optional file_info) */
    size_t accepted = 0;
    for (size_t k = 0; k < n; k++) {
        cvf_error err;
        if (cvf_read(m.data, k, &visitor, &(seen){0}, 0, &err) == 0)
            accepted++;
        else
            CHECK(strncmp(err.msg, "offset ", 7) == 0);
    }
    CHECK_EQ_U64(accepted, 1);
    free(d);
    free(m.data);
}

static void test_json_scan(void)
{
    static const char *const good[] = {
        "[]", " [ 1 , -2.5e+3 , \"a\\u00e9\\n\" , true , false , null , NaN , -Infinity ] ",
        "{\"a\": {\"b\": [{}, []]}}", "\"\xc3\xa9\"", "0", "[[],[[]],{}]",
    };
    static const char *const badj[] = {
        "", "[", "[1,]", "[1 2]", "{\"a\" 1}", "{\"a\": }", "01", "1.", "-", "\"\\x\"",
        "\"\xff\"", "\"a\nb\"", "[1] x", "tru", "\"\\u12g4\"", "{1: 2}", "[\"\xed\xa0\x80\"]",
    };
    size_t pos;
    const char *what;
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        int rc = cvf_json_scan(good[i], strlen(good[i]), NULL, NULL, &pos, &what);
        CHECK(rc == 0);
        if (rc)
            fprintf(stderr, "good JSON %zu rejected: %s at %zu\n", i, what, pos);
    }
    for (size_t i = 0; i < sizeof badj / sizeof *badj; i++) {
        int rc = cvf_json_scan(badj[i], strlen(badj[i]), NULL, NULL, &pos, &what);
        CHECK(rc == -1);
        if (rc == 0)
            fprintf(stderr, "bad JSON %zu accepted\n", i);
    }
    cvf_span *items;
    size_t n;
    const char *list = " [ 1 , {\"a\": [2, 3]} ,\"x\",[] ] ";
    CHECK(cvf_json_scan(list, strlen(list), &items, &n, &pos, &what) == 0);
    CHECK_EQ_U64(n, 4);
    if (n == 4) {
        CHECK(items[0].len == 1 && list[items[0].off] == '1');
        CHECK(items[1].len == 13 && !memcmp(list + items[1].off, "{\"a\": [2, 3]}", 13));
        CHECK(items[2].len == 3 && !memcmp(list + items[2].off, "\"x\"", 3));
        CHECK(items[3].len == 2 && !memcmp(list + items[3].off, "[]", 2));
    }
    free(items);
    CHECK(cvf_json_scan("{}", 2, &items, &n, &pos, &what) == -1);
    /* deep nesting is an error, not a stack overflow */
    size_t deep = 100000;
    char *d = malloc(deep * 2);
    memset(d, '[', deep);
    memset(d + deep, ']', deep);
    CHECK(cvf_json_scan(d, deep * 2, NULL, NULL, &pos, &what) == -1);
    CHECK(strstr(what, "deeply") != NULL);
    CHECK(cvf_json_scan(d + deep - 500, 1000, NULL, NULL, &pos, &what) == 0);
    free(d);
}

int main(void)
{
    test_roundtrip();
    test_errors();
    test_json_scan();
    return test_summary("test_cvf_reader");
}

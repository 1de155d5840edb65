/* test_cvf_writer.c — unit checks of common/cvf_writer.c against the byte layout of
 * ../shared/cvf-format.md: exact bytes for small records, the args_offset of FEE groups,
 * varint widths, record-order errors, limits, rounding, sink failures and large groups that
 * cross the writer's output buffer.  Decoding here is done by hand (not by cvf_reader.c), so
 * the writer is checked independently of our reader. */
#include <math.h>
#include <zlib.h>

#include "cvf.h"
#include "cvf_test.h"

static uint64_t rd_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Minimal varint decoder (spec §4). */
static uint64_t rd_varint(const uint8_t **pp)
{
    const uint8_t *p = *pp;
    int w = 1 << (p[0] & 3);
    uint64_t v = 0;
    memcpy(&v, p, (size_t)w);
    *pp = p + w;
    return v >> 2;
}

static void test_empty_file(void)
{
    static const uint8_t expect[35] = {1, 0, 0, 0, 0, 0, 0, 0, 0x05, 2, 0, 0, 0, 0, 0, 0, 0,
                                       0x0a, 0, 0, 0, 0, 0, 0, 0, 0x78, 0x9c, 0x8b, 0x8e,
                                       0x05, 0x00, 0x01, 0x15, 0x00, 0xb9};
    membuf m = {0};
    cvf_writer *w = cvf_writer_new(membuf_sink, &m);
    CHECK(w != NULL);
    CHECK(cvf_writer_finish(w) == 0);
    CHECK_EQ_U64(m.len, 35);
    CHECK(m.len == 35 && memcmp(m.data, expect, 35) == 0);
    CHECK_EQ_U64(cvf_writer_bytes(w), 35);
    CHECK(cvf_writer_finish(w) == -1); /* twice is an error */
    cvf_writer_free(w);
    free(m.data);
}

static void test_names_and_fee_bytes(void)
{
    membuf m = {0};
    cvf_writer *w = cvf_writer_new(membuf_sink, &m);
    CHECK(cvf_write_process_name(w, 7, 8, "MainProcess") == 0);
    CHECK(cvf_write_thread_name(w, 7, 9, "T") == 0);
    /* the worked example of spec §4: dur 28 (1 byte), delta 125 and dur 1112 (2 bytes each) */
    cvf_fee_event ev[3] = {{100, 28}, {225, 1112}, {225 + 0x40000000LL, 0x3FFF}};
    CHECK(cvf_write_fee_group(w, 7, 9, "f", ev, 3, NULL, 0) == 0);
    CHECK(cvf_writer_finish(w) == 0);
    const uint8_t *p = m.data;
    CHECK_EQ_U64(rd_u64(p), 1);
    p += 8;
    CHECK_EQ_U64(*p, 0x02);
    CHECK_EQ_U64(rd_u64(p + 1), 7);
    CHECK_EQ_U64(rd_u64(p + 9), 8);
    CHECK(strcmp((const char *)p + 17, "MainProcess") == 0);
    p += 17 + 12;
    CHECK_EQ_U64(*p, 0x03);
    CHECK_EQ_U64(rd_u64(p + 9), 9);
    CHECK(strcmp((const char *)p + 17, "T") == 0);
    p += 17 + 2;
    CHECK_EQ_U64(*p, 0x01);
    CHECK_EQ_U64(rd_u64(p + 1), 7);
    CHECK_EQ_U64(rd_u64(p + 9), 9);
    CHECK(strcmp((const char *)p + 17, "f") == 0);
    p += 19;
    CHECK_EQ_U64(rd_u64(p), 3);     /* count */
    CHECK_EQ_U64(rd_u64(p + 8), 0); /* no args */
    CHECK_EQ_U64(rd_u64(p + 16), 100);
    p += 24;
    CHECK_EQ_U64(p[0], 0x70); /* 28 << 2 */
    CHECK_EQ_U64(p[1], 0xf5);
    CHECK_EQ_U64(p[2], 0x01);
    CHECK_EQ_U64(p[3], 0x61);
    CHECK_EQ_U64(p[4], 0x11);
    p += 5;
    /* delta 2^30 needs 8 bytes (flag 3); dur 0x3FFF still fits 2 bytes */
    CHECK_EQ_U64(p[0] & 3, 3);
    const uint8_t *q = p;
    CHECK_EQ_U64(rd_varint(&q), 0x40000000);
    CHECK_EQ_U64(q - p, 8);
    CHECK_EQ_U64(rd_varint(&q), 0x3FFF);
    CHECK_EQ_U64(q - p, 10);
    CHECK_EQ_U64(*q, 0x05); /* the empty other-events record follows */
    CHECK_EQ_U64((size_t)(q - m.data) + 1 + 16 + 10, m.len);
    cvf_writer_free(w);
    free(m.data);
}

static char *inflate_blob(const uint8_t *p, uint64_t *ulen_out)
{
    uint64_t ulen = rd_u64(p), clen = rd_u64(p + 8);
    char *out = malloc(ulen + 1);
    uLongf dl = (uLongf)ulen;
    if (uncompress((Bytef *)out, &dl, p + 16, (uLong)clen) != Z_OK || dl != ulen) {
        free(out);
        return NULL;
    }
    out[ulen] = 0;
    *ulen_out = ulen;
    return out;
}

static void test_fee_args_offset(void)
{
    membuf m = {0};
    cvf_writer *w = cvf_writer_new(membuf_sink, &m);
    cvf_fee_event ev[2] = {{-500, 1}, {-300, 2}}; /* negative ts is raw i64 (quirk Q3) */
    const char *args = "[{\"a\": 1}, {\"b\": \"x\"}]";
    CHECK(cvf_write_fee_group(w, 1, 2, "g", ev, 2, args, strlen(args)) == 0);
    CHECK(cvf_write_fee_group(w, 1, 2, "h", ev, 1, "[{}]", 4) == 0);
    CHECK(cvf_write_other_events(w, "[{\"ph\": \"i\"}]", 13) == 0);
    CHECK(cvf_write_file_info(w, "{}", 2) == 0);
    CHECK(cvf_writer_finish(w) == 0);
    const uint8_t *p = m.data + 8;
    CHECK_EQ_U64(*p, 0x01);
    p += 1 + 16 + 2;
    CHECK_EQ_U64(rd_u64(p), 2);
    uint64_t off = rd_u64(p + 8);
    CHECK_EQ_U64((int64_t)rd_u64(p + 16), -500);
    const uint8_t *q = p + 24;
    CHECK_EQ_U64(rd_varint(&q), 1);
    CHECK_EQ_U64(rd_varint(&q), 200);
    CHECK_EQ_U64(rd_varint(&q), 2);
    CHECK_EQ_U64(off, (uint64_t)(q - m.data)); /* args start right after the stream */
    CHECK(q[16] == 0x78 && q[17] == 0x9c);      /* zlib container, default level */
    uint64_t ulen = 0;
    char *txt = inflate_blob(q, &ulen);
    CHECK(txt && strcmp(txt, args) == 0);
    free(txt);
    q += 16 + rd_u64(q + 8);
    CHECK_EQ_U64(*q, 0x01); /* second group, its own offset */
    const uint8_t *g2 = q + 1 + 16 + 2;
    uint64_t off2 = rd_u64(g2 + 8);
    CHECK_EQ_U64(off2, (uint64_t)(g2 + 24 + 1 - m.data));
    q = m.data + off2;
    q += 16 + rd_u64(q + 8);
    CHECK_EQ_U64(*q, 0x05);
    q += 1;
    txt = inflate_blob(q, &ulen);
    CHECK(txt && strcmp(txt, "[{\"ph\": \"i\"}]") == 0);
    free(txt);
    q += 16 + rd_u64(q + 8);
    CHECK_EQ_U64(*q, 0x11);
    q += 1;
    txt = inflate_blob(q, &ulen);
    CHECK(txt && strcmp(txt, "{}") == 0);
    free(txt);
    q += 16 + rd_u64(q + 8);
    CHECK_EQ_U64((size_t)(q - m.data), m.len);
    cvf_writer_free(w);
    free(m.data);
}

static void test_order_and_limits(void)
{
    membuf m = {0};
    cvf_writer *w = cvf_writer_new(membuf_sink, &m);
    cvf_fee_event ev[2] = {{0, 1}, {5, 1}};
    CHECK(cvf_write_fee_group(w, 1, 1, "f", ev, 2, NULL, 0) == 0);
    CHECK(cvf_writer_finish(w) == 0);
    size_t len_before = m.len;
    cvf_writer_free(w);

    m.len = 0;
    w = cvf_writer_new(membuf_sink, &m);
    CHECK(cvf_write_fee_group(w, 1, 1, "f", ev, 2, NULL, 0) == 0);
    CHECK(cvf_write_process_name(w, 1, 1, "late") == -1);
    CHECK(strstr(cvf_writer_error(w)->msg, "order") != NULL);
    CHECK(cvf_write_other_events(w, "[]", 2) == 0);
    CHECK(cvf_write_other_events(w, "[]", 2) == -1); /* only once */
    CHECK(cvf_write_fee_group(w, 1, 1, "f", ev, 2, NULL, 0) == -1);
    CHECK(cvf_write_counter_group(w, 1, 1, "c", NULL, 0, NULL, 0, NULL) == -1);
    CHECK(cvf_write_file_info(w, "{}", 2) == 0);
    CHECK(cvf_write_file_info(w, "{}", 2) == -1);
    CHECK(cvf_writer_finish(w) == 0);
    CHECK_EQ_U64(m.len, len_before + 1 + 16 + 10); /* the rejected calls wrote nothing */
    cvf_writer_free(w);

    m.len = 0;
    w = cvf_writer_new(membuf_sink, &m);
    cvf_fee_event big[2] = {{0, UINT64_C(1) << 62}, {1, 1}};
    CHECK(cvf_write_fee_group(w, 1, 1, "f", big, 2, NULL, 0) == -1);
    CHECK(strstr(cvf_writer_error(w)->msg, "2^62") != NULL);
    cvf_fee_event far[2] = {{0, 1}, {INT64_C(1) << 62, 1}};
    CHECK(cvf_write_fee_group(w, 1, 1, "f", far, 2, NULL, 0) == -1);
    cvf_fee_event ok[2] = {{0, 1}, {(INT64_C(1) << 62) - 1, (UINT64_C(1) << 62) - 1}};
    CHECK(cvf_write_fee_group(w, 1, 1, "f", ok, 2, NULL, 0) == 0);
    cvf_fee_event unsorted[2] = {{5, 1}, {4, 1}};
    CHECK(cvf_write_fee_group(w, 1, 1, "f", unsorted, 2, NULL, 0) == -1);
    CHECK(strstr(cvf_writer_error(w)->msg, "sorted") != NULL);
    cvf_fee_event extreme[2] = {{INT64_MIN, 0}, {INT64_MAX, 0}};
    CHECK(cvf_write_fee_group(w, 1, 1, "f", extreme, 2, NULL, 0) == -1);
    CHECK(cvf_write_fee_group(w, 1, 1, "f", ev, 0, NULL, 0) == -1);
    CHECK(cvf_writer_finish(w) == 0);
    cvf_writer_free(w);
    free(m.data);
}

static void test_name_truncation(void)
{
    char ascii[700], utf8[700];
    memset(ascii, 'a', 600);
    ascii[600] = 0;
    for (int i = 0; i < 300; i++) { /* é = c3 a9: byte 511 would split the 256th char */
        utf8[2 * i] = (char)0xc3;
        utf8[2 * i + 1] = (char)0xa9;
    }
    utf8[600] = 0;
    membuf m = {0};
    cvf_writer *w = cvf_writer_new(membuf_sink, &m);
    CHECK(cvf_write_process_name(w, 1, 1, ascii) == 0);
    CHECK(cvf_write_thread_name(w, 1, 1, utf8) == 0);
    CHECK(cvf_writer_finish(w) == 0);
    const uint8_t *p = m.data + 8 + 17;
    CHECK_EQ_U64(strlen((const char *)p), 511);
    p += 512 + 17;
    CHECK_EQ_U64(strlen((const char *)p), 510);
    CHECK(memcmp(p, utf8, 510) == 0);
    cvf_writer_free(w);
    free(m.data);
}

static void test_units(void)
{
    CHECK_EQ_U64(cvf_us_to_ticks(0.019), 2);
    CHECK_EQ_U64(cvf_us_to_ticks(188398827.269), 18839882727LL);
    CHECK(cvf_us_to_ticks(-0.019) == -2);
    CHECK(cvf_us_to_ticks(NAN) == 0);
    CHECK(cvf_us_to_ticks(INFINITY) == INT64_MAX);
    CHECK(cvf_us_to_ticks(-INFINITY) == INT64_MIN);
    CHECK(cvf_us_to_ticks(1e300) == INT64_MAX);
    CHECK(cvf_us_to_ticks(-1e300) == INT64_MIN);
    CHECK(cvf_us_to_ticks(9.2233720368547758e16) == INT64_MAX);
    CHECK_EQ_U64(cvf_dur_us_to_ticks(0.28), 28);
    CHECK_EQ_U64(cvf_dur_us_to_ticks(0.005), 1); /* half rounds away from zero */
    CHECK_EQ_U64(cvf_dur_us_to_ticks(-1.0), 0);
    CHECK_EQ_U64(cvf_dur_us_to_ticks(NAN), 0);
    CHECK(cvf_dur_us_to_ticks(1e300) == UINT64_MAX);
    CHECK(cvf_dur_us_to_ticks(INFINITY) == UINT64_MAX);

    cvf_fee_event ev[4] = {{5, 2}, {1, 9}, {5, 1}, {1, 3}};
    cvf_fee_sort(ev, 4);
    CHECK(ev[0].ts == 1 && ev[0].dur == 3 && ev[1].dur == 9 && ev[2].dur == 1 &&
          ev[3].dur == 2);
}

static void test_counter_bytes(void)
{
    membuf m = {0};
    cvf_writer *w = cvf_writer_new(membuf_sink, &m);
    const char *keys[2] = {"a", "b"};
    int64_t ts[2] = {1000, 2000};
    cvf_counter_value vals[4] = {
        {CVF_COUNTER_LONG, {.i = -3}}, {CVF_COUNTER_FLOAT, {.f = 2.5}},
        {CVF_COUNTER_SAME, {.i = 0}}, {CVF_COUNTER_LONG_STRING, {.s = "1180591620717411303424"}},
    };
    CHECK(cvf_write_counter_group(w, 3, 4, "mem", keys, 2, ts, 2, vals) == 0);
    int64_t bad_ts[2] = {2000, 1000};
    CHECK(cvf_write_counter_group(w, 3, 4, "mem", keys, 2, bad_ts, 2, vals) == -1);
    cvf_counter_value bad[4] = {vals[0], vals[1], vals[2], {CVF_COUNTER_LONG_STRING, {.s = "1x"}}};
    CHECK(cvf_write_counter_group(w, 3, 4, "mem", keys, 2, ts, 2, bad) == -1);
    CHECK(cvf_writer_finish(w) == 0);
    const uint8_t *p = m.data + 8;
    CHECK_EQ_U64(*p, 0x04);
    CHECK_EQ_U64(rd_u64(p + 1), 3);
    CHECK_EQ_U64(rd_u64(p + 9), 4);
    p += 17;
    CHECK(strcmp((const char *)p, "mem") == 0);
    p += 4;
    CHECK_EQ_U64(rd_u64(p), 2);
    p += 8;
    CHECK(memcmp(p, "a\0b\0", 4) == 0);
    p += 4;
    CHECK_EQ_U64(rd_u64(p), 2);
    CHECK_EQ_U64(rd_u64(p + 8), 1000);
    p += 16;
    CHECK_EQ_U64(*p, 0x23);
    CHECK((int64_t)rd_u64(p + 1) == -3);
    p += 9;
    CHECK_EQ_U64(*p, 0x24);
    double d;
    memcpy(&d, p + 1, 8);
    CHECK(d == 2.5);
    p += 9;
    CHECK_EQ_U64(rd_u64(p), 2000);
    p += 8;
    CHECK_EQ_U64(*p, 0x22);
    CHECK_EQ_U64(p[1], 0x25);
    CHECK(strcmp((const char *)p + 2, "1180591620717411303424") == 0);
    p += 2 + 23;
    CHECK_EQ_U64(*p, 0x05);
    cvf_writer_free(w);
    free(m.data);
}

static void test_sink_failure(void)
{
    membuf m = {0};
    m.fail_after = 100;
    cvf_writer *w = cvf_writer_new(membuf_sink, &m);
    size_t n = 100000;
    cvf_fee_event *ev = malloc(n * sizeof *ev);
    for (size_t i = 0; i < n; i++)
        ev[i] = (cvf_fee_event){(int64_t)i * 1000, 10};
    CHECK(cvf_write_fee_group(w, 1, 1, "f", ev, n, NULL, 0) == -1);
    CHECK(strstr(cvf_writer_error(w)->msg, "writing the trace failed") != NULL);
    CHECK(cvf_write_other_events(w, "[]", 2) == -1);
    CHECK(cvf_writer_finish(w) == -1);
    cvf_writer_free(w);
    free(ev);
    free(m.data);
}

/* A group far larger than the 64 KiB output buffer, with every varint width, and a zblob
 * larger than the buffer (the direct-to-sink path): decode everything back. */
static void test_large_group(void)
{
    size_t n = 300000;
    cvf_fee_event *ev = malloc(n * sizeof *ev);
    uint64_t x = 88172645463325252ULL;
    int64_t ts = -1000;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        static const uint64_t masks[4] = {0x3F, 0x3FFF, 0x3FFFFFFF, 0xFFFFFFFFFFULL};
        ts += (int64_t)(x & masks[x >> 62]);
        ev[i] = (cvf_fee_event){ts, (x >> 20) & masks[(x >> 60) & 3]};
    }
    size_t alen = 2 + n * 4;
    char *args = malloc(alen + 1);
    char *a = args;
    *a++ = '[';
    for (size_t i = 0; i < n; i++) {
        memcpy(a, i ? ",{}" : "{} ", 3);
        a += 3;
    }
    *a++ = ']';
    alen = (size_t)(a - args);
    membuf m = {0};
    cvf_writer *w = cvf_writer_new(membuf_sink, &m);
    CHECK(cvf_write_process_name(w, 1, 1, "p") == 0);
    CHECK(cvf_write_fee_group(w, 1, 1, "big", ev, n, args, alen) == 0);
    CHECK(cvf_writer_finish(w) == 0);
    const uint8_t *p = m.data + 8 + 17 + 2 + 17 + 4;
    CHECK_EQ_U64(rd_u64(p), n);
    uint64_t off = rd_u64(p + 8);
    p += 16;
    CHECK((int64_t)rd_u64(p) == ev[0].ts);
    p += 8;
    size_t bad = 0;
    int64_t t = ev[0].ts;
    if (rd_varint(&p) != ev[0].dur)
        bad++;
    for (size_t i = 1; i < n; i++) {
        t += (int64_t)rd_varint(&p);
        if (t != ev[i].ts || rd_varint(&p) != ev[i].dur)
            bad++;
    }
    CHECK_EQ_U64(bad, 0);
    CHECK_EQ_U64(off, (uint64_t)(p - m.data));
    uint64_t ulen = 0;
    char *txt = inflate_blob(p, &ulen);
    CHECK(txt && ulen == alen && memcmp(txt, args, alen) == 0);
    free(txt);
    cvf_writer_free(w);
    free(m.data);
    free(args);
    free(ev);
}

int main(void)
{
    test_empty_file();
    test_names_and_fee_bytes();
    test_fee_args_offset();
    test_order_and_limits();
    test_name_truncation();
    test_units();
    test_counter_bytes();
    test_sink_failure();
    test_large_group();
    return test_summary("test_cvf_writer");
}

/* test_live.c — the live aggregation of `vcattach top` (trace/live.c) through its public
 * header: self time from nested calls, p99, wait kinds, and the memory budget: a flood of new
 * keys and threads stays within it, and what did not fit is counted, never kept; malformed
 * frames are counted.  Frames are built here as an agent sends them (common/protocol.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cvf_test.h"
#include "protocol.h"
#include "vctrace.h"

static size_t chunk(unsigned char *buf, uint32_t owner, const struct vc_wire_record *r, uint32_t n)
{
    memcpy(buf, &owner, 4);
    memcpy(buf + 4, &n, 4);
    memcpy(buf + 8, r, n * sizeof *r);
    return 8 + n * sizeof *r;
}

static size_t names(unsigned char *buf, uint32_t id, const char *name)
{
    uint32_t len = (uint32_t)strlen(name);
    memcpy(buf, &id, 4);
    memcpy(buf + 4, &len, 4);
    memcpy(buf + 8, name, len);
    return 8 + len;
}

static void clock1(vct_live *lv, int64_t now)
{
    struct vc_wire_clock c = {0, 0, 1.0}; /* raw ticks are ns */
    vct_live_frame(lv, 0, 42, VC_MSG_CLOCK, &c, sizeof c, now);
}

static void test_self_time(void)
{
    vct_live *lv = vct_live_new(64u << 20, 5, 0);
    CHECK(lv != NULL);
    clock1(lv, 0);
    static unsigned char buf[1 << 16];
    size_t n = names(buf, 1, "parent (app.py:1)");
    vct_live_frame(lv, 0, 42, VC_MSG_NAMES, buf, n, 10);
    n = names(buf, 2, "child (app.py:5)");
    vct_live_frame(lv, 0, 42, VC_MSG_NAMES, buf, n, 10);
    n = names(buf, 3, "time.sleep");
    vct_live_frame(lv, 0, 42, VC_MSG_NAMES, buf, n, 10);
    /* parent [0, 1000 ms) with 10 children of 50 ms each and a 200 ms sleep, ten times */
    struct vc_wire_record r[12];
    for (int k = 0; k < 10; k++) {
        uint64_t base = (uint64_t)k * 1000000000ull;
        for (int i = 0; i < 10; i++)
            r[i] = (struct vc_wire_record){base + (uint64_t)i * 60000000ull, 50000000ull, 2, 0};
        r[10] = (struct vc_wire_record){base + 700000000ull, 200000000ull, 3, 0};
        r[11] = (struct vc_wire_record){base, 1000000000ull, 1, 0};
        n = chunk(buf, 0, r, 12);
        vct_live_frame(lv, 0, 42, VC_MSG_CHUNK, buf, n, 1000 + k * 100);
    }
    vct_live_now(lv, 2000);
    vct_live_row rows[8];
    size_t got = vct_live_functions(lv, VCT_LIVE_WORK, VCT_LIVE_BY_SELF, rows, 8);
    CHECK(got == 2);
    /* per second of a 2 s window: child 10*10*50 ms = 5000 ms / 2 s; parent's self 300 ms x10 */
    CHECK(!strcmp(rows[0].name, "child (app.py:5)"));
    CHECK(rows[0].self_ms > 2400 && rows[0].self_ms < 2600);
    CHECK(!strcmp(rows[1].name, "parent (app.py:1)"));
    CHECK(rows[1].self_ms > 1400 && rows[1].self_ms < 1600);
    CHECK(rows[1].total_ms > 4900 && rows[1].total_ms < 5100);
    CHECK(rows[0].p99_ms > 40 && rows[0].p99_ms < 60); /* within a bin: 19% */
    vct_live_wait w[4];
    CHECK(vct_live_waits(lv, w, 4) == 1);
    CHECK(!strcmp(w[0].kind, "sleep"));
    CHECK(w[0].ms > 900 && w[0].ms < 1100);
    /* after the window, nothing is left in the views */
    vct_live_now(lv, 60000);
    CHECK(vct_live_functions(lv, VCT_LIVE_WORK, VCT_LIVE_BY_SELF, rows, 8) == 0);
    vct_live_free(lv);
}

static void test_budget(void)
{
    uint64_t budget = 4u << 20;
    vct_live *lv = vct_live_new(budget, 5, 0);
    CHECK(lv != NULL);
    static unsigned char buf[VC_MSG_MAX];
    struct vc_wire_record r[1000];
    uint64_t sent = 0;
    /* 200 000 keys on 20 000 threads, each named with 500 bytes */
    for (uint32_t k = 0; k < 200; k++) {
        size_t off = 0;
        for (uint32_t i = 0; i < 1000; i++) {
            char name[512];
            memset(name, 'a' + (int)(i % 26), 500);
            name[500] = '\0';
            off += names(buf + off, k * 1000 + i, name);
            r[i] = (struct vc_wire_record){i, 10, k * 1000 + i, 0};
        }
        vct_live_frame(lv, 0, 42, VC_MSG_NAMES, buf, off, 10);
        size_t n = chunk(buf, k * 100, r, 1000);
        vct_live_frame(lv, 0, 42, VC_MSG_CHUNK, buf, n, 10);
        sent += 1000;
    }
    vct_live_status st;
    vct_live_status_of(lv, &st);
    CHECK(st.mem_bytes <= budget);
    CHECK(st.events == sent);
    CHECK(st.unfitted > 0);
    CHECK(st.functions < 200000);
    /* malformed frames: counted, nothing read past them */
    uint32_t bad[2] = {0, 1000000};
    vct_live_frame(lv, 0, 42, VC_MSG_CHUNK, bad, sizeof bad, 20);
    uint32_t badname[3] = {7, 0xffffffffu, 0};
    vct_live_frame(lv, 0, 42, VC_MSG_NAMES, badname, sizeof badname, 20);
    vct_live_frame(lv, 0, 42, VC_MSG_CLOCK, bad, 3, 20);
    vct_live_status_of(lv, &st);
    CHECK(st.malformed == 3);
    CHECK(vct_live_new(1024, 5, 0) == NULL); /* a budget that cannot hold the tables */
    vct_live_free(lv);
}

int main(void)
{
    test_self_time();
    test_budget();
    (void)membuf_sink;
    return test_summary("test_live");
}

/* fuzz_live.c — libFuzzer harness: the live aggregation of `vcattach top` (trace/live.c)
 * fed the frames an agent streams (the target's user's code: SECURITY.md §4).
 *
 * Input: the shape of fuzz_frames.c's (so its seeds serve here too): two bytes, then frames
 * as they come on the control socket (u32 type | u32 length | payload).  Byte 0 picks the
 * process number each frame is taken for (a tree's member: 0..3), byte 1 the budget (a small
 * one makes every allocation meet it; 8 MiB otherwise: the tables scale with it, the checks
 * do not).  Every frame goes to vct_live_frame, one ms apart;
 * then every view is taken, at the end and past the window.  Nothing may crash, leak, read
 * out of bounds, or pass the budget.
 * Built by tests/fuzz/fuzz.mk; seeds in tests/fuzz/corpus/live. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vctrace.h"

static void views(vct_live *lv, int64_t now)
{
    static vct_live_row rows[64];
    vct_live_wait waits[16];
    static vct_live_thread threads[64];
    vct_live_status st;
    vct_live_now(lv, now);
    vct_live_functions(lv, VCT_LIVE_WORK, VCT_LIVE_BY_SELF, rows, 64);
    vct_live_functions(lv, VCT_LIVE_REQUESTS, VCT_LIVE_BY_CALLS, rows, 64);
    vct_live_waits(lv, waits, 16);
    vct_live_threads(lv, threads, 64);
    vct_live_status_of(lv, &st);
    if (st.mem_bytes > st.budget)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t procs = data[0], small = data[1] & 1;
    vct_live *lv = vct_live_new(small ? 2u << 20 : 8u << 20, 5, 0);
    if (!lv)
        return 0;
    size_t off = 2;
    int64_t now = 0;
    while (size - off >= 8) {
        uint32_t type, len;
        memcpy(&type, data + off, 4);
        memcpy(&len, data + off + 4, 4);
        off += 8;
        if (len > size - off)
            len = (uint32_t)(size - off);
        unsigned proc = (unsigned)(now % 4) & (procs & 3);
        vct_live_frame(lv, proc, 1000 + proc, type, data + off, len, now);
        off += len;
        now += 1;
    }
    views(lv, now);
    views(lv, now + 2500);
    views(lv, now + 60000);
    vct_live_free(lv);
    return 0;
}

/* window.c — resolving a time window against a .cvf and applying it to a loaded trace
 * (window.h).  Resolving is one pass over the FEE groups' time streams only (no args, no
 * JSON), so it costs a fraction of the conversion it precedes.
 */
#include "window.h"

#include "cvf_reader.h"

static int on_fee_start(void *ctx, const cvf_fee_group *g)
{
    int64_t *first = ctx;
    if (g->count && (*first == INT64_MAX || g->ts[0] < *first))
        *first = g->ts[0]; /* a group is sorted by ts: its first is its earliest */
    return 0;
}

int vct_window_resolve(const void *cvf, size_t size, int64_t from_rel, int64_t to_rel,
                       uint64_t min_dur, vct_window *w, cvf_error *err)
{
    static const cvf_visitor v = {.fee_group = on_fee_start};
    int64_t first = INT64_MAX;
    if (cvf_read(cvf, size, &v, &first, CVF_READ_SKIP_JSON, err) != 0)
        return -1;
    if (first == INT64_MAX)
        first = 0; /* no calls: nothing to window but counters, counted from 0 */
    /* first may be negative (a .cvf's timestamps are any int64, the file its writer's), where
     * INT64_MAX - first would overflow; from_rel and to_rel are >= 0, so first + them cannot
     * (fuzz_offline found it: tests/fuzz/regressions/offline/window-first-call-negative.cvf). */
    w->from = first >= 0 && from_rel > INT64_MAX - first ? INT64_MAX : first + from_rel;
    w->to = to_rel < 0 || (first >= 0 && to_rel > INT64_MAX - first) ? INT64_MAX : first + to_rel;
    w->min_dur = min_dur;
    return 0;
}

void vct_window_apply(vct_trace *t, const vct_window *w)
{
    t->nevents = 0;
    for (size_t i = 0; i < t->nthreads; i++) {
        vct_thread *th = &t->threads[i];
        size_t kept = 0;
        for (size_t k = 0; k < th->nevents; k++) {
            vct_event ev = th->events[k];
            int64_t ts = ev.ts;
            uint64_t dur = (uint64_t)ev.end - (uint64_t)ev.ts; /* end >= ts: exact, no overflow */
            if (!vct_window_clip(w, &ts, &dur))
                continue;
            ev.ts = ts;
            ev.end = ts + (int64_t)dur;
            if (!t->nevents || ev.ts < t->min_ts)
                t->min_ts = ev.ts;
            if (!t->nevents || ev.end > t->max_end)
                t->max_end = ev.end;
            t->nevents++;
            th->events[kept++] = ev;
        }
        th->nevents = kept;
    }
}

/* request_track.c — the requests as Chrome-trace slices on "requests" tracks
 * (request_track.h).
 *
 * Lanes are assigned greedily per process in start order: a request goes to the first lane
 * whose last slice has ended, else to a new lane.  The events are built with jansson and
 * written compactly (json_text.c); convert_job.c hands the text to chrome.c, which splices it
 * in after the trace's own events.
 */
#include "request_track.h"
#include "pyname.h"

#include <stdlib.h>
#include <string.h>

typedef struct lane_state {
    uint64_t pid;
    int64_t *free_at; /* per lane: when its last slice ends */
    size_t nlanes, cap;
} lane_state;

typedef struct sort_ctx {
    const vct_trace *t;
    const vct_requests *r;
} sort_ctx;

/* By process, then start. */
static int cmp_start(const void *x, const void *y, void *ctx)
{
    const sort_ctx *c = ctx;
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    const vct_request *a = &c->r->reqs[i], *b = &c->r->reqs[j];
    uint64_t pa = c->t->threads[a->thread].pid, pb = c->t->threads[b->thread].pid;
    if (pa != pb)
        return pa < pb ? -1 : 1;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    return i < j ? -1 : i > j;
}


/* The name and sort index of lane `lane` of process pid. */
static int put_lane_names(jtext *out, uint64_t pid, size_t lane)
{
    char name[32];
    if (lane)
        snprintf(name, sizeof name, "requests %zu", lane + 1);
    else
        snprintf(name, sizeof name, "requests");
    json_int_t tid = (json_int_t)(VCT_REQ_TRACK_TID + lane);
    if (jtext_put_event(out, json_pack("{s:s,s:s,s:I,s:I,s:{s:s}}", "ph", "M", "name", "thread_name",
                                 "pid", (json_int_t)pid, "tid", tid, "args", "name", name)) < 0)
        return -1;
    return jtext_put_event(out, json_pack("{s:s,s:s,s:I,s:I,s:{s:I}}", "ph", "M", "name",
                                    "thread_sort_index", "pid", (json_int_t)pid, "tid", tid,
                                    "args", "sort_index", (json_int_t)-1000 + (json_int_t)lane));
}

/* The lane for a request [ts, end) of process pid: the first free one, or a new one (named
 * on first use).  SIZE_MAX on allocation failure. */
static size_t take_lane(lane_state *ls, jtext *out, uint64_t pid, int64_t ts, int64_t end)
{
    if (ls->pid != pid) {
        ls->pid = pid;
        ls->nlanes = 0;
    }
    size_t lane = 0;
    while (lane < ls->nlanes && ls->free_at[lane] > ts)
        lane++;
    if (lane == ls->nlanes) {
        if (ls->nlanes == ls->cap) {
            size_t cap = ls->cap ? ls->cap * 2 : 8;
            int64_t *bigger = realloc(ls->free_at, cap * sizeof *bigger);
            if (!bigger)
                return SIZE_MAX;
            ls->free_at = bigger;
            ls->cap = cap;
        }
        ls->nlanes++;
        if (put_lane_names(out, pid, lane) < 0)
            return SIZE_MAX;
    }
    ls->free_at[lane] = end;
    return lane;
}

static const char *cut_text(unsigned cut)
{
    return cut == (VCT_REQ_CUT_START | VCT_REQ_CUT_END) ? "start and end"
           : cut == VCT_REQ_CUT_START                   ? "start"
           : cut == VCT_REQ_CUT_END                     ? "end"
                                                        : NULL;
}

/* The slice of request q on its lane. */
static int put_request(jtext *out, const vct_trace *t, const vct_request *q, int64_t ts,
                       int64_t end, size_t lane)
{
    const vct_thread *th = &t->threads[q->thread];
    char shortname[256];
    json_t *args = json_pack("{s:s,s:I,s:f}", "function", t->funcs[q->func], "tid",
                             (json_int_t)th->tid, "duration_ms",
                             (double)vct_sat_diff(q->end, q->ts) / (VCT_TICKS_PER_US * 1000.0));
    const char *cut = cut_text(q->cut);
    if (args && cut && json_object_set_new(args, "cut_by_trace", json_string(cut)) < 0) {
        json_decref(args);
        args = NULL;
    }
    if (!args)
        return -1;
    return jtext_put_event(out, json_pack("{s:s,s:s,s:s,s:I,s:I,s:f,s:f,s:o}", "ph", "X", "name",
                                    vct_pyname_short(t->funcs[q->func], shortname, sizeof shortname),
                                    "cat", "request", "pid", (json_int_t)th->pid, "tid",
                                    (json_int_t)(VCT_REQ_TRACK_TID + lane), "ts",
                                    (double)ts / VCT_TICKS_PER_US, "dur",
                                    (double)vct_sat_diff(end, ts) / VCT_TICKS_PER_US,
                                    "args", args));
}

int vct_request_track_json(const vct_trace *t, const vct_requests *r, const vct_window *w,
                           jtext *out)
{
    size_t *order = malloc((r->n ? r->n : 1) * sizeof *order);
    if (!order)
        return -1;
    for (size_t i = 0; i < r->n; i++)
        order[i] = i;
    sort_ctx sc = {t, r};
    qsort_r(order, r->n, sizeof *order, cmp_start, &sc);
    lane_state ls = {.pid = UINT64_MAX};
    int rc = 0;
    for (size_t i = 0; !rc && i < r->n; i++) {
        const vct_request *q = &r->reqs[order[i]];
        int64_t ts = q->ts;
        uint64_t dur = (uint64_t)vct_sat_diff(q->end, q->ts);
        if (w && !vct_window_clip(w, &ts, &dur))
            continue;
        uint64_t pid = t->threads[q->thread].pid;
        size_t lane = take_lane(&ls, out, pid, ts, vct_sat_add(ts, (int64_t)dur));
        rc = lane == SIZE_MAX ? -1
                              : put_request(out, t, q, ts, vct_sat_add(ts, (int64_t)dur), lane);
    }
    free(ls.free_at);
    free(order);
    return rc;
}

/* live_view.c — the rows `vcattach top` shows, made from live.c's buckets (live.h): each
 * function's and thread's seconds of the window summed, converted from the agent's raw ticks
 * with its process's clock fit, per second of the window, sorted.  Names are copied as the
 * agent sent them: the screen sanitizes them (common/term.h).
 *
 * The same function in several processes of a tree is one row: rows are sorted by name and
 * equal names merged (their rates add up; p50/p99: the largest of theirs).
 */
#include "live.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "waits.h"

struct acc {
    uint64_t self, total, max, calls;
    uint32_t hist[LIVE_HIST_BINS];
};

static void sum_func(const struct live_func *f, unsigned nsec, uint64_t first, uint64_t last,
                     struct acc *a)
{
    memset(a, 0, sizeof *a);
    for (unsigned i = 0; i < nsec; i++) {
        const struct live_bucket *b = &f->b[i];
        if (b->second < first || b->second > last)
            continue;
        a->self += b->self;
        a->total += b->total;
        a->calls += b->calls;
        if (b->max > a->max)
            a->max = b->max;
        for (unsigned k = 0; k < LIVE_HIST_BINS; k++)
            a->hist[k] += b->hist[k];
    }
}

static double quantile(const struct acc *a, double q)
{
    if (!a->calls)
        return 0;
    uint64_t want = (uint64_t)(q * (double)a->calls);
    if (want >= a->calls)
        want = a->calls - 1;
    uint64_t seen = 0;
    for (unsigned k = 0; k < LIVE_HIST_BINS; k++) {
        seen += a->hist[k];
        if (seen > want)
            return live_bin_value(k);
    }
    return (double)a->max;
}

static int by_name(const void *x, const void *y)
{
    return strcmp(((const vct_live_row *)x)->name, ((const vct_live_row *)y)->name);
}

static enum vct_live_sort sort_key;
static int by_key(const void *x, const void *y)
{
    const vct_live_row *a = x, *b = y;
    double ka = sort_key == VCT_LIVE_BY_CALLS ? a->calls : sort_key == VCT_LIVE_BY_TOTAL ? a->total_ms : a->self_ms;
    double kb = sort_key == VCT_LIVE_BY_CALLS ? b->calls : sort_key == VCT_LIVE_BY_TOTAL ? b->total_ms : b->self_ms;
    if (ka != kb)
        return ka < kb ? 1 : -1;
    return strcmp(a->name, b->name);
}

/* Merges adjacent rows of the same name (sorted by name); returns the new count. */
static size_t merge_names(vct_live_row *rows, size_t n)
{
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (out && !strcmp(rows[out - 1].name, rows[i].name)) {
            vct_live_row *m = &rows[out - 1];
            m->self_ms += rows[i].self_ms;
            m->total_ms += rows[i].total_ms;
            m->calls += rows[i].calls;
            m->n += rows[i].n;
            if (rows[i].p50_ms > m->p50_ms) m->p50_ms = rows[i].p50_ms;
            if (rows[i].p99_ms > m->p99_ms) m->p99_ms = rows[i].p99_ms;
            if (rows[i].max_ms > m->max_ms) m->max_ms = rows[i].max_ms;
            continue;
        }
        rows[out++] = rows[i];
    }
    return out;
}

size_t vct_live_functions(vct_live *lv, enum vct_live_what what, enum vct_live_sort sort,
                          vct_live_row *rows, size_t max)
{
    uint64_t first, last;
    double ms;
    live_window(lv, &first, &last, &ms);
    double per_s = 1000.0 / ms;
    vct_live_row *all = calloc(lv->nfuncs ? lv->nfuncs : 1, sizeof *all);
    struct acc *a = malloc(sizeof *a);
    size_t n = 0;
    for (size_t i = 0; all && a && i < lv->fcap; i++) {
        const struct live_func *f = &lv->funcs[i];
        if (!f->b || (what == VCT_LIVE_REQUESTS ? !f->request : f->wait_kind != 0))
            continue;
        sum_func(f, lv->nsec, first, last, a);
        if (!a->calls || n >= lv->nfuncs)
            continue;
        double ns = live_rate(lv, f->proc) / 1e6; /* ms per raw tick */
        vct_live_row *r = &all[n++];
        if (f->name)
            snprintf(r->name, sizeof r->name, "%s", f->name);
        else
            snprintf(r->name, sizeof r->name, "(not named yet: key %u)", (unsigned)f->id);
        r->self_ms = (double)a->self * ns * per_s;
        r->total_ms = (double)a->total * ns * per_s;
        r->calls = (double)a->calls * per_s;
        r->n = a->calls;
        r->p50_ms = quantile(a, 0.50) * ns;
        r->p99_ms = quantile(a, 0.99) * ns;
        r->max_ms = (double)a->max * ns;
    }
    free(a);
    if (!all)
        return 0;
    qsort(all, n, sizeof *all, by_name);
    n = merge_names(all, n);
    sort_key = sort;
    qsort(all, n, sizeof *all, by_key);
    size_t k = n < max ? n : max;
    memcpy(rows, all, k * sizeof *rows);
    free(all);
    return k;
}

size_t vct_live_waits(vct_live *lv, vct_live_wait *rows, size_t max)
{
    uint64_t first, last;
    double ms;
    live_window(lv, &first, &last, &ms);
    double per_s = 1000.0 / ms;
    vct_live_wait kinds[VCT_WAIT_NKINDS];
    memset(kinds, 0, sizeof kinds);
    for (size_t i = 0; i < lv->fcap; i++) {
        const struct live_func *f = &lv->funcs[i];
        if (!f->b || !f->wait_kind || f->wait_kind >= VCT_WAIT_NKINDS)
            continue;
        double ns = live_rate(lv, f->proc) / 1e6;
        for (unsigned s = 0; s < lv->nsec; s++) {
            const struct live_bucket *b = &f->b[s];
            if (b->second < first || b->second > last)
                continue;
            kinds[f->wait_kind].ms += (double)b->self * ns * per_s;
            kinds[f->wait_kind].calls += b->calls * per_s;
        }
    }
    size_t n = 0;
    for (int k = 1; k < VCT_WAIT_NKINDS; k++) {
        if (kinds[k].calls <= 0)
            continue;
        kinds[k].kind = vct_wait_kind_name((enum vct_wait_kind)k);
        size_t j = n++; /* insertion: longest first */
        while (j > 0 && kinds[j - 1].ms < kinds[k].ms) {
            kinds[j] = kinds[j - 1];
            j--;
        }
        kinds[j] = kinds[k];
    }
    size_t out = n < max ? n : max;
    memcpy(rows, kinds, out * sizeof *rows);
    return out;
}

static int by_busy(const void *x, const void *y)
{
    const vct_live_thread *a = x, *b = y;
    double ka = a->work_ms + a->wait_ms, kb = b->work_ms + b->wait_ms;
    if (ka != kb)
        return ka < kb ? 1 : -1;
    return a->tid < b->tid ? -1 : a->tid > b->tid;
}

size_t vct_live_threads(vct_live *lv, vct_live_thread *rows, size_t max)
{
    uint64_t first, last;
    double ms;
    live_window(lv, &first, &last, &ms);
    double per_s = 1000.0 / ms;
    vct_live_thread *all = calloc(lv->nthreads ? lv->nthreads : 1, sizeof *all);
    if (!all)
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < lv->tcap && n < lv->nthreads; i++) {
        const struct live_thread *t = &lv->threads[i];
        if (!t->b)
            continue;
        double ns = live_rate(lv, t->proc) / 1e6;
        vct_live_thread r = {.pid = t->proc < lv->nprocs ? lv->procs[t->proc].pid : 0,
                             .tid = t->tid};
        snprintf(r.name, sizeof r.name, "%s", t->name);
        for (unsigned s = 0; s < lv->nsec; s++) {
            const struct live_tbucket *b = &t->b[s];
            if (b->second < first || b->second > last)
                continue;
            r.work_ms += (double)b->work * ns * per_s;
            r.wait_ms += (double)b->wait * ns * per_s;
            r.calls += b->calls * per_s;
        }
        if (r.calls > 0)
            all[n++] = r;
    }
    qsort(all, n, sizeof *all, by_busy);
    size_t k = n < max ? n : max;
    memcpy(rows, all, k * sizeof *rows);
    free(all);
    return k;
}

void vct_live_status_of(vct_live *lv, vct_live_status *st)
{
    uint64_t first, last;
    double ms;
    live_window(lv, &first, &last, &ms);
    memset(st, 0, sizeof *st);
    st->window_s = ms / 1000.0;
    uint64_t recs = 0;
    for (unsigned i = 0; i < lv->nsec; i++)
        if (lv->rec_second_of[i] >= first && lv->rec_second_of[i] <= last)
            recs += lv->rec_seconds[i];
    st->events_per_s = (double)recs * 1000.0 / ms;
    st->events = lv->records;
    st->dropped = lv->dropped;
    st->unfitted = lv->unfitted;
    st->malformed = lv->malformed;
    st->mem_bytes = lv->used;
    st->budget = lv->budget;
    st->processes = lv->nprocs;
    st->functions = lv->nfuncs;
    size_t active = 0;
    for (size_t i = 0; i < lv->tcap; i++) {
        const struct live_thread *t = &lv->threads[i];
        for (unsigned s = 0; t->b && s < lv->nsec; s++)
            if (t->b[s].second >= first && t->b[s].second <= last && t->b[s].calls) {
                active++;
                break;
            }
    }
    st->threads = active;
}

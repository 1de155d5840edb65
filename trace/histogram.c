/* histogram.c — log-bucketed duration histograms and nearest-rank percentiles (histogram.h).
 *
 * The bucket of a duration is computed with log(); adding is one log and a counter increment
 * (the summary adds one per call).  The counter range grows in both directions by doubling,
 * so a histogram is one allocation however its values arrive.
 */
#include "histogram.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint32_t bucket_of(int64_t ticks)
{
    if (ticks < VCT_HIST_EXACT)
        return ticks < 0 ? 0 : (uint32_t)ticks;
    static double inv_log_gamma;
    if (inv_log_gamma == 0)
        inv_log_gamma = 1.0 / log(VCT_HIST_GAMMA);
    double j = log((double)ticks / VCT_HIST_EXACT) * inv_log_gamma;
    return VCT_HIST_EXACT + (uint32_t)j;
}

/* The value reported for bucket b: exact below VCT_HIST_EXACT, else the harmonic midpoint. */
static int64_t bucket_value(uint32_t b)
{
    if (b < VCT_HIST_EXACT)
        return b;
    double lo = VCT_HIST_EXACT * pow(VCT_HIST_GAMMA, (double)(b - VCT_HIST_EXACT));
    double hi = lo * VCT_HIST_GAMMA;
    double mid = 2.0 * lo * hi / (lo + hi);
    return mid >= 9.2e18 ? INT64_MAX : (int64_t)(mid + 0.5);
}

/* Makes room for bucket b.  0, or -1 on allocation failure. */
static int cover(vct_hist *h, uint32_t b)
{
    if (h->n && b >= h->lo && b < h->lo + h->n)
        return 0;
    uint32_t lo = h->n ? (b < h->lo ? b : h->lo) : b;
    uint32_t hi = h->n ? (b >= h->lo + h->n ? b + 1 : h->lo + h->n) : b + 1;
    uint32_t want = hi - lo, n = h->n ? h->n : 8;
    while (n < want)
        n *= 2;
    /* keep the range's growth on the side that grew */
    if (h->n && b < h->lo)
        lo = hi >= n ? hi - n : 0;
    uint64_t *counts = calloc(n, sizeof *counts);
    if (!counts)
        return -1;
    if (h->n)
        memcpy(counts + (h->lo - lo), h->counts, h->n * sizeof *counts);
    free(h->counts);
    h->counts = counts;
    h->lo = lo;
    h->n = n;
    return 0;
}

int vct_hist_add(vct_hist *h, int64_t ticks)
{
    if (ticks < 0)
        ticks = 0;
    uint32_t b = bucket_of(ticks);
    if (cover(h, b) < 0)
        return -1;
    h->counts[b - h->lo]++;
    if (!h->total || ticks < h->min)
        h->min = ticks;
    if (!h->total || ticks > h->max)
        h->max = ticks;
    h->total++;
    return 0;
}

/* ceil(q·n), in [1, n]. */
static uint64_t nearest_rank(double q, uint64_t n)
{
    double r = ceil(q * (double)n);
    if (!(r >= 1))
        return 1;
    return r >= (double)n ? n : (uint64_t)r;
}

int64_t vct_hist_quantile(const vct_hist *h, double q)
{
    if (!h->total)
        return 0;
    uint64_t rank = nearest_rank(q, h->total), seen = 0;
    if (rank == 1)
        return h->min;
    if (rank == h->total)
        return h->max;
    for (uint32_t i = 0; i < h->n; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            int64_t v = bucket_value(h->lo + i);
            return v < h->min ? h->min : v > h->max ? h->max : v;
        }
    }
    return h->max;
}

void vct_hist_reset(vct_hist *h)
{
    free(h->counts);
    memset(h, 0, sizeof *h);
}

int64_t vct_quantile_sorted(const int64_t *sorted, size_t n, double q)
{
    return n ? sorted[nearest_rank(q, n) - 1] : 0;
}

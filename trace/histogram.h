/* histogram.h — a duration distribution in bounded memory: percentiles with ≤ 1 % error.
 *
 * `vcattach summary` prints p50 and p99 per function, over traces of 100 M calls: keeping
 * every duration is not bounded, so each function gets a log-bucketed histogram instead (the
 * DDSketch idea).  Durations below VCT_HIST_EXACT ticks (1.28 µs) have a bucket each and are
 * exact; above, bucket j holds [E·γ^j, E·γ^(j+1)) with γ = 1.02, and a quantile is reported as
 * the bucket's harmonic midpoint 2·lo·hi/(lo+hi), whose relative error is at most
 * (γ-1)/(γ+1) < 0.99 % of the true value (then clamped to the exact min and max).
 * A histogram keeps one counter per bucket between its smallest and largest bucket seen, so
 * its size depends on the spread of the durations, never on their number: at most ~2,100
 * buckets (16.8 KB) for durations from 10 ns to 2^63 ticks, a few hundred for a typical
 * function (100 buckets cover a factor 7 of spread).
 *
 * Percentiles are by nearest rank: pq is the ceil(q·n)-th smallest duration (q in (0, 1]).
 */
#ifndef VCT_HISTOGRAM_H
#define VCT_HISTOGRAM_H

#include <stddef.h>
#include <stdint.h>

#define VCT_HIST_GAMMA 1.02
#define VCT_HIST_EXACT 128 /* ticks below this are counted exactly */
/* The worst relative error of a reported percentile is vctrace.h's VCT_PERCENTILE_ERROR_TEXT
 * ("0.99 percent", for --help and docs): change both with VCT_HIST_GAMMA. */

typedef struct vct_hist {
    uint64_t *counts; /* counts[i] is bucket lo + i */
    uint32_t lo, n;   /* buckets [lo, lo + n) are allocated; n = 0: empty */
    uint64_t total;
    int64_t min, max; /* exact */
} vct_hist;

/* Adds one duration (ticks, >= 0).  0, or -1 on allocation failure (h unchanged). */
int vct_hist_add(vct_hist *h, int64_t ticks);

/* The nearest-rank q-quantile (0 < q <= 1), within the stated error; 0 when empty. */
int64_t vct_hist_quantile(const vct_hist *h, double q);

/* Frees the buckets and empties h (it can be reused). */
void vct_hist_reset(vct_hist *h);

/* The nearest-rank q-quantile of n exact values sorted ascending (requests keep theirs). */
int64_t vct_quantile_sorted(const int64_t *sorted, size_t n, double q);

#endif /* VCT_HISTOGRAM_H */

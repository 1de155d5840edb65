/* window.h — `vcattach convert --from S --to S --min-dur DUR`: the part of a trace to write.
 *
 * A long or busy trace gives an output no viewer can open (4 s of a busy server: 739 MB of
 * Chrome JSON).  A window keeps the calls that overlap [from, to] (seconds into the trace,
 * counted from its first call), clipped to it so that calls stay nested, and leaves out the
 * calls shorter than min_dur (short calls are leaves: dropping them never orphans a child).
 * Counters outside the window go too; other events (few) are kept.
 */
#ifndef VCT_WINDOW_H
#define VCT_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "cvf.h"
#include "model.h"

typedef struct vct_window {
    int64_t from, to; /* absolute ticks (after vct_window_resolve) */
    uint64_t min_dur; /* ticks */
} vct_window;

/* Turns from/to relative to the trace's first call (ticks; to < 0: no end) into absolute
 * ticks of the .cvf at cvf[0 .. size).  0, or -1 with err (a malformed file). */
int vct_window_resolve(const void *cvf, size_t size, int64_t from_rel, int64_t to_rel,
                       uint64_t min_dur, vct_window *w, cvf_error *err);

/* Whether a call [*ts, *ts + *dur) is kept; if so it is clipped to the window. */
static inline int vct_window_clip(const vct_window *w, int64_t *ts, uint64_t *dur)
{
    if (*dur < w->min_dur)
        return 0;
    int64_t start = *ts;
    int64_t end = *dur > (uint64_t)(INT64_MAX - (start > 0 ? start : 0)) ? INT64_MAX
                                                                       : start + (int64_t)*dur;
    if (end < w->from || start > w->to)
        return 0;
    if (start < w->from)
        start = w->from;
    if (end > w->to)
        end = w->to;
    *ts = start;
    *dur = (uint64_t)(end - start);
    return 1;
}

/* Whether an instant (a counter sample) at ts is inside the window. */
static inline int vct_window_has(const vct_window *w, int64_t ts)
{
    return ts >= w->from && ts <= w->to;
}

/* Applies the window to a loaded trace: events dropped or clipped in place (their order
 * stays valid), the trace's span and count updated. */
void vct_window_apply(vct_trace *t, const vct_window *w);

#endif /* VCT_WINDOW_H */

/* summary.h — where the time of a trace went: per-function self time, inclusive time, calls,
 * mean and max duration, over one thread or several merged (what `vcattach summary` prints).
 *
 * Times come from one nesting walk per thread (model.h):
 *   self  = a call's duration minus its direct children's (clipped) durations;
 *   total = inclusive time, counting recursion once: only calls with no active call of the
 *           same function below them on the stack add their duration, so f→g→f is not
 *           counted twice for f;
 *   mean, max over every call (recursive ones included).
 * A section's `busy` time is the sum of its root calls' durations: the base of percentages.
 * Computation only; printing is the caller's.
 */
#ifndef VCT_SUMMARY_H
#define VCT_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

enum vct_sort_key { VCT_SORT_SELF, VCT_SORT_TOTAL, VCT_SORT_CALLS };

typedef struct vct_func_stats {
    uint64_t calls;
    int64_t self, total, sum_dur, max_dur; /* ticks */
} vct_func_stats;

/* One section (a thread, or all threads when merged) being accumulated. */
typedef struct vct_summary {
    const vct_trace *trace;
    vct_func_stats *stats; /* [nfuncs], indexed by function id; zero outside `touched` */
    uint32_t *active;      /* [nfuncs]: calls of the function open on the current stack */
    uint32_t *touched;     /* ids of the functions with calls in this section */
    size_t ntouched;
    uint64_t calls;
    int64_t busy;          /* time in calls: the sum of root call durations */
    enum vct_sort_key sort;
} vct_summary;

/* Allocates the per-function arrays for t.  0, or -1 on allocation failure. */
int vct_summary_init(vct_summary *s, const vct_trace *t);
void vct_summary_free(vct_summary *s);

/* Adds one thread's calls to the section.  0, or -1 on allocation failure. */
int vct_summary_add_thread(vct_summary *s, const vct_thread *th);

/* Orders `touched` by key, descending (ties: by function name). */
void vct_summary_sort(vct_summary *s, enum vct_sort_key key);

/* Empties the section for the next one (keeps the arrays). */
void vct_summary_reset(vct_summary *s);

/* Which threads get a table when there are more than max_threads: the ones with the most
 * calls (a thread-per-request server has hundreds of tiny threads).  Returns a malloc'd flag
 * per thread (1 = shown), or NULL with *failed set on allocation failure; NULL and !*failed
 * when every thread fits. */
unsigned char *vct_summary_busiest_threads(const vct_trace *t, size_t max_threads, int *failed);

#endif /* VCT_SUMMARY_H */

/* model_runs.h — the compact form of a thread's calls, read back in walk order
 * (model_runs.c; the form itself is in model.h: vct_run, vct_thread.runs/packed).
 *
 * Internal to trace/: model.c's walk and counts use it, nothing else needs to know a thread
 * can be compact.
 */
#ifndef VCT_MODEL_RUNS_H
#define VCT_MODEL_RUNS_H

#include "model.h"

typedef struct vct_run_cursor {
    const unsigned char *p; /* the next event's bytes */
    uint32_t left;          /* events left in the run after `ev` */
    uint32_t run;           /* the run's index: the tie-break, as insertion order */
    vct_event ev;           /* the run's current event */
} vct_run_cursor;

/* A k-way merge of a compact thread's runs (a binary heap of their cursors). */
typedef struct vct_merge {
    const vct_run *runs;
    vct_run_cursor *cur;
    uint32_t *heap; /* cursor indexes, the next event's at [0] */
    size_t n;
} vct_merge;

/* Starts the merge.  0, or -1 on allocation failure. */
int vct_merge_begin(vct_merge *m, const vct_thread *th);
/* The next event in walk order into *ev: 1, or 0 when every run is done. */
int vct_merge_next(vct_merge *m, vct_event *ev);
void vct_merge_end(vct_merge *m);

/* Calls (not resume slices) of a compact thread. */
uint64_t vct_runs_calls(const vct_thread *th);
/* Frees a thread's compact form. */
void vct_runs_free(vct_thread *th);

#endif /* VCT_MODEL_RUNS_H */

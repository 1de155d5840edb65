/* task_track.h — `vcattach convert --tasks`: each asyncio task's steps on a timeline track of
 * its own in the Chrome-trace output.
 *
 * A task step (the event a task marker names and its descendants, tasks.h) moves from its
 * thread's track to the task's: same pid, tid VCT_TASK_TRACK_TID + the task's id (above any
 * Linux tid and the "requests" tracks, below 2^32), named "task NAME COROUTINE" (e.g. "task
 * Task-5 handler").  Everything outside a step stays on its thread.  chrome.c asks, per X
 * event, which track it goes to (vct_task_track_tid, through convert_ctx.retid); the names
 * are extra events spliced in after the trace's own.
 */
#ifndef VCT_TASK_TRACK_H
#define VCT_TASK_TRACK_H

#include <stdint.h>

#include "json_text.h"
#include "tasks.h"

typedef struct vct_task_track {
    const vct_trace *trace;
    vct_tasks tasks;
    uint64_t last_pid, last_tid; /* cache: the last lookup's thread ... */
    size_t last_thread;           /* ... and its index (SIZE_MAX: none) */
    int cached;
} vct_task_track;

/* Builds the tasks of a full trace.  0, or -1 on allocation failure. */
int vct_task_track_init(vct_task_track *tt, const vct_trace *t);
void vct_task_track_free(vct_task_track *tt);

/* The tid an X event of (pid, tid) starting at ts (ticks, before any window) is written
 * with: its task's track, or tid.  ctx: a vct_task_track. */
uint64_t vct_task_track_tid(void *ctx, uint64_t pid, uint64_t tid, int64_t ts);

/* Appends the thread_name events of the task tracks to out, as JSON objects separated by
 * ",\n" (nothing without tasks).  0, or -1 on allocation failure. */
int vct_task_track_json(const vct_task_track *tt, jtext *out);

#endif /* VCT_TASK_TRACK_H */

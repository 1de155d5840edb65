/* tasks.h — the asyncio tasks of a trace: which task each coroutine step (a resume slice, or
 * a task's first call) ran for, each task's name and coroutine, and which task created it.
 *
 * The agent records two things per process (docs/cvf-format.md):
 *   a counter group per thread, "task TID", key "id": a sample at ts = the thread began a step
 *       of task `id` (>= 1, never reused in the process); ts is the start of the X event of
 *       the step's top coroutine call (a resume slice, but for the task's first step);
 *   an instant "vcattach task" per task, args {"task": id, "name": Task.get_name()}.
 * Loading keeps the markers per thread (vct_thread.tasks, sorted by vct_tasks_finish) and the
 * names per process (vct_trace.task_names); both cost a few bytes a step, in arrays.
 *
 * vct_tasks_build (full loads only: it reads the thread's events) matches each marker to the
 * outermost event of its thread starting at its ts (exactly, else ±1 tick of rounding): that
 * event and its descendants are the step; a step nested in another (an eager task's first
 * step inside its creator's) owns its own descendants.  A marker with no such event, an id
 * out of range, a name that is not a string: ignored (a task with no name is "Task-ID").
 *
 * Parents are derived, per thread: the calls of asyncio's BaseEventLoop.create_task (what
 * asyncio.create_task, gather, TaskGroup and uvicorn go through) are matched in time order to
 * the tasks whose first step (not a resume: the task started inside the trace) begins after
 * the call started (the ready queue is FIFO); a first step inside a create_task call (eager
 * start) matches that call.  The parent is the task whose step holds the matched call.
 */
#ifndef VCT_TASKS_H
#define VCT_TASKS_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct cvf_counter_group;

/* The name prefix of the agent's counter groups, and the largest task id taken: more is a
 * broken file (it also keeps the synthetic track tids of convert --tasks below 2^32). */
#define VCT_TASK_COUNTER_PREFIX "task "
#define VCT_TASK_ID_MAX 2000000000u
/* convert --tasks: task ID's track is tid VCT_TASK_TRACK_TID + ID, above any Linux tid
 * (< 2^22) and the "requests" tracks' (request_track.h), below 2^32 (viewers take u32). */
#define VCT_TASK_TRACK_TID 2000000000ull

/* Adds the markers of a counter group if it is a "task TID" one of that thread with the one
 * key "id" (others are ignored).  0, or -1 on allocation failure. */
int vct_tasks_add_group(vct_trace *t, const struct cvf_counter_group *g);
/* Records the name of task id of process pid (a "vcattach task" instant; NULL or "": none).
 * 0, or -1 on allocation failure. */
int vct_tasks_add_name(vct_trace *t, uint64_t pid, uint64_t id, const char *name);
/* Sorts the markers and names.  Called by load.c after vct_trace_finish.  0, or -1 (memory). */
int vct_tasks_finish(vct_trace *t);
/* How many distinct tasks (pid, id) have markers, and how many markers (steps) there are;
 * pid 0: every process.  Works on compact loads.  0, or -1 (memory). */
int vct_tasks_count(const vct_trace *t, uint64_t pid, uint64_t *ntasks, uint64_t *nsteps);

/* One task, as built from the markers. */
typedef struct vct_task {
    uint64_t pid;
    uint32_t id;
    const char *name;    /* its recorded name, or NULL ("Task-ID") */
    size_t thread;       /* its first step's thread (index into trace->threads) */
    size_t first_step;   /* index into vct_tasks.steps of its first step */
    int64_t ts, end;     /* its first step's start, its last step's end (ticks) */
    uint32_t func;       /* its coroutine: the function of its first step's event */
    unsigned started_before; /* its first step is a resume: it began before the trace */
    size_t parent;       /* index into vct_tasks.tasks, or SIZE_MAX (none known) */
    size_t nsteps;
} vct_task;

/* One step: event `event` of thread `thread` (and its descendants) ran for task `task`. */
typedef struct vct_task_step {
    size_t thread, event, task;
} vct_task_step;

/* A boundary of a thread's ownership map: from ts on (up to the next boundary) an event
 * starting there belongs to step `step` (SIZE_MAX: to no task). */
typedef struct vct_task_bound {
    int64_t ts;
    size_t step;
} vct_task_bound;

typedef struct vct_tasks {
    const vct_trace *trace;
    vct_task *tasks;     /* by (pid, id) */
    size_t n;
    vct_task_step *steps; /* by (thread, event) */
    size_t nsteps;
    vct_task_bound *bounds; /* per thread, sorted by ts: [bound_first[i], bound_first[i+1]) */
    size_t *bound_first;    /* [nthreads + 1] */
} vct_tasks;

/* Builds the tasks of a finished, full (not compact) trace.  A trace without markers gives
 * n = 0.  0, or -1 on allocation failure. */
int vct_tasks_build(const vct_trace *t, vct_tasks *out);
void vct_tasks_free(vct_tasks *k);

/* The step (index into k->steps) that an event of thread ti starting at ts belongs to: the
 * innermost step event holding it; SIZE_MAX: none. */
size_t vct_tasks_step_at(const vct_tasks *k, size_t ti, int64_t ts);
/* "Task-5", or the recorded name; written into buf. */
const char *vct_task_label(const vct_task *task, char *buf, size_t len);

#endif /* VCT_TASKS_H */

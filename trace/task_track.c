/* task_track.c — the asyncio tasks' own tracks in the Chrome-trace output (task_track.h).
 *
 * The lookup is per X event, so it is a binary search in the thread's ownership map
 * (tasks.c) after a cached thread lookup (events come grouped by thread and function); the
 * names are built with jansson and written compactly (json_text.c), like the "requests"
 * tracks (request_track.c).
 */
#include "task_track.h"

#include <stdlib.h>
#include <string.h>

#include "pyname.h"

int vct_task_track_init(vct_task_track *tt, const vct_trace *t)
{
    memset(tt, 0, sizeof *tt);
    tt->trace = t;
    return vct_tasks_build(t, &tt->tasks);
}

void vct_task_track_free(vct_task_track *tt)
{
    vct_tasks_free(&tt->tasks);
    memset(tt, 0, sizeof *tt);
}

uint64_t vct_task_track_tid(void *ctx, uint64_t pid, uint64_t tid, int64_t ts)
{
    vct_task_track *tt = ctx;
    if (!tt->tasks.n)
        return tid;
    if (!tt->cached || tt->last_pid != pid || tt->last_tid != tid) {
        tt->last_pid = pid;
        tt->last_tid = tid;
        tt->last_thread = vct_trace_thread_index(tt->trace, pid, tid);
        tt->cached = 1;
    }
    size_t ti = tt->last_thread;
    size_t s = ti == SIZE_MAX ? SIZE_MAX : vct_tasks_step_at(&tt->tasks, ti, ts);
    if (s == SIZE_MAX)
        return tid;
    return VCT_TASK_TRACK_TID + tt->tasks.tasks[tt->tasks.steps[s].task].id;
}

int vct_task_track_json(const vct_task_track *tt, jtext *out)
{
    const vct_tasks *k = &tt->tasks;
    for (size_t i = 0; i < k->n; i++) {
        const vct_task *task = &k->tasks[i];
        char label[32], coro[256], name[512];
        snprintf(name, sizeof name, "task %s %s", vct_task_label(task, label, sizeof label),
                 vct_pyname_short(tt->trace->funcs[task->func], coro, sizeof coro));
        json_t *ev = json_pack("{s:s,s:s,s:I,s:I,s:{s:s}}", "ph", "M", "name", "thread_name",
                               "pid", (json_int_t)task->pid, "tid",
                               (json_int_t)(VCT_TASK_TRACK_TID + task->id), "args", "name",
                               name);
        if (!ev) /* a name cut inside a UTF-8 sequence: the label alone */
            ev = json_pack("{s:s,s:s,s:I,s:I,s:{s:s}}", "ph", "M", "name", "thread_name", "pid",
                           (json_int_t)task->pid, "tid",
                           (json_int_t)(VCT_TASK_TRACK_TID + task->id), "args", "name", "task");
        if (jtext_put_event(out, ev) != 0)
            return -1;
    }
    return 0;
}

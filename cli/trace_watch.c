/* trace_watch.c — the one watcher of a streaming trace (trace_watch.h). */
#include "trace_watch.h"

static struct trace_watch *watch;

void trace_watch_set(struct trace_watch *w)
{
    watch = w;
}

int trace_watching(void)
{
    return watch != 0;
}

void trace_watch_frame(unsigned proc, uint64_t pid, uint32_t type, const void *buf, size_t len)
{
    if (watch && watch->frame)
        watch->frame(watch->ctx, proc, pid, type, buf, len);
}

int trace_watch_tick(void)
{
    return watch && watch->tick ? watch->tick(watch->ctx) : 0;
}

void trace_watch_leave(void)
{
    if (watch && watch->leave)
        watch->leave(watch->ctx);
}

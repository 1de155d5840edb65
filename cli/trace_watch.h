/* trace_watch.h — a watcher of a trace while it streams: `vcattach top` (cmd_top.c) sees
 * every frame the agents send, is asked between frames whether the trace should end, and is
 * told when it does, without the trace's workflows (trace_process.c, tree_trace.c) knowing
 * what it shows.
 *
 * One watcher at most, set before the trace starts (trace_watch_set); with none, every call
 * below does nothing, and `vcattach trace` is what it was.
 */
#ifndef VC_TRACE_WATCH_H
#define VC_TRACE_WATCH_H

#include <stddef.h>
#include <stdint.h>

struct trace_watch {
    void *ctx;
    /* A streaming frame of process number proc (0: a single process; a tree's member index) */
    void (*frame)(void *ctx, unsigned proc, uint64_t pid, uint32_t type, const void *buf,
                  size_t len);
    /* Between frames, at least every 100 ms while tracing: 1 ends the trace (q pressed,
     * --once shown), as a Ctrl-C would. */
    int (*tick)(void *ctx);
    /* The trace ends (stop, Ctrl-C, the target gone): the terminal is given back. */
    void (*leave)(void *ctx);
};

void trace_watch_set(struct trace_watch *w);
int trace_watching(void);
void trace_watch_frame(unsigned proc, uint64_t pid, uint32_t type, const void *buf, size_t len);
int trace_watch_tick(void);
void trace_watch_leave(void);

#endif /* VC_TRACE_WATCH_H */

/* proc_events.h — the host's forks, execs and exits as the kernel announces them, at once
 * (proc_events.c: the process events connector).  `--subprocesses` learns from it the tree's
 * births that its look at /proc every 100 ms misses (a pool worker of 20 ms) and the execs of
 * new interpreters the moment they happen. */
#ifndef VC_PROC_EVENTS_H
#define VC_PROC_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct proc_events;

enum { PROC_EV_FORK = 1, PROC_EV_EXEC, PROC_EV_EXIT };
struct proc_event_info {
    int what;          /* PROC_EV_* */
    pid_t pid;         /* the process (a fork's child) */
    pid_t ppid;        /* a fork's parent */
    uint64_t ts_ns;    /* when (CLOCK_MONOTONIC) */
};
typedef void (*proc_event_fn)(void *ctx, const struct proc_event_info *e);

/* Subscribes.  0, or -1 with err (no CAP_NET_ADMIN, no CONFIG_PROC_EVENTS): then there is no
 * such source, and nothing else changes. */
int proc_events_open(struct proc_events **out, char *err, size_t errlen);
/* The descriptor to poll (-1 for NULL). */
int proc_events_fd(const struct proc_events *pe);
/* The events pending, at most max messages (never blocks): fn for each fork, exec and exit of
 * a process (threads' are left out).  Returns how many messages were read. */
int proc_events_read(struct proc_events *pe, proc_event_fn fn, void *ctx, int max);
/* How many times the kernel had to drop events (the socket's buffer was full). */
uint64_t proc_events_lost(const struct proc_events *pe);
void proc_events_close(struct proc_events *pe);

#endif /* VC_PROC_EVENTS_H */

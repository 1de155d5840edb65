/* waits.h — which calls of a trace are waiting rather than working.
 *
 * A blocking call (a lock acquire, a sleep, a poll, a socket receive, a queue get, a wait for
 * a child process, a pipe read…) spends its time off the CPU: ranked by self time next to
 * real work it hides the work.  The calls known to block are listed in one place,
 * waits.def; `vcattach summary` counts their inclusive time as waiting.
 */
#ifndef VCT_WAITS_H
#define VCT_WAITS_H

enum vct_wait_kind {
    VCT_WAIT_NONE = 0,
    VCT_WAIT_LOCK,
    VCT_WAIT_SLEEP,
    VCT_WAIT_SELECT,
    VCT_WAIT_SOCKET,
    VCT_WAIT_QUEUE,
    VCT_WAIT_PROCESS,
    VCT_WAIT_PIPE,
    VCT_WAIT_AT_ATTACH, /* not from the table: a call in progress when the trace began */
    VCT_WAIT_OFFCPU,    /* not from the table: measured off-CPU time of a call no line names
                           (summary.h: blocked, asleep, or runnable but not running) */
    VCT_WAIT_NKINDS
};

/* The kind of a function of the trace, by its name as the agent writes it (C: "mod.func" or
 * "Type.method"; Python: "qualname (path:line)").  VCT_WAIT_NONE for work. */
enum vct_wait_kind vct_wait_kind_of(const char *name);

/* "lock", "sleep", "select", … for the printed table. */
const char *vct_wait_kind_name(enum vct_wait_kind kind);

#endif /* VCT_WAITS_H */

/* receive_priority.h — vcattach's own CPU priority while a trace streams in
 * (receive_priority.c).
 *
 * While the target records, vcattach must drain the agent's in-flight window as fast as the
 * target fills it: when it falls behind, the agent drops calls (it never waits).  On a busy
 * service vcattach competes for the cores with the very processes it traces, at the same
 * priority, and loses: a gunicorn service of 4 workers under wrk on 2 cores lost 16-19% of
 * its calls at nice 0, 0.1-1% at nice -5 and none at nice -10 (measured, README).  So
 * vcattach raises its own priority for that phase only (the target's processes are never
 * touched), and goes back to its own before it builds the .cvf, which can wait.
 */
#ifndef VC_RECEIVE_PRIORITY_H
#define VC_RECEIVE_PRIORITY_H

#include "attach_options.h"

/* The niceness vcattach takes while receiving, unless --nice says otherwise. */
#define CLI_RECEIVE_NICE (-10)

struct receive_priority {
    int raised; /* setpriority took: restore `saved` */
    int saved;
};

/* Takes --nice N (or CLI_RECEIVE_NICE when that is a higher priority than vcattach's own).
 * Raising needs root or CAP_SYS_NICE: without it the default stays silent (said with -v), an
 * explicit --nice is said in one line; either way the trace goes on. */
void receive_priority_raise(struct receive_priority *p, const struct cli_options *opt,
                            const char *cmd);
/* Back to the niceness vcattach had (a no-op if it was not changed). */
void receive_priority_restore(struct receive_priority *p);

#endif /* VC_RECEIVE_PRIORITY_H */

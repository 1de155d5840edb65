/* receive_priority.c — vcattach's own CPU priority while a trace streams in: why, and the
 * numbers, in receive_priority.h.
 *
 * On Linux a niceness belongs to a thread: setpriority(PRIO_PROCESS, 0) changes the calling
 * one, which is the thread that receives (vcattach receives on its main thread).
 */
#include "receive_priority.h"
#include "say.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

void receive_priority_raise(struct receive_priority *p, const struct cli_options *opt,
                            const char *cmd)
{
    p->raised = 0;
    errno = 0;
    int cur = getpriority(PRIO_PROCESS, 0);
    if (cur == -1 && errno != 0)
        return;
    int want = opt->nice_set ? opt->nice : CLI_RECEIVE_NICE;
    if (want == cur || (!opt->nice_set && cur < want))
        return; /* already there, or already more favoured than the default */
    if (setpriority(PRIO_PROCESS, 0, want) == 0) {
        p->raised = 1;
        p->saved = cur;
        if (opt->verbose)
            say("%s: receiving at nice %d (was %d)\n", cmd, want, cur);
        return;
    }
    int e = errno;
    if (opt->nice_set)
        say("%s: --nice %d: %s (raising vcattach's priority needs root or "
                        "CAP_SYS_NICE); receiving at nice %d\n", cmd, want, strerror(e), cur);
    else if (opt->verbose)
        say("%s: staying at nice %d (nice %d needs root or CAP_SYS_NICE): calls "
                        "may be dropped if the target outruns vcattach\n", cmd, cur, want);
}

void receive_priority_restore(struct receive_priority *p)
{
    if (p->raised && setpriority(PRIO_PROCESS, 0, p->saved) == 0)
        p->raised = 0;
}

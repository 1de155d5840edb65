/* tree_sessions.h — detached sessions over a process tree: `start --subprocesses` (a session
 * per process, each writing its own part) and `stop|status --subprocesses` (every session of
 * the tree; stop merges the parts).  The controller does not stay: a process born after
 * `start` is not followed. */
#ifndef VC_TREE_SESSIONS_H
#define VC_TREE_SESSIONS_H

#include <stdint.h>

#include "attach_options.h"

/* `start --subprocesses`: a detached session in opt->pid and in each CPython descendant there
 * is at attach, each writing OUT-without-.cvf.PID.cvf itself.  An exit code. */
int tree_start(const struct cli_options *opt);

/* `stop|status --subprocesses` (request VC_MSG_STOP or VC_MSG_STATUS): every session running
 * in opt->pid and its descendants; stop then merges the files they wrote into one .cvf (the
 * common name of `start --subprocesses`) and removes the parts.  An exit code. */
int tree_stop(const struct cli_options *opt, uint32_t request);

#endif /* VC_TREE_SESSIONS_H */

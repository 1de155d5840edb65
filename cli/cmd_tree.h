/* cmd_tree.h — the process-tree workflow of `vcattach --subprocesses` (cmd_tree.c). */
#ifndef VC_CMD_TREE_H
#define VC_CMD_TREE_H

#include "attach_options.h"

/* Traces opt->pid and its CPython descendants into one .cvf.  Returns an exit code. */
int run_tree(const struct cli_options *opt);

/* `start --subprocesses`: a detached session in opt->pid and in each CPython descendant there
 * is at attach (processes born later are not followed: no controller stays to configure them),
 * each writing OUT-without-.cvf.PID.cvf itself. */
int start_tree(const struct cli_options *opt);

/* `stop|status --subprocesses` (request VC_MSG_STOP or VC_MSG_STATUS): every session running
 * in opt->pid and its descendants; stop then merges the files they wrote into one .cvf (the
 * common name of `start --subprocesses`) and removes the parts. */
int stop_tree(const struct cli_options *opt, unsigned request);

/* The CONFIG text of a session (cmd_trace.c): output, fallback, deadline, buffer, hook,
 * filters, detach for start.  0, or -1 if it does not fit in cap. */
int attach_build_config(const struct cli_options *opt, const char *output, const char *fallback,
                        char *cfg, size_t cap);

/* One process, the single-target workflow of cmd_trace.c (trace or start). */
int attach_one(enum cli_mode mode, const struct cli_options *opt);

#endif /* VC_CMD_TREE_H */

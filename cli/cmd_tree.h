/* cmd_tree.h — the process-tree workflow of `vcattach --subprocesses` (cmd_tree.c). */
#ifndef VC_CMD_TREE_H
#define VC_CMD_TREE_H

#include "attach_options.h"

/* Traces opt->pid and its CPython descendants into one .cvf.  Returns an exit code. */
int run_tree(const struct cli_options *opt);

#endif /* VC_CMD_TREE_H */

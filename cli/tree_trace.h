/* tree_trace.h — `vcattach --pid PID --subprocesses`: one trace of a process tree
 * (tree_trace.c). */
#ifndef VC_TREE_TRACE_H
#define VC_TREE_TRACE_H

#include "attach_options.h"

/* Traces opt->pid and its CPython descendants into one .cvf.  Returns an exit code. */
int tree_trace(const struct cli_options *opt);

#endif /* VC_TREE_TRACE_H */

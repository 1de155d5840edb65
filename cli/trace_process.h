/* trace_process.h — one process attached: `vcattach [trace]` and `vcattach start` without
 * --subprocesses (trace_process.c); `start --subprocesses` runs it once per process. */
#ifndef VC_TRACE_PROCESS_H
#define VC_TRACE_PROCESS_H

#include "attach_options.h"

/* Attaches to opt->pid and traces it: opt->mode CLI_TRACE writes the trace (or streams it)
 * when it ends; CLI_START leaves a detached session that writes OUT itself.  An exit code
 * (commands.h), every message printed. */
int trace_process(const struct cli_options *opt);

#endif /* VC_TRACE_PROCESS_H */

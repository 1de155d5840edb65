/* trace_input.h — the trace operands of the offline commands (summary, requests): one file,
 * or several .cvf files read as one trace (merged in memory, trace/merge.c). */
#ifndef VC_TRACE_INPUT_H
#define VC_TRACE_INPUT_H

#include <stddef.h>

#include "model.h"

/* Loads paths[0 .. n) (n >= 1) into *out, with model.h's VCT_LOAD_* flags (summary, which
 * only walks, loads compact).  label: what to call the input in messages and headers (the
 * path, or "N files"), written into label[labellen].  0, or -1 after printing one line
 * "vcattach CMD: why" on stderr (the file is unreadable or corrupt: exit 1). */
int cli_load_trace(const char *cmd, char *const *paths, size_t n, unsigned flags,
                   vct_trace **out, char *label, size_t labellen);

/* Whether the trace holds process pid (a thread of it, or its name). */
int cli_trace_has_pid(const vct_trace *t, uint64_t pid);

#endif

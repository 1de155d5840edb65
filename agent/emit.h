/* emit.h — a stopped session's records to a .cvf stream (emit.c), and that stream to its
 * output: the controller (through control.c's sink), an fd, a Unix socket, or a file written
 * by common/atomic_file.h (the CLI's writer too).  Runs on the agent thread without the GIL. */
#ifndef VC_AGENT_EMIT_H
#define VC_AGENT_EMIT_H

#include "session.h"
#include "atomic_file.h"
#include "cvf.h"

#include <sys/types.h>

int vc_emit_stream(vc_session *s, cvf_sink_fn sink, void *ctx, struct vc_result *res, char *err,
                   size_t errlen);
/* The trace to `output`: "fd:N", "unix:/path", or a file written by common/atomic_file.h with
 * exactly `mode` (VC_OUTPUT_MODE for the output the operator named, VC_FALLBACK_MODE for the
 * fallback, which may land in a shared temporary directory) and `flags` (VC_ATOMIC_FORCE: an
 * existing file is replaced).  0 or -errno with err; when the file's rename failed, -errno and
 * s->kept_tmp names the OUT.tmp that holds the trace. */
#define VC_OUTPUT_MODE 0644
#define VC_FALLBACK_MODE 0600
int vc_emit(vc_session *s, const char *output, mode_t mode, unsigned flags, struct vc_result *res,
            char *err, size_t errlen);

/* The output's rename failed and OUT.tmp holds the trace: s->kept_tmp names it (END's kept=)
 * and a line on the target's stderr says so (a `start` has no vcattach to tell). */
void vc_emit_note_kept(vc_session *s, const char *tmp, const char *err);
/* For a streamed session (stream.c), which sends these instead of a .cvf: the process name
 * (the command line, malloc'd) and the session's other events (see emit.c). */
char *vc_emit_process_name(void);
char *vc_emit_session_events(const vc_session *s, uint64_t pid, const vc_clock_map *map,
                             size_t *len_out, uint64_t *dropped_out);

#endif /* VC_AGENT_EMIT_H */

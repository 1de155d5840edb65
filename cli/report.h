/* report.h — what the attach commands print from an agent's texts (END, STATUS): the one
 * summary line of a trace, the live status line while tracing, the buffer-fill warning.
 * Shared by `trace`/`start` (trace_process.c) and `stop`/`status` (cmd_stop.c), so that a
 * session reads the same whichever command ends it.  Agent texts are sanitized by
 * control_client.c before they get here.
 */
#ifndef VC_REPORT_H
#define VC_REPORT_H

#include <stdint.h>
#include <sys/types.h>

/* A numeric field of a key=value text, 0 when absent. */
unsigned long long report_u64(const char *text, const char *key);

/* The agent's status in END: 0, or a negative errno. */
long report_end_status(const char *end_text);

/* "vcattach: pid N in 3.0s: E events, T threads, D dropped, SIZE -> WHERE [filtered: …]",
 * with a hint when pid has Python children that --subprocesses would trace.  bytes 0: the
 * size END reports; traced_ms 0: no duration. */
void report_summary(pid_t pid, const char *end_text, const char *where, uint64_t bytes,
                    uint64_t traced_ms);

/* "\rvcattach: tracing pid N: 1.2s elapsed, 8.8s left (Ctrl-C to stop)" on a terminal
 * (show), and its removal. */
void report_status_line(int show, pid_t pid, int64_t elapsed_ms, uint64_t duration_ms,
                        const char *extra);
void report_status_line_clear(int show);

/* From an agent's STATUS text: will its buffer fill within horizon_ms of the session's start,
 * at the rate so far?  1: yes, and it says so on stderr ("before WHEN"), with the --buffer-mb
 * that would hold the whole horizon; 0: no; -1: cannot tell yet (nothing recorded); -2: an
 * agent that does not report its buffer. */
int report_buffer_forecast(const char *status_text, double horizon_ms, const char *when);

#endif /* VC_REPORT_H */

/* control.h — the agent's side of the control channel and of the status socket (control.c):
 * the handshake (HELLO/CONFIG), STARTED/ERROR, serving the sockets while tracing, and END.
 * Called by agent.c only. */
#ifndef VC_AGENT_CONTROL_H
#define VC_AGENT_CONTROL_H

#include "session.h"

#include <stddef.h>

/* Connects to the controller and sends HELLO (with the window's memfd when the session has
 * one), unless that was done already; timeout_ms bounds both (0: one try, never a wait: a
 * fork child does this on its forking thread, follow.c).  0 or -errno with a message. */
int vc_control_hello(vc_session *s, int timeout_ms, char *err, size_t errlen);
/* HELLO (vc_control_hello) then CONFIG into the session. */
int vc_control_handshake(vc_session *s, char *err, size_t errlen);
void vc_control_send_started(vc_session *s);
void vc_control_send_error(vc_session *s, const char *msg);
/* Waits up to timeout_ms for the wake pipe (VC_POLL_WAKE, drained) and/or the control and
 * status sockets (VC_POLL_SOCKETS, served): a stop reason, or VC_STOP_NONE. */
#define VC_POLL_WAKE 1u
#define VC_POLL_SOCKETS 2u
int vc_control_poll(vc_session *s, int timeout_ms, unsigned what);
/* The socket thread (control.c): serves the sockets while the agent thread traces.  start: 0,
 * or -1 (no thread: the agent thread must poll the sockets itself); stop: joins it (bounded by
 * one poll slice and one status client's 1 s). */
int vc_control_serve_start(vc_session *s);
void vc_control_serve_stop(void);
/* END goes out after the session has become idle (so that a controller attaching again as
 * soon as it reads END finds neither a running session nor its status socket).  prepare takes
 * the text and the two fds out of the session, which the next session may then reuse;
 * send writes END to both fds and closes them. */
typedef struct vc_end_msg {
    int control_fd;
    int status_client_fd;
    /* 8 KiB: what the CLI reads END into (cmd_trace.c's reply buffers).  Keys go in order of
     * use (counts, output, status, error, kept, filters); one that would not fit is left out
     * (only with paths near PATH_MAX). */
    char text[8192];
} vc_end_msg;
/* END's text: the counts, output=, status= (0 or -errno); on failure error= (the one-line
 * message) and, when the output's OUT.tmp was kept, kept= (its path). */
void vc_control_prepare_end(vc_session *s, const struct vc_result *res, const char *err,
                            vc_end_msg *out);
void vc_control_send_end(vc_end_msg *m);
void vc_status_open(vc_session *s);
void vc_status_close(vc_session *s);
int vc_control_emit_data(vc_session *s, struct vc_result *res, char *err, size_t errlen);

#endif /* VC_AGENT_CONTROL_H */

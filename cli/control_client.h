/* control_client.h — the controller's end of a session (ctl_*): its side of the control
 * channel (common/protocol.h); the agent's end is agent/control.c (vc_session).
 *
 * Two sockets:
 *   - the per-session control socket, which vcattach creates before injecting under a fresh
 *     random abstract name in the target's network namespace, and the agent connects to:
 *     HELLO, CONFIG, STARTED, STOP, DATA*, END;
 *   - the abstract status socket a running agent listens on (VC_AGENT_SOCKET_FMT), which
 *     `vcattach status|stop` and the preflight use to find a session.
 * Every wait is bounded; the peer of both is checked with SO_PEERCRED (pid = the target).
 * The other end is agent/control.c; the frames and their order are in docs/protocol.md.
 */
#ifndef VC_CONTROL_CLIENT_H
#define VC_CONTROL_CLIENT_H

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include "protocol.h"

struct ctl_conn {
    pid_t pid;                              /* the target: the only accepted peer */
    char target_path[128];                  /* "@vcattach-ctl-<hex>#<token>": what the agent is
                                               told (the name to connect to, the token) */
    char token[33];                         /* 128 random bits in hex: CONFIG carries them, and
                                               the agent starts only for a controller that
                                               knows them (docs/protocol.md) */
    int listen_fd;
    int fd;                                 /* the agent's connection, -1 before accept */
    char hello[512];                        /* the agent's HELLO text */
};

void ctl_init(struct ctl_conn *s);

/* Creates the listening control socket: an abstract name with 128 random bits, in pid's
 * network namespace (entered for the socket() call when it differs from ours).  No file, no
 * directory: nothing the target's user could redirect, nothing left behind on any exit.
 * Also draws the session's token (target_path carries both to the agent).
 * Returns 0 or -1 with err. */
int ctl_listen(struct ctl_conn *s, pid_t pid, char *err, size_t errlen);

/* Waits up to timeout_ms for the agent to connect, checks that the peer is the target (others
 * are turned away and the wait goes on), closes the listener (the name goes with it), and
 * reads the HELLO.
 * Gives up early if *cancel becomes non-zero or the target exits.  Returns 0 or -1 with err. */
int ctl_accept(struct ctl_conn *s, int timeout_ms, volatile sig_atomic_t *cancel, char *err,
                   size_t errlen);

/* Sends CONFIG and waits up to timeout_ms in all (whatever else the agent sends meanwhile) for
 * STARTED (its text into reply).  An ERROR from the agent, EOF, a timeout or *cancel: -1 with
 * err.  Returns 0.  Every text received from the agent (reply, err, end_text, hello) is
 * sanitized: no control characters reach the terminal. */
int ctl_configure(struct ctl_conn *s, const char *config, char *reply, size_t cap,
                      int timeout_ms, volatile sig_atomic_t *cancel, char *err, size_t errlen);

/* Appends the session's token to a CONFIG text (vc_kv_append's contract: 0, or -1 when it
 * does not fit).  ctl_configure does it itself; a tree's per-process CONFIG calls it. */
int ctl_add_token(const struct ctl_conn *s, char *config, size_t cap, size_t *used);

/* Bounds of the transfer after STOP: the agent (the target's user's code) decides how much
 * it sends and how fast, so both are capped. */
struct receive_limits {
    int frame_timeout_ms;     /* the longest wait for one frame */
    int64_t total_timeout_ms; /* the whole transfer (--collect-timeout) */
    uint64_t max_bytes;       /* everything received, headers included (--max-trace-mb) */
};

/* Closes the sockets (every exit path). */
void ctl_close(struct ctl_conn *s);

/* What ctl_receive does with a frame of the trace: DATA (the agent's .cvf) or a streaming
 * frame (common/spool.h).  0, or < 0 with err to end the transfer. */
typedef int (*ctl_data_fn)(void *ctx, uint32_t type, const void *buf, size_t len, char *err,
                           size_t errlen);

/* Receives the trace after STOP (or the agent's own deadline): DATA and streaming frames go
 * to on_data(ctx, …) until END, whose text goes into end_text, within *lim.  Returns 0; -1
 * with err on ERROR, EOF, a timeout, a limit or a failed write.
 * *cancel non-zero abandons the transfer (-1, err says so). */
int ctl_receive(struct ctl_conn *s, ctl_data_fn on_data,
                    void *ctx, char *end_text, size_t cap, const struct receive_limits *lim,
                    volatile sig_atomic_t *cancel, char *err, size_t errlen);

/* The framing both ends of the controller use (control_client.c, session_query.c).
 * ctl_recv_frame: one frame into buf (cap bytes), waiting up to the deadline (vc_monotonic_ms)
 * in slices that look at *cancel; every frame but DATA and the spooled ones comes back
 * sanitized for the terminal.  The payload length, or -1 with errno (ECANCELED, ETIMEDOUT).
 * ctl_describe_recv_error: errno after a failed receive, said as one line ("... when").
 * ctl_peer_pid: SO_PEERCRED's pid of a connected socket, 0 or -1. */
long ctl_recv_frame(int fd, uint32_t *type, void *buf, size_t cap, int64_t deadline,
                    volatile sig_atomic_t *cancel);
void ctl_describe_recv_error(char *err, size_t errlen, const char *when, pid_t pid);
int ctl_peer_pid(int fd, pid_t *pid);

#endif /* VC_CONTROL_CLIENT_H */

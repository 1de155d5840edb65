/* protocol.h — the control channel between `vcattach` (controller) and the agent; the
 * conversation, both sockets and every timeout are described in docs/protocol.md.
 *
 * Owns the wire format of the Unix stream socket that vcattach creates (an abstract name with
 * random bits, passed to the agent as "@name") and the agent connects to.  Both ends run on the same machine, so frames are
 * host-endian:  u32 type | u32 length | length bytes of payload.
 *
 * Text payloads are "key=value\n" lines (no '=' or '\n' inside keys; values end at '\n').
 *
 * A session, as the controller sees it:
 *   agent → HELLO   pid=, python=3.11.7, agent=<version>
 *   ctl   → CONFIG  duration_ms=, buffer_mb=, hook=, output=, fallback=
 *   agent → STARTED threads=, backend=        (or ERROR text, then close)
 *   ctl   → STOP    (optional: early stop; the deadline or socket EOF also stops)
 *   agent → DATA*   chunks of the .cvf stream (when output=control)
 *   agent → END     events=, threads=, drops=, bytes=, gil_us=, output=
 * STATUS may be sent by the controller at any time; the agent answers with STATUS text
 * (state=, elapsed_ms=, remaining_ms=, threads=, output=).
 *
 * CONFIG keys (all optional but output):
 *   output=control | /abs/path.cvf | unix:/abs/socket   where the .cvf goes ("control": as DATA
 *                                                        frames on this socket)
 *   fallback=/abs/path.partial.cvf   written instead if the controller vanishes before the end
 *   duration_ms=N (0: until STOP)   buffer_mb=N   hook=auto|profile|monitoring|eval   null_hook=0|1
 *   include=GLOB, exclude=GLOB (one line each, repeated)   no_c_calls=1   max_depth=N
 *   min_dur_ns=N   the filters (agent/filter.h); END then also has filters=<as options>
 *   detach=1   the controller will close the socket after STARTED (vcattach start): the
 *              session goes on to its deadline and writes `output` itself
 *   follow_forks=1   (--subprocesses) a fork child opens its own session on this socket
 *
 * Besides the per-session control socket, a running session listens on the abstract Unix
 * socket VC_AGENT_SOCKET_FMT (with the target's own pid) so that later `vcattach status` and
 * `vcattach stop` can find it.  On that socket the client sends STATUS or STOP; the agent
 * checks the client's uid (root or its own) with SO_PEERCRED, and the client checks that the
 * peer's pid is the target's.  After STOP the agent answers END when the trace is written.
 */
#ifndef VC_PROTOCOL_H
#define VC_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#define VC_PROTOCOL_VERSION 1
/* Largest payload either side accepts: a .cvf DATA chunk or a config text. */
#define VC_MSG_MAX (1u << 20)
/* Abstract socket name (leading NUL, not a file) of a running session: printf with the pid. */
#define VC_AGENT_SOCKET_FMT "vcattach-agent-%d"

enum vc_msg_type {
    VC_MSG_HELLO = 1,
    VC_MSG_CONFIG = 2,
    VC_MSG_STARTED = 3,
    VC_MSG_STOP = 4,
    VC_MSG_STATUS = 5,
    VC_MSG_DATA = 6,
    VC_MSG_END = 7,
    VC_MSG_ERROR = 8,
};

/* Sends one frame; retries on EINTR and short writes, gives up after timeout_ms.
 * Returns 0, or -1 with errno (ETIMEDOUT on timeout, EPIPE when the peer is gone). */
int vc_msg_send(int fd, uint32_t type, const void *payload, size_t len, int timeout_ms);

/* Receives one frame into buf (cap bytes; payload NUL-terminated when it fits, so text
 * payloads can be used as C strings).  timeout_ms < 0 waits forever (never used by the
 * agent).  Returns the payload length, or -1 with errno: ETIMEDOUT, ECONNRESET (EOF),
 * EMSGSIZE (frame larger than cap - 1 or VC_MSG_MAX). */
long vc_msg_recv(int fd, uint32_t *type, void *buf, size_t cap, int timeout_ms);

/* Looks up `key` in a "key=value\n" text.  Copies the value (NUL-terminated) into out.
 * Returns the value's length, or -1 if the key is absent or the value does not fit. */
long vc_kv_get(const char *text, const char *key, char *out, size_t cap);

/* Appends "key=value\n" to a text buffer of capacity cap (used = current length).
 * Returns 0, or -1 if it does not fit or key/value contain '\n' (key also '=').
 * The buffer stays NUL-terminated. */
int vc_kv_append(char *text, size_t cap, size_t *used, const char *key, const char *value);

#endif /* VC_PROTOCOL_H */

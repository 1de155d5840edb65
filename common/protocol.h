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
/* The value of the agent's exported `vc_agent_loaded` once its dlopen finished (its
 * constructor ran: the loader's last step, after every relocation).  The ptrace injector
 * reads it before calling vc_agent_connect: an agent whose dlopen was abandoned half way (a
 * crash in the target's loader) is mapped but must never be called into. */
#define VC_AGENT_LOADED_MAGIC 0x564c4f41u
/* The agent's exported `vc_agent_phase`: how far the session started by vc_agent_connect has
 * come.  A young process's injector reads it while it holds the process's main thread at
 * its system calls (injector/hold.c): the thread is held while the agent waits for vcattach
 * (CONNECTING), prepares its buffers (PREPARING) or waits for the GIL (GIL_WAIT: a bounded
 * time per system call, in case the thread holds it there), let run while the agent waits
 * for the interpreter's initialization (INIT_WAIT), and let go for good at DONE (hooks in, or
 * the session ended). */
enum vc_agent_phase {
    VC_PHASE_NONE = 0,     /* no session was ever launched (or an agent from before phases) */
    VC_PHASE_CONNECTING,   /* launched: connecting to vcattach, waiting for its CONFIG */
    VC_PHASE_INIT_WAIT,    /* configured: waiting for the interpreter's initialization */
    VC_PHASE_PREPARING,    /* the interpreter is initialized: the buffers are being made */
    VC_PHASE_GIL_WAIT,     /* taking the GIL to install the hooks */
    VC_PHASE_DONE,         /* hooks installed, or the session failed or ended */
};

enum vc_msg_type {
    VC_MSG_HELLO = 1,
    VC_MSG_CONFIG = 2,
    VC_MSG_STARTED = 3,
    VC_MSG_STOP = 4,
    VC_MSG_STATUS = 5,
    VC_MSG_DATA = 6,
    VC_MSG_END = 7,
    VC_MSG_ERROR = 8,
    /* Streaming (CONFIG stream=1, output=control; docs/protocol.md "Streaming"): while it
     * traces, the agent sends what it recorded, and vcattach spools it (common/spool.h). */
    VC_MSG_CHUNK = 9,   /* u32 owner | u32 count | count x struct vc_wire_record */
    VC_MSG_NAMES = 10,  /* { u32 id | u32 len | len bytes }*: the names of new keys */
    VC_MSG_THREADS = 11, /* { u32 owner | i32 tid | u32 name_len | u32 blocked_len | name |
                            blocked }*: the thread table (owner = index in the agent's) */
    VC_MSG_CLOCK = 12,  /* struct vc_wire_clock: raw clock -> CLOCK_MONOTONIC, latest fit */
    VC_MSG_META = 13,   /* u64 pid | the process name (bytes) */
    VC_MSG_EVENTS = 14, /* the session's other events: a JSON list (attach, detach, filters) */
};

/* One record of a CHUNK frame: a completed call in the agent's raw clock (agent/buffer.h's
 * vc_record, byte for byte). */
struct vc_wire_record {
    uint64_t start;
    uint64_t dur;
    uint32_t id;
    uint32_t flags;
};
/* flags of a wire record (agent/buffer.h VC_REC_*) */
#define VC_WIRE_OPEN 1u
#define VC_WIRE_RESUME 2u
#define VC_WIRE_AT_ATTACH 4u
#define VC_WIRE_AT_ATTACH_INNER 8u
/* A record whose id is VC_WIRE_DROPPED is no call: the thread lost `flags` calls, between
 * `start` and `start + dur`, because the window was full (vcattach did not keep up). */
#define VC_WIRE_DROPPED (UINT32_MAX - 2)
/* A record whose id is VC_WIRE_CPU is no call: a sample of its thread's CPU clock
 * (agent/cpu_sample.c): at raw time `start` the thread had run `dur` ns in all; flags 0. */
#define VC_WIRE_CPU (UINT32_MAX - 3)
/* A record whose id is VC_WIRE_TASK is no call: at raw time `start` (the start of the call
 * record of the same thread that begins there) the thread began a step of asyncio task number
 * `dur` (>= 1, unique in the process); flags 0 (agent/tasks.h). */
#define VC_WIRE_TASK (UINT32_MAX - 4)
/* Ids VC_WIRE_TASK_NAME_0 - k (k < 3) are no calls: bytes 16k..16k+15 of the name of task
 * number `flags`, `start` then `dur` as they lie in memory (little-endian), NUL-padded. */
#define VC_WIRE_TASK_NAME_0 (UINT32_MAX - 5)
#define VC_WIRE_TASK_NAME_PARTS 3

/* The CLOCK frame: ns = ns0 + (raw - raw0) * ns_per_raw (common/tick_map.h). */
struct vc_wire_clock {
    uint64_t raw0;
    uint64_t ns0;
    double ns_per_raw;
};

/* The window a streaming agent records into, shared with vcattach (docs/protocol.md,
 * "The window"): a memfd the agent passes with HELLO or STARTED (SCM_RIGHTS).  vcattach reads
 * it only when the session ended without END (the process was killed, or exited before it
 * could send everything): what the agent had recorded and not sent yet is still there, with
 * the names of its keys and the clock's fit.  Everything in it is the target's, and untrusted:
 * read with pread, bounded, and fed to the spool like any frame.
 *   offset 0                 struct vc_wire_window
 *   arena_off                the names arena: NAMES entries { u32 id | u32 len | bytes }*,
 *                            the first arena_len bytes written (each entry whole)
 *   chunks_off + i * chunk_bytes   chunk i: struct vc_wire_chunk, then count records */
#define VC_WINDOW_MAGIC "VCWIN001"
struct vc_wire_window {
    char magic[8];
    uint32_t head_bytes;      /* sizeof(struct vc_wire_window) */
    uint32_t chunk_bytes;     /* 65536 */
    uint64_t nchunks;
    uint64_t chunks_off;
    uint64_t arena_off, arena_cap;
    uint64_t arena_len;       /* bytes of whole entries in the arena */
    uint64_t clock_seq;       /* even: clock is whole (odd while it is rewritten) */
    struct vc_wire_clock clock; /* the latest fit (0 rate: none yet) */
};
/* A chunk's head in the window.  state: what the sender did with its records. */
struct vc_wire_chunk {
    uint64_t next;            /* the agent's own link: meaningless here */
    uint32_t state;           /* VC_CHUNK_* */
    int32_t tid;              /* its thread's track tid (THREADS' tid), 0 if unknown */
    uint32_t owner;           /* the thread's slot (CHUNK's owner) */
    uint32_t count;           /* records written (each one whole before it is counted) */
};
#define VC_CHUNK_UNSENT 0u    /* being filled, or waiting for the sender */
#define VC_CHUNK_SENDING 1u   /* in a CHUNK frame being sent (maybe received whole) */
#define VC_CHUNK_SENT 2u      /* received: not to be read again */

/* Sends one frame; retries on EINTR and short writes, gives up after timeout_ms.
 * Returns 0, or -1 with errno (ETIMEDOUT on timeout, EPIPE when the peer is gone). */
int vc_msg_send(int fd, uint32_t type, const void *payload, size_t len, int timeout_ms);

/* Receives one frame into buf (cap bytes; payload NUL-terminated when it fits, so text
 * payloads can be used as C strings).  timeout_ms < 0 waits forever (never used by the
 * agent).  Returns the payload length, or -1 with errno: ETIMEDOUT, ECONNRESET (EOF),
 * EMSGSIZE (frame larger than cap - 1 or VC_MSG_MAX). */
long vc_msg_recv(int fd, uint32_t *type, void *buf, size_t cap, int timeout_ms);
/* As vc_msg_send, with pass_fd (>= 0) sent along (SCM_RIGHTS) with the frame's first byte. */
int vc_msg_send_fd(int fd, uint32_t type, const void *payload, size_t len, int pass_fd,
                   int timeout_ms);
/* As vc_msg_recv; a descriptor the peer passed with the frame is put in *passed_fd
 * (close-on-exec; -1 if none; any more than one are closed). */
long vc_msg_recv_fd(int fd, uint32_t *type, void *buf, size_t cap, int *passed_fd,
                    int timeout_ms);

/* Looks up `key` in a "key=value\n" text.  Copies the value (NUL-terminated) into out.
 * Returns the value's length, or -1 if the key is absent or the value does not fit. */
long vc_kv_get(const char *text, const char *key, char *out, size_t cap);

/* Appends "key=value\n" to a text buffer of capacity cap (used = current length).
 * Returns 0, or -1 if it does not fit or key/value contain '\n' (key also '=').
 * The buffer stays NUL-terminated. */
int vc_kv_append(char *text, size_t cap, size_t *used, const char *key, const char *value);

#endif /* VC_PROTOCOL_H */

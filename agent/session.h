/* session.h — the state of one tracing session, shared by the agent's files.
 *
 * There is at most one session per process (g_vc, defined in session.c).  Its fields are
 * written either by the agent thread or by the hooks, always under the GIL.  The life-cycle
 * state (state, stop request, result, wake pipe) is not here: lifecycle.h owns it, behind its
 * own lock.  (Include guard VC_AGENT_SESSION_H: the CLI's control client once used
 * VC_SESSION_H for a header of the same file name.)
 */
#ifndef VC_AGENT_SESSION_H
#define VC_AGENT_SESSION_H

#include "compat.h"
#include "buffer.h"
#include "clock.h"
#include "names.h"
#include "filter.h"
#include "vcagent.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#define VC_STACK_DEPTH 512   /* frames tracked per thread; deeper ones are counted, skipped */
/* Thread states per session; later threads are not traced.  < 0xffff: monitoring's thread
 * binding packs the index in 16 bits. */
#define VC_MAX_THREADS 1024
#define VC_PATH_MAX 4096

/* One entry of a thread's shadow stack: the call being timed. */
typedef struct vc_frame {
    const void *match; /* code object (Python) or callable (C): what the exit event names */
    uint64_t start;
    uint32_t id;
    uint16_t is_c;
    uint16_t flags;    /* VC_REC_RESUME / VC_REC_AT_ATTACH, copied into its record */
} vc_frame;

typedef struct vc_thread {
    vc_chunk *chunk;          /* current chunk (NULL: take one on the next record) */
    uint32_t depth;           /* logical depth; entries above VC_STACK_DEPTH are not stored */
    uint32_t index;           /* position in the session's thread table */
    uint32_t gen;             /* session generation that owns this state */
    uint32_t bound;           /* monitoring: a thread's TLS points here */
    uint32_t seeded;          /* frames seeded at attach still at the bottom of the stack */
    uint64_t too_deep;        /* calls skipped because the stack was full */
    PyThreadState *tstate;    /* owner (identity while the thread lives) */
    pid_t tid;                /* gettid(), taken on the thread's first event; 0 = none yet */
    unsigned long ident;      /* PyThreadState.thread_id (threading.get_ident()) */
    int hooked;               /* legacy hook installed on tstate */
    char *name;               /* threading name (malloc'd), NULL if unknown */
    /* What the thread was doing in the kernel when it was seeded (threads.c: its state, and
     * wchan or syscall, e.g. "S futex_wait_queue"), "" if unknown: written in the args of its
     * innermost seeded frame, the call that was in progress at attach. */
    char blocked[64];
    vc_frame stack[VC_STACK_DEPTH];
} vc_thread;

struct vc_backend_ops; /* backend.h */

typedef struct vc_session {
    /* config (copied) */
    char output[VC_PATH_MAX];
    char fallback[VC_PATH_MAX];
    char control_path[VC_PATH_MAX];
    uint64_t duration_ms;
    uint32_t buffer_mb;
    uint32_t hook_kind;
    uint32_t null_hook;
    vc_filter filter;         /* what is kept (filter.h); read by the hot path */
    int detach;               /* control: the controller closes after STARTED */
    int follow_forks;         /* control: a fork child opens its own session (follow.c) */
    int control_fd;           /* -1 if none */
    int status_fd;            /* abstract listening socket, -1 if none */
    int status_client_fd;     /* a `vcattach stop` waiting for END, -1 if none */

    /* hook state, under the GIL */
    uint32_t gen;
    const struct vc_backend_ops *backend; /* installed backend, NULL when none */
    char backend_name[16];    /* the backend that ran (kept after stop, for the trace) */
    int tool_id;              /* monitoring tool id, -1 if none */
    vc_pins pins;
    vc_pool pool;
    vc_thread *threads;       /* mmap of VC_MAX_THREADS, lazily touched */
    uint32_t nthreads;
    uint64_t threads_untraced;
    PyThreadState *agent_tstate;
    PyObject *start_hook;     /* our threading._profile_hook object */
    PyObject *saved_profile_hook;
    PyObject *atexit_cb;
    int threading_patched;

    /* times */
    vc_clock_pair clk_start, clk_stop;
    uint64_t attach_ns, stop_ns;
    uint64_t stop_raw;
    uint64_t start_mono_ms;
    uint64_t gil_hold_us;

    /* stop snapshot (owned, used without the GIL) */
    char **names;
    uint32_t nnames;
} vc_session;

extern vc_session g_vc;

/* ---- threads (threads.c) ---- */
vc_thread *vc_thread_new(vc_session *s, PyThreadState *ts);
vc_thread *vc_thread_for_tstate(vc_session *s, PyThreadState *ts);
/* Pushes the frames already running on ts onto t's shadow stack, all started at `now`.
 * by_frame: a running call is matched by its frame object (legacy hook), by what the frame
 * evaluator is given for it (VC_SEED_BY_EVAL), else by its code.  t->seeded: how many. */
void vc_thread_seed(vc_session *s, vc_thread *t, PyThreadState *ts, uint64_t now, int by_frame);
#define VC_SEED_BY_CODE 0
#define VC_SEED_BY_FRAME 1
#define VC_SEED_BY_EVAL 2 /* matched by what the frame evaluator gets (hook_evalframe.c) */
void vc_threads_capture_names(vc_session *s);
void vc_thread_capture_current_name(vc_session *s, vc_thread *t);
void vc_thread_free_all(vc_session *s);
int vc_threads_alloc(vc_session *s);
extern vc_thread vc_ignored_thread;

/* ---- threading start hook (starthook.c) ---- */
int vc_threading_patch(vc_session *s);
void vc_threading_restore(vc_session *s);
int vc_threading_foreign(void);

/* ---- emit (emit.c) ---- */
#include "cvf.h"
int vc_emit_stream(vc_session *s, cvf_sink_fn sink, void *ctx, struct vc_result *res, char *err,
                   size_t errlen);
/* A file output is created with exactly `mode` (VC_OUTPUT_MODE for the output the operator
 * named, VC_FALLBACK_MODE for the fallback, which may land in a shared temporary directory). */
#define VC_OUTPUT_MODE 0644
#define VC_FALLBACK_MODE 0600
int vc_emit(vc_session *s, const char *output, mode_t mode, struct vc_result *res, char *err,
            size_t errlen);

/* ---- fork following (follow.c) ---- */
/* In a fork child of a session with follow_forks, under the child's GIL: wraps os._exit (once
 * per process image) so that a child leaving through it still sends its trace. */
void vc_follow_wrap_os_exit(void);

/* ---- control (control.c) ---- */
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
    char text[VC_PATH_MAX + 1024];
} vc_end_msg;
void vc_control_prepare_end(vc_session *s, const struct vc_result *res, vc_end_msg *out);
void vc_control_send_end(vc_end_msg *m);
void vc_status_open(vc_session *s);
void vc_status_close(vc_session *s);
void vc_control_close(vc_session *s);
int vc_control_emit_data(vc_session *s, struct vc_result *res, char *err, size_t errlen);

/* Milliseconds since the session started tracing (0 before). */
static inline uint64_t vc_session_elapsed_ms(const vc_session *s)
{
    uint64_t now = vc_clock_mono_ns() / 1000000u;
    return s->start_mono_ms ? now - s->start_mono_ms : 0;
}

#endif /* VC_AGENT_SESSION_H */

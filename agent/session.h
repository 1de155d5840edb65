/* session.h — the state of one tracing session, shared by the agent's files.
 *
 * There is at most one session per process (g_vc).  Its fields are written either by the
 * agent thread or by the hooks, always under the GIL, except the life-cycle fields (state,
 * stop request, result) which are guarded by g_vc_lock.
 */
#ifndef VC_SESSION_H
#define VC_SESSION_H

#include "compat.h"
#include "buffer.h"
#include "clock.h"
#include "names.h"
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
    uint32_t is_c;
} vc_frame;

typedef struct vc_thread {
    vc_chunk *chunk;          /* current chunk (NULL: take one on the next record) */
    uint32_t depth;           /* logical depth; entries above VC_STACK_DEPTH are not stored */
    uint32_t index;           /* position in the session's thread table */
    uint32_t gen;             /* session generation that owns this state */
    uint32_t bound;           /* monitoring: a thread's TLS points here */
    uint64_t too_deep;        /* calls skipped because the stack was full */
    PyThreadState *tstate;    /* owner (identity while the thread lives) */
    pid_t tid;                /* gettid(), taken on the thread's first event; 0 = none yet */
    unsigned long ident;      /* PyThreadState.thread_id (threading.get_ident()) */
    int hooked;               /* legacy hook installed on tstate */
    char *name;               /* threading name (malloc'd), NULL if unknown */
    vc_frame stack[VC_STACK_DEPTH];
} vc_thread;

enum vc_state { VC_IDLE = 0, VC_STARTING, VC_RUNNING, VC_STOPPING };

enum vc_backend { VC_BACKEND_PROFILE = 1, VC_BACKEND_MONITORING = 2 };

enum vc_stop_reason { VC_STOP_NONE = 0, VC_STOP_API, VC_STOP_DEADLINE, VC_STOP_CONTROL,
                      VC_STOP_CONTROL_EOF, VC_STOP_STATUS, VC_STOP_ATEXIT };

typedef struct vc_session {
    /* config (copied) */
    char output[VC_PATH_MAX];
    char fallback[VC_PATH_MAX];
    char control_path[VC_PATH_MAX];
    uint64_t duration_ms;
    uint32_t buffer_mb;
    uint32_t hook_kind;
    uint32_t null_hook;
    int detach;               /* control: the controller closes after STARTED */
    int control_fd;           /* -1 if none */
    int status_fd;            /* abstract listening socket, -1 if none */
    int status_client_fd;     /* a `vcattach stop` waiting for END, -1 if none */

    /* hook state, under the GIL */
    uint32_t gen;
    int backend;
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

/* ---- hooks ---- */
int vc_profile_install_all(vc_session *s, char *err, size_t errlen);
int vc_profile_install_current(vc_session *s, PyThreadState *ts);
void vc_profile_remove_all(vc_session *s);
int vc_profile_scan_new_threads(vc_session *s);
int vc_profile_foreign(vc_session *s, char *err, size_t errlen);
int vc_profile_type_ready(void);

int vc_monitoring_install(vc_session *s, char *err, size_t errlen);
void vc_monitoring_remove(vc_session *s);
int vc_monitoring_foreign(char *err, size_t errlen);
void vc_monitoring_bind_current(vc_thread *t);
/* The calling thread's state (bound on first use); &vc_ignored_thread if untraced. */
vc_thread *vc_monitoring_current(void);

/* ---- threads ---- */
vc_thread *vc_thread_new(vc_session *s, PyThreadState *ts);
vc_thread *vc_thread_for_tstate(vc_session *s, PyThreadState *ts);
void vc_thread_seed(vc_session *s, vc_thread *t, PyThreadState *ts, uint64_t now);
void vc_threads_capture_names(vc_session *s);
void vc_thread_capture_current_name(vc_session *s, vc_thread *t);
int vc_threading_patch(vc_session *s);
void vc_threading_restore(vc_session *s);
void vc_thread_free_all(vc_session *s);
int vc_threads_alloc(vc_session *s);
int vc_threading_foreign(void);
extern vc_thread vc_ignored_thread;

/* ---- emit ---- */
#include "cvf.h"
int vc_emit_stream(vc_session *s, cvf_sink_fn sink, void *ctx, struct vc_result *res, char *err,
                   size_t errlen);
int vc_emit(vc_session *s, const char *output, struct vc_result *res, char *err, size_t errlen);

/* ---- control ---- */
int vc_control_handshake(vc_session *s, char *err, size_t errlen);
void vc_control_send_started(vc_session *s);
void vc_control_send_error(vc_session *s, const char *msg);
int vc_control_poll(vc_session *s, int timeout_ms);
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

/* ---- agent.c ---- */
void vc_request_stop(int reason);
uint64_t vc_elapsed_ms(void);
int vc_session_state(void);
int vc_wake_fd(void);

#endif /* VC_SESSION_H */

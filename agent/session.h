/* session.h — the state of one tracing session (its data only: g_vc, defined in session.c),
 * shared by the agent's files.  What each file does with it is declared in that file's own
 * header (threads.h, starthook.h, emit.h, follow.h, control.h).
 *
 * There is at most one session per process (g_vc, defined in session.c).  Its fields are
 * written either by the agent thread or by the hooks, always under the GIL (and, once the
 * session is `parallel`, under the lock among GILs too: hooklock.h).  The life-cycle
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
    /* streaming: calls lost since the window was last full (record.c), and their range */
    uint64_t drop_n, drop_first, drop_last;
    uint32_t announced;       /* streaming: the thread's tid and name have been sent */
    const char *announced_name; /* ... and which name (threads.c replaces it when it changes) */
    PyThreadState *tstate;    /* owner (identity while the thread lives) */
    pid_t tid;                /* gettid(), taken on the thread's first event; 0 = none yet */
    unsigned long ident;      /* PyThreadState.thread_id (threading.get_ident()) */
    /* The interpreter the thread state belongs to (interps.h): its id (0: the main one) and
     * its slot in the session's interpreter table, the owner of the keys it pins.  An OS
     * thread that enters several interpreters has one state, one vc_thread, one track each. */
    int64_t interp_id;
    uint32_t interp_slot;
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
    uint32_t init_wait_ms;    /* control: how long to wait for an interpreter's initialization */
    uint32_t buffer_mb;
    uint32_t hook_kind;
    uint32_t null_hook;
    vc_filter filter;         /* what is kept (filter.h); read by the hot path */
    int detach;               /* control: the controller closes after STARTED */
    int follow_forks;         /* control: a fork child opens its own session (follow.c) */
    int continued;            /* a fork child's session: the parent's hooks go on (follow.c) */
    int window_passed;        /* the pool's memfd went to the controller (HELLO or STARTED) */
    int hello_sent;           /* control_fd is connected and HELLO went (a fork child: early) */
    int force;                /* control: a file output may replace an existing file (emit.c) */
    int stream;               /* control: stream=1, records go out while tracing (stream.c) */
    int tasks_on;             /* asyncio task steps are marked (tasks.h); read by the hot path */
    int no_tasks;             /* control: tasks=0 (--no-tasks), never mark them */
    int control_fd;           /* -1 if none */
    int status_fd;            /* abstract listening socket, -1 if none */
    int status_client_fd;     /* a `vcattach stop` waiting for END, -1 if none */

    /* hook state, under the GIL */
    uint32_t gen;
    /* 3.12+: a sub-interpreter with its own GIL was asked to hook itself: from then until the
     * next session's start every hook and the agent's table work run under vc_hooklock
     * (hooklock.h), the GIL alone no longer excluding the other hooks.  Set by the agent
     * thread under the main GIL (no hook of the main GIL runs then). */
    int parallel;
    /* parallel: the stop has begun taking the threads and keys (set under the lock, cleared
     * with the generation's switch): a hook that runs meanwhile records nothing. */
    int closed;
    const struct vc_backend_ops *backend; /* installed backend, NULL when none */
    char backend_name[16];    /* the backend that ran (kept after stop, for the trace) */
    int tool_id;              /* monitoring tool id, -1 if none */
    vc_pins pins;
    vc_pool pool;
    vc_thread *threads;       /* mmap of VC_MAX_THREADS, lazily touched */
    uint32_t nthreads;
    uint64_t threads_untraced;
    uint64_t interps_untraced; /* sub-interpreters seen but not traced (3.12+: interps.c) */
    uint64_t interps_untraced_shared; /* ... of which under the main GIL (mod_wsgi's) */
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

    /* delivery: the OUT.tmp the writer kept when it could not rename it ("" if none), named
     * in END and on stderr (emit.c) */
    char kept_tmp[VC_PATH_MAX + 8];

    /* streaming (stream.c): what has been sent, what waits to be (built under the GIL) */
    uint32_t names_sent;      /* ids [0, names_sent) have been named to the controller */
    uint64_t arena_sent;      /* bytes of the window's names arena sent (buffer.h) */
    unsigned char *pending;   /* NAMES and THREADS frames built at the last GIL visit */
    size_t pending_len, pending_cap;
    int stream_broken;        /* a send failed: the controller is gone (or the spool broke) */
    struct spool *spool;      /* `start`: the agent's own spool, OUTPUT.spool (stream.c) */
    struct spool *spool_prev; /* ... with --last: its generation before (OUTPUT.spool.prev) */
    uint64_t last_ns;         /* control: last_ms (start --last), the final part kept */
    char spool_err[256];      /* why the spool broke, if it did */
    uint64_t chunks_sent, records_sent;

    /* stop snapshot (owned, used without the GIL) */
    char **names;
    uint32_t nnames;
} vc_session;

extern vc_session g_vc;

/* Milliseconds since the session started tracing (0 before). */
static inline uint64_t vc_session_elapsed_ms(const vc_session *s)
{
    uint64_t now = vc_clock_mono_ns() / 1000000u;
    return s->start_mono_ms ? now - s->start_mono_ms : 0;
}

#endif /* VC_AGENT_SESSION_H */

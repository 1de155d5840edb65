/* vcagent.h — the exported interface of libvcagent-pyXY.so, the in-target tracer.
 *
 * Three callers use it:
 *   - the injector, through a remote call on a hijacked thread (ptrace, gdb), or from the
 *     remote-exec loader script through ctypes (CPython 3.14+, PEP 768; ctypes releases the
 *     GIL around the call): vc_agent_connect(path) only; the rest of the config then arrives
 *     over the control socket (common/protocol.h);
 *   - the in-process Python API (python/vcattach/__init__.py), through ctypes:
 *     vc_agent_start(&config) … vc_agent_stop(…);
 *   - tests and benchmarks, through the Python API.
 *
 * Rules for every entry point: it returns at once (never waits for the GIL), runs no Python
 * code, and is safe to call on a thread that was stopped at an arbitrary safe point (it may
 * malloc and pthread_create; nothing else).  All work happens on the agent's own thread.
 */
#ifndef VC_AGENT_H
#define VC_AGENT_H

#include <stdint.h>

#define VC_CONFIG_ABI 1

enum vc_hook_kind {
    VC_HOOK_AUTO = 0,       /* sys.monitoring on 3.12+, the legacy profile hook before; the
                             * frame evaluator with --no-c-calls on 3.9-3.13 (agent.c) */
    VC_HOOK_PROFILE = 1,    /* legacy Py_tracefunc (PyEval_SetProfile family), every version */
    VC_HOOK_MONITORING = 2, /* sys.monitoring, 3.12+ only */
    VC_HOOK_EVAL = 3,       /* PEP 523 frame-evaluation hook, 3.9–3.13, Python calls only */
};

struct vc_config {
    uint32_t abi;             /* VC_CONFIG_ABI */
    uint32_t struct_size;     /* sizeof(struct vc_config): lets the struct grow */
    /* Where the trace goes when the session stops:
     *   "/abs/path.cvf"  written as path.tmp (O_EXCL|O_NOFOLLOW, mode 0644), fsync'd, renamed
     *                    over an existing file (common/atomic_file.h; only a `vcattach start`
     *                    session without force=1 refuses to replace one)
     *   "fd:N"           an already-open file descriptor (not closed by the agent)
     *   "unix:/path"     a listening Unix stream socket */
    const char *output;
    const char *fallback;     /* used if `output` cannot be written; may be NULL */
    uint64_t duration_ms;     /* 0: until vc_agent_stop (or process exit) */
    uint32_t buffer_mb;       /* total record buffer for all threads; 0 = 256 */
    uint32_t hook;            /* enum vc_hook_kind */
    uint32_t null_hook;       /* 1: the hook records nothing (benchmark floor of the mechanism) */
    /* Filters (all optional; a struct_size ending before them means none): */
    const char *include;      /* fnmatch globs on co_filename, separated by '\n'; NULL: all */
    const char *exclude;      /* the same, left out (a C call is judged by its caller's file) */
    uint32_t no_c_calls;      /* 1: C functions are not traced (and cost nothing where possible) */
    uint32_t max_depth;       /* calls deeper than this are not recorded; 0: unlimited */
    uint64_t min_dur_ns;      /* calls shorter than this are not kept; 0: all */
};
/* The smallest struct_size accepted: a config from before the filters. */
#define VC_CONFIG_MIN_SIZE 48

/* Result of a finished session (filled by vc_agent_stop / vc_agent_last_result). */
struct vc_result {
    uint64_t events;          /* X events written */
    uint64_t threads;         /* threads with a track in the trace */
    uint64_t dropped;         /* calls lost to full buffers */
    uint64_t bytes;           /* .cvf bytes emitted */
    uint64_t gil_hold_us;     /* longest GIL hold by the agent during stop */
    uint64_t records_bytes;   /* buffer bytes used by the records */
    int32_t status;           /* 0 ok, else -errno-like failure (message: vc_agent_last_error) */
    int32_t pad;
};

/* Starts a session from a config (copied before return).  Idempotent while a session runs
 * (returns -EBUSY).  Returns 0 or -errno. */
int vc_agent_start(const struct vc_config *cfg);

/* Starts a session whose config comes over the control socket at `control_path`
 * (the injector's entry point).  Returns 0 or -errno; never blocks on the socket. */
int vc_agent_connect(const char *control_path);

/* Waits up to wait_ms for the session started by vc_agent_start/vc_agent_connect to have its
 * hooks installed.  Returns 0 (tracing), the session's -errno if it failed to start (message:
 * vc_agent_last_error), -ETIMEDOUT, or -ESRCH if no session was started.  Must be called
 * without holding the GIL (the agent thread needs it to install the hooks). */
int vc_agent_wait_started(int wait_ms);

/* Asks the running session to stop and waits up to wait_ms for the trace to be emitted.
 * Must be called without holding the GIL (ctypes.CDLL releases it).  Fills *out if given.
 * Returns 0, -ESRCH if no session ran, -ETIMEDOUT. */
int vc_agent_stop(int wait_ms, struct vc_result *out);

/* 1 while a session is active (hooks installed or trace being emitted), else 0. */
int vc_agent_active(void);

/* The last session's result, and a one-line message for its last failure ("" if none). */
int vc_agent_last_result(struct vc_result *out);
const char *vc_agent_last_error(void);

#endif /* VC_AGENT_H */

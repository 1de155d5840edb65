/* backend.h — what the session asks of a hook backend, as one table of operations.
 *
 * Three instances, one per hook file: vc_backend_profile (hook_profile.c, the legacy
 * Py_tracefunc, every version), vc_backend_monitoring (hook_monitoring.c, sys.monitoring,
 * 3.12+; on older headers its install refuses with a message) and vc_backend_eval
 * (hook_evalframe.c, PEP 523's frame evaluator, 3.9–3.13, Python calls only).  The session keeps the
 * installed one in vc_session.backend, so agent.c and starthook.c never branch on which it is.
 * The profile and eval backends hook every interpreter the session traces (interps.h:
 * install, scan and remove walk them all); sys.monitoring, the main one (3.12+).
 * None of these runs on the hot path (the hooks' callbacks are the hot path, record.h).
 * Every operation needs the GIL.
 */
#ifndef VC_AGENT_BACKEND_H
#define VC_AGENT_BACKEND_H

#include "session.h"

typedef struct vc_backend_ops {
    const char *name; /* "profile" or "monitoring": the STARTED message's backend= */
    /* 1 (message in err) if another profiler holds this backend's slot on any thread. */
    int (*foreign)(vc_session *s, char *err, size_t errlen);
    /* Installs the hook for every existing thread, their shadow stacks seeded with the frames
     * already running.  -1 with a message; what was done is undone by remove. */
    int (*install)(vc_session *s, char *err, size_t errlen);
    /* Removes whatever install did (also a partial install); safe to call twice. */
    void (*remove)(vc_session *s);
    /* Periodic visit: hooks threads that appeared since (started outside threading). */
    void (*scan_new_threads)(vc_session *s);
    /* On a thread that threading just started (its start hook): hooks or binds it; its state,
     * or NULL if it is not traced. */
    vc_thread *(*on_new_thread)(vc_session *s, PyThreadState *ts);
    /* A sub-interpreter adopted while tracing (interps.h): hooks what the backend hooks per
     * interpreter (its threads are also hooked by the next scan).  NULL: nothing to do. */
    void (*attach_interp)(vc_session *s, PyInterpreterState *interp);
    /* Its end (our atexit in it, with its GIL): every hook of ours out of it.  NULL: none. */
    void (*detach_interp)(vc_session *s, PyInterpreterState *interp);
    /* 3.12+ (interps.c), run *in* a sub-interpreter with its GIL (the main one, or its own
     * and then the lock among GILs too, hooklock.h), as its current thread
     * (a pending call): hooks it (its existing threads seeded), its callbacks carrying `tag`
     * (an int object made in it: the session and slot) so that a thread's calls go to its
     * state in this interpreter.  -1 (nothing left installed) if it cannot.  NULL: this
     * backend does not trace 3.12+ sub-interpreters (they are counted as not traced). */
    int (*install_here)(vc_session *s, uint32_t slot, PyObject *tag);
    /* Undoes install_here in the current interpreter (slot's, or with slot 0 any hook of ours
     * left from an ended session: then nothing of the session is touched). */
    void (*remove_here)(vc_session *s, uint32_t slot);
} vc_backend_ops;

extern const vc_backend_ops vc_backend_profile;
extern const vc_backend_ops vc_backend_monitoring;
extern const vc_backend_ops vc_backend_eval;

/* The rest of the table of a backend this interpreter does not have (backend.c): nothing is
 * foreign, nothing to remove or scan, no thread is bound. */
int vc_backend_absent_foreign(vc_session *s, char *err, size_t errlen);
void vc_backend_absent_remove(vc_session *s);
void vc_backend_scan_nothing(vc_session *s); /* also for backends with one hook for all threads */
vc_thread *vc_backend_absent_on_new_thread(vc_session *s, PyThreadState *ts);
/* The table of such a backend: its own install (which refuses, saying why), the rest absent. */
#define VC_BACKEND_ABSENT(NAME, REFUSING_INSTALL)                                               \
    {                                                                                         \
        .name = (NAME), .foreign = vc_backend_absent_foreign, .install = (REFUSING_INSTALL),  \
        .remove = vc_backend_absent_remove,                                                   \
        .scan_new_threads = vc_backend_scan_nothing,                                          \
        .on_new_thread = vc_backend_absent_on_new_thread,                                     \
    }

#endif /* VC_AGENT_BACKEND_H */

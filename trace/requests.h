/* requests.h — the requests (units of work) of a trace: which calls they are, and which of
 * them the trace's start or end cut.
 *
 * A request is the outermost call, on one thread, of an entry function: a server's "serve one
 * request" (gunicorn's handle_request, uvicorn's run_asgi, Celery's trace_task: the table
 * requests.def), or any function a --entry glob names.  A match nested in another match on
 * the same thread is part of it, never a request of its own.
 *
 * A coroutine entry (ASGI) runs as slices: its first call, then resumes (VCT_EV_RESUME) after
 * each await.  With asyncio task markers (tasks.h) the task is the unit: a task whose
 * coroutine is an entry is a request, from its first step's start to its last step's end;
 * its slices are its steps and those of the tasks it created (transitively), so requests
 * overlapping on one event loop stay apart.  Without markers (an older agent), the slices of
 * one entry function on a thread, from a first call up to the next first call, are taken as
 * one request: overlapping ones cannot be told apart (their slices go to the latest one).
 *
 * Cut: a request whose entry was already running at attach (VCT_EV_AT_ATTACH, or a first slice
 * that is a resume) began before the trace; one whose last slice ends at its process's detach
 * instant was still running when the trace stopped (the agent closes open calls there).  Its
 * duration is not a latency: it is kept apart.
 */
#ifndef VCT_REQUESTS_H
#define VCT_REQUESTS_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

enum vct_req_kind { VCT_REQ_ENTRY, VCT_REQ_WSGI, VCT_REQ_ASGI, VCT_REQ_CELERY, VCT_REQ_NKINDS };

enum { VCT_REQ_CUT_START = 1u, VCT_REQ_CUT_END = 2u };

/* One slice of a request: an event of its thread, and the request's next slice. */
typedef struct vct_req_slice {
    size_t event;       /* index into the thread's events */
    size_t next;        /* index into vct_requests.slices, or SIZE_MAX after the last */
} vct_req_slice;

typedef struct vct_request {
    size_t thread;      /* index into trace->threads */
    size_t first, last; /* its first and last slice (indices into vct_requests.slices) */
    size_t nslices;
    int64_t ts, end;    /* first slice's start, last slice's end (ticks) */
    uint32_t func;      /* the entry function */
    unsigned cut;       /* VCT_REQ_CUT_* */
    uint32_t task_id;   /* by asyncio task: the request's task (tasks.h); 0: not by task */
    const char *task_name; /* its recorded name (the trace's), or NULL ("Task-ID") */
    size_t ntasks;      /* the tasks it is made of: its own and those it created */
} vct_request;

typedef struct vct_requests {
    vct_request *reqs;
    size_t n, cap;
    vct_req_slice *slices;
    size_t nslices, slices_cap;
} vct_requests;

/* Which functions are entries: from requests.def (entry_glob NULL), or those whose name, or
 * name without its " (file:line)", matches entry_glob (fnmatch).  Returns a malloc'd
 * array[t->nfuncs] of enum vct_req_kind + 1 (0: not an entry), or NULL on allocation
 * failure. */
unsigned char *vct_requests_entries(const vct_trace *t, const char *entry_glob);

/* Finds the requests of the threads of process pid (0: every process), in thread order.
 * entries: from vct_requests_entries.  0, or -1 on allocation failure. */
int vct_requests_find(const vct_trace *t, const unsigned char *entries, uint64_t pid,
                      vct_requests *out);

void vct_requests_free(vct_requests *r);

/* "WSGI", "ASGI", "Celery", "--entry" */
const char *vct_req_kind_name(enum vct_req_kind kind);
/* The server or framework requests.def names for an entry function, or NULL (--entry). */
const char *vct_req_server_of(const char *name);

#endif /* VCT_REQUESTS_H */

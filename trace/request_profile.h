/* request_profile.h — where one request's time went: its heaviest path, its top functions by
 * self time, and its waiting by kind.
 *
 * The request's calls (every slice's subtree on its thread) are merged into one call tree by
 * function along the stack, like a flame graph's:
 *   heaviest path  from the entry, the child with the largest inclusive time, down to a leaf
 *                  or a wait (a blocking call's callees are waiting, not a path of work);
 *   self time      per function, waits left out, as `vcattach summary` counts it (summary.h);
 *   waiting        the inclusive time of the outermost blocking calls, by kind (waits.def),
 *                  and the time before the first traced callee of calls running at attach;
 *   on-CPU         measured (a trace with CPU samples, cpu.h): the on-CPU part of the
 *                  slices' time, the rest off-CPU whatever the calls' names;
 *   suspended      a coroutine request's time between its slices (awaiting).  In the tree
 *                  it is booked to the awaiting chain: the coroutines the next slice resumes
 *                  into (the resume, its first callee if a resume, and so on down), so the
 *                  heaviest path goes to the await that waited (`slow → asyncio.sleep`).
 */
#ifndef VCT_REQUEST_PROFILE_H
#define VCT_REQUEST_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "requests.h"
#include "summary.h"

typedef struct vct_req_step {
    uint32_t func;
    int64_t incl; /* ticks */
} vct_req_step;

typedef struct vct_req_profile {
    vct_req_step *path;  /* the heaviest path, entry first */
    size_t npath;
    vct_req_step *top;   /* functions by working self time, most first (incl = self) */
    size_t ntop;
    int64_t wait[VCT_WAIT_NKINDS]; /* ticks waiting by kind ([VCT_WAIT_AT_ATTACH]: at attach) */
    int64_t waiting;     /* their sum */
    int64_t busy;        /* the slices' total duration */
    int64_t suspended;   /* (end - ts) - busy */
    int measured;        /* the trace has CPU samples (cpu.h): on_cpu is meaningful */
    int64_t on_cpu;      /* the on-CPU part of busy, measured ... */
    int64_t cpu_seen;    /* ... of this part of busy that the samples cover: the rest of it
                            (cpu_seen - on_cpu) was off-CPU */
} vct_req_profile;

/* Reusable state: per-function arrays of the trace, the merged tree. */
typedef struct vct_req_profiler {
    const vct_trace *trace;
    vct_summary acc;
    struct req_node *nodes;
    size_t nnodes, nodes_cap;
    size_t *stack; /* node per open depth */
    size_t stack_cap;
    int64_t gap;        /* the suspension before the slice being walked */
    size_t chain_depth; /* its awaiting chain's depth so far */
    int chain_live;     /* the chain may still grow */
    int failed;
} vct_req_profiler;

/* 0, or -1 on allocation failure. */
int vct_req_profiler_init(vct_req_profiler *p, const vct_trace *t);
void vct_req_profiler_free(vct_req_profiler *p);

/* Profiles request q of r, keeping the top `ntop` functions by self time.  The result's
 * arrays are malloc'd (vct_req_profile_free).  0, or -1 on allocation failure. */
int vct_req_profile_compute(vct_req_profiler *p, const vct_requests *r, const vct_request *q,
                            size_t ntop, vct_req_profile *out);
void vct_req_profile_free(vct_req_profile *prof);

#endif /* VCT_REQUEST_PROFILE_H */

/* load.c — reads a trace file into a vct_trace (model.h), then runs the finishing steps: the
 * model's, then the CPU samples' and the task markers' (load.h).
 *
 * Two inputs, told apart by their first bytes (input.h): a .cvf (a u64 version 1) through the
 * bounded codec reader, and Chrome-trace JSON ('{' or '[', what `vcattach convert` and
 * VizTracer write) through the streaming converter (json_cvf.h, via input.h), so `summary`
 * and the exporters also work on a JSON trace.
 * Only what the summary and exports use is kept: complete (X) events, thread names, the
 * drop count the agent reports as an instant event with args.dropped, the filters, each
 * process's attach and detach times (requests cut by the trace's end), the CPU samples and
 * the asyncio task markers and names (tasks.h).
 */
#include "load.h"
#include "cpu.h"
#include "sched_split.h"
#include "tasks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cvf_reader.h"
#include "window.h"
#include "text.h"

/* A JSON real as a u64, saturating: converting a double outside the target type's range is
 * undefined behaviour in C, and a trace may hold 1e300.  NaN and negatives are 0. */
static uint64_t real_to_u64(double d)
{
    if (!(d > 0))
        return 0;
    return d >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)d;
}

/* ---- the "dropped" instant event (shared by both inputs) --------------------------------- */

/* Adds the count of an event like {"ph":"i","name":"vcattach.dropped","args":{"dropped":N}}.
 * Any non-X event with a numeric args.dropped counts: the agent's name may evolve. */
static void note_drops(vct_trace *t, json_t *event)
{
    json_t *args = json_object_get(event, "args");
    json_t *dropped = json_object_get(args, "dropped");
    if (json_is_integer(dropped) && json_integer_value(dropped) >= 0)
        vct_trace_add_drops(t, (uint64_t)json_integer_value(dropped));
    else if (json_is_real(dropped) && json_real_value(dropped) >= 0)
        vct_trace_add_drops(t, real_to_u64(json_real_value(dropped)));
}

/* The agent's "vcattach detach" carries args.interps_untraced (CPython 3.12+: sub-interpreters
 * it saw and left alone); one per traced process, summed. */
static void note_interps(vct_trace *t, json_t *event)
{
    json_t *args = json_object_get(event, "args");
    json_t *n = json_object_get(args, "interps_untraced");
    json_t *shared = json_object_get(args, "interps_untraced_shared_gil");
    if (json_is_integer(n) && json_integer_value(n) > 0)
        t->interps_untraced += (uint64_t)json_integer_value(n);
    if (json_is_integer(shared) && json_integer_value(shared) > 0)
        t->interps_untraced_shared += (uint64_t)json_integer_value(shared);
}

/* ---- Chrome-trace JSON ------------------------------------------------------------------- */

/* A JSON trace goes through the streaming JSON → .cvf converter (json_cvf.c) into an
 * anonymous memory file, and is then loaded like a .cvf: memory stays proportional to the
 * compact trace, never to a JSON tree (jansson's tree of a 600 MB trace takes ~6 GB). */
static int load_cvf(const void *data, size_t size, vct_trace *t, unsigned flags,
                    const vct_window *w, cvf_error *cerr);

static int load_json(const char *name, const void *json, size_t json_size, vct_trace *t,
                     unsigned flags, char *err, size_t errlen)
{
    void *cvf;
    size_t size;
    int fd = vct_json_to_memfd(name, json, json_size, err, errlen);
    if (fd < 0)
        return -1;
    int rc = vct_map_fd(fd, &cvf, &size);
    close(fd);
    if (rc < 0 || size == 0) {
        snprintf(err, errlen, "%s: cannot read back the converted trace: %s", name,
                 rc < 0 ? strerror(errno) : "empty");
        return -1;
    }
    cvf_error cerr = {0};
    rc = load_cvf(cvf, size, t, flags | VCT_LOAD_MAPPED_INPUT, NULL, &cerr);
    if (rc < 0)
        snprintf(err, errlen, "%s: %s", name, cerr.msg);
    munmap(cvf, size);
    return rc;
}

/* ---- .cvf --------------------------------------------------------------------------------- */

typedef struct cvf_load_ctx {
    vct_trace *t;
    cvf_error *err;
    unsigned flags;            /* VCT_LOAD_* */
    const vct_window *window;  /* compact loads: applied as events are added; or NULL */
    const unsigned char *base; /* the .cvf bytes (VCT_LOAD_MAPPED_INPUT: a file mapping) */
    uint64_t released;         /* bytes before it given back to the kernel */
    vct_event *slice;          /* compact loads: scratch of COMPACT_SLICE events */
} cvf_load_ctx;

/* A compact load sorts a group in slices of this many events (6 MiB of scratch). */
#define COMPACT_SLICE (1u << 18)
/* ... and gives back the mapping's pages already read, this many bytes at a time. */
#define RELEASE_STEP (64ull << 20)

static int cvf_nomem(cvf_load_ctx *c, uint64_t offset)
{
    snprintf(c->err->msg, sizeof c->err->msg,
             "out of memory while loading the record at offset %llu", (unsigned long long)offset);
    return -1;
}

static int on_cvf_thread_name(void *ctx, uint64_t pid, uint64_t tid, const char *name)
{
    cvf_load_ctx *c = ctx;
    return vct_trace_set_thread_name(c->t, pid, tid, name) < 0 ? cvf_nomem(c, 0) : 0;
}

static int on_cvf_process_name(void *ctx, uint64_t pid, uint64_t tid, const char *name)
{
    cvf_load_ctx *c = ctx;
    (void)tid;
    return vct_trace_set_process_name(c->t, pid, name) < 0 ? cvf_nomem(c, 0) : 0;
}

/* Walk order (model.c's sort): start, the longer call first, then the order of the file. */
static int cmp_walk(const void *a, const void *b)
{
    const vct_event *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    if (x->end != y->end)
        return x->end > y->end ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The compact form: the group in slices, each sorted and appended as runs. */
static int add_compact(cvf_load_ctx *c, const cvf_fee_group *g, vct_thread *th, uint32_t func)
{
    size_t n = 0;
    int sorted = 1;
    for (size_t i = 0; i <= g->count; i++) {
        if (n == COMPACT_SLICE || (i == g->count && n)) {
            if (!sorted)
                qsort(c->slice, n, sizeof *c->slice, cmp_walk);
            if (vct_trace_add_sorted(c->t, th, c->slice, n) < 0)
                return -1;
            n = 0;
            sorted = 1;
        }
        if (i == g->count)
            break;
        int64_t ts = g->ts[i];
        uint64_t dur = g->dur[i];
        if (c->window && !vct_window_clip(c->window, &ts, &dur))
            continue;
        vct_event *e = &c->slice[n];
        e->ts = ts;
        e->end = (ts >= 0 ? dur > (uint64_t)(INT64_MAX - ts) : dur > (uint64_t)INT64_MAX)
                     ? INT64_MAX
                     : ts + (int64_t)dur;
        e->func = func;
        e->seq = (uint32_t)n;
        e->flags = (g->args ? vct_args_flags(g->args_json + g->args[i].off, g->args[i].len)
                            : 0) & 3u;
        if (n && sorted && cmp_walk(&c->slice[n - 1], e) > 0)
            sorted = 0;
        n++;
    }
    return 0;
}

/* The pages of a file mapping before `offset` are read: given back (a page touched again is
 * read again from the file, so this only lowers the resident size). */
static void release_read_pages(cvf_load_ctx *c, uint64_t offset)
{
    if (!(c->flags & VCT_LOAD_MAPPED_INPUT) || offset < c->released + RELEASE_STEP)
        return;
    uint64_t upto = offset & ~(uint64_t)(sysconf(_SC_PAGESIZE) - 1);
    uintptr_t from = (uintptr_t)c->base & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1);
    if ((uintptr_t)c->base + upto > from)
        madvise((void *)from, (uintptr_t)c->base + upto - from, MADV_DONTNEED);
    c->released = upto;
}

static int on_cvf_fee(void *ctx, const cvf_fee_group *g)
{
    cvf_load_ctx *c = ctx;
    uint32_t func;
    vct_thread *th;
    if (vct_trace_intern(c->t, g->name, &func) < 0 || !(th = vct_trace_thread(c->t, g->pid, g->tid)))
        return cvf_nomem(c, g->offset);
    if (c->flags & VCT_LOAD_COMPACT) {
        release_read_pages(c, g->offset);
        return add_compact(c, g, th, func) < 0 ? cvf_nomem(c, g->offset) : 0;
    }
    for (size_t i = 0; i < g->count; i++) {
        unsigned flags = g->args ? vct_args_flags(g->args_json + g->args[i].off, g->args[i].len)
                                 : 0;
        if (vct_trace_add_event(c->t, th, g->ts[i], g->dur[i], func, flags) < 0)
            return cvf_nomem(c, g->offset);
    }
    return 0;
}

/* The agent's {"ph":"i","name":"vcattach filters","args":{"include":[…],"exclude":[…],
 * "no_c_calls":…,"max_depth":…,"min_dur_ns":…}}: kept as one line of text for the summary's
 * header (a filtered trace must not pass for a full one).  Several processes: the first. */
static void note_filters(vct_trace *t, json_t *event)
{
    json_t *name = json_object_get(event, "name");
    if (t->filters || !json_is_string(name) || strcmp(json_string_value(name), "vcattach filters"))
        return;
    json_t *args = json_object_get(event, "args");
    char buf[1024]; /* a header line: what does not fit is cut, whole items only */
    vc_text line;
    vc_text_fixed(&line, buf, sizeof buf);
    static const char *const lists[] = {"include", "exclude"};
    for (size_t l = 0; l < 2; l++) {
        json_t *arr = json_object_get(args, lists[l]);
        size_t i;
        json_t *g;
        json_array_foreach(arr, i, g) {
            if (json_is_string(g))
                vc_text_printf(&line, "%s--%s '%s'", line.len ? " " : "", lists[l],
                               json_string_value(g));
        }
    }
    if (json_is_true(json_object_get(args, "no_c_calls")))
        vc_text_printf(&line, "%s--no-c-calls", line.len ? " " : "");
    json_t *d = json_object_get(args, "max_depth");
    if (json_is_integer(d) && json_integer_value(d) > 0)
        vc_text_printf(&line, "%s--max-depth %lld", line.len ? " " : "",
                       (long long)json_integer_value(d));
    json_t *m = json_object_get(args, "min_dur_ns");
    if (json_is_integer(m) && json_integer_value(m) > 0)
        vc_text_printf(&line, "%s--min-dur %lldns", line.len ? " " : "",
                       (long long)json_integer_value(m));
    t->filters = strdup(line.len ? buf : "(unknown filters)");
}

/* The agent's {"ph":"i","name":"vcattach attach"|"vcattach detach","pid":P,"ts":µs}. */
static int note_session(vct_trace *t, json_t *event)
{
    const char *name = json_string_value(json_object_get(event, "name"));
    json_t *pid = json_object_get(event, "pid"), *ts = json_object_get(event, "ts");
    if (!name || !json_is_integer(pid) || json_integer_value(pid) < 0 || !json_is_number(ts))
        return 0;
    int detach = !strcmp(name, "vcattach detach");
    if (!detach && strcmp(name, "vcattach attach"))
        return 0;
    double us = json_number_value(ts);
    if (!(us >= 0 && us < 9e16)) /* ticks must fit an int64 */
        return 0;
    return vct_trace_note_session(t, (uint64_t)json_integer_value(pid), detach,
                                  (int64_t)(us * VCT_TICKS_PER_US + 0.5));
}

/* The agent's {"ph":"i","name":"vcattach task","pid":P,"args":{"task":ID,"name":"…"}}: the
 * name of a task (tasks.h); a name that is not a string is no name. */
static int note_task(vct_trace *t, json_t *event)
{
    const char *name = json_string_value(json_object_get(event, "name"));
    json_t *pid = json_object_get(event, "pid"), *args = json_object_get(event, "args");
    json_t *id = json_object_get(args, "task");
    if (!name || strcmp(name, "vcattach task") || !json_is_integer(pid) ||
        json_integer_value(pid) < 0 || !json_is_integer(id) || json_integer_value(id) < 1)
        return 0;
    return vct_tasks_add_name(t, (uint64_t)json_integer_value(pid),
                              (uint64_t)json_integer_value(id),
                              json_string_value(json_object_get(args, "name")));
}

/* Other events are few (instants, unfinished calls); only the ones mentioning "dropped",
 * the filters, the session's attach and detach or a task's name are parsed. */
static int on_cvf_other(void *ctx, const cvf_json_record *r)
{
    cvf_load_ctx *c = ctx;
    for (size_t i = 0; i < r->nitems; i++) {
        const char *item = r->json + r->items[i].off;
        size_t len = r->items[i].len;
        if (!memmem(item, len, "\"dropped\"", 9) && !memmem(item, len, "\"vcattach ", 10))
            continue;
        json_t *ev = json_loadb(item, len, JSON_DECODE_ANY, NULL);
        const char *ph = json_string_value(json_object_get(ev, "ph"));
        int rc = 0;
        if (ph && ph[0] != 'X' && ph[0] != 'M' && ph[0] != 'C') {
            note_drops(c->t, ev);
            note_interps(c->t, ev);
            note_filters(c->t, ev);
            rc = note_session(c->t, ev);
            if (!rc)
                rc = note_task(c->t, ev);
            if (!rc)
                rc = vct_sched_note(c->t, ev);
        }
        json_decref(ev);
        if (rc < 0)
            return cvf_nomem(c, r->offset);
    }
    return 0;
}

/* The agent's per-thread CPU clock samples ("cpu TID" counters, cpu.h) and asyncio task
 * step markers ("task TID", tasks.h); others are ignored. */
static int on_cvf_counter(void *ctx, const cvf_counter_group *g)
{
    cvf_load_ctx *c = ctx;
    return vct_cpu_add_group(c->t, g) < 0 || vct_tasks_add_group(c->t, g) < 0 ||
                   vct_sched_add_group(c->t, g) < 0
               ? cvf_nomem(c, g->offset)
               : 0;
}

static int load_cvf(const void *data, size_t size, vct_trace *t, unsigned flags,
                    const vct_window *w, cvf_error *cerr)
{
    static const cvf_visitor visitor = {
        .process_name = on_cvf_process_name,
        .thread_name = on_cvf_thread_name,
        .fee_group = on_cvf_fee,
        .counter_group = on_cvf_counter,
        .other_events = on_cvf_other,
    };
    cvf_load_ctx c = {t, cerr, flags, w, data, 0, NULL};
    if (flags & VCT_LOAD_COMPACT) {
        t->compact = 1;
        if (!(c.slice = malloc(COMPACT_SLICE * sizeof *c.slice))) {
            cerr->offset = 0;
            snprintf(cerr->msg, sizeof cerr->msg, "out of memory");
            return -1;
        }
    }
    int rc = cvf_read(data, size, &visitor, &c, 0, cerr) != 0 ? -1 : 0;
    free(c.slice);
    return rc;
}

/* The finishing steps, in order: the model's (sorting), then those of the analyses built on
 * it (sched_split.h, which makes CPU samples, before cpu.h; tasks.h), which the model does not
 * know.  0, or -1 (memory). */
static int finish(vct_trace *t)
{
    return vct_trace_finish(t) < 0 || vct_sched_finish(t) < 0 || vct_cpu_finish(t) < 0 ||
                   vct_tasks_finish(t) < 0
               ? -1
               : 0;
}

int vct_trace_from_cvf_ex(const void *data, size_t size, unsigned flags, const vct_window *w,
                          vct_trace **out, cvf_error *err)
{
    *out = NULL;
    vct_trace *t = vct_trace_new();
    if (!t) {
        err->offset = 0;
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return -1;
    }
    if (load_cvf(data, size, t, flags, w, err) < 0) {
        vct_trace_free(t);
        return -1;
    }
    if (finish(t) < 0) {
        err->offset = 0;
        snprintf(err->msg, sizeof err->msg, "out of memory while sorting the events");
        vct_trace_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

/* ---- entry point ------------------------------------------------------------------------- */

int vct_trace_load(const vct_input *in, unsigned flags, vct_trace **out, char *err,
                   size_t errlen)
{
    const char *name = vct_input_name(in);
    flags &= VCT_LOAD_COMPACT; /* the input's mapping is known here: its flag is ours to set */
    *out = NULL;
    if (in->kind == VCT_INPUT_EMPTY) {
        snprintf(err, errlen, "%s is empty: not a .cvf trace (a .cvf is at least 35 bytes)",
                 name);
        return -1;
    }
    vct_trace *t = vct_trace_new();
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc;
    if (in->kind == VCT_INPUT_JSON) {
        rc = load_json(name, in->data, in->size, t, flags, err, errlen);
    } else { /* a .cvf, or not: the reader says what is wrong, and where */
        cvf_error cerr = {0};
        rc = load_cvf(in->data, in->size, t, flags | VCT_LOAD_MAPPED_INPUT, NULL, &cerr);
        if (rc < 0)
            snprintf(err, errlen, "%s is not a readable .cvf trace: %s", name, cerr.msg);
    }
    if (rc == 0 && finish(t) < 0) {
        snprintf(err, errlen, "%s: out of memory while sorting the events", name);
        rc = -1;
    }
    if (rc < 0) {
        vct_trace_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

int vct_trace_open(const char *const *paths, size_t n, unsigned flags, vct_input *in,
                   vct_trace **out, char *err, size_t errlen)
{
    if (vct_input_open(in, paths, n, err, errlen) < 0)
        return -1;
    if (vct_trace_load(in, flags, out, err, errlen) < 0) {
        vct_input_close(in);
        return -1;
    }
    return 0;
}

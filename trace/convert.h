/* convert.h — the output formats of `vcattach convert` and the JSON → .cvf direction.
 *
 * A .cvf input is turned into one of several formats; each is one function with the
 * signature below, listed in the table in cmd_convert.c (`--format NAME`).  To add a format:
 * write `int convert_cvf_to_NAME(...)` in its own convert_NAME.c using the reader API
 * (common/cvf_reader.h), declare it here, and add one row to that table.
 */
#ifndef VC_CONVERT_H
#define VC_CONVERT_H

#include <stddef.h>
#include <stdio.h>

#include "cvf.h"

/* Progress reporting for long conversions: called now and then with bytes done of total.
 * May be NULL. */
typedef void (*convert_progress_fn)(void *ctx, size_t done, size_t total);

struct vct_window;

typedef struct convert_ctx {
    convert_progress_fn progress;
    void *progress_ctx;
    /* --from/--to/--min-dur (window.h), resolved; NULL: the whole trace. */
    const struct vct_window *window;
    /* --merged (svg): one flame graph for all threads instead of one per thread. */
    int merged;
    /* The input is a read-only file mapping (cvf_map_file): the JSON walk may drop the pages
     * it has read (MADV_DONTNEED), so memory follows the output, not the input's size. */
    int input_is_mapping;
    /* chrome: more events to write after the trace's own (JSON objects separated by ",\n",
     * e.g. the "requests" tracks of request_track.h); NULL: none. */
    const char *extra_events;
    size_t extra_len;
    /* chrome: the tid an X event of (pid, tid) starting at ts ticks (before the window) is
     * written with, e.g. its asyncio task's track (task_track.h); NULL: its own. */
    uint64_t (*retid)(void *ctx, uint64_t pid, uint64_t tid, int64_t ts);
    void *retid_ctx;
} convert_ctx;

/* A .cvf → text converter: reads cvf[0 .. size), writes to `out` (a buffered stdio stream
 * the caller flushes, checks and closes).  Returns 0, or -1 with err filled (one line; for a
 * malformed file the reader's message, which names the byte offset). */
typedef int (*convert_cvf_fn)(const void *cvf, size_t size, FILE *out, const convert_ctx *cc,
                              cvf_error *err);

/* Chrome trace event JSON, the same events VizTracer's decompressor returns
 * (chrome.c). */
int convert_cvf_to_chrome(const void *cvf, size_t size, FILE *out, const convert_ctx *cc,
                          cvf_error *err);

/* Chrome trace JSON (an object with "traceEvents", or a bare list of events) → .cvf written
 * to the fd, grouped like VizTracer's compressor (json_cvf.c).  Returns 0, or -1 with err:
 * err->offset is the index of the offending event when the problem is an event, and err->msg
 * names it. */
int convert_json_to_cvf(const char *json, size_t len, int out_fd, const convert_ctx *cc,
                        cvf_error *err);

#endif

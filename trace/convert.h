/* convert.h — the contract every converter of `vcattach convert` fulfils: what it is given
 * (convert_ctx) and, for a .cvf → text output format, its signature (convert_cvf_fn).
 *
 * A .cvf input is turned into one of several formats; each is one function with the
 * signature below, declared in its own header (chrome.h, export.h) and listed in the table in
 * convert_job.c (`--format NAME`).  To add a format: write `int convert_cvf_to_NAME(...)` in
 * its own NAME.c using the reader API (common/cvf_reader.h), declare it in NAME.h, and add
 * one row to that table.  The JSON → .cvf direction is json_cvf.h.
 */
#ifndef VCT_CONVERT_H
#define VCT_CONVERT_H

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
    /* --working (svg, collapsed, speedscope): stacks weighed by on-CPU time (self_cpu.h). */
    int working;
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

#endif

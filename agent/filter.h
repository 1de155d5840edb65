/* filter.h — which calls a session keeps: --include/--exclude globs on a Python function's
 * file (co_filename, fnmatch semantics: `*` also matches `/`), --no-c-calls, --max-depth,
 * --min-dur.
 *
 * The glob verdict is taken once per code object, when the pinned key table (names.h) first
 * sees it, and cached in that table's slot: the hot path never matches a glob.  A C call is
 * judged by its caller's file, i.e. by the verdict of the caller's code (the backends check
 * it through the shadow stack: only included calls are ever pushed).  max_depth and min_dur
 * act in record.h, on the record path only.
 *
 * The config arrives as CONFIG lines (include=GLOB, exclude=GLOB repeated; no_c_calls=1;
 * max_depth=N; min_dur_ns=N) or through struct vc_config (vcagent.h); both end up here.
 */
#ifndef VC_FILTER_H
#define VC_FILTER_H

#include <stddef.h>
#include <stdint.h>

#define VC_FILTER_MAX_GLOBS 64
#define VC_FILTER_POOL 8192 /* bytes for every glob's text */

typedef struct vc_filter {
    uint32_t n_include, n_exclude;
    uint32_t has_globs;      /* any include or exclude: verdicts are taken */
    uint32_t no_c_calls;     /* C functions are not traced at all */
    uint32_t max_depth;      /* calls deeper than this are not recorded; 0 = unlimited */
    uint32_t depth_limit;    /* max_depth, or UINT32_MAX for unlimited (set at start) */
    uint64_t min_dur_ns;     /* calls shorter than this are not kept; 0 = all */
    uint64_t min_dur_raw;    /* the same in clock ticks (set when the session starts) */
    const char *include[VC_FILTER_MAX_GLOBS];
    const char *exclude[VC_FILTER_MAX_GLOBS];
    size_t pool_used;
    char pool[VC_FILTER_POOL];
} vc_filter;

void vc_filter_reset(vc_filter *f);
/* Derives the hot path's fields (depth_limit, min_dur_raw) once the clock is set up. */
void vc_filter_prepare(vc_filter *f);
/* Adds one glob (include != 0: to the include list).  0, or -1 with a message. */
int vc_filter_add_glob(vc_filter *f, int include, const char *glob, char *err, size_t errlen);
/* Reads every filter key of a CONFIG text ("key=value\n" lines).  0, or -1 with a message. */
int vc_filter_from_kv(vc_filter *f, const char *text, char *err, size_t errlen);
/* Reads a list of globs separated by '\n' (the C API's form).  0, or -1 with a message. */
int vc_filter_add_list(vc_filter *f, int include, const char *list, char *err, size_t errlen);
/* 1 if a Python function defined in `filename` (UTF-8) is traced, 0 if it is filtered out. */
int vc_filter_file_included(const vc_filter *f, const char *filename);
/* 1 if any filter is in force (the trace is not a full one). */
int vc_filter_active(const vc_filter *f);
/* The filters as a JSON object {"include":[…],"exclude":[…],"no_c_calls":…,"max_depth":…,
 * "min_dur_ns":…} into buf; the length written, or -1 if it does not fit. */
int vc_filter_json(const vc_filter *f, char *buf, size_t cap);

/* The filters as the command line would give them ("--exclude '*-packages*' --no-c-calls"), cut
 * with "..." at cap; for the END message's filters= line.  Returns the length. */
int vc_filter_describe(const vc_filter *f, char *buf, size_t cap);

/* The verdict for a code object (GIL held; PyObject is only declared here so that this header
 * needs no Python.h): 1 traced, 0 filtered out. */
struct _object;
int vc_filter_code_included(const vc_filter *f, struct _object *code);

#endif /* VC_FILTER_H */

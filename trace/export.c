/* export.c — the speedscope, collapsed and SVG exports as `vcattach convert` output formats.
 *
 * Adapts export_speedscope/export_collapsed/export_svg (speedscope.h, collapsed.h, svg.h: they
 * work on a loaded trace) to convert.h's convert_cvf_fn: build the per-thread model from the
 * .cvf bytes (load.h), export, free.
 */
#include <stdio.h>

#include "export.h"
#include "collapsed.h"
#include "load.h"
#include "speedscope.h"
#include "svg.h"
#include "window.h"

typedef int (*export_fn)(const vct_trace *t, const convert_ctx *cc, FILE *out, char *err,
                         size_t errlen);

static int speedscope_unnamed(const vct_trace *t, const convert_ctx *cc, FILE *out, char *err,
                              size_t errlen)
{
    return export_speedscope(t, NULL, cc && cc->working, out, err, errlen);
}

static int collapsed(const vct_trace *t, const convert_ctx *cc, FILE *out, char *err,
                     size_t errlen)
{
    return export_collapsed(t, cc && cc->working, out, err, errlen);
}

static int svg(const vct_trace *t, const convert_ctx *cc, FILE *out, char *err, size_t errlen)
{
    char title[160];
    double span_ms = (double)vct_trace_span(t) / (VCT_TICKS_PER_US * 1e3);
    int working = cc && cc->working;
    snprintf(title, sizeof title, "vcattach flame graph%s: %zu thread%s%s, %.1f ms",
             working ? " of working (on-CPU) time" : "", t->nthreads,
             t->nthreads == 1 ? "" : "s", cc && cc->merged ? " merged" : "", span_ms);
    return export_svg(t, cc && cc->merged, working, title, out, err, errlen);
}

/* compact: the export only walks (collapsed, SVG), so the trace is loaded compact with the
 * window applied as it loads; otherwise (speedscope reads the event arrays) in full. */
static int convert_with(export_fn fn, int compact, const void *cvf, size_t size, FILE *out,
                        const convert_ctx *cc, cvf_error *err)
{
    vct_trace *t;
    unsigned flags = compact ? VCT_LOAD_COMPACT : 0;
    if (cc && cc->input_is_mapping)
        flags |= VCT_LOAD_MAPPED_INPUT;
    if (vct_trace_from_cvf_ex(cvf, size, flags, compact && cc ? cc->window : NULL, &t, err) < 0)
        return -1;
    if (!compact && cc && cc->window)
        vct_window_apply(t, cc->window);
    if (cc && cc->progress)
        cc->progress(cc->progress_ctx, size / 2, size); /* loaded: the walk is the other half */
    int rc = fn(t, cc, out, err->msg, sizeof err->msg);
    if (rc < 0)
        err->offset = 0;
    else if (cc && cc->progress)
        cc->progress(cc->progress_ctx, size, size);
    vct_trace_free(t);
    return rc;
}

int convert_cvf_to_speedscope(const void *cvf, size_t size, FILE *out, const convert_ctx *cc,
                              cvf_error *err)
{
    return convert_with(speedscope_unnamed, 0, cvf, size, out, cc, err);
}

int convert_cvf_to_collapsed(const void *cvf, size_t size, FILE *out, const convert_ctx *cc,
                             cvf_error *err)
{
    return convert_with(collapsed, 1, cvf, size, out, cc, err);
}

int convert_cvf_to_svg(const void *cvf, size_t size, FILE *out, const convert_ctx *cc,
                       cvf_error *err)
{
    return convert_with(svg, 1, cvf, size, out, cc, err);
}

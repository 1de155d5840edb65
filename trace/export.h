/* export.h — trace exports for other viewers: speedscope's own JSON format, folded
 * ("collapsed") stacks for flamegraph.pl / speedscope / inferno, and our own flame graph SVG.
 *
 * Two layers: export_* write a loaded trace (model.h); convert_cvf_to_* have the
 * convert_cvf_fn signature of convert.h, so `vcattach convert --format speedscope|collapsed`
 * is one row each in cmd_convert.c's formats[] table.
 */
#ifndef VC_EXPORT_H
#define VC_EXPORT_H

#include <stddef.h>
#include <stdio.h>

#include "convert.h"
#include "model.h"

/* speedscope file format (https://www.speedscope.app/file-format-schema.json): one "evented"
 * profile per thread in microseconds, frames shared, open/close events properly nested.
 * `name` is the file's display name; NULL gives "vcattach trace".  0, or -1 with err. */
int export_speedscope(const vct_trace *t, const char *name, FILE *out, char *err, size_t errlen);

/* Folded stacks, all threads merged: one line per distinct call stack,
 * "root;child;leaf <self time in µs, rounded>", stacks whose self time rounds to 0 left out.
 * ';' inside a name becomes ':' and newlines are dropped, so every line parses back. */
int export_collapsed(const vct_trace *t, FILE *out, char *err, size_t errlen);

/* A flame graph as one self-contained SVG (inline script and style, no external resource):
 * search, click to zoom; one tree per thread under a frame naming it, or all threads merged.
 * `title` is shown on top (NULL: a default).  0, or -1 with err. */
int export_svg(const vct_trace *t, int merged, const char *title, FILE *out, char *err,
               size_t errlen);

/* The same, as `vcattach convert` output formats (convert_cvf_fn, see convert.h). */
int convert_cvf_to_speedscope(const void *cvf, size_t size, FILE *out, const convert_ctx *cc,
                              cvf_error *err);
int convert_cvf_to_collapsed(const void *cvf, size_t size, FILE *out, const convert_ctx *cc,
                             cvf_error *err);
int convert_cvf_to_svg(const void *cvf, size_t size, FILE *out, const convert_ctx *cc,
                       cvf_error *err);

#endif /* VC_EXPORT_H */

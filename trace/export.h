/* export.h — export.c's own: the exports of a loaded trace (speedscope.h, collapsed.h,
 * svg.h) as `vcattach convert` output formats, i.e. with convert.h's convert_cvf_fn
 * signature, so that each is one row of convert_job.c's format table.  The exporters'
 * contracts are their own headers, not this one. */
#ifndef VCT_EXPORT_H
#define VCT_EXPORT_H

#include <stddef.h>
#include <stdio.h>

#include "convert.h"

int convert_cvf_to_speedscope(const void *cvf, size_t size, FILE *out, const convert_ctx *cc,
                              cvf_error *err);
int convert_cvf_to_collapsed(const void *cvf, size_t size, FILE *out, const convert_ctx *cc,
                             cvf_error *err);
int convert_cvf_to_svg(const void *cvf, size_t size, FILE *out, const convert_ctx *cc,
                       cvf_error *err);

#endif /* VCT_EXPORT_H */

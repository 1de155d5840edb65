/* svg.h — the contract of svg.c: a loaded trace as a flame graph in one self-contained SVG. */
#ifndef VCT_SVG_H
#define VCT_SVG_H

#include <stddef.h>
#include <stdio.h>

#include "model.h"

/* A flame graph as one self-contained SVG (inline script and style, no external resource):
 * search, click to zoom; one tree per thread under a frame naming it, or all threads merged.
 * working: widths are on-CPU time (self_cpu.h), not wall time.  `title` is shown on top
 * (NULL: a default).  0, or -1 with err. */
int export_svg(const vct_trace *t, int merged, int working, const char *title, FILE *out,
               char *err, size_t errlen);

#endif /* VCT_SVG_H */

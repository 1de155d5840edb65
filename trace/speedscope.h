/* speedscope.h — the contract of speedscope.c: a loaded trace in speedscope's own file
 * format. */
#ifndef VCT_SPEEDSCOPE_H
#define VCT_SPEEDSCOPE_H

#include <stddef.h>
#include <stdio.h>

#include "model.h"

/* speedscope file format (https://www.speedscope.app/file-format-schema.json): one "evented"
 * profile per thread in microseconds, frames shared, open/close events properly nested.
 * working: one "sampled" profile per thread instead, its distinct stacks weighted by their
 * self on-CPU µs (collapsed.h's vct_fold_stacks).  `name` is the file's display name; NULL
 * gives "vcattach trace".  0, or -1 with err. */
int export_speedscope(const vct_trace *t, const char *name, int working, FILE *out, char *err,
                      size_t errlen);

#endif /* VCT_SPEEDSCOPE_H */

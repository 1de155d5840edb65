/* chrome.h — the contract of chrome.c: a .cvf as Chrome trace event JSON, the same events
 * VizTracer's decompressor returns (the default output of `vcattach convert`). */
#ifndef VCT_CHROME_H
#define VCT_CHROME_H

#include <stddef.h>
#include <stdio.h>

#include "convert.h"

/* A convert_cvf_fn (convert.h); cc's window, extra_events and retid apply. */
int convert_cvf_to_chrome(const void *cvf, size_t size, FILE *out, const convert_ctx *cc,
                          cvf_error *err);

#endif /* VCT_CHROME_H */

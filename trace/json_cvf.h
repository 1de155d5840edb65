/* json_cvf.h — the contract of json_cvf.c: Chrome trace JSON back to a .cvf (`vcattach
 * convert` of a JSON input, and the loader's way to read a JSON trace). */
#ifndef VCT_JSON_CVF_H
#define VCT_JSON_CVF_H

#include <stddef.h>

#include "convert.h"

/* Chrome trace JSON (an object with "traceEvents", or a bare list of events) → .cvf written
 * to the fd, grouped like VizTracer's compressor.  cc: progress and input_is_mapping apply
 * (NULL: none).  Returns 0, or -1 with err: err->offset is the index of the offending event
 * when the problem is an event, and err->msg names it. */
int convert_json_to_cvf(const char *json, size_t len, int out_fd, const convert_ctx *cc,
                        cvf_error *err);

#endif /* VCT_JSON_CVF_H */

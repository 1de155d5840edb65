/* load.h — a trace file into the model (load.c): the .cvf bytes of an input (input.h), or a
 * Chrome-trace JSON converted to them first, read into a vct_trace (model.h), and then the
 * finishing steps, in order: the model's own (threads and events sorted), then the analyses'
 * built on it (the CPU samples, cpu.h; the asyncio task markers, tasks.h).  The model does not
 * call what is built on it: this file is where the two meet.
 */
#ifndef VCT_LOAD_H
#define VCT_LOAD_H

#include <stddef.h>

#include "cvf.h"
#include "input.h"
#include "model.h"

struct vct_window;

/* How to load.  VCT_LOAD_COMPACT: threads in the compact form, for the consumers that only
 * walk (summary, the collapsed and SVG exports); VCT_LOAD_MAPPED_INPUT: the .cvf bytes are a
 * read-only file mapping, whose pages already read may be given back as the load goes (they
 * would be read again from the file if needed). */
enum { VCT_LOAD_COMPACT = 1u, VCT_LOAD_MAPPED_INPUT = 2u };

/* Builds a finished trace from a whole .cvf in memory, with a window (window.h; NULL: none)
 * applied as events are added: the calls outside it are never held.  0, or -1 with err (the
 * reader's message, which names the byte offset). */
int vct_trace_from_cvf_ex(const void *data, size_t size, unsigned flags,
                          const struct vct_window *w, vct_trace **out, cvf_error *err);

/* Loads an input (a .cvf, or a Chrome-trace JSON) into a finished trace, with flags
 * (VCT_LOAD_COMPACT; the input is a mapping already).  On failure returns -1 with a one-line
 * message in err (what is wrong, and where). */
int vct_trace_load(const vct_input *in, unsigned flags, vct_trace **out, char *err,
                   size_t errlen);

/* The reports' way in: opens paths[0 .. n) as one input (input.h) and loads it with flags.
 * 0 with *in open and *out loaded (the caller frees both), or -1 with err (nothing open). */
int vct_trace_open(const char *const *paths, size_t n, unsigned flags, vct_input *in,
                   vct_trace **out, char *err, size_t errlen);

#endif /* VCT_LOAD_H */

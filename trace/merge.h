/* merge.h — several .cvf traces into one: the files of the processes of a tree
 * (`vcattach --subprocesses`), or traces taken separately that `summary` and `convert` are
 * asked to treat as one.
 *
 * Every record is copied as decoded by the bounded reader and re-encoded by the streaming
 * writer, in the order the writer requires (process names, thread names, FEE groups, counter
 * groups, one other-events list that concatenates every input's, the first file_info): one
 * pass over the mapped inputs per kind of record, so nothing but the current record is held
 * in memory.  All inputs are on one clock already (CLOCK_MONOTONIC, ticks of 10 ns): the
 * agent of every process calibrates its raw timestamps to it.
 */
#ifndef VCT_MERGE_H
#define VCT_MERGE_H

#include <stddef.h>

#include "cvf.h"
#include "vctrace.h" /* vct_cvf_check, vct_cvf_merge_fd: the public face of this file */

/* Merges paths[0 .. n) into sink.  0, or -1 with a one-line message (which file, what) in
 * err.  Names shared by several inputs (same pid and tid) are written once. */
int vct_cvf_merge(const char *const *paths, size_t n, cvf_sink_fn sink, void *ctx, char *err,
                  size_t errlen);

/* Merges paths into an anonymous in-memory file (memfd) and returns its descriptor, which
 * reads from offset 0 as one .cvf (through /proc/self/fd/N where a path is needed), or -1
 * with err. */
int vct_cvf_merge_to_memfd(const char *const *paths, size_t n, char *err, size_t errlen);

#endif /* VCT_MERGE_H */

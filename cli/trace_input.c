/* trace_input.c — loading the trace operands of `summary` and `requests` (trace_input.h).
 * Several files go through trace/merge.c into an anonymous memory file first, then load like
 * one: one path for every offline command, one message style. */
#include "trace_input.h"

#include <stdio.h>
#include <unistd.h>

#include "merge.h"

int cli_load_trace(const char *cmd, char *const *paths, size_t n, unsigned flags,
                   vct_trace **out, char *label, size_t labellen)
{
    char err[1024], merged_path[64];
    const char *load_path = paths[0];
    int merged_fd = -1;
    snprintf(label, labellen, "%s", paths[0]);
    if (n > 1) { /* several files: one trace, merged in memory */
        merged_fd = vct_cvf_merge_to_memfd((const char *const *)paths, n, err, sizeof err);
        if (merged_fd < 0) {
            fprintf(stderr, "vcattach %s: %s\n", cmd, err);
            return -1;
        }
        snprintf(merged_path, sizeof merged_path, "/proc/self/fd/%d", merged_fd);
        snprintf(label, labellen, "%zu files", n);
        load_path = merged_path;
    }
    int rc = vct_trace_load_ex(load_path, flags, out, err, sizeof err);
    if (merged_fd >= 0)
        close(merged_fd);
    if (rc < 0)
        fprintf(stderr, "vcattach %s: %s\n", cmd, err);
    return rc;
}

int cli_trace_has_pid(const vct_trace *t, uint64_t pid)
{
    if (vct_trace_process_name(t, pid))
        return 1;
    for (size_t i = 0; i < t->nthreads; i++)
        if (t->threads[i].pid == pid)
            return 1;
    return 0;
}

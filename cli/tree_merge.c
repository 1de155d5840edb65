/* tree_merge.c — a process tree's parts merged into one .cvf (tree_merge.h).
 *
 * Every member of a tree is untrusted: its agent runs in the target's user's process and may
 * send (or its process may write, for `start --subprocesses`) any bytes as its part.  The
 * merge (libvctrace's vct_cvf_merge_fd) reads its inputs in several passes and fails as a whole on the first
 * malformed record, so a single hostile member used to leave every other member's trace
 * unmerged.  Here each part is decoded once on its own first; a malformed one is named and
 * left out, the others merged.  The parts are private copies (an unlinked file or a memfd
 * only vcattach writes), so what was checked is what is merged.
 */
#include "tree_merge.h"

#include <stdio.h>
#include <stdlib.h>

#include "say.h"
#include "vctrace.h"

size_t tree_parts_check(const char *cmd, struct tree_part *parts, size_t n)
{
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        char err[512];
        parts[i].ok = vct_cvf_check(parts[i].path, err, sizeof err) == 0;
        if (parts[i].ok) {
            ok++;
            continue;
        }
        say("%s: pid %d%s%s%s: its trace is malformed (%s): not merged, the other "
                        "processes' traces are\n", cmd, (int)parts[i].pid,
                parts[i].name ? " (" : "", parts[i].name ? parts[i].name : "",
                parts[i].name ? ")" : "", err);
    }
    return ok;
}

int tree_parts_merge(const struct tree_part *parts, size_t n, int fd, char *err, size_t errlen)
{
    const char **paths = calloc(n ? n : 1, sizeof *paths);
    if (paths == NULL) {
        snprintf(err, errlen, "out of memory while merging the traces");
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (parts[i].ok)
            paths[k++] = parts[i].path;
    int rc = vct_cvf_merge_fd(paths, k, fd, err, errlen);
    free(paths);
    return rc;
}

/* tree_merge.h — the merge of a process tree's parts into one .cvf (tree_merge.c), shared by
 * `vcattach --subprocesses` (tree_trace.c, at the end of the trace) and `stop --subprocesses`
 * (tree_sessions.c): each part is checked on its own first, so that one that does not decode
 * is left out, named, and cannot sink the others. */
#ifndef VC_TREE_MERGE_H
#define VC_TREE_MERGE_H

#include <stddef.h>
#include <sys/types.h>

/* One member's part: a private copy of ours (a path such as /proc/self/fd/N). */
struct tree_part {
    pid_t pid;            /* the member it came from (named in the warning) */
    const char *path;     /* where the merge reads it */
    const char *name;     /* what the operator knows it as (OUT.PID.cvf), or NULL */
    int ok;               /* set by tree_parts_check: 1 when it decodes as a whole .cvf */
};

/* Checks every part (vctrace.h's vct_cvf_check).  Each that fails gets ok = 0 and one
 * line on stderr naming its pid and why: "CMD: pid N: its trace is malformed (offset X:
 * ...): not merged, the other processes' traces are".  Returns how many are ok. */
size_t tree_parts_check(const char *cmd, struct tree_part *parts, size_t n);

/* Merges the parts whose ok is set into fd (their number may be 0: an empty trace).  0, or -1
 * with a one-line message in err. */
int tree_parts_merge(const struct tree_part *parts, size_t n, int fd, char *err, size_t errlen);

#endif /* VC_TREE_MERGE_H */

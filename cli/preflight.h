/* preflight.h — every check made before anything is done to the target process.
 *
 * Each failing check yields one line naming the cause and the fix; the caller prints it and
 * exits with the usage/preflight code (2).  The checks only read /proc and files, probe the
 * agent's abstract status socket, and fork one short-lived child of our own to find out
 * whether ptrace is allowed at all for vcattach (seccomp, LSM).
 */
#ifndef VC_PREFLIGHT_H
#define VC_PREFLIGHT_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include "vcinject.h"

struct target_info {
    struct target_facts f; /* the snapshot every check judged (pid, uids, comm, py, ...) */
    char agent[PATH_MAX];  /* absolute path of the agent build for the target's version */
    int agent_needs_copy;  /* f.other_mnt_ns and `agent` is not visible there: copy it into
                              the target's /tmp */
    char agent_in_target[PATH_MAX]; /* the path the target loads (agent, or the copy) */
    pid_t held_by;         /* a child of ours that holds it at its start (tree_catch.h), let
                              go before it is injected: its tracing is not refused, 0 none */
    struct tracee *caught; /* that very child injecting it: the thread it holds
                              (inject_request.caught), NULL none */
};

/* Checks, in order: the process exists; vcattach may ptrace it (uid / CAP_SYS_PTRACE, Yama
 * ptrace_scope, non-dumpable targets, ptrace blocked for vcattach itself by seccomp or an
 * LSM); it is not stopped and not already traced; it is CPython of a supported version, on a C
 * library the agents load into (glibc 2.17+: not musl, not an older glibc), with an agent
 * build that is safe to load; in another mount namespace, it has a /tmp (for the
 * socket, and a copy of the agent if ours is not visible there); no vcattach session runs in
 * it (held_by: a tracer of ours, see target_info).  Returns 0 with *t filled (release it with preflight_release), or -1 with one line
 * (cause and fix) in err (nothing to release). */
int preflight_target(pid_t pid, pid_t held_by, struct target_info *t, char *err,
                     size_t errlen);

/* Releases what preflight_target holds (the facts' pidfd); safe twice. */
void preflight_release(struct target_info *t);

#endif /* VC_PREFLIGHT_H */

/* rexec_script.h — internal to the injector (used by inject.c): the small Python file the
 * remote-exec method asks the target to run (PEP 768): it loads the agent with ctypes and
 * calls vc_agent_connect(control_path).
 *
 * It is made like the agent copy (vcinject.h, part 4): by a child in the target's mount
 * namespace and root with the target's uid and gid (the script belongs to the target's user,
 * mode 0400: it holds the session's token), in the target's /tmp only when that directory is
 * root-owned (uid 0 of the target's user namespace) and sticky, in a fresh directory (0711:
 * nobody lists it) named .vcattach-rx-<our pid>-<random>, the file created O_EXCL|O_NOFOLLOW.
 * Root itself never creates, chmods or unlinks anything there: a mount or symlink raced in by
 * the target's user can only redirect what that user could do anyway.  The script removes
 * nothing itself: vcattach removes it (the same kind of child) once the agent connected, or
 * when the request was withdrawn; a vcattach killed in between, or one that could not
 * withdraw its request for certain (inject_remote_exec.c), leaves it, and the next one
 * that makes a script in that /tmp removes it (its creator gone, older than any live script,
 * the target user's, and not a mount point).
 */
#ifndef VC_REXEC_SCRIPT_H
#define VC_REXEC_SCRIPT_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

struct rexec_script {
    pid_t pid;                 /* the target */
    uid_t uid;                 /* the target's fsuid and fsgid: the helper's credentials */
    gid_t gid;
    char dir[64];              /* our directory in its /tmp, "" when nothing was created */
    char path[PATH_MAX];       /* the script as the target sees it: /tmp/DIR/attach.py */
};

/* Writes the script for the target's view of the agent and control socket paths.  Returns 0,
 * or -1 with one line in err (and nothing left behind). */
int rexec_script_create(pid_t pid, const char *agent_path, const char *control_path,
                        struct rexec_script *s, char *err, size_t errlen);

/* Removes the script and its directory (safe to call twice, or after a failed create). */
void rexec_script_remove(struct rexec_script *s);

#endif /* VC_REXEC_SCRIPT_H */

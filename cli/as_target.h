/* as_target.h — do a file operation in the target's filesystem as the target's user (or, with
 * as_target_user_run, anything else that must be done as that user).
 *
 * Whatever vcattach must create where the target can see it (the agent's copy in a container's
 * /tmp) is created by a short-lived child that entered the target's mount namespace, chrooted
 * to the target's root and dropped to the target's uid and gid (no supplementary groups).  The
 * target's user owns that /tmp and can swap any name in it for a symlink or a mount point at
 * any instant; as that user, the child can only do what the user could do anyway, so no race
 * there can make root write, chown or unlink a file of the host (SECURITY.md). */
#ifndef VC_AS_TARGET_H
#define VC_AS_TARGET_H

#include <stddef.h>
#include <sys/types.h>

/* Runs fn(arg, out, outcap) in such a child; fn returns 0 and puts its result text in out, or
 * non-zero with a one-line reason in out.  The child is killed after timeout_ms.  Returns 0
 * with out filled, or -1 with err (fn's reason, or why the child could not be started). */
int as_target_run(pid_t pid, uid_t uid, gid_t gid, int (*fn)(void *arg, char *out, size_t cap),
                  void *arg, char *out, size_t outcap, int timeout_ms, char *err,
                  size_t errlen);

/* The same child without entering the target's filesystem: only its uid and gid (e.g. to talk
 * to a target in another user namespace, which sees root as an unmapped uid). */
int as_target_user_run(pid_t pid, uid_t uid, gid_t gid,
                       int (*fn)(void *arg, char *out, size_t cap), void *arg, char *out,
                       size_t outcap, int timeout_ms, char *err, size_t errlen);

/* The most a child's result (out, or its reason) can hold, NUL included. */
#define AS_TARGET_OUT_MAX 8192

#endif /* VC_AS_TARGET_H */

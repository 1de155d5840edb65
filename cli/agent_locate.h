/* agent_locate.h — find the agent build for a CPython version and check that it is safe to
 * load into someone else's process (used by preflight.c).
 *
 * Search order (the first directory that exists wins for the override):
 *   $VCATTACH_AGENT_DIR                 only this directory, when set (tests, custom installs)
 *   <dir of /proc/self/exe>/            the build tree: build/vcattach next to build/libvcagent-*
 *   <dir of /proc/self/exe>/../lib/vcattach/   installed: PREFIX/bin/vcattach
 * File name: libvcagent-py<major><minor, 2 digits>.so, e.g. libvcagent-py311.so, -py308.so;
 * for a target on musl libc (Alpine) libvcagent-py<XY>-musl.so, built with musl-gcc, and
 * nothing else (a glibc agent would bring glibc into a musl process);
 * for a debug (Py_DEBUG) target libvcagent-py311d.so first, built against the debug headers
 * when `make` found them (the exact ABI: reference totals kept), else the release one (the same
 * object layout: docs/embedded-hosts.md).
 */
#ifndef VC_AGENT_LOCATE_H
#define VC_AGENT_LOCATE_H

#include <stddef.h>
#include <sys/types.h>

/* Finds the agent for major.minor (debug: a Py_DEBUG target; musl: a target on musl libc).
 * Returns 0 with the absolute path in `path`, or -1 with one line in err naming the
 * directories searched and how to build the missing agent. */
int agent_locate(int major, int minor, int debug, int musl, char *path, size_t cap, char *err,
                 size_t errlen);

/* Refuses an agent that others could have replaced (it runs inside the target): the file and
 * its directory must be owned by root or the operator and not writable by group or others;
 * and the target's user (target_uid) must be able to read it.  Returns 0 or -1 with err. */
int agent_check_safe(const char *path, uid_t target_uid, char *err, size_t errlen);

/* Makes the agent loadable by a target in another mount namespace that cannot see our file
 * (a container): a copy in a fresh, unpredictably named directory of the target's /tmp
 * (/tmp/.vcattach-agent-XXXXXX/<file name>), created by a child that runs as the target's user
 * in the target's root (as_target.h): root itself never writes there.  A copy of the same
 * content that the target still has loaded (an earlier attach) is reused by its path, so that
 * dlopen returns the agent already there.  Returns 0 with the target's view of the path in
 * out and *made = 1 when a new copy was made (remove it with agent_copy_remove once the
 * target has loaded it), or -1 with err. */
int agent_copy_into_target(pid_t pid, uid_t uid, gid_t gid, const char *agent, char *out,
                           size_t cap, int *made, char *err, size_t errlen);

/* Removes a copy made by agent_copy_into_target, as the target's user (a failure is a warning
 * on stderr: the file is the target user's own, in its /tmp). */
void agent_copy_remove(pid_t pid, uid_t uid, gid_t gid, const char *path);

#endif /* VC_AGENT_LOCATE_H */

/* session_query.h — asking a running session (session_query.c): `vcattach status|stop`, the
 * preflight's "is a session running there already", `start|stop --subprocesses` per member. */
#ifndef VC_SESSION_QUERY_H
#define VC_SESSION_QUERY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Talks to a running session through its abstract status socket (named with the pid the
 * target sees for itself, which differs inside a pid namespace; abstract sockets are per
 * network namespace, so a target in another one is not found): sends `request`
 * (VC_MSG_STATUS or VC_MSG_STOP) and waits up to timeout_ms for the answer (STATUS, or END
 * after STOP), whose text goes into reply.  A name held by another process (squatting) is
 * skipped with a warning, and the session's fallback names ("<name>-<random>", listed in
 * /proc/net/unix) are tried.  Returns 1 (answered), 0 (no session is running in pid), -1 with
 * err (ERROR, timeout). */
int ctl_query(pid_t pid, uint32_t request, char *reply, size_t cap, int timeout_ms,
                  char *err, size_t errlen);

#endif /* VC_SESSION_QUERY_H */

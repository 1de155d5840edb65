/* unix_names.h — which abstract Unix socket names a process listens on (unix_names.c): how
 * `status`/`stop` find a session whose well-known name was squatted, however many other
 * names a squatter binds next to it. */
#ifndef VC_UNIX_NAMES_H
#define VC_UNIX_NAMES_H

#include <stddef.h>
#include <sys/types.h>

/* One abstract name (without its leading NUL), as listed in /proc/net/unix. */
typedef char unix_name[108];

/* The listening sockets named "PREFIX-*" in our network namespace (/proc/net/unix) whose
 * socket is one of pid's own fds (/proc/PID/fd), in the order listed, into a malloc'd array
 * (*names, to free).  *others counts the "PREFIX-*" names held by anyone else.  Returns how
 * many are pid's, or -1 if /proc/net/unix or /proc/PID/fd cannot be read (or out of
 * memory). */
long unix_names_held(pid_t pid, const char *prefix, unix_name **names, size_t *others);

#endif /* VC_UNIX_NAMES_H */

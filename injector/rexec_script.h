/* rexec_script.h — internal to the injector (used by inject.c): the small Python file the
 * remote-exec method asks the target to run (PEP 768): it loads the agent with ctypes and
 * calls vc_agent_connect(control_path).
 *
 * It is made with the same rules as the agent copy (agent_locate.h): in the target's own /tmp,
 * reached through /proc/PID/root with every component opened O_NOFOLLOW relative to a
 * directory fd, in a fresh directory of ours (0711, owned by us: nobody else can write or
 * list it) named .vcattach-rx-<our pid>-<random>, the file created O_EXCL|O_NOFOLLOW and
 * given to the target's user, mode 0400: it holds the session's token.  The script removes
 * nothing itself: vcattach removes it once the agent connected, or when the request was
 * withdrawn; a vcattach killed in between leaves it, and the next one that makes a script in
 * that /tmp removes it (its creator gone, older than any live script).
 */
#ifndef VC_REXEC_SCRIPT_H
#define VC_REXEC_SCRIPT_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

struct rexec_script {
    int tmp_fd;                /* the target's /tmp, -1 when nothing was created */
    int dir_fd;                /* our directory in it */
    char dir[64];              /* its name */
    char path[PATH_MAX];       /* the script as the target sees it: /tmp/DIR/attach.py */
};

/* Writes the script for the target's view of the agent and control socket paths.  Returns 0,
 * or -1 with one line in err (and nothing left behind). */
int rexec_script_create(pid_t pid, const char *agent_path, const char *control_path,
                        struct rexec_script *s, char *err, size_t errlen);

/* Removes the script and its directory (safe to call twice, or after a failed create). */
void rexec_script_remove(struct rexec_script *s);

#endif /* VC_REXEC_SCRIPT_H */

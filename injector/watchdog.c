/* watchdog.c — the ptrace method's last bound (watchdog.h).
 *
 * A thread waits on a pipe with poll(): the method's end writes to it.  If the time runs out
 * first, the method is stuck in the kernel (a read of a stalled FUSE mapping of the target):
 * _exit ends every thread of vcattach, FUSE waits included, and the kernel detaches the
 * target's threads, which run on with their own registers.  Async-signal-safe calls only
 * after the time ran out (write, _exit): the stuck thread may hold any lock.
 */
#include "watchdog.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "monotonic.h"

static void *watch(void *arg)
{
    struct watchdog *w = arg;
    int64_t deadline = vc_monotonic_ms() + w->ms;
    for (;;) {
        int64_t left = deadline - vc_monotonic_ms();
        if (left <= 0)
            break;
        struct pollfd p = {.fd = w->pipe[0], .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r > 0)
            return NULL; /* disarmed */
        if (r < 0 && errno != EINTR)
            return NULL; /* cannot watch: the method's own deadlines stay */
    }
    char line[256];
    int n = snprintf(line, sizeof line,
                     "vcattach: the injection into pid %d did not return within %d ms: a read "
                     "of its memory is blocked in the kernel (a stalled FUSE mapping?); "
                     "vcattach exits, the kernel detaches the target, which runs on\n",
                     (int)w->pid, w->ms);
    if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0)
        n = 0;
    _exit(1);
}

int watchdog_arm(struct watchdog *w, int ms, pid_t pid)
{
    memset(w, 0, sizeof *w);
    w->ms = ms;
    w->pid = pid;
    if (pipe2(w->pipe, O_CLOEXEC) < 0)
        return -1;
    /* The thread takes no signal: a SIGTSTP (or any other) delivered to it would act on the
     * whole process while the method holds the target's threads; the method's thread has the
     * mask that defers them until every thread is detached. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&w->thread, NULL, watch, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        close(w->pipe[0]);
        close(w->pipe[1]);
        return -1;
    }
    w->armed = 1;
    return 0;
}

void watchdog_disarm(struct watchdog *w)
{
    if (!w->armed)
        return;
    close(w->pipe[1]); /* POLLHUP/POLLIN on the read end: disarmed */
    pthread_join(w->thread, NULL);
    close(w->pipe[0]);
    w->armed = 0;
}

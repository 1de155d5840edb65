/* tree_catch.c — a process of the tree that exec'd an interpreter during the trace, held at
 * the start of its initialization until it is injected (injector/catch.c).
 *
 * Why: a pool's spawned worker that lives 100 ms ran its first tasks before its agent was in
 * on a loaded machine: between the kernel's word of its exec and the injection's first stop
 * came this loop's own work (its look at /proc, the preflight, the helper's start) and the
 * worker's own slices.  So at the exec a child of ours (the catcher) seizes it at once and
 * keeps it at the first system call of CPython's initialization; the injection lets it go
 * (tree_catch_release, right before the method runs: a process has one tracer), as does any
 * end of the member's examination, the tree's stop, or a kill of vcattach.  The catcher exits
 * by itself past its budgets, so the longest a process can be held is bounded whatever this
 * loop does.  --method remote-exec never ptraces a member: nothing is caught then. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "monotonic.h"
#include "say.h"
#include "test_seam.h"
#include "tree_run.h"
#include "vcinject.h"

#define CATCH_STEP_MS 1500 /* the loader and libc's start, on a loaded machine */
#define CATCH_HOLD_MS 1000 /* held for this loop's preflight and its helper's start */

int tree_exe_names_python(const char *exe)
{
    const char *base = strrchr(exe, '/');
    return strstr(base ? base + 1 : exe, "python") != NULL;
}

struct caught_say {
    pid_t pid;
    int64_t exec_ms;
};

static void said_caught(void *arg, const struct inject_catch *res)
{
    const struct caught_say *c = arg;
    say("vcattach: pid %d caught at its interpreter's start (%lld ms after its exec, at %d "
        "system calls: %s)\n", (int)c->pid, (long long)(vc_monotonic_ms() - c->exec_ms),
        res->stops, res->at);
}

/* The catcher of pid's process, whichever member holds it (a process that exec'd after its
 * session has a member per image), or NULL. */
static struct member *catching(struct tree_run *r, pid_t pid)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->m[i].pid == pid && r->m[i].catcher > 0)
            return &r->m[i];
    return NULL;
}

void tree_catch_start(struct tree_run *r, struct member *m)
{
    char exe[256];
    if (catching(r, m->pid) != NULL || r->stopping || r->opt->method == CLI_METHOD_REMOTE_EXEC ||
        VC_SEAM(CATCH_OFF) != NULL)
        return;
    target_exe(m->pid, exe, sizeof exe);
    if (!tree_exe_names_python(exe))
        return;
    /* the process as it is now (its start time checked once the pidfd is open): a pid
     * reused by the moment of the seize is told apart */
    int pidfd = target_pidfd_open(m->pid);
    if (pidfd < 0)
        return;
    if (!tree_same_process(m)) { /* the pid is another's already */
        close(pidfd);
        return;
    }
    pid_t parent = getpid();
    fflush(NULL); /* nothing buffered twice */
    pid_t c = fork();
    if (c != 0)
        close(pidfd);
    if (c < 0)
        return; /* not caught: injected as it comes */
    if (c == 0) {
        /* vcattach's end (or its kill) is the catch's end: the kernel lets the thread go */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        struct inject_catch res;
        struct caught_say cs = {m->pid, m->exec_ms ? m->exec_ms : vc_monotonic_ms()};
        int rc = inject_catch_at_start(m->pid, pidfd, CATCH_STEP_MS, CATCH_HOLD_MS, &res,
                                       r->opt->verbose ? said_caught : NULL, &cs);
        if (r->opt->verbose && (rc < 0 || !res.caught))
            say("vcattach: pid %d not caught at its interpreter's start: %s (%d system calls)\n",
                (int)m->pid, res.ended, res.stops);
        _exit(0);
    }
    m->catcher = c;
}

static void release(struct member *m)
{
    kill(m->catcher, SIGKILL); /* ours and unreaped: the pid is still its */
    while (waitpid(m->catcher, NULL, 0) < 0 && errno == EINTR)
        ;
    m->catcher = 0; /* reaped: the kernel has detached the thread, which goes on */
}

void tree_catch_release(struct tree_run *r, pid_t pid)
{
    struct member *c = catching(r, pid);
    if (c != NULL)
        release(c);
}

pid_t tree_catcher_of(struct tree_run *r, pid_t pid)
{
    struct member *c = catching(r, pid);
    return c != NULL ? c->catcher : 0;
}

void tree_catch_release_all(struct tree_run *r)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->m[i].catcher > 0)
            release(&r->m[i]);
}

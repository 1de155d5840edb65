/* gilwait.c — the agent thread takes the GIL without starving behind the target's own
 * threads (why, and how: gilwait.h).
 *
 * The state is one mutex and one condition variable: whether the agent thread waits, how
 * many times it has got the GIL (the yielding thread waits for that count to move), whether
 * a yield call is queued, and the pid that queued it (a fork child's copy of a queued call
 * finds another pid and does nothing).  Nothing here is on the hot path: it runs once per
 * visit (every 100 ms) at most.
 */
#include "gilwait.h"
#include "compat.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_waiting;    /* the agent thread wants the GIL and has not got it */
static unsigned g_taken; /* times it got it */
static int g_queued;     /* a yield call is queued and has not run yet */
static pid_t g_pid;      /* the process whose agent thread waits */

static void atfork_prepare(void) { pthread_mutex_lock(&g_lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&g_lock); }

static void init_cond(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cond, &a);
    pthread_condattr_destroy(&a);
}

static void atfork_child(void)
{
    /* The child has no agent thread: nobody waits, and the lock and condition start over. */
    pthread_mutex_init(&g_lock, NULL);
    init_cond();
    g_waiting = 0;
    g_queued = 0;
}

static void init_once(void)
{
    init_cond();
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* The pending call: on a thread of the target, with the GIL.  Always 0 (else CPython raises in
 * that thread). */
static int yield_to_agent(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_lock);
    g_queued = 0;
    int wanted = g_waiting && g_pid == getpid();
    unsigned taken = g_taken;
    pthread_mutex_unlock(&g_lock);
    /* Finalizing: the GIL must stay where it is (a thread taking it now may be ended). */
    if (!wanted || vc_compat_is_finalizing())
        return 0;
    PyThreadState *me = PyEval_SaveThread();
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += VC_GIL_YIELD_MAX_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&g_lock);
    while (g_waiting && g_taken == taken)
        if (pthread_cond_timedwait(&g_cond, &g_lock, &until) != 0)
            break; /* ETIMEDOUT: another thread took the GIL; go on as CPython would */
    pthread_mutex_unlock(&g_lock);
    PyEval_RestoreThread(me);
    return 0;
}

static void wait_begins(void)
{
    pthread_once(&g_once, init_once);
    pthread_mutex_lock(&g_lock);
    g_waiting = 1;
    g_pid = getpid();
    /* Queue full, or 3.8 (-1): we wait as any thread would.  Finalizing: CPython frees the
     * queue's lock at the end (the atexit stop runs before that, with no need of a yield). */
    if (!g_queued && !vc_compat_is_finalizing() &&
        vc_compat_gil_holder_call(yield_to_agent, NULL) == 0)
        g_queued = 1;
    pthread_mutex_unlock(&g_lock);
}

static void wait_ends(void)
{
    pthread_mutex_lock(&g_lock);
    g_waiting = 0;
    g_taken++;
    pthread_cond_broadcast(&g_cond);
    pthread_mutex_unlock(&g_lock);
}

PyGILState_STATE vc_gil_ensure(void)
{
    wait_begins();
    PyGILState_STATE st = PyGILState_Ensure();
    wait_ends();
    return st;
}

void vc_gil_restore(PyThreadState *ts)
{
    wait_begins();
    PyEval_RestoreThread(ts);
    wait_ends();
}

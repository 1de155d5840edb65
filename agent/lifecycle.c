/* lifecycle.c — the session life cycle (lifecycle.h): one mutex and one condition variable
 * over the state, the stop request, the wake pipe, the last result and error.
 *
 * Kept apart from agent.c so that control.c (and anything else on the agent thread) can read
 * the state and request a stop without calling back into the session's owner.  Every wait is
 * bounded; nothing here touches Python.
 */
#include "lifecycle.h"
#include "channel.h"
#include "hooklock.h"
#include "protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_state = VC_IDLE;        /* enum vc_state */
static int g_started;                /* this session: 0 pending, 1 hooks installed, <0 failed */
static int g_stop_reason;            /* enum vc_stop_reason requested, 0 none */
static int g_ran;                    /* a session has finished at least once */
static int g_wake[2] = {-1, -1};     /* written to wake the agent thread's poll */
static struct vc_result g_result;
static pid_t g_session_pid;          /* the process that started the session */
static int g_fork_cleanup;           /* a fork child inherited a running session */
static int g_cond_ready_reset;       /* a fork child must re-create the condition variable */
static char g_error[512];

/* Read (never written) by the injector of a young process from outside, while this process
 * runs (injector/hold.c): a plain aligned word, written only through vc_life_set_phase. */
__attribute__((visibility("default"))) volatile uint32_t vc_agent_phase;

/* The agent thread's tid, for the same reader: it tells a thread that waits for the GIL
 * (running) from one blocked on a lock the held thread owns (sleeping). */
__attribute__((visibility("default"))) volatile int32_t vc_agent_tid;

/* For the same reader: where _PyRuntime.initialized is (compat.h), 0 if not known. While the
 * agent waits for the initialization, the held thread runs; once it is initialized, it is
 * held at its next call rather than run its program's first lines untraced. */
__attribute__((visibility("default"))) volatile uint64_t vc_agent_init_flag;

void vc_life_set_phase(unsigned phase)
{
    __atomic_store_n(&vc_agent_phase, (uint32_t)phase, __ATOMIC_RELEASE);
}

void vc_life_note_init_flag(uintptr_t addr)
{
    __atomic_store_n(&vc_agent_init_flag, (uint64_t)addr, __ATOMIC_RELEASE);
}

void vc_life_mark_agent_thread(void)
{
    __atomic_store_n(&vc_agent_tid, (int32_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
}

/* ---- waiting ------------------------------------------------------------------------------ */

static void deadline_from_now(struct timespec *ts, int wait_ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += wait_ms / 1000;
    ts->tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static pthread_cond_t *cond(void)
{
    /* The condition variable waits on CLOCK_MONOTONIC (set up once). */
    static int ready;
    if (g_cond_ready_reset) {
        g_cond_ready_reset = 0;
        ready = 0;
    }
    if (!ready) {
        pthread_condattr_t a;
        pthread_condattr_init(&a);
        pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
        pthread_cond_init(&g_cond, &a); /* never waited on yet (or a fork child's copy) */
        pthread_condattr_destroy(&a);
        ready = 1;
    }
    return &g_cond;
}

/* Waits (lock held) until pred() or the deadline; returns pred(). */
static int wait_until(int (*pred)(void), int wait_ms)
{
    struct timespec dl;
    deadline_from_now(&dl, wait_ms < 0 ? 0 : wait_ms);
    while (!pred()) {
        if (pthread_cond_timedwait(cond(), &g_lock, &dl) == ETIMEDOUT)
            break;
    }
    return pred();
}

static int pred_idle(void) { return g_state == VC_IDLE; }
static int pred_started(void) { return g_started != 0 || g_state == VC_IDLE; }

static void close_wake_pipe(void)
{
    if (g_wake[0] >= 0)
        close(g_wake[0]);
    if (g_wake[1] >= 0)
        close(g_wake[1]);
    g_wake[0] = g_wake[1] = -1;
}

/* ---- entry points ------------------------------------------------------------------------- */

int vc_life_claim(void)
{
    pthread_mutex_lock(&g_lock);
    if (g_state != VC_IDLE) {
        pthread_mutex_unlock(&g_lock);
        return -EBUSY;
    }
    return 0;
}

void vc_life_release(void)
{
    pthread_mutex_unlock(&g_lock);
}

int vc_life_launch(void *(*fn)(void *))
{
    if (pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0)
        return -errno;
    g_session_pid = getpid();
    g_started = 0;
    g_stop_reason = VC_STOP_NONE;
    g_error[0] = '\0';
    g_result = (struct vc_result){0};

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* The agent thread must not take the process's signals. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_t th;
    vc_life_set_phase(VC_PHASE_CONNECTING); /* before the thread can move it on */
    int rc = pthread_create(&th, &attr, fn, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        vc_life_set_phase(VC_PHASE_DONE);
        close_wake_pipe();
        return -rc;
    }
    g_state = VC_STARTING;
    return 0;
}

int vc_life_wait_started(int wait_ms)
{
    pthread_mutex_lock(&g_lock);
    if (g_state == VC_IDLE && !g_ran) {
        pthread_mutex_unlock(&g_lock);
        return -ESRCH;
    }
    int ok = wait_until(pred_started, wait_ms);
    int rc = !ok ? -ETIMEDOUT : g_started > 0 ? 0 : g_started < 0 ? g_started : -EIO;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

int vc_life_stop_and_wait(int wait_ms, struct vc_result *out)
{
    pthread_mutex_lock(&g_lock);
    if (g_state == VC_IDLE) {
        int ran = g_ran;
        if (ran && out != NULL)
            *out = g_result;
        pthread_mutex_unlock(&g_lock);
        return ran ? 0 : -ESRCH;
    }
    pthread_mutex_unlock(&g_lock);
    vc_life_request_stop(VC_STOP_API);
    pthread_mutex_lock(&g_lock);
    int done = wait_until(pred_idle, wait_ms);
    if (done && out != NULL)
        *out = g_result;
    pthread_mutex_unlock(&g_lock);
    return done ? 0 : -ETIMEDOUT;
}

int vc_life_wait_idle(int wait_ms)
{
    pthread_mutex_lock(&g_lock);
    int done = wait_until(pred_idle, wait_ms);
    pthread_mutex_unlock(&g_lock);
    return done;
}

int vc_life_last_result(struct vc_result *out)
{
    pthread_mutex_lock(&g_lock);
    int ran = g_ran;
    if (out != NULL)
        *out = g_result;
    pthread_mutex_unlock(&g_lock);
    return ran ? 0 : -ESRCH;
}

const char *vc_life_last_error(void)
{
    static char copy[512];
    pthread_mutex_lock(&g_lock);
    memcpy(copy, g_error, sizeof copy);
    pthread_mutex_unlock(&g_lock);
    return copy;
}

/* ---- any thread --------------------------------------------------------------------------- */

int vc_life_state(void)
{
    pthread_mutex_lock(&g_lock);
    int st = g_state;
    pthread_mutex_unlock(&g_lock);
    return st;
}

void vc_life_request_stop(int reason)
{
    pthread_mutex_lock(&g_lock);
    if (g_stop_reason == VC_STOP_NONE)
        g_stop_reason = reason;
    int fd = g_wake[1];
    pthread_mutex_unlock(&g_lock);
    if (fd >= 0) {
        char c = 1;
        ssize_t w = write(fd, &c, 1); /* a full pipe already wakes the poll */
        (void)w;
    }
}

int vc_life_stop_requested(void)
{
    pthread_mutex_lock(&g_lock);
    int r = g_stop_reason;
    pthread_mutex_unlock(&g_lock);
    return r;
}

int vc_life_wake_fd(void)
{
    return g_wake[0];
}

int vc_life_in_session_process(void)
{
    return getpid() == g_session_pid;
}

/* ---- the agent thread --------------------------------------------------------------------- */

void vc_life_signal_started(int status)
{
    pthread_mutex_lock(&g_lock);
    g_started = status == 0 ? 1 : status;
    if (status == 0)
        g_state = VC_RUNNING;
    vc_life_set_phase(VC_PHASE_DONE);
    pthread_cond_broadcast(cond());
    pthread_mutex_unlock(&g_lock);
}

void vc_life_set_stopping(void)
{
    pthread_mutex_lock(&g_lock);
    g_state = VC_STOPPING;
    pthread_mutex_unlock(&g_lock);
}

void vc_life_set_result(const struct vc_result *res)
{
    pthread_mutex_lock(&g_lock);
    g_result = *res;
    pthread_mutex_unlock(&g_lock);
}

void vc_life_finish(int status, const char *err)
{
    pthread_mutex_lock(&g_lock);
    g_result.status = status;
    if (err != NULL && err[0] != '\0')
        snprintf(g_error, sizeof g_error, "%s", err);
    if (g_started == 0)
        g_started = status ? status : -EIO;
    g_state = VC_IDLE;
    g_ran = 1;
    vc_life_set_phase(VC_PHASE_DONE);
    close_wake_pipe();
    pthread_cond_broadcast(cond());
    pthread_mutex_unlock(&g_lock);
}

static unsigned g_delivered;
static unsigned g_delivered_seen;

static int pred_delivered(void) { return g_delivered != g_delivered_seen; }

unsigned vc_life_delivered(void)
{
    pthread_mutex_lock(&g_lock);
    unsigned d = g_delivered;
    pthread_mutex_unlock(&g_lock);
    return d;
}

void vc_life_mark_delivered(void)
{
    pthread_mutex_lock(&g_lock);
    g_delivered++;
    pthread_cond_broadcast(cond());
    pthread_mutex_unlock(&g_lock);
}

int vc_life_wait_delivered(unsigned seen, int wait_ms)
{
    pthread_mutex_lock(&g_lock);
    g_delivered_seen = seen;
    int done = wait_until(pred_delivered, wait_ms);
    pthread_mutex_unlock(&g_lock);
    return done;
}

/* ---- fork: the child inherits the hooks but not the agent thread --------------------------
 * pthread_atfork keeps our lock usable in the child and notes that a session was running;
 * agent.c then removes the inherited hooks under the child's GIL. */

static void atfork_prepare(void) { pthread_mutex_lock(&g_lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&g_lock); }

static void atfork_child(void)
{
    pthread_mutex_init(&g_lock, NULL);
    vc_hooklock_reset_in_child(); /* its holder, if any, is not in the child */
    vc_channel_reset_in_child();  /* ... nor the agent thread, maybe in a send */
    g_cond_ready_reset = 1;
    if (g_state != VC_IDLE)
        g_fork_cleanup = 1;
    g_state = VC_IDLE;
    g_ran = 0;
    g_wake[0] = g_wake[1] = -1; /* the parent's pipe: never written, its fds left alone */
}

void vc_life_register_atfork(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

int vc_life_take_fork_cleanup(void)
{
    int r = g_fork_cleanup;
    g_fork_cleanup = 0;
    return r;
}

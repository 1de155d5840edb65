/* hooklock.c — the lock among GILs (see hooklock.h): a spin lock with a per-thread depth.
 *
 * Why spinning: it is held for one hook's general half (tens of nanoseconds), taken by every
 * hook of a parallel session, often by two threads on two cores at once.  A sleeping mutex
 * turned every such meeting into a futex wait and wake (system calls of microseconds each).
 * The waiter spins on a plain read (no cache-line traffic until the holder lets go) with the
 * CPU's pause hint, and after a while yields the CPU: the holder may have been preempted. */
#include "hooklock.h"

#include <sched.h>

static int g_hooklock; /* 0 free, 1 held */
/* Levels the calling thread holds.  Dynamic TLS model, as hook_monitoring.c's slot (why:
 * there). */
static __thread int tl_depth;

#define VC_SPINS_BEFORE_YIELD 2000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void lock(void)
{
    for (unsigned spins = 0;;) {
        if (!__atomic_exchange_n(&g_hooklock, 1, __ATOMIC_ACQUIRE))
            return;
        while (__atomic_load_n(&g_hooklock, __ATOMIC_RELAXED)) {
            if (++spins < VC_SPINS_BEFORE_YIELD) {
                cpu_relax();
            } else {
                spins = 0;
                sched_yield();
            }
        }
    }
}

static void unlock(void)
{
    __atomic_store_n(&g_hooklock, 0, __ATOMIC_RELEASE);
}

void vc_hooklock_acquire(void)
{
    if (tl_depth++ == 0)
        lock();
}

void vc_hooklock_release(void)
{
    if (tl_depth > 0 && --tl_depth == 0)
        unlock();
}

int vc_hooklock_release_all(void)
{
    int depth = tl_depth;
    if (depth > 0) {
        tl_depth = 0;
        unlock();
    }
    return depth;
}

void vc_hooklock_reacquire(int depth)
{
    if (depth > 0 && tl_depth == 0)
        lock();
    tl_depth += depth;
}

void vc_hooklock_reset_in_child(void)
{
    g_hooklock = 0;
    tl_depth = 0;
}

/* cpu_sample.c — samples every traced thread's CPU clock from the sender thread (see
 * cpu_sample.h), so that waiting is measured (the thread was not running) instead of guessed
 * from a list of blocking functions' names.
 *
 * How a thread's CPU time is read without touching the thread and without the GIL:
 * clock_gettime on its per-thread CPU clock, whose clockid the kernel derives from the tid
 * (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) = (~tid << 3) | 6, the number glibc's
 * pthread_getcpuclockid returns: bench/cpu checks it on the running kernel).  It counts the
 * thread's scheduler runtime in ns (user + system), and fails with EINVAL once the thread has
 * exited.  /proc/self/task/TID/schedstat says the same for 5x the cost (bench/cpu).
 *
 * Cost: one read is a syscall, 0.3–1.5 µs.  The period adapts to what the reads cost, measured
 * on this thread's own CPU clock each round: period = reads x cost / VC_CPU_BUDGET, at least
 * VC_CPU_PERIOD_MIN_NS (10 ms), at most VC_CPU_PERIOD_MAX_NS; so 200 threads cost 0.5% of a
 * core whatever the machine (bench/cpu prints the numbers).
 *
 * What is sent: a thread's samples are run-length coded: a sample equal to the previous one
 * (the thread did not run: asleep, blocked) is held, and sent only before the next change or
 * at the end, so an idle thread costs two records per idle stretch, and the line between two
 * samples sent is always the real one.  Samples wait in a small per-thread buffer and go out
 * every VC_CPU_FLUSH_NS as CHUNK frames of VC_ID_CPU records (the receiver bounds-checks them
 * like any record: common/spool.c).
 *
 * Memory: one state per thread slot (VC_MAX_THREADS x ~410 bytes, ~420 KiB), allocated by the
 * first session that streams and kept for the process, like the thread table.
 *
 * Nothing here runs on a traced thread or in a hook: the hot path is untouched.
 */
#include "cpu_sample.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VC_CPU_PERIOD_MIN_NS (10ull * 1000 * 1000)
#define VC_CPU_PERIOD_MAX_NS (100ull * 1000 * 1000)
#define VC_CPU_FLUSH_NS (100ull * 1000 * 1000)
#define VC_CPU_BUDGET 0.005 /* of one core, for the reads */
#define VC_CPU_BUF 16       /* samples a thread holds before they must go */

struct cpu_thread {
    uint8_t seen, dead, held;
    uint32_t nbuf;
    uint64_t last_cpu;             /* the last sample's value */
    uint64_t held_raw;             /* held: the last sample equal to last_cpu, not sent yet */
    vc_record buf[VC_CPU_BUF];
};

static struct cpu_thread *g_cpu;   /* VC_MAX_THREADS, kept for the process */
static uint64_t g_next_ns, g_last_flush_ns;
static double g_cost_ns = 1000;    /* one read, measured (first guess: 1 µs) */
static struct vc_cpu_stats g_stats;

static uint64_t clock_ns(clockid_t c)
{
    struct timespec ts;
    if (clock_gettime(c, &ts) != 0)
        return UINT64_MAX;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* linux/posix-timers.h, MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) */
static clockid_t thread_clock(pid_t tid)
{
    return (clockid_t)((~(unsigned)tid) << 3) | 4 /* CPUCLOCK_PERTHREAD_MASK */ | 2 /* SCHED */;
}

int vc_cpu_sample_reset(void)
{
    if (g_cpu == NULL)
        g_cpu = calloc(VC_MAX_THREADS, sizeof *g_cpu);
    else
        memset(g_cpu, 0, (size_t)VC_MAX_THREADS * sizeof *g_cpu);
    g_next_ns = g_last_flush_ns = 0;
    memset(&g_stats, 0, sizeof g_stats);
    return g_cpu != NULL ? 0 : -1;
}

static int flush_thread(vc_session *s, uint32_t owner, struct cpu_thread *c, vc_cpu_send_fn send)
{
    if (c->nbuf == 0)
        return 0;
    struct {
        uint32_t owner, count;
        vc_record rec[VC_CPU_BUF];
    } frame;
    frame.owner = owner;
    frame.count = c->nbuf;
    memcpy(frame.rec, c->buf, c->nbuf * sizeof(vc_record));
    c->nbuf = 0;
    return send(s, &frame, 8 + (size_t)frame.count * sizeof(vc_record));
}

static int put(vc_session *s, uint32_t owner, struct cpu_thread *c, uint64_t raw, uint64_t cpu,
               vc_cpu_send_fn send)
{
    if (c->nbuf == VC_CPU_BUF && flush_thread(s, owner, c, send) != 0)
        return -1;
    c->buf[c->nbuf++] = (vc_record){.start = raw, .dur = cpu, .id = VC_ID_CPU, .flags = 0};
    return 0;
}

/* One sample of thread `owner` (tid), coded as the top comment says. */
static int sample(vc_session *s, uint32_t owner, pid_t tid, vc_cpu_send_fn send)
{
    struct cpu_thread *c = &g_cpu[owner];
    uint64_t cpu = clock_ns(thread_clock(tid));
    uint64_t raw = vc_clock_now();
    if (cpu == UINT64_MAX) { /* exited: its last held sample ends its line */
        c->dead = 1;
        if (c->held && put(s, owner, c, c->held_raw, c->last_cpu, send) != 0)
            return -1;
        c->held = 0;
        return 0;
    }
    if (c->seen && cpu == c->last_cpu) {
        c->held = 1;
        c->held_raw = raw;
        return 0;
    }
    if (c->held && put(s, owner, c, c->held_raw, c->last_cpu, send) != 0)
        return -1;
    c->held = 0;
    c->seen = 1;
    c->last_cpu = cpu;
    return put(s, owner, c, raw, cpu, send);
}

/* Reads every live thread's clock once; returns how many were read, or -1. */
static int round_all(vc_session *s, vc_cpu_send_fn send)
{
    uint32_t n = __atomic_load_n(&s->nthreads, __ATOMIC_ACQUIRE);
    if (n > VC_MAX_THREADS)
        n = VC_MAX_THREADS;
    int reads = 0;
    for (uint32_t i = 0; i < n; i++) {
        pid_t tid = __atomic_load_n(&s->threads[i].tid, __ATOMIC_RELAXED);
        if (tid <= 0 || g_cpu[i].dead)
            continue;
        if (sample(s, i, tid, send) != 0)
            return -1;
        reads++;
    }
    return reads;
}

static int flush_all(vc_session *s, int held_too, vc_cpu_send_fn send)
{
    uint32_t n = __atomic_load_n(&s->nthreads, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n && i < VC_MAX_THREADS; i++) {
        struct cpu_thread *c = &g_cpu[i];
        if (held_too && c->held) {
            if (put(s, i, c, c->held_raw, c->last_cpu, send) != 0)
                return -1;
            c->held = 0;
        }
        if (flush_thread(s, i, c, send) != 0)
            return -1;
    }
    return 0;
}

int vc_cpu_sample_tick(vc_session *s, vc_cpu_send_fn send)
{
    if (g_cpu == NULL || s->threads == NULL)
        return 0;
    uint64_t now = vc_clock_mono_ns();
    if (now >= g_next_ns) {
        uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        int reads = round_all(s, send);
        if (reads < 0)
            return -1;
        uint64_t c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        if (reads > 0 && c0 != UINT64_MAX && c1 != UINT64_MAX && c1 >= c0) {
            g_cost_ns = 0.75 * g_cost_ns + 0.25 * ((double)(c1 - c0) / reads);
            g_stats.spent_ns += c1 - c0;
        }
        g_stats.rounds++;
        g_stats.reads += (uint64_t)reads;
        double period = reads * g_cost_ns / VC_CPU_BUDGET;
        if (period < VC_CPU_PERIOD_MIN_NS)
            period = VC_CPU_PERIOD_MIN_NS;
        if (period > VC_CPU_PERIOD_MAX_NS)
            period = VC_CPU_PERIOD_MAX_NS;
        g_next_ns = now + (uint64_t)period;
        if (g_stats.period_min_ns == 0 || (uint64_t)period < g_stats.period_min_ns)
            g_stats.period_min_ns = (uint64_t)period;
        if ((uint64_t)period > g_stats.period_max_ns)
            g_stats.period_max_ns = (uint64_t)period;
    }
    if (now - g_last_flush_ns >= VC_CPU_FLUSH_NS) {
        g_last_flush_ns = now;
        return flush_all(s, 0, send);
    }
    return 0;
}

int vc_cpu_sample_finish(vc_session *s, vc_cpu_send_fn send)
{
    if (g_cpu == NULL || s->threads == NULL)
        return 0;
    if (round_all(s, send) < 0)
        return -1;
    return flush_all(s, 1, send);
}

void vc_cpu_sample_stats(struct vc_cpu_stats *st)
{
    *st = g_stats;
}

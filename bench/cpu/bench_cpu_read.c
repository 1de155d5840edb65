/* bench_cpu_read.c — what one read of another thread's CPU clock costs, the ways the agent
 * could read it (agent/cpu_sample.c): clock_gettime on a clockid made from the tid (the
 * kernel's CPUCLOCK encoding), on pthread_getcpuclockid's clockid (the same number, which this
 * bench checks on the running kernel), and /proc/self/task/TID/schedstat.  Then the sampler's
 * budget: the period at which N threads (default 200) cost 0.5% and 1% of a core.
 * Prints measured costs; asserts nothing but the clockid formula.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NT 200

static pid_t tids[NT];
static volatile int quit;

static void *idle_thread(void *arg)
{
    tids[(intptr_t)arg] = (pid_t)syscall(SYS_gettid);
    while (!quit) {
        struct timespec d = {0, 50 * 1000 * 1000};
        nanosleep(&d, NULL);
    }
    return NULL;
}

static uint64_t mono(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* linux/posix-timers.h: MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) */
static clockid_t tid_clock(pid_t tid)
{
    return (clockid_t)((~(unsigned)tid) << 3) | 4 /* PERTHREAD */ | 2 /* SCHED */;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : NT;
    if (n < 1 || n > NT)
        n = NT;
    pthread_t th[NT];
    for (int i = 0; i < n; i++)
        if (pthread_create(&th[i], NULL, idle_thread, (void *)(intptr_t)i) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    for (int spin = 0; spin < 1000; spin++) {
        int all = 1;
        for (int i = 0; i < n; i++)
            all &= tids[i] != 0;
        if (all)
            break;
        usleep(1000);
    }
    clockid_t pc;
    if (pthread_getcpuclockid(th[0], &pc) != 0 || pc != tid_clock(tids[0])) {
        printf("clockid formula WRONG on this kernel/libc: pthread %d, formula %d\n", (int)pc,
               (int)tid_clock(tids[0]));
        return 1;
    }
    printf("clockid formula: ((~tid) << 3) | 6 == pthread_getcpuclockid's (%d): ok\n", (int)pc);

    int rounds = 200;
    uint64_t c0 = mono(CLOCK_THREAD_CPUTIME_ID), w0 = mono(CLOCK_MONOTONIC);
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < n; i++) {
            struct timespec ts;
            clock_gettime(tid_clock(tids[i]), &ts);
        }
    uint64_t c1 = mono(CLOCK_THREAD_CPUTIME_ID), w1 = mono(CLOCK_MONOTONIC);
    double per_clock = (double)(c1 - c0) / ((double)rounds * n);
    printf("clock_gettime(thread clock of tid): %.0f ns CPU per read (%.0f ns wall)\n", per_clock,
           (double)(w1 - w0) / ((double)rounds * n));

    char path[64], buf[128];
    c0 = mono(CLOCK_THREAD_CPUTIME_ID);
    int srounds = 20;
    for (int r = 0; r < srounds; r++)
        for (int i = 0; i < n; i++) {
            snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", (int)tids[i]);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd >= 0) {
                if (read(fd, buf, sizeof buf) < 0)
                    buf[0] = 0;
                close(fd);
            }
        }
    c1 = mono(CLOCK_THREAD_CPUTIME_ID);
    double per_proc = (double)(c1 - c0) / ((double)srounds * n);
    printf("/proc/self/task/TID/schedstat (open+read+close): %.0f ns CPU per read (%.1fx)\n",
           per_proc, per_proc / per_clock);
    for (int pct = 1; pct <= 2; pct++) {
        double budget = pct * 0.005; /* 0.5%, 1% of a core */
        double period_ms = n * per_clock / budget / 1e6;
        printf("%d threads: %.1f%% of a core at a period of %.1f ms (%.0f Hz)\n", n,
               budget * 100, period_ms, 1000 / period_ms);
    }
    printf("%d threads at 10 ms: %.2f%% of a core\n", n, n * per_clock / 1e7 * 100);
    quit = 1;
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    return 0;
}

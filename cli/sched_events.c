/* sched_events.c — per-thread perf context-switch rings of a traced process (see
 * sched_events.h): open, rescan for new threads, drain, decode.
 *
 * Why perf_event_open per thread and not tracepoints: a PERF_COUNT_SW_DUMMY event with
 * context_switch=1 needs no tracefs, follows one thread wherever it runs, and its switch-out
 * record carries PERF_RECORD_MISC_SWITCH_OUT_PREEMPT: the thread left the CPU still runnable
 * (preempted) rather than blocked.  inherit=1 cannot be mmapped per thread (the kernel refuses
 * cpu=-1 with inherit), so new threads are found by rescanning /proc/PID/task on each tick;
 * a thread's switches before it is found are not recorded (the trace/ split falls back to
 * the CPU samples or the names for that stretch).
 *
 * The rings are written by the kernel, not the target, but they are still read as untrusted
 * bytes: data_head is checked against the ring's size, every record's size against what is
 * left, and a record is copied out (wrapping) into a bounded buffer before it is decoded.
 */
#include "sched_events.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "monotonic.h"
#include "test_seam.h"
#include "vcinject.h"

/* 1024 rings of 132 KiB (data pages + the header page): at most 132 MiB of kernel memory,
 * the figure SECURITY.md gives; a thread beyond it keeps the sampled split. */
#define SCHED_MAX_THREADS 1024
#define SCHED_RING_PAGES 32    /* data pages per thread: 128 KiB, ~5400 switch records */
#define SCHED_RESCAN_MS 50
#define SCHED_REC_MAX 256      /* the largest record we decode; longer ones are skipped */

struct sched_thread {
    int32_t host_tid;          /* as vcattach sees it: /proc/PID/task */
    int32_t tid;               /* as the trace names it (the target's namespace) */
    int fd;
    unsigned char *map;        /* metadata page + data pages */
    size_t data_size;
    unsigned state;
    int seen;                  /* found by the last rescan */
};

struct sched_events {
    pid_t pid;
    sched_sink_fn sink;
    void *ctx;
    struct sched_thread *th;
    size_t n;
    size_t pages;
    int64_t last_scan_ms;
    struct sched_stats st;
};

static long page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? p : 4096;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int sched_decode_record(const unsigned char *rec, size_t len, unsigned *state, uint64_t *ns,
                        uint64_t *lost)
{
    struct perf_event_header h;
    if (len < sizeof h)
        return -1;
    memcpy(&h, rec, sizeof h);
    if (h.size != len)
        return -1;
    if (h.type == PERF_RECORD_SWITCH) { /* sample_id: u32 pid, u32 tid, u64 time */
        if (len < sizeof h + 16)
            return -1;
        memcpy(ns, rec + sizeof h + 8, 8);
        if (!(h.misc & PERF_RECORD_MISC_SWITCH_OUT))
            *state = SCHED_ON_CPU;
        else
            *state = (h.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) ? SCHED_RUNNABLE
                                                                    : SCHED_BLOCKED;
        return 1;
    }
    if (h.type == PERF_RECORD_LOST) { /* u64 id, u64 lost, sample_id */
        if (len < sizeof h + 16)
            return -1;
        memcpy(lost, rec + sizeof h + 8, 8);
        return 2;
    }
    return 0;
}

/* Copies n bytes at ring offset off (wrapping) out of the data area. */
static void ring_copy(const struct sched_thread *t, uint64_t off, void *dst, size_t n)
{
    const unsigned char *data = t->map + page_size();
    size_t at = (size_t)(off % t->data_size);
    size_t first = n < t->data_size - at ? n : t->data_size - at;
    memcpy(dst, data + at, first);
    memcpy((unsigned char *)dst + first, data, n - first);
}

static void emit(struct sched_events *se, struct sched_thread *t, uint64_t ns, unsigned state)
{
    if (state == t->state)
        return;
    t->state = state;
    se->sink(se->ctx, t->tid, ns, state);
}

/* Reads every complete record between data_tail and data_head, then gives the space back. */
static void drain(struct sched_events *se, struct sched_thread *t)
{
    struct perf_event_mmap_page *pg = (struct perf_event_mmap_page *)t->map;
    uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = pg->data_tail;
    if (head - tail > t->data_size) { /* cannot be: skip it all, counted */
        se->st.bad++;
        tail = head;
    }
    unsigned char rec[SCHED_REC_MAX];
    while (head - tail >= sizeof(struct perf_event_header)) {
        struct perf_event_header h;
        ring_copy(t, tail, &h, sizeof h);
        if (h.size < sizeof h || h.size > head - tail) {
            se->st.bad++;
            tail = head;
            break;
        }
        if (h.size <= sizeof rec) {
            ring_copy(t, tail, rec, h.size);
            unsigned state = 0;
            uint64_t ns = 0, lost = 0;
            int k = sched_decode_record(rec, h.size, &state, &ns, &lost);
            if (k == 1) {
                se->st.switches++;
                emit(se, t, ns, state);
            } else if (k == 2) {
                se->st.lost += lost;
            } else if (k < 0) {
                se->st.bad++;
            }
        }
        tail += h.size;
    }
    __atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
}

/* 'R' (running or runnable) is taken as on-CPU until the first switch says otherwise;
 * anything else as blocked. */
static unsigned initial_state(pid_t pid, int32_t host_tid)
{
    return target_thread_state(pid, host_tid) == 'R' ? SCHED_ON_CPU : SCHED_BLOCKED;
}

static int open_event(int32_t host_tid)
{
    if (VC_SEAM(SCHED_DENY) != NULL) { /* tests: perf refused, as in a locked-down container */
        errno = EACCES;
        return -1;
    }
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_DUMMY;
    a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
    a.sample_id_all = 1;
    a.context_switch = 1;
    a.use_clockid = 1;
    a.clockid = CLOCK_MONOTONIC;
    a.disabled = 0;
    return (int)syscall(SYS_perf_event_open, &a, host_tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

/* Opens host_tid's event and ring.  0, or -1 with errno. */
static int add_thread(struct sched_events *se, int32_t host_tid)
{
    if (se->n >= SCHED_MAX_THREADS) {
        se->st.refused++;
        errno = ENOSPC;
        return -1;
    }
    uint64_t t0 = mono_ns(); /* before the event opens: its records come after */
    unsigned state = initial_state(se->pid, host_tid);
    int fd = open_event(host_tid);
    if (fd < 0)
        return -1;
    size_t len = (se->pages + 1) * (size_t)page_size();
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    struct sched_thread *t = &se->th[se->n++];
    *t = (struct sched_thread){host_tid, (int32_t)target_thread_own_tid(se->pid, host_tid), fd, map,
                               se->pages * (size_t)page_size(), state, 1};
    se->sink(se->ctx, t->tid, t0, state);
    se->st.threads++;
    return 0;
}

static void drop_thread(struct sched_events *se, size_t i)
{
    struct sched_thread *t = &se->th[i];
    drain(se, t);
    munmap(t->map, (se->pages + 1) * (size_t)page_size());
    close(t->fd);
    se->th[i] = se->th[--se->n];
}

static struct sched_thread *find(struct sched_events *se, int32_t host_tid)
{
    for (size_t i = 0; i < se->n; i++)
        if (se->th[i].host_tid == host_tid)
            return &se->th[i];
    return NULL;
}

/* Opens the threads not known yet, closes those gone.  The number of threads opened, or -1
 * with errno when /proc/PID/task cannot be read; *first_errno: the first open's failure. */
static int rescan(struct sched_events *se, int *first_errno)
{
    pid_t *tids = NULL;
    size_t ntids = 0;
    int rc = target_threads(se->pid, &tids, &ntids);
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    for (size_t i = 0; i < se->n; i++)
        se->th[i].seen = 0;
    int opened = 0;
    for (size_t k = 0; k < ntids; k++) {
        struct sched_thread *t = find(se, (int32_t)tids[k]);
        if (t != NULL) {
            t->seen = 1;
        } else if (add_thread(se, (int32_t)tids[k]) == 0) {
            opened++;
        } else if (errno != ESRCH && errno != ENOSPC) {
            if (*first_errno == 0)
                *first_errno = errno;
            se->st.refused++;
        }
    }
    free(tids);
    for (size_t i = se->n; i-- > 0;)
        if (!se->th[i].seen)
            drop_thread(se, i); /* exited: its last switch-out stands */
    se->last_scan_ms = vc_monotonic_ms();
    return opened;
}

int sched_events_open(struct sched_events **out, pid_t pid, sched_sink_fn sink, void *ctx,
                      char *why, size_t cap)
{
    *out = NULL;
    struct sched_events *se = calloc(1, sizeof *se);
    if (se == NULL || (se->th = calloc(SCHED_MAX_THREADS, sizeof *se->th)) == NULL) {
        free(se);
        snprintf(why, cap, "out of memory");
        return -1;
    }
    se->pid = pid;
    se->sink = sink;
    se->ctx = ctx;
    se->pages = SCHED_RING_PAGES;
    const char *pages = VC_SEAM(SCHED_PAGES); /* tests: a tiny ring that loses records */
    if (pages != NULL && atoi(pages) > 0 && (atoi(pages) & (atoi(pages) - 1)) == 0)
        se->pages = (size_t)atoi(pages);
    int first_errno = 0;
    int opened = rescan(se, &first_errno);
    if (opened <= 0) {
        int e = opened < 0 ? errno : first_errno;
        snprintf(why, cap, "perf_event_open on the threads of pid %d failed: %s%s", (int)pid,
                 e ? strerror(e) : "no thread",
                 e == EACCES || e == EPERM ? " (needs root or CAP_PERFMON; a container may "
                                             "forbid it)"
                 : e == ENOENT || e == ENOSYS ? " (this kernel has no perf events)"
                                              : "");
        sched_events_close(se, NULL);
        return -1;
    }
    *out = se;
    return 0;
}

void sched_events_tick(struct sched_events *se)
{
    if (se == NULL)
        return;
    for (size_t i = 0; i < se->n; i++)
        drain(se, &se->th[i]);
    if (vc_monotonic_ms() - se->last_scan_ms >= SCHED_RESCAN_MS) {
        int first_errno = 0;
        rescan(se, &first_errno);
    }
}

void sched_events_close(struct sched_events *se, struct sched_stats *st)
{
    if (st != NULL)
        memset(st, 0, sizeof *st);
    if (se == NULL)
        return;
    uint64_t end = mono_ns();
    for (size_t i = 0; i < se->n; i++) {
        struct sched_thread *t = &se->th[i];
        drain(se, t);
        se->sink(se->ctx, t->tid, end, t->state); /* the state holds to the trace's end */
        munmap(t->map, (se->pages + 1) * (size_t)page_size());
        close(t->fd);
    }
    if (st != NULL)
        *st = se->st;
    free(se->th);
    free(se);
}

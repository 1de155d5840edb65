/* ptrace.c — seize/interrupt/detach of every thread of a target, bounded waits, register and
 * memory access (see ptrace.h).
 *
 * Why PTRACE_SEIZE + PTRACE_INTERRUPT rather than PTRACE_ATTACH: ATTACH sends SIGSTOP, which
 * races with job control (a target stopped by the operator, or stopped meanwhile, ends up in the
 * wrong state after we leave) and can leave a thread in T.  INTERRUPT stops a thread with a
 * PTRACE_EVENT_STOP that vanishes at detach.  No option is set at seize: in particular never
 * PTRACE_O_EXITKILL, so if we die the kernel detaches and the target lives.
 *
 * Waits poll waitpid(WNOHANG), yielding the CPU for the first 50 us (a remote call's syscall
 * stops come that fast) and then with short, growing sleeps up to an absolute deadline: no
 * SIGCHLD handling is needed, which keeps the caller's own signal and child handling intact. */
#include "ptrace.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sched.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "test_seam.h"

#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202 /* <linux/elf.h>; <elf.h> is shadowed by injector/elf.h */
#endif
#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

int64_t pt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define SPIN_NS 50000 /* how long a wait polls with sched_yield before it naps */

static void nap(int64_t ns)
{
    struct timespec ts = {0, (long)ns};
    nanosleep(&ts, NULL);
}

static struct tracee *group_find(struct tracee_group *g, pid_t tid)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->t[i].tid == tid)
            return &g->t[i];
    return NULL;
}

static struct tracee *group_add(struct tracee_group *g, pid_t tid)
{
    if (g->n == g->cap) {
        size_t ncap = g->cap ? 2 * g->cap : 16;
        struct tracee *nv = realloc(g->t, ncap * sizeof *nv);
        if (!nv)
            return NULL;
        g->t = nv;
        g->cap = ncap;
    }
    struct tracee *t = &g->t[g->n++];
    memset(t, 0, sizeof *t);
    t->tid = tid;
    t->state = TRACEE_RUNNING;
    return t;
}

static int is_job_control_stop(int sig)
{
    return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

int pt_wait_stop(struct tracee *t, int64_t deadline_ns, int *status)
{
    int64_t sleep_ns = 20000, started = pt_now_ns();
    for (;;) {
        int st = 0;
        pid_t r = waitpid(t->tid, &st, __WALL | WNOHANG);
        if (r == t->tid) {
            if (status)
                *status = st;
            if (WIFEXITED(st) || WIFSIGNALED(st)) {
                t->state = TRACEE_GONE;
                return -ESRCH;
            }
            if (!WIFSTOPPED(st))
                continue;
            int sig = WSTOPSIG(st), event = (unsigned)st >> 16;
            t->state = TRACEE_STOPPED;
            t->group_stop = 0;
            t->in_signal_stop = 0;
            t->syscall_stop = 0;
            if (event == 0 && sig == (SIGTRAP | 0x80)) {
                t->syscall_stop = 1; /* PTRACE_SYSCALL stop, not a signal */
            } else if (event == PTRACE_EVENT_STOP) {
                if (is_job_control_stop(sig))
                    t->group_stop = sig;
            } else if (event == 0) {
                /* signal-delivery-stop: the signal is suppressed unless we hand it back; the
                 * caller decides (it may be a fault of our call), the default is re-delivery. */
                t->in_signal_stop = sig;
            }
            return 0;
        }
        if (r < 0) {
            if (errno == EINTR)
                continue;
            t->state = TRACEE_GONE; /* ECHILD: not (or no longer) our tracee */
            return -ESRCH;
        }
        int64_t now = pt_now_ns();
        if (now >= deadline_ns)
            return -ETIMEDOUT;
        if (now - started < SPIN_NS) {
            /* syscall stops of a remote call come within microseconds: a nap (its timer
             * slack included) would cost more than the stop itself */
            sched_yield();
            continue;
        }
        if (sleep_ns > deadline_ns - now)
            sleep_ns = deadline_ns - now;
        nap(sleep_ns);
        if (sleep_ns < 1000000)
            sleep_ns *= 2;
    }
}

/* After a wait: a signal-delivery-stop for a real signal is remembered for re-delivery.
 * A kernel-generated SIGTRAP (si_code > 0: a trap caused by tracing) is dropped: re-delivered
 * to an untraced thread, it would kill the target. */
static void keep_signal(struct tracee *t)
{
    int sig = t->in_signal_stop;
    if (sig <= 0 || sig > 64)
        return;
    if (sig == SIGTRAP) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (ptrace(PTRACE_GETSIGINFO, t->tid, 0, &si) < 0 || si.si_code > 0)
            return;
    }
    t->pending_sigs |= 1ull << (sig - 1);
}

int pt_seize_all(struct tracee_group *g, pid_t pid, int64_t deadline_ns)
{
    g->pid = pid;
    for (int round = 0; round < 1000; round++) {
        pid_t *tids = NULL;
        size_t n = 0;
        int r = proc_list_tasks(pid, &tids, &n);
        if (r < 0)
            return r;
        size_t added = 0;
        for (size_t i = 0; i < n; i++) {
            if (group_find(g, tids[i]))
                continue;
            char st = proc_task_state(pid, tids[i]);
            if (st == 'Z' || st == 'X' || st == 0)
                continue; /* exiting: nothing to stop */
            if (ptrace(PTRACE_SEIZE, tids[i], 0, 0) < 0) {
                int e = errno;
                if (e == ESRCH)
                    continue; /* exited meanwhile */
                /* The kernel also says EPERM for a thread that is exiting (exit_state set).
                 * Permission is per process: once one thread is ours, EPERM means exiting. */
                if (e == EPERM && proc_tracer_pid(pid, tids[i]) > 0) {
                    free(tids);
                    return -EBUSY; /* another tracer: never inject concurrently with it */
                }
                char now = e == EPERM ? proc_task_state(pid, tids[i]) : 'R';
                if (e == EPERM && (g->n > 0 || now == 'Z' || now == 'X' || now == 0))
                    continue;
                free(tids);
                return -e;
            }
            struct tracee *t = group_add(g, tids[i]);
            if (!t) {
                ptrace(PTRACE_DETACH, tids[i], 0, 0);
                free(tids);
                return -ENOMEM;
            }
            if (ptrace(PTRACE_INTERRUPT, tids[i], 0, 0) < 0 && errno == ESRCH)
                t->state = TRACEE_GONE;
            added++;
        }
        free(tids);
        for (size_t i = 0; i < g->n; i++) {
            struct tracee *t = &g->t[i];
            if (t->state != TRACEE_RUNNING)
                continue;
            r = pt_wait_stop(t, deadline_ns, NULL);
            if (r == -ETIMEDOUT)
                return r;
            if (r == 0)
                keep_signal(t);
        }
        if (added == 0) {
            for (size_t i = 0; i < g->n; i++)
                if (g->t[i].state == TRACEE_STOPPED)
                    return 0;
            return -ESRCH;
        }
        if (pt_now_ns() >= deadline_ns)
            return -ETIMEDOUT;
    }
    return -EAGAIN; /* threads are created faster than we can stop them */
}

int pt_adopt(struct tracee_group *g, pid_t pid, struct tracee *t)
{
    g->pid = pid;
    struct tracee *mine = group_add(g, t->tid);
    if (!mine)
        return -ENOMEM;
    *mine = *t;
    t->state = TRACEE_DETACHED;
    t->pending_sigs = 0; /* handed back by g's detach */
    return 0;
}

int pt_detach(struct tracee_group *g, struct tracee *t)
{
    if (t->state == TRACEE_GONE || t->state == TRACEE_DETACHED)
        return 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (t->state == TRACEE_RUNNING) {
            /* resumed by us earlier: it must be in a ptrace-stop to be detached */
            if (ptrace(PTRACE_INTERRUPT, t->tid, 0, 0) < 0 && errno == ESRCH) {
                t->state = TRACEE_GONE;
                return 0;
            }
            int r = pt_wait_stop(t, pt_now_ns() + 1000000000, NULL);
            if (r == -ESRCH)
                return 0;
            if (r < 0)
                return r;
            keep_signal(t); /* a signal that beat the INTERRUPT: hand it back below */
        }
        /* Signals are handed back with tgkill after the detach, not through PTRACE_DETACH's
         * data argument: the kernel honours that only in a signal-delivery-stop, and the
         * thread may be in an interrupt- or group-stop now. */
        if (ptrace(PTRACE_DETACH, t->tid, 0, 0) == 0) {
            t->state = TRACEE_DETACHED;
            for (int s = 1; s <= 64; s++)
                if (t->pending_sigs & (1ull << (s - 1)))
                    syscall(SYS_tgkill, g->pid, t->tid, s);
            t->pending_sigs = 0;
            return 0;
        }
        if (errno != ESRCH)
            return -errno;
        /* ESRCH: exited, or not stopped after all */
        if (syscall(SYS_tgkill, g->pid, t->tid, 0) < 0) {
            t->state = TRACEE_GONE;
            return 0;
        }
        t->state = TRACEE_RUNNING;
    }
    return -EBUSY;
}

int pt_detach_all(struct tracee_group *g)
{
    int failed = 0;
    for (size_t i = 0; i < g->n; i++)
        if (pt_detach(g, &g->t[i]) < 0)
            failed++;
    return failed;
}

void pt_release(struct tracee_group *g)
{
    pt_detach_all(g);
    free(g->t);
    g->t = NULL;
    g->n = g->cap = 0;
}

int pt_set_tracesysgood(pid_t tid)
{
    return ptrace(PTRACE_SETOPTIONS, tid, 0, (void *)(long)PTRACE_O_TRACESYSGOOD) < 0 ? -errno : 0;
}

int pt_get_sigmask(pid_t tid, uint64_t *mask)
{
    return ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof *mask, mask) < 0 ? -errno : 0;
}

int pt_set_sigmask(pid_t tid, uint64_t mask)
{
    return ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof mask, &mask) < 0 ? -errno : 0;
}

int pt_getregs(pid_t tid, struct user_regs_struct *r)
{
    return ptrace(PTRACE_GETREGS, tid, 0, r) < 0 ? -errno : 0;
}

int pt_setregs(pid_t tid, const struct user_regs_struct *r)
{
    return ptrace(PTRACE_SETREGS, tid, 0, r) < 0 ? -errno : 0;
}

int pt_get_fpstate(pid_t tid, struct pt_fpstate *fp)
{
    struct iovec iov = {fp->buf, sizeof fp->buf};
    if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &iov) == 0) {
        fp->kind = 1;
        fp->len = iov.iov_len;
        return 0;
    }
    if (ptrace(PTRACE_GETFPREGS, tid, 0, fp->buf) == 0) {
        fp->kind = 2;
        fp->len = sizeof(struct user_fpregs_struct);
        return 0;
    }
    fp->kind = 0;
    return -errno;
}

int pt_set_fpstate(pid_t tid, const struct pt_fpstate *fp)
{
    if (fp->kind == 1) {
        struct iovec iov = {(void *)fp->buf, fp->len};
        return ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &iov) < 0 ? -errno : 0;
    }
    if (fp->kind == 2)
        return ptrace(PTRACE_SETFPREGS, tid, 0, fp->buf) < 0 ? -errno : 0;
    return 0;
}

static int peek_word(pid_t tid, uint64_t addr, long *word)
{
    errno = 0;
    long w = ptrace(PTRACE_PEEKDATA, tid, (void *)addr, 0);
    if (w == -1 && errno)
        return -errno;
    *word = w;
    return 0;
}

/* Test-only fault injection (test_seam.h, not in the product): VCATTACH_TEST_BLOCKING_READ=peek (tests/system/test_security_sock.py)
 * makes every read of the target's memory block as one of a stalled FUSE mapping would, so
 * that the method's watchdog (watchdog.h) is what ends it.  Unset, it does nothing. */
static void test_block(void)
{
    const char *v = VC_SEAM(BLOCKING_READ);
    if (v && strcmp(v, "peek") == 0)
        for (;;)
            pause();
}

int pt_read(pid_t tid, uint64_t addr, void *buf, size_t len)
{
    test_block();
    struct iovec local = {buf, len}, remote = {(void *)addr, len};
    if (process_vm_readv(tid, &local, 1, &remote, 1, 0) == (ssize_t)len)
        return 0;
    unsigned char *out = buf;
    for (size_t done = 0; done < len;) {
        uint64_t a = (addr + done) & ~7ull;
        size_t skip = (addr + done) - a;
        long w;
        int r = peek_word(tid, a, &w);
        if (r < 0)
            return r;
        size_t take = 8 - skip < len - done ? 8 - skip : len - done;
        memcpy(out + done, (unsigned char *)&w + skip, take);
        done += take;
    }
    return 0;
}

int pt_poke_text(pid_t tid, uint64_t addr, const void *buf, size_t len)
{
    const unsigned char *in = buf;
    for (size_t done = 0; done < len;) {
        uint64_t a = (addr + done) & ~7ull;
        size_t skip = (addr + done) - a;
        long w;
        size_t take = 8 - skip < len - done ? 8 - skip : len - done;
        if (skip || take < 8) { /* partial word: read-modify-write */
            int r = peek_word(tid, a, &w);
            if (r < 0)
                return r;
        }
        memcpy((unsigned char *)&w + skip, in + done, take);
        if (ptrace(PTRACE_POKEDATA, tid, (void *)a, (void *)w) < 0)
            return -errno;
        done += take;
    }
    return 0;
}

int pt_write(pid_t tid, uint64_t addr, const void *buf, size_t len)
{
    struct iovec local = {(void *)buf, len}, remote = {(void *)addr, len};
    if (process_vm_writev(tid, &local, 1, &remote, 1, 0) == (ssize_t)len)
        return 0;
    return pt_poke_text(tid, addr, buf, len);
}

int pt_write_mem(pid_t tid, uint64_t addr, const void *buf, size_t len)
{
    struct iovec local = {(void *)buf, len}, remote = {(void *)addr, len};
    ssize_t n = process_vm_writev(tid, &local, 1, &remote, 1, 0);
    if (n == (ssize_t)len)
        return 0;
    return n < 0 ? -errno : -EFAULT;
}

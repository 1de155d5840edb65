/* remote_call.c — execute code on a borrowed, stopped thread (see remote_call.h).
 *
 * The thread runs until our int3; on the way, anything may happen and is handled:
 *  - a PTRACE_EVENT_STOP (a queued interrupt, or a group-stop from job control): resume it;
 *    a group-stop's signal is kept for re-delivery at detach so job control still works;
 *  - a signal sent by someone (SIGALRM, SIGCHLD, SIGINT, …): suppressed now, re-delivered at
 *    detach, when the thread is back in its own context;
 *  - a fault raised by the call itself (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, a foreign
 *    SIGTRAP): the call is abandoned, the caller restores the thread (-EFAULT);
 *  - SIGSYS: a seccomp filter forbids a syscall the call made (-ENOSYS);
 *  - no return before the deadline: the thread is interrupted and the caller restores it
 *    (-ETIMEDOUT). */
#include "remote_call.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#define ERESTART_RESTARTBLOCK 516 /* kernel-internal errno (include/linux/errno.h) */
/* How long remote_end waits for an abandoned call's thread to stop before restoring it. */
#define RESTORE_WAIT_NS (10 * 1000000000ll)

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

/* syscall; int3; call *%rax; int3 */
static const unsigned char trampoline[6] = {0x0f, 0x05, 0xcc, 0xff, 0xd0, 0xcc};
#define SYSCALL_AT 0
#define CALL_AT 3

int remote_begin(struct remote *rc, struct tracee *t, uint64_t code_addr)
{
    memset(rc, 0, sizeof *rc);
    rc->t = t;
    rc->code = code_addr;
    rc->saved_fp = malloc(sizeof *rc->saved_fp);
    if (!rc->saved_fp)
        return -ENOMEM;
    int r = pt_getregs(t->tid, &rc->saved_regs);
    if (r < 0)
        goto fail;
    if (pt_get_fpstate(t->tid, rc->saved_fp) < 0)
        rc->saved_fp->kind = 0; /* no FPU state to save (not fatal: nothing of it is changed) */
    rc->regs_saved = 1;
    r = pt_read(t->tid, code_addr, rc->saved_code, sizeof rc->saved_code);
    if (r < 0)
        goto fail;
    r = pt_poke_text(t->tid, code_addr, trampoline, sizeof trampoline);
    if (r < 0)
        goto fail;
    rc->code_written = 1;
    return 0;
fail:
    rc->regs_saved = 0;
    free(rc->saved_fp);
    rc->saved_fp = NULL;
    return r;
}

static int is_fault(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE ||
           sig == SIGABRT || sig == SIGTRAP || sig == SIGSYS;
}

/* The thread is in a signal-delivery-stop after our code was abandoned: keep the signal for
 * re-delivery unless it is a fault the abandoned code raised itself (kernel-generated, or
 * abort()'s tgkill): re-sent to the restored thread, that would kill the target. */
static void keep_signal_of_abandoned_call(struct tracee *t)
{
    int sig = t->in_signal_stop;
    t->in_signal_stop = 0;
    if (sig <= 0 || sig > 64)
        return;
    if (is_fault(sig)) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (ptrace(PTRACE_GETSIGINFO, t->tid, 0, &si) < 0 || si.si_code > 0 ||
            si.si_code == SI_TKILL)
            return;
    }
    t->pending_sigs |= 1ull << (sig - 1);
}

/* Resumes the thread with regs and waits for the int3 at expect_rip. */
static int run_until_trap(struct remote *rc, struct user_regs_struct *regs, uint64_t expect_rip,
                          uint64_t *ret, int64_t deadline_ns)
{
    struct tracee *t = rc->t;
    pid_t tid = t->tid;
    regs->orig_rax = (unsigned long long)-1; /* never restart a syscall into our code */
    regs->eflags &= ~(1ull << 10);           /* DF clear, as the ABI requires at a call */
    int r = pt_setregs(tid, regs);
    if (r < 0)
        return r;
    int resume_sig = 0;
    rc->fault_sig = 0;
    for (;;) {
        if (ptrace(PTRACE_CONT, tid, 0, (void *)(long)resume_sig) < 0)
            return errno == ESRCH ? -ESRCH : -errno;
        t->state = TRACEE_RUNNING;
        resume_sig = 0;
        int st;
        r = pt_wait_stop(t, deadline_ns, &st);
        if (r == -ETIMEDOUT) {
            rc->foreign_stops++;
            /* stuck (e.g. on a lock): take the thread back so it can be restored */
            ptrace(PTRACE_INTERRUPT, tid, 0, 0);
            /* Not stopped within 1 s (uninterruptible sleep, e.g. a vfork in the call):
             * remote_end waits longer, it must restore before anything detaches. */
            int r2 = pt_wait_stop(t, pt_now_ns() + 1000000000, NULL);
            if (r2 == -ESRCH)
                return -ESRCH;
            if (r2 == 0)
                keep_signal_of_abandoned_call(t);
            return -ETIMEDOUT;
        }
        if (r < 0)
            return r;
        int sig = WSTOPSIG(st), event = (unsigned)st >> 16;
        struct user_regs_struct now;
        int at_our_trap = event == 0 && sig == SIGTRAP && pt_getregs(tid, &now) == 0 &&
                          now.rip == expect_rip;
        if (!at_our_trap)
            rc->foreign_stops++;
        if (event == PTRACE_EVENT_STOP) {
            if (t->group_stop) /* job control stopped the process meanwhile: redo it later */
                t->pending_sigs |= 1ull << (t->group_stop - 1);
            continue;
        }
        if (event != 0)
            continue;
        if (at_our_trap) {
            *ret = now.rax;
            t->in_signal_stop = 0;
            return 0;
        }
        siginfo_t si;
        memset(&si, 0, sizeof si);
        int have_si = ptrace(PTRACE_GETSIGINFO, tid, 0, &si) == 0;
        /* a kernel-generated fault (si_code > 0), or one aimed at this very thread (abort() inside
         * the call raises SIGABRT with tgkill): the call is dead */
        if (is_fault(sig) && have_si && (si.si_code > 0 || si.si_code == SI_TKILL)) {
            rc->fault_sig = sig;
            t->in_signal_stop = 0;
            return sig == SIGSYS ? -ENOSYS : -EFAULT;
        }
        /* someone else's signal: hand it back when the thread is itself again */
        t->pending_sigs |= 1ull << (sig - 1);
        t->in_signal_stop = 0;
    }
}

int remote_syscall(struct remote *rc, long nr, const uint64_t args[6], uint64_t *ret,
                   int64_t deadline_ns)
{
    struct user_regs_struct regs = rc->saved_regs;
    regs.rax = (unsigned long long)nr;
    regs.rdi = args[0];
    regs.rsi = args[1];
    regs.rdx = args[2];
    regs.r10 = args[3];
    regs.r8 = args[4];
    regs.r9 = args[5];
    regs.rip = rc->code + SYSCALL_AT;
    return run_until_trap(rc, &regs, rc->code + SYSCALL_AT + 3, ret, deadline_ns);
}

int remote_call(struct remote *rc, uint64_t fn, uint64_t a0, uint64_t a1, uint64_t stack_top,
                uint64_t *ret, int64_t deadline_ns)
{
    struct user_regs_struct regs = rc->saved_regs;
    regs.rax = fn;
    regs.rdi = a0;
    regs.rsi = a1;
    regs.rip = rc->code + CALL_AT;
    regs.rsp = stack_top & ~15ull; /* aligned before `call` pushes the return address */
    rc->calls_run++;
    return run_until_trap(rc, &regs, rc->code + CALL_AT + 3, ret, deadline_ns);
}

int remote_end(struct remote *rc)
{
    int err = 0;
    if (!rc->t)
        return 0;
    pid_t tid = rc->t->tid;
    if (rc->t->state == TRACEE_RUNNING && (rc->code_written || rc->regs_saved)) {
        /* An abandoned call that did not stop for the interrupt yet: its registers and our
         * code must be put back before any detach, or once free it returns into the int3 of
         * the trampoline (SIGTRAP: the target dies).  Waiting longer is the lesser harm. */
        ptrace(PTRACE_INTERRUPT, tid, 0, 0);
        int r = pt_wait_stop(rc->t, pt_now_ns() + RESTORE_WAIT_NS, NULL);
        if (r < 0) { /* gone, or could not take it back: nothing can be restored */
            free(rc->saved_fp);
            rc->saved_fp = NULL;
            return r;
        }
        keep_signal_of_abandoned_call(rc->t);
    }
    if (rc->code_written) {
        int r = pt_poke_text(tid, rc->code, rc->saved_code, sizeof trampoline);
        if (r < 0)
            err = r;
        else
            rc->code_written = 0;
    }
    if (rc->regs_saved) {
        struct user_regs_struct regs = rc->saved_regs;
        if (rc->foreign_stops && (long)regs.orig_rax >= 0 &&
            (long)regs.rax == -ERESTART_RESTARTBLOCK) {
            regs.rax = regs.orig_rax; /* re-issue the syscall (2-byte `syscall` before rip) */
            regs.rip -= 2;
            regs.orig_rax = (unsigned long long)-1;
        }
        int r = pt_setregs(tid, &regs);
        if (r < 0 && !err)
            err = r;
        if (rc->saved_fp && rc->saved_fp->kind) {
            r = pt_set_fpstate(tid, rc->saved_fp);
            if (r < 0 && !err)
                err = r;
        }
        if (!err)
            rc->regs_saved = 0;
    }
    free(rc->saved_fp);
    rc->saved_fp = NULL;
    return err;
}

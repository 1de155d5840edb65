/* syscall_step.c — one thread run from system call to system call (syscall_step.h).
 *
 * The stops report SIGTRAP|0x80 (PTRACE_O_TRACESYSGOOD): if the stepping process is killed
 * at any instant the kernel detaches the thread, and a stop's code it would re-send as a
 * signal is no valid signal and is dropped (ptrace.h pt_set_tracesysgood), so the thread goes
 * on from the system call it was at as if nothing happened. */
#include "syscall_step.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>

#define SEIZE_WAIT_MS 200 /* for the first stop after PTRACE_INTERRUPT */

int step_seize(pid_t pid, struct tracee *t, const char **ended)
{
    memset(t, 0, sizeof *t);
    t->tid = pid;
    t->state = TRACEE_RUNNING;
    if (ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_TRACESYSGOOD) < 0) {
        t->state = TRACEE_DETACHED; /* never seized: nothing to detach */
        *ended = errno == ESRCH ? "the process ended" : "it could not be seized";
        return -1;
    }
    int r = 0, st = -1;
    if (ptrace(PTRACE_INTERRUPT, pid, 0, 0) < 0 ||
        (r = pt_wait_stop(t, pt_now_ns() + (int64_t)SEIZE_WAIT_MS * 1000000, &st)) < 0) {
        *ended = r != -ESRCH ? "it did not stop" : st == -1 ? "it was not ours to wait for"
                                                            : "the process ended";
        errno = 0;
        return -1;
    }
    return 0;
}

/* A signal-delivery-stop's signal, to hand back at once: all but a SIGTRAP of the kernel's
 * own (si_code > 0), which would kill an untraced thread. */
static int signal_to_deliver(pid_t tid, int sig)
{
    if (sig != SIGTRAP)
        return sig;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (ptrace(PTRACE_GETSIGINFO, tid, 0, &si) < 0 || si.si_code > 0)
        return 0;
    return sig;
}

int step_at_entry(const struct user_regs_struct *regs)
{
    return (long)regs->rax == -ENOSYS;
}

void step_syscalls(struct tracee *t, int64_t end_ns, int slice_ms, step_visit visit,
                   void *ctx, int *stops, const char **ended)
{
    pid_t pid = t->tid;
    int sig = 0;
    for (;;) {
        if (t->state == TRACEE_STOPPED) {
            if (t->group_stop) {
                *ended = "it was stopped (job control)";
                break;
            }
            if (t->in_signal_stop)
                sig = signal_to_deliver(pid, t->in_signal_stop);
            if (t->syscall_stop) {
                (*stops)++;
                struct user_regs_struct regs;
                if (pt_getregs(pid, &regs) == 0 && !visit(ctx, pid, &regs, ended))
                    break;
            }
            if (pt_now_ns() >= end_ns)
                break;
            if (ptrace(PTRACE_SYSCALL, pid, 0, sig) < 0) {
                *ended = "the process ended";
                t->state = TRACEE_GONE;
                return;
            }
            sig = 0;
            t->state = TRACEE_RUNNING;
        }
        int64_t slice = pt_now_ns() + (int64_t)slice_ms * 1000000;
        int r = pt_wait_stop(t, slice < end_ns ? slice : end_ns, NULL);
        if (r == -ESRCH) {
            *ended = "the process ended";
            return;
        }
        if (r == -ETIMEDOUT && (!visit(ctx, pid, NULL, ended) || pt_now_ns() >= end_ns))
            break;
    }
    if (t->state == TRACEE_STOPPED && sig) /* seen at the last stop: delivered at the detach */
        t->pending_sigs |= 1ull << (sig - 1);
}

/* syscall_step.h — internal to the injector: one thread run from system call to system call
 * (PTRACE_SYSCALL), for the holds of a young process (hold.c: after its injection until its
 * agent has its hooks in; catch.c: from its exec until vcattach injects it).
 *
 * Why one stepper: both keep a thread only where it would stop anyway (the entry or exit of a
 * system call), deliver every signal at once, end at a job-control stop or when the process
 * ends, and are bounded; what differs is only what they do at a stop. */
#ifndef VC_SYSCALL_STEP_H
#define VC_SYSCALL_STEP_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "ptrace.h"

/* Called at each system-call stop (regs: the thread's registers there) and, with regs NULL,
 * each time the thread ran slice_ms without a stop (running, or blocked in a call).  The
 * thread is stopped when regs is given, and may be kept so inside the call.  Returns 1 to go
 * on stepping, 0 to end (*ended, if set, says why: a static phrase). */
typedef int (*step_visit)(void *ctx, pid_t pid, const struct user_regs_struct *regs,
                          const char **ended);

/* Seizes pid's main thread alone (PTRACE_O_TRACESYSGOOD, never EXITKILL) and waits for its
 * first stop (bounded).  0 with t stopped; -1 with *ended ("the process ended", "it did not
 * stop") or errno set (the seize was refused: then t was never seized). */
int step_seize(pid_t pid, struct tracee *t, const char **ended);

/* Steps the stopped thread t until visit says 0, end_ns (absolute, pt_now_ns) passes, a
 * job-control stop, or the process ends (*ended says which; t->state TRACEE_GONE then).
 * *stops counts the system-call stops seen.  The thread is left stopped or gone, never
 * detached: the caller detaches it (pt_detach), with any signal seen at the last stop kept
 * in t->pending_sigs for delivery at the detach. */
void step_syscalls(struct tracee *t, int64_t end_ns, int slice_ms, step_visit visit,
                   void *ctx, int *stops, const char **ended);

/* 1 if regs (at a system-call stop) are those of a call's entry, 0 at its exit: on x86-64 the
 * kernel sets rax to -ENOSYS before it runs the call, and no call it runs returns that. */
int step_at_entry(const struct user_regs_struct *regs);

#endif /* VC_SYSCALL_STEP_H */

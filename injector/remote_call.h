/* remote_call.h — run a function or a syscall on one stopped thread of the target and get its
 * return value, then put the thread back exactly as it was.
 *
 * Code: 6 bytes written over an address nobody executes (libc's ELF entry point):
 *     syscall; int3; call *%rax; int3
 * Stack: a private region we mmap in the target (never the thread's own stack: its red zone
 * and the frames of the interrupted code stay untouched).  orig_rax is set to -1 during calls
 * so an interrupted syscall is not restarted into the trampoline; the full saved register set
 * (orig_rax included, so the syscall restarts normally) and the FPU/vector state are restored
 * by remote_restore on every path. */
#ifndef VC_REMOTE_CALL_H
#define VC_REMOTE_CALL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/user.h>

#include "ptrace.h"

struct remote {
    struct tracee *t;
    uint64_t code;           /* trampoline address */
    unsigned char saved_code[8];
    struct user_regs_struct saved_regs;
    struct pt_fpstate *saved_fp;
    int code_written, regs_saved;
    int fault_sig;           /* the fatal signal the last call died of (0: none) */
    int calls_run;           /* remote_call invocations that started executing */
    int foreign_stops;       /* stops during our code other than its int3: the thread's
                              * syscall restart block may have been reused by our code */
};

/* Saves registers, FPU state and the bytes at code_addr, then writes the trampoline.
 * 0 or -errno (then nothing was changed). */
int remote_begin(struct remote *rc, struct tracee *t, uint64_t code_addr);

/* Runs a syscall with up to 6 args; *ret receives rax (a -errno on failure). 0 or -errno:
 * -ETIMEDOUT, -ESRCH (thread died), -EFAULT (fatal signal, rc->fault_sig), -ENOSYS (SIGSYS:
 * blocked by seccomp). */
int remote_syscall(struct remote *rc, long nr, const uint64_t args[6], uint64_t *ret,
                   int64_t deadline_ns);

/* Calls fn(a0, a1) on the private stack whose top (exclusive) is stack_top. Same returns. */
int remote_call(struct remote *rc, uint64_t fn, uint64_t a0, uint64_t a1, uint64_t stack_top,
                uint64_t *ret, int64_t deadline_ns);

/* Restores the original bytes, registers and FPU state (whatever was saved).  0 or -errno.
 * A thread still running (a call abandoned at its timeout that has not stopped for the
 * interrupt yet: an uninterruptible wait) is taken back first, waiting up to 10 s; it must not
 * be detached unrestored, or it returns into the trampoline's int3 once free.
 * One deliberate difference: if the thread was interrupted in a syscall that restarts through
 * the kernel's per-thread restart block (rax == -ERESTART_RESTARTBLOCK: relative sleeps, timed
 * futex waits, poll) and a syscall of our code may have been interrupted meanwhile (so that
 * block may now describe OUR syscall, e.g. a 60 s sleep, or a finished one that returns at
 * once), the original syscall is re-issued from its saved arguments instead: a relative wait
 * may then last longer than asked (never shorter, never someone else's). */
int remote_end(struct remote *rc);

#endif /* VC_REMOTE_CALL_H */

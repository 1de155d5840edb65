/* remote_call.h — run a syscall or a function on one stopped thread of the target and get its
 * result, in such a way that the thread puts itself back exactly as it was even if the
 * injector vanishes (kill -9) at any instant.
 *
 * No code of the target is ever written.  Two gadgets already in libc's text are borrowed:
 * `syscall; ret` and the rt_sigreturn restorer (`mov $15,%rax; syscall`).  Before any register
 * changes, an rt signal frame holding the thread's own state (registers with the syscall
 * restart applied as the kernel would, FPU/xstate, signal mask) is written where the kernel
 * would put one; every piece of our code ends in rt_sigreturn through such a frame:
 *  - a syscall runs at the gadget with rsp at a frame on the thread's own stack (below its red
 *    zone): `syscall`, then `ret` into the restorer, then rt_sigreturn;
 *  - a call runs a 15-byte stub in a private page we map (never a page of the target's files;
 *    mapped read+exec and written through ptrace, never writable and executable):
 *    `call *%rax; mov %rax,(%rbx); mov %r12,%rsp; mov $15,%eax; syscall`, on a private stack,
 *    with its frame above that stack.
 * The injector follows with PTRACE_SYSCALL and knows a piece is done at the syscall-entry stop
 * of its rt_sigreturn; nothing traps, so if the injector dies the thread simply runs on to its
 * rt_sigreturn (PTRACE_O_TRACESYSGOOD makes an unreaped syscall stop harmless, see ptrace.h).
 *
 * Left behind when the injector dies mid-way: at most the scratch mapping (anonymous,
 * private) and whatever the function itself did.  Signals that the injector had already
 * intercepted for re-delivery at detach are lost then. */
#ifndef VC_REMOTE_CALL_H
#define VC_REMOTE_CALL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/user.h>

#include "elf.h"
#include "ptrace.h"

/* Code the target already maps (target addresses). */
struct remote_gadgets {
    uint64_t syscall_ret;  /* 0f 05 c3: syscall; ret */
    uint64_t restorer;     /* mov $15,%rax (or %eax); syscall */
    uint64_t restorer_end; /* the address after its syscall (rip at the syscall stops) */
};

/* Finds the gadgets in libc's file (its ELF mapped as ef, loaded at bias).  0 or -ENOENT. */
int remote_find_gadgets(const struct elf_file *ef, uint64_t bias, struct remote_gadgets *g);

struct remote {
    struct tracee *t;
    struct remote_gadgets g;
    struct user_regs_struct saved_regs; /* as found */
    struct user_regs_struct home_regs;  /* what every frame restores: saved_regs with the
                                         * interrupted syscall's restart applied */
    struct pt_fpstate *saved_fp;
    struct pt_fpstate *now_fp;          /* the state read back after each rt_sigreturn */
    uint64_t fp_missed;                 /* xstate components a frame did not bring home (set
                                         * directly then): none on any CPU seen so far */
    uint64_t sigmask;
    uint32_t fp_size;                   /* bytes of saved_fp->buf a frame carries */
    uint64_t scratch, scratch_len;      /* stub page + data + stack + frame area (0: none) */
    int regs_saved;
    int at_home;       /* the thread is stopped with its own registers back (after our
                        * rt_sigreturn, or never moved) */
    int timed_out;     /* a piece was abandoned at its deadline */
    int running_away;  /* an abandoned call could not be taken back: its frames stay */
    int fault_sig;     /* the fatal signal the last call died of (0: none) */
    int calls_run;     /* remote_call invocations that started executing */
    int foreign_stops; /* stops during our code other than syscall stops: the thread's syscall
                        * restart block may have been reused by our code */
};

/* Saves registers, FPU state and signal mask; sets PTRACE_O_TRACESYSGOOD; checks the gadgets
 * in target memory.  0 or -errno (then nothing was changed): -EOPNOTSUPP for a thread with an
 * x86 shadow stack (CET), which our frames cannot satisfy. */
int remote_begin(struct remote *rc, struct tracee *t, const struct remote_gadgets *g);

/* Runs a syscall with up to 6 args; *ret receives rax (a -errno on failure). 0 or -errno:
 * -ETIMEDOUT, -ESRCH (thread died), -EFAULT (fatal signal, rc->fault_sig), -ENOSYS (SIGSYS:
 * blocked by seccomp), -ENOSPC (no room for the frame on the thread's stack: nothing ran). */
int remote_syscall(struct remote *rc, long nr, const uint64_t args[6], uint64_t *ret,
                   int64_t deadline_ns);

/* Maps the private scratch region (stub, data_len bytes of data, a 1 MiB stack, the call
 * frames); *data receives the data address.  Unmapped by remote_end.  0 or -errno (a failed
 * syscall's errno: ENOMEM, EPERM...). */
int remote_map_scratch(struct remote *rc, size_t data_len, uint64_t *data, int64_t deadline_ns);

/* Calls fn(a0, a1) on the scratch stack. Same returns as remote_syscall. */
int remote_call(struct remote *rc, uint64_t fn, uint64_t a0, uint64_t a1, uint64_t *ret,
                int64_t deadline_ns);

/* Puts the thread back if a piece was abandoned (fault, timeout), through a fresh frame and
 * rt_sigreturn, and unmaps the scratch region unless a call still runs on it.  0 or -errno.
 * A thread still running (a call abandoned at its timeout that has not stopped for the
 * interrupt yet: an uninterruptible wait) is taken back first, waiting up to 10 s.
 * One deliberate difference: if the thread was interrupted in a syscall that restarts through
 * the kernel's per-thread restart block (rax == -ERESTART_RESTARTBLOCK: relative sleeps, timed
 * futex waits, poll) and either a syscall of our code may have been interrupted meanwhile (so
 * that block may now describe OUR syscall, e.g. a 60 s sleep, or a finished one that returns
 * at once) or the injector died (the thread came home through rt_sigreturn, which resets the
 * block), the original syscall is re-issued from its saved arguments instead: a relative
 * wait may then last longer than asked (never shorter, never someone else's).  When the
 * thread was already inside restart_syscall (its wait interrupted once before, e.g. by an
 * earlier attach), the original syscall is unknown: restart_syscall is re-issued and, the
 * block being reset by then, returns -EINTR, as the kernel does after a signal handler. */
int remote_end(struct remote *rc);

#endif /* VC_REMOTE_CALL_H */

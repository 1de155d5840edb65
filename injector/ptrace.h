/* ptrace.h — the set of traced threads of one target: seize and stop every thread with
 * PTRACE_SEIZE + PTRACE_INTERRUPT (no SIGSTOP is ever sent, no kill-on-exit option is ever set),
 * bounded waits, signals that arrive meanwhile kept for re-delivery, and detach of every thread
 * on every path.  Registers and memory of a stopped thread are read/written through here too. */
#ifndef VC_PTRACE_H
#define VC_PTRACE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

enum tracee_state {
    TRACEE_STOPPED = 0, /* in a ptrace-stop: registers may be read/written */
    TRACEE_RUNNING,     /* seized and interrupted, stop not yet seen, or resumed by us */
    TRACEE_GONE,        /* exited (or could not be seized because it exited) */
    TRACEE_DETACHED,
};

struct tracee {
    pid_t tid;
    enum tracee_state state;
    uint64_t pending_sigs; /* bit (sig-1): signals intercepted by us, re-delivered at detach */
    int group_stop;        /* the stop was a group-stop for this signal (job control) */
    int in_signal_stop;    /* last stop was a signal-delivery-stop (it is not a safe point) */
    int syscall_stop;      /* last stop was a syscall-entry/exit stop (PTRACE_SYSCALL with
                            * PTRACE_O_TRACESYSGOOD: status SIGTRAP|0x80) */
};

struct tracee_group {
    pid_t pid;
    struct tracee *t;
    size_t n, cap;
};

/* Monotonic clock in nanoseconds (deadlines are absolute values of it). */
int64_t pt_now_ns(void);

/* Seizes and stops every thread of pid, re-listing /proc/PID/task until no new thread shows
 * up.  On failure, threads seized so far stay in the group (the caller detaches them).
 * 0, or -errno: -EPERM (may not trace), -EBUSY (a thread is traced by someone else),
 * -ESRCH (process gone), -ETIMEDOUT. */
int pt_seize_all(struct tracee_group *g, pid_t pid, int64_t deadline_ns);

/* Waits (bounded) for the next stop of t, recording what kind of stop it was. 0, -ETIMEDOUT,
 * -ESRCH (thread exited: t->state is TRACEE_GONE).  *status receives the raw wait status. */
int pt_wait_stop(struct tracee *t, int64_t deadline_ns, int *status);

/* Takes t (a thread of pid this process seized and keeps in a ptrace-stop: a caught process,
 * catch.c) into g as if pt_seize_all had stopped it; t itself is marked detached, since g owns
 * the thread from now on (pt_release lets it go).  0, or -ENOMEM (t untouched). */
int pt_adopt(struct tracee_group *g, pid_t pid, struct tracee *t);

/* Detaches one thread (re-delivering the signals it had pending); a running thread is
 * interrupted first.  Bounded; returns 0 or -errno. */
int pt_detach(struct tracee_group *g, struct tracee *t);
/* Detaches every thread still attached; returns the number that could not be detached. */
int pt_detach_all(struct tracee_group *g);
/* Detaches all, then frees the group. */
void pt_release(struct tracee_group *g);

/* Makes syscall stops of tid report SIGTRAP|0x80 (PTRACE_O_TRACESYSGOOD, nothing else: never
 * EXITKILL).  Required before any PTRACE_SYSCALL: if the tracer dies before reaping a syscall
 * stop, the kernel re-sends the stop's code to the thread as a signal; SIGTRAP|0x80 is no valid
 * signal and is dropped, a plain SIGTRAP would kill the target. */
int pt_set_tracesysgood(pid_t tid);

/* The thread's blocked-signal mask (PTRACE_GETSIGMASK / PTRACE_SETSIGMASK). */
int pt_get_sigmask(pid_t tid, uint64_t *mask);
int pt_set_sigmask(pid_t tid, uint64_t mask);

int pt_getregs(pid_t tid, struct user_regs_struct *r);
int pt_setregs(pid_t tid, const struct user_regs_struct *r);

/* Extended FPU/vector state (XSAVE area, or the FXSAVE area where XSAVE is unavailable). */
struct pt_fpstate {
    int kind; /* 0 none, 1 xstate, 2 fpregs */
    size_t len;
    unsigned char buf[16384] __attribute__((aligned(64)));
};
int pt_get_fpstate(pid_t tid, struct pt_fpstate *fp);
int pt_set_fpstate(pid_t tid, const struct pt_fpstate *fp);

/* Target memory, through process_vm_{readv,writev} with a PTRACE_PEEK/POKE fallback (which
 * also writes read-only text).  0 or -errno. */
int pt_read(pid_t tid, uint64_t addr, void *buf, size_t len);
int pt_write(pid_t tid, uint64_t addr, const void *buf, size_t len);
/* Writes only where the target itself could write (process_vm_writev, no PTRACE_POKE
 * fallback): a guard page or a read-only page is -EFAULT, never silently written. */
int pt_write_mem(pid_t tid, uint64_t addr, const void *buf, size_t len);
/* Writes code: always through PTRACE_POKETEXT (text is read-only to process_vm_writev). */
int pt_poke_text(pid_t tid, uint64_t addr, const void *buf, size_t len);

#endif /* VC_PTRACE_H */

/* watchdog.h — internal to the injector: the last bound of the ptrace method.
 *
 * Every wait of the ptrace method is bounded by its deadline, but a read of the target's
 * memory (PTRACE_PEEKDATA, process_vm_readv, libunwind's reads of its stacks) faults the
 * target's pages in, and a page of a FUSE-backed mapping waits in the kernel for a daemon that
 * the target's user may stall: no deadline of ours reaches there, and the thread cannot be
 * cancelled.  FUSE waits are killable, and when a tracer exits the kernel detaches every
 * tracee (each thread in the middle of a call comes home through its own signal frame, see
 * method.h), so ending vcattach is a bound that leaves the target running: the watchdog says
 * why on stderr and exits. */
#ifndef VC_WATCHDOG_H
#define VC_WATCHDOG_H

#include <pthread.h>
#include <sys/types.h>

struct watchdog {
    pthread_t thread;
    int pipe[2];   /* a byte (or the close) disarms it */
    int armed;
    int ms;
    pid_t pid;     /* for the message */
};

/* Arms it: unless watchdog_disarm comes within ms, the process exits (status 1) after one
 * line on stderr.  0, or -1 (no thread could be started: the method runs without it). */
int watchdog_arm(struct watchdog *w, int ms, pid_t pid);

/* Disarms and joins it (a no-op when it was not armed). */
void watchdog_disarm(struct watchdog *w);

#endif /* VC_WATCHDOG_H */

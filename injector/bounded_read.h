/* bounded_read.h — internal to the injector: a read of another process that may block for
 * ever, done in a short-lived child that is SIGKILLed at a deadline.
 *
 * Reading another process's memory (process_vm_readv, /proc/PID/cmdline) faults its pages in;
 * a page of a FUSE-backed mapping waits for the FUSE daemon, which the target's user may run
 * and stall.  A thread blocked there cannot be cancelled, but a process can be killed (FUSE
 * waits are killable), so the read runs in a child and only its result comes back.
 */
#ifndef VC_BOUNDED_READ_H
#define VC_BOUNDED_READ_H

#include <stddef.h>

/* Runs fn(arg, buf, len) in a child and copies its buf back.  fn returns 0 or a negative
 * errno.  Returns fn's result, or -ETIMEDOUT when the child did not finish within timeout_ms
 * (it is killed), or another negative errno when no child could run.  `tag` names the call
 * for the test-only fault point (bounded_read.c). */
int bounded_read(const char *tag, int (*fn)(void *arg, void *buf, size_t len), void *arg,
                 void *buf, size_t len, int timeout_ms);

#endif /* VC_BOUNDED_READ_H */

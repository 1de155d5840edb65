/* bounded_read.c — reads of another process in a child killed at a deadline (see
 * bounded_read.h).  The child writes fn's result and then the buffer on a pipe; the parent
 * reads them before the deadline, and kills and reaps the child whatever happened. */
#include "bounded_read.h"
#include "monotonic.h"
#include "test_seam.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Test-only fault injection (test_seam.h, not in the product): VCATTACH_TEST_BLOCKING_READ=TAG (tests/system/test_security_sock.py)
 * makes the child of that call block as a read of a stalled FUSE mapping would.  Unset, it
 * does nothing. */
static void test_block(const char *tag)
{
    const char *v = VC_SEAM(BLOCKING_READ);
    if (v && strcmp(v, tag) == 0)
        for (;;)
            pause();
}

/* Reads len bytes before the deadline.  0, or -1 (short: the child died, or timed out). */
static int read_all(int fd, void *buf, size_t len, int64_t deadline, int *timed_out)
{
    size_t used = 0;
    while (used < len) {
        int64_t left = deadline - vc_monotonic_ms();
        if (left <= 0) {
            *timed_out = 1;
            return -1;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        ssize_t n = read(fd, (char *)buf + used, len - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        used += (size_t)n;
    }
    return 0;
}

int bounded_read(const char *tag, int (*fn)(void *arg, void *buf, size_t len), void *arg,
                 void *buf, size_t len, int timeout_ms)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    pid_t child = fork();
    if (child < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return -e;
    }
    if (child == 0) {
        close(p[0]);
        test_block(tag);
        int32_t rc = fn(arg, buf, len);
        /* The parent reads exactly this much; a failed write shows as a short read there. */
        if (write(p[1], &rc, sizeof rc) == (ssize_t)sizeof rc && rc == 0) {
            size_t done = 0;
            while (done < len) {
                ssize_t n = write(p[1], (char *)buf + done, len - done);
                if (n <= 0)
                    break;
                done += (size_t)n;
            }
        }
        _exit(0);
    }
    close(p[1]);
    int64_t deadline = vc_monotonic_ms() + timeout_ms;
    int timed_out = 0;
    int32_t rc = -EIO;
    if (read_all(p[0], &rc, sizeof rc, deadline, &timed_out) < 0)
        rc = -EIO;
    else if (rc == 0 && read_all(p[0], buf, len, deadline, &timed_out) < 0)
        rc = -EIO;
    close(p[0]);
    if (timed_out)
        kill(child, SIGKILL);
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
        ;
    return timed_out ? -ETIMEDOUT : rc;
}

/* protocol.c — framing and key=value helpers for the control channel (see protocol.h).
 * Used by both the injector and the agent, so it touches only libc: no allocation, and every
 * blocking step is bounded by poll() with the caller's timeout. */
#include "protocol.h"
#include "monotonic.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Waits until fd is ready for `events`, at most until `deadline` (ms; < 0 = forever). */
static int wait_ready(int fd, short events, int64_t deadline)
{
    for (;;) {
        int timeout = -1;
        if (deadline >= 0) {
            int64_t left = deadline - vc_monotonic_ms();
            if (left <= 0) {
                errno = ETIMEDOUT;
                return -1;
            }
            timeout = left > 1000000 ? 1000000 : (int)left;
        }
        struct pollfd p = {.fd = fd, .events = events, .revents = 0};
        int r = poll(&p, 1, timeout);
        if (r > 0)
            return 0; /* readable, writable, or an error the next read/write reports */
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

static int write_all(int fd, const void *data, size_t len, int64_t deadline)
{
    const char *p = data;
    while (len > 0) {
        if (wait_ready(fd, POLLOUT, deadline) < 0)
            return -1;
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int vc_msg_send(int fd, uint32_t type, const void *payload, size_t len, int timeout_ms)
{
    return vc_msg_send_fd(fd, type, payload, len, -1, timeout_ms);
}

int vc_msg_send_fd(int fd, uint32_t type, const void *payload, size_t len, int pass_fd,
                   int timeout_ms)
{
    if (len > VC_MSG_MAX) {
        errno = EMSGSIZE;
        return -1;
    }
    int64_t deadline = timeout_ms < 0 ? -1 : vc_monotonic_ms() + timeout_ms;
    uint32_t head[2] = {type, (uint32_t)len};
    /* Header and payload leave in one sendmsg when the socket takes them whole (a small
     * message on a Unix stream socket always does): a peer that exits right after sending
     * never leaves a header without its payload behind. */
    struct iovec iov[2] = {{.iov_base = head, .iov_len = sizeof head},
                           {.iov_base = (void *)payload, .iov_len = len}};
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
    union { /* the descriptor travels with the first byte that is sent */
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    if (pass_fd >= 0) {
        memset(&ctl, 0, sizeof ctl);
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof ctl.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    }
    size_t sent = 0;
    for (;;) {
        if (wait_ready(fd, POLLOUT, deadline) < 0)
            return -1;
        ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) {
            sent = (size_t)n;
            break;
        }
        if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
    }
    /* a partial send (large payload, full buffer): the rest goes in order */
    if (sent < sizeof head &&
        write_all(fd, (const char *)head + sent, sizeof head - sent, deadline) < 0)
        return -1;
    size_t done = sent > sizeof head ? sent - sizeof head : 0;
    return done < len ? write_all(fd, (const char *)payload + done, len - done, deadline) : 0;
}

/* Descriptors that came with a read: the first kept in *keep (if it is -1 and keep is not
 * NULL), every other one closed (a peer may pass any number, with any frame). */
static void take_fds(struct msghdr *msg, int *keep)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c != NULL; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int got;
            memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
            if (keep != NULL && *keep < 0)
                *keep = got;
            else
                close(got);
        }
    }
}

/* read_all through recvmsg, taking the descriptors that come along (take_fds). */
static int read_all_fds(int fd, void *data, size_t len, int *keep, int64_t deadline)
{
    char *p = data;
    while (len > 0) {
        if (wait_ready(fd, POLLIN, deadline) < 0)
            return -1;
        union {
            char buf[CMSG_SPACE(4 * sizeof(int))];
            struct cmsghdr align;
        } ctl;
        struct iovec iov = {.iov_base = p, .iov_len = len};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                             .msg_controllen = sizeof ctl.buf};
        ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n > 0 || msg.msg_controllen > 0)
            take_fds(&msg, keep);
        if (n == 0) {
            errno = ECONNRESET;
            return -1;
        }
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

long vc_msg_recv(int fd, uint32_t *type, void *buf, size_t cap, int timeout_ms)
{
    return vc_msg_recv_fd(fd, type, buf, cap, NULL, timeout_ms);
}

long vc_msg_recv_fd(int fd, uint32_t *type, void *buf, size_t cap, int *passed_fd,
                    int timeout_ms)
{
    int64_t deadline = timeout_ms < 0 ? -1 : vc_monotonic_ms() + timeout_ms;
    uint32_t head[2];
    if (passed_fd != NULL)
        *passed_fd = -1;
    /* A descriptor comes with a frame's first byte: the head.  Without passed_fd, any that
     * comes is closed (a plain read would let the kernel drop it as well). */
    if (read_all_fds(fd, head, sizeof head, passed_fd, deadline) < 0) {
        if (passed_fd != NULL && *passed_fd >= 0) {
            close(*passed_fd);
            *passed_fd = -1;
        }
        return -1;
    }
    if (head[1] > VC_MSG_MAX || (size_t)head[1] >= cap ||
        (head[1] && read_all_fds(fd, buf, head[1], NULL, deadline) < 0)) {
        if (head[1] > VC_MSG_MAX || (size_t)head[1] >= cap)
            errno = EMSGSIZE;
        if (passed_fd != NULL && *passed_fd >= 0) {
            close(*passed_fd);
            *passed_fd = -1;
        }
        return -1;
    }
    ((char *)buf)[head[1]] = '\0';
    *type = head[0];
    return (long)head[1];
}

long vc_kv_get(const char *text, const char *key, char *out, size_t cap)
{
    size_t klen = strlen(key);
    const char *line = text;
    while (line && *line) {
        const char *end = strchr(line, '\n');
        size_t llen = end ? (size_t)(end - line) : strlen(line);
        if (llen > klen && line[klen] == '=' && memcmp(line, key, klen) == 0) {
            size_t vlen = llen - klen - 1;
            if (vlen >= cap)
                return -1;
            memcpy(out, line + klen + 1, vlen);
            out[vlen] = '\0';
            return (long)vlen;
        }
        line = end ? end + 1 : NULL;
    }
    return -1;
}

int vc_kv_append(char *text, size_t cap, size_t *used, const char *key, const char *value)
{
    size_t klen = strlen(key), vlen = strlen(value);
    if (klen == 0 || strpbrk(key, "=\n") || strchr(value, '\n'))
        return -1;
    if (*used + klen + 1 + vlen + 1 >= cap)
        return -1;
    char *p = text + *used;
    memcpy(p, key, klen);
    p[klen] = '=';
    memcpy(p + klen + 1, value, vlen);
    p[klen + 1 + vlen] = '\n';
    *used += klen + vlen + 2;
    text[*used] = '\0';
    return 0;
}

/* proc_events.c — the kernel's own account of forks, execs and exits (proc_events.h).
 *
 * A tree trace used to learn of a new process only from its 100 ms look at /proc: a pool
 * worker that lives 20 ms was never seen, so never listed, and a spawned interpreter waited up
 * to 100 ms for its injection.  The process events connector (NETLINK_CONNECTOR, CN_IDX_PROC)
 * multicasts every fork, exec and exit of the host as it happens, with the parent of each
 * fork: the tree's births are known at once, exactly.  It needs CAP_NET_ADMIN (vcattach runs
 * as root) and CONFIG_PROC_EVENTS; without them the /proc look is all there is, as before.
 * Only messages from the kernel (sender port 0) are read, and with bounds: a short or odd one
 * is skipped.
 */
#include "proc_events.h"

#include <errno.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* linux/cn_proc.h, as far as it is read here (its layout is ABI). */
#define CN_PROC_LISTEN 1 /* PROC_CN_MCAST_LISTEN */
#define CN_PROC_IGNORE 2
#define CN_EV_FORK 0x00000001u
#define CN_EV_EXEC 0x00000002u
#define CN_EV_EXIT 0x80000000u
struct cn_proc_head { /* struct proc_event up to its union */
    uint32_t what;
    uint32_t cpu;
    uint64_t timestamp_ns;
};
#define RCVBUF_BYTES (8 << 20) /* a busy host forks a lot: room before the kernel drops */

struct proc_events {
    int fd;
    uint64_t lost; /* the socket overflowed (ENOBUFS): events were dropped */
};

static int send_op(int fd, uint32_t op)
{
    /* nlmsghdr | cn_msg (whose data[] is the op) | op, laid out by hand: cn_msg ends in a
     * flexible array */
    unsigned char m[sizeof(struct nlmsghdr) + sizeof(struct cn_msg) + sizeof op];
    struct nlmsghdr nl = {.nlmsg_len = sizeof m, .nlmsg_type = NLMSG_DONE};
    struct cn_msg cn;
    memset(&cn, 0, sizeof cn);
    cn.id.idx = CN_IDX_PROC;
    cn.id.val = CN_VAL_PROC;
    cn.len = sizeof op;
    memcpy(m, &nl, sizeof nl);
    memcpy(m + sizeof nl, &cn, sizeof cn);
    memcpy(m + sizeof nl + sizeof cn, &op, sizeof op);
    return send(fd, m, sizeof m, 0) == (ssize_t)sizeof m ? 0 : -1;
}

int proc_events_open(struct proc_events **out, char *err, size_t errlen)
{
    *out = NULL;
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_CONNECTOR);
    if (fd < 0) {
        snprintf(err, errlen, "no process events connector: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = CN_IDX_PROC, .nl_pid = 0};
    int size = RCVBUF_BYTES;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) != 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || send_op(fd, CN_PROC_LISTEN) != 0) {
        snprintf(err, errlen, "no process events (needs CAP_NET_ADMIN and CONFIG_PROC_EVENTS): "
                 "%s", strerror(errno));
        close(fd);
        return -1;
    }
    struct proc_events *pe = calloc(1, sizeof *pe);
    if (pe == NULL) {
        snprintf(err, errlen, "out of memory");
        close(fd);
        return -1;
    }
    pe->fd = fd;
    *out = pe;
    return 0;
}

int proc_events_fd(const struct proc_events *pe)
{
    return pe ? pe->fd : -1;
}

uint64_t proc_events_lost(const struct proc_events *pe)
{
    return pe ? pe->lost : 0;
}

/* One connector message: a process event, if it is one of those we pass on. */
static void one(const unsigned char *p, size_t len, proc_event_fn fn, void *ctx)
{
    if (len < sizeof(struct cn_msg) + sizeof(struct cn_proc_head))
        return;
    struct cn_msg cn;
    memcpy(&cn, p, sizeof cn);
    if (cn.id.idx != CN_IDX_PROC || cn.id.val != CN_VAL_PROC ||
        cn.len > len - sizeof cn || cn.len < sizeof(struct cn_proc_head))
        return;
    const unsigned char *ev = p + sizeof cn;
    struct cn_proc_head h;
    memcpy(&h, ev, sizeof h);
    const unsigned char *data = ev + sizeof h;
    size_t dlen = cn.len - sizeof h;
    int32_t v[4];
    struct proc_event_info e = {.ts_ns = h.timestamp_ns};
    if (h.what == CN_EV_FORK && dlen >= 16) { /* parent_pid, parent_tgid, child_pid, child_tgid */
        memcpy(v, data, 16);
        if (v[2] != v[3])
            return; /* a new thread, not a process */
        e.what = PROC_EV_FORK, e.pid = v[3], e.ppid = v[1];
    } else if (h.what == CN_EV_EXEC && dlen >= 8) { /* process_pid, process_tgid */
        memcpy(v, data, 8);
        e.what = PROC_EV_EXEC, e.pid = v[1];
    } else if (h.what == CN_EV_EXIT && dlen >= 8) { /* process_pid, process_tgid, ... */
        memcpy(v, data, 8);
        if (v[0] != v[1])
            return; /* a thread that ended */
        e.what = PROC_EV_EXIT, e.pid = v[1];
    } else {
        return;
    }
    fn(ctx, &e);
}

int proc_events_read(struct proc_events *pe, proc_event_fn fn, void *ctx, int max)
{
    static unsigned char buf[64 << 10];
    int n = 0;
    while (pe != NULL && n < max) {
        struct sockaddr_nl from;
        socklen_t flen = sizeof from;
        ssize_t got = recvfrom(pe->fd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from,
                               &flen);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno == ENOBUFS) { /* the kernel dropped some: said, not fatal */
            pe->lost++;
            continue;
        }
        if (got <= 0)
            break;
        if (flen != sizeof from || from.nl_pid != 0)
            continue; /* not from the kernel */
        for (size_t off = 0; off + NLMSG_HDRLEN <= (size_t)got;) {
            struct nlmsghdr nh;
            memcpy(&nh, buf + off, sizeof nh);
            if (nh.nlmsg_len < NLMSG_HDRLEN || nh.nlmsg_len > (size_t)got - off)
                break;
            if (nh.nlmsg_type != NLMSG_ERROR && nh.nlmsg_type != NLMSG_NOOP)
                one(buf + off + NLMSG_HDRLEN, nh.nlmsg_len - NLMSG_HDRLEN, fn, ctx);
            off += NLMSG_ALIGN(nh.nlmsg_len);
            n++;
        }
    }
    return n;
}

void proc_events_close(struct proc_events *pe)
{
    if (pe == NULL)
        return;
    (void)send_op(pe->fd, CN_PROC_IGNORE);
    close(pe->fd);
    free(pe);
}

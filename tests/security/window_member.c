/* window_member.c — a hostile member of a `--subprocesses` trace that passes vcattach a
 * "window" (docs/protocol.md "The window") vcattach must not trust
 * (tests/system/test_security_tree.py::test_hostile_window_is_read_safely).
 *
 *   window_member NAME READY KIND
 *
 * Connects to the tree's abstract control socket NAME, sends HELLO with a descriptor of
 * KIND, takes CONFIG, sends STARTED, writes its pid to READY, and exits without END (so that
 * vcattach reads the window):
 *   fifo      a pipe's read end (a read would block forever)
 *   garbage   a memfd of random bytes
 *   lying     a memfd whose head claims 2^40 chunks and a 1 TiB arena in 1 MiB
 *   chunks    a valid head, then chunks with impossible counts, owners and ids
 *   shrink    a valid head and chunks, the memfd cut to its head by a child right after
 * It is not Python: vcattach skips it, then takes its connection as a member joining by itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "protocol.h"

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static int window(const char *kind)
{
    if (strcmp(kind, "fifo") == 0) {
        int p[2];
        if (pipe(p) != 0)
            die("pipe");
        return p[0];
    }
    int fd = memfd_create("hostile-window", 0);
    if (fd < 0 || ftruncate(fd, 1 << 20) != 0)
        die("memfd");
    unsigned char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        die("mmap");
    if (strcmp(kind, "garbage") == 0) {
        for (size_t off = 0; off < (1u << 20); off += 256)
            if (getrandom(m + off, 256, 0) != 256)
                die("getrandom");
        return fd;
    }
    struct vc_wire_window *h = (void *)m;
    memcpy(h->magic, VC_WINDOW_MAGIC, 8);
    h->head_bytes = sizeof *h;
    h->chunk_bytes = 65536;
    h->arena_off = 4096;
    h->arena_cap = 8192;
    h->chunks_off = 65536;
    h->nchunks = 15;
    h->clock = (struct vc_wire_clock){0, 0, 0.4};
    if (strcmp(kind, "lying") == 0) {
        h->nchunks = (uint64_t)1 << 40;
        h->arena_cap = (uint64_t)1 << 40;
        h->arena_len = (uint64_t)1 << 40;
        return fd;
    }
    /* an arena entry running past its end, and chunks of every impossible kind */
    uint32_t entry[2] = {7, 100000};
    memcpy(m + h->arena_off, entry, 8);
    h->arena_len = 8 + 16;
    for (uint64_t i = 0; i < h->nchunks; i++) {
        struct vc_wire_chunk *c = (void *)(m + h->chunks_off + i * 65536);
        c->state = VC_CHUNK_UNSENT;
        c->owner = i % 3 == 0 ? 70000 : (uint32_t)i;
        c->tid = (int32_t)(i % 2 ? -5 : 1);
        c->count = i % 4 == 1 ? 0xffffffffu : 100;
        struct vc_wire_record *r = (void *)(c + 1);
        for (uint32_t k = 0; k < 100; k++)
            r[k] = (struct vc_wire_record){k * 1000, 10, i % 5 == 2 ? 0xfff00000u : k, 0};
    }
    if (strcmp(kind, "shrink") == 0 && fork() == 0) { /* cut it while vcattach reads it */
        for (int k = 0; k < 2000; k++) {
            if (ftruncate(fd, k % 2 ? 4096 : 1 << 20) != 0)
                break;
            usleep(500);
        }
        _exit(0);
    }
    return fd;
}

static void send_frame(int s, uint32_t type, const char *text, int fd)
{
    uint32_t head[2] = {type, (uint32_t)strlen(text)};
    struct iovec iov[2] = {{head, 8}, {(void *)text, strlen(text)}};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
    if (fd >= 0) {
        memset(&ctl, 0, sizeof ctl);
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof ctl.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    if (sendmsg(s, &msg, 0) < 0)
        die("sendmsg");
}

static uint32_t recv_frame(int s)
{
    uint32_t head[2];
    if (recv(s, head, 8, MSG_WAITALL) != 8)
        die("recv");
    static char buf[1 << 20];
    if (head[1] > sizeof buf || (head[1] && recv(s, buf, head[1], MSG_WAITALL) != head[1]))
        die("recv payload");
    return head[0];
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: window_member NAME READY KIND\n");
        return 2;
    }
    int w = window(argv[3]);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t n = strlen(argv[1]);
    if (s < 0 || n + 1 >= sizeof a.sun_path)
        die("socket");
    memcpy(a.sun_path + 1, argv[1], n);
    if (connect(s, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
                                                      1 + n)) != 0)
        die("connect");
    char hello[64];
    snprintf(hello, sizeof hello, "pid=%d\nforked=1\n", (int)getpid());
    send_frame(s, VC_MSG_HELLO, hello, w);
    if (recv_frame(s) != VC_MSG_CONFIG)
        die("no CONFIG");
    send_frame(s, VC_MSG_STARTED, "threads=1\nbackend=profile\n", w); /* a second: closed */
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.new", argv[2]);
    FILE *f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%d", (int)getpid()) < 0 || fclose(f) != 0 ||
        rename(tmp, argv[2]) != 0)
        die("ready");
    usleep(300 * 1000); /* then it ends: no END, vcattach reads its window */
    return 0;
}

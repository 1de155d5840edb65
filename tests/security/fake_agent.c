/* fake_agent.c — a hostile agent for tests/system/test_security_agent.py: a shared library that
 * vcattach injects in place of libvcagent-pyXY.so (VCATTACH_AGENT_DIR) and that speaks the
 * control protocol (common/protocol.h, docs/protocol.md) badly on purpose.
 *
 * vc_agent_connect(path) runs on the hijacked thread: it only starts a thread and returns.
 * That thread connects, says HELLO, reads CONFIG, then misbehaves as FAKE_AGENT_MODE (in the
 * target's environment) says:
 *   stall    STATUS frames every 20 ms, never STARTED (each used to restart the wait)
 *   escape   an ERROR whose text holds terminal escape sequences and C1 controls
 *   flood    STARTED, then after STOP 1 MiB DATA frames as fast as they go, forever
 *   trickle  STARTED, then after STOP one byte of DATA every 100 ms, forever
 * The thread ends when vcattach closes the socket; the target process is never harmed.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static char control_path[108];

static int send_frame(int fd, uint32_t type, const void *p, uint32_t len)
{
    uint32_t h[2] = {type, len};
    if (send(fd, h, sizeof h, MSG_NOSIGNAL) != (ssize_t)sizeof h)
        return -1;
    const char *c = p;
    while (len) {
        ssize_t n = send(fd, c, len, MSG_NOSIGNAL);
        if (n <= 0)
            return -1;
        c += n;
        len -= (uint32_t)n;
    }
    return 0;
}

static int recv_all(int fd, void *p, size_t len)
{
    char *c = p;
    while (len) {
        ssize_t n = recv(fd, c, len, 0);
        if (n <= 0)
            return -1;
        c += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads one frame, dropping its payload; returns its type or -1. */
static long recv_frame(int fd)
{
    uint32_t h[2];
    if (recv_all(fd, h, sizeof h) < 0)
        return -1;
    char buf[4096];
    for (uint32_t left = h[1]; left;) {
        uint32_t k = left < sizeof buf ? left : sizeof buf;
        if (recv_all(fd, buf, k) < 0)
            return -1;
        left -= k;
    }
    return h[0];
}

static void nap(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *run(void *unused)
{
    (void)unused;
    const char *mode = getenv("FAKE_AGENT_MODE");
    mode = mode ? mode : "stall";
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    socklen_t alen = sizeof a;
    if (control_path[0] == '@') { /* an abstract name, then '#' and the session's token */
        size_t n = strcspn(control_path + 1, "#");
        memcpy(a.sun_path + 1, control_path + 1, n);
        alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    } else {
        memcpy(a.sun_path, control_path, strlen(control_path) + 1);
    }
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, alen) < 0)
        return NULL;
    char hello[64];
    int hn = snprintf(hello, sizeof hello, "pid=%d\npython=3\nagent=fake\n", (int)getpid());
    if (send_frame(fd, 1, hello, (uint32_t)hn) < 0 || recv_frame(fd) != 2 /* CONFIG */)
        goto out;
    if (!strcmp(mode, "stall")) {
        static const char st[] = "state=starting\n";
        while (send_frame(fd, 5, st, sizeof st - 1) == 0)
            nap(20);
    } else if (!strcmp(mode, "escape")) {
        static const char evil[] = "no\x1b]0;owned\x07\x1b[2J\x1b[31mred\x9b" "31m\xc2\x9b" "1m\rend";
        send_frame(fd, 8, evil, sizeof evil - 1);
        nap(500);
    } else {
        static const char started[] = "threads=1\nbackend=fake\n";
        if (send_frame(fd, 3, started, sizeof started - 1) < 0)
            goto out;
        if (!strcmp(mode, "flood")) { /* records without end, before and after STOP */
            uint32_t count = 40000;
            size_t len = 8 + (size_t)count * 24;
            unsigned char *chunk = calloc(1, len);
            if (chunk != NULL)
                memcpy(chunk + 4, &count, 4);
            while (chunk && send_frame(fd, 9 /* CHUNK */, chunk, (uint32_t)len) == 0)
                ;
            free(chunk);
            goto out;
        }
        if (!strcmp(mode, "bad-chunk")) { /* a count its length does not hold */
            unsigned char chunk[8 + 24] = {0};
            uint32_t count = 1000;
            memcpy(chunk + 4, &count, 4);
            send_frame(fd, 9, chunk, sizeof chunk);
            nap(2000);
            goto out;
        }
        if (recv_frame(fd) != 4 /* STOP */)
            goto out;
        unsigned char name[9] = {0, 0, 0, 0, 1, 0, 0, 0, 'f'}; /* one key named "f" */
        while (send_frame(fd, 10 /* NAMES */, name, sizeof name) == 0)
            nap(100);
    }
out:
    close(fd);
    return NULL;
}

__attribute__((visibility("default"))) int vc_agent_connect(const char *path)
{
    if (strlen(path) >= sizeof control_path)
        return -1;
    strcpy(control_path, path);
    pthread_t t;
    if (pthread_create(&t, NULL, run, NULL) != 0)
        return -1;
    pthread_detach(t);
    return 0;
}

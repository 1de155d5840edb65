/* fixture_agent.c — a stand-in for libvcagent used by the injector tests (test_inject*.py).
 *
 * It exports what the injector calls, vc_agent_connect(path), and proves it ran without any
 * Python C-API use: a detached thread reports "vc-fixture pid=P call=N loads=L" to
 * - "file:/path"  appended to that file,
 * - "/path"       a Unix stream socket the test listens on.
 * Special paths exercise the injector's failure handling:
 * - "fail:..."    returns -EINVAL (the call's result must be reported),
 * - "crash:..."   dereferences NULL in the call (SIGSEGV on the borrowed thread: the injector
 *                 must restore the thread and the target must live on),
 * - "hang:..."    sleeps 60 s in the call (the injector's timeout must take the thread back).
 * Like the agent it exports vc_agent_loaded, set by its constructor; built with
 * -DFIXTURE_NEVER_LOADED (libvcfixture-unloaded.so) it never is, as in a library whose dlopen
 * was abandoned half way: the injector must not call into it. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "protocol.h"

static int loads;
static int calls;

__attribute__((constructor)) static void fixture_loaded(void)
{
    __atomic_add_fetch(&loads, 1, __ATOMIC_SEQ_CST);
}

struct report {
    char path[4096];
    int call;
    long caller_tid;
};

static void *report_thread(void *arg)
{
    struct report *r = arg;
    char line[256];
    int n = snprintf(line, sizeof line, "vc-fixture pid=%d call=%d loads=%d caller_tid=%ld\n",
                     (int)getpid(), r->call, __atomic_load_n(&loads, __ATOMIC_SEQ_CST),
                     r->caller_tid);
    if (strncmp(r->path, "file:", 5) == 0) {
        int fd = open(r->path + 5, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) {
            if (write(fd, line, (size_t)n) < 0) { /* nothing to do: the test sees no line */
            }
            close(fd);
        }
    } else {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        size_t plen = strlen(r->path);
        if (plen < sizeof sa.sun_path)
            memcpy(sa.sun_path, r->path, plen + 1);
        if (fd >= 0 && plen < sizeof sa.sun_path && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
            if (write(fd, line, (size_t)n) < 0) {
            }
        }
        if (fd >= 0)
            close(fd);
    }
    free(r);
    return NULL;
}

__attribute__((visibility("default"))) volatile uint32_t vc_agent_loaded;

#ifndef FIXTURE_NEVER_LOADED
__attribute__((constructor)) static void mark_loaded(void)
{
    vc_agent_loaded = VC_AGENT_LOADED_MAGIC;
}
#endif

__attribute__((visibility("default"))) int vc_agent_connect(const char *path)
{
    int call = __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST);
    if (!path)
        return -EINVAL;
    if (strncmp(path, "fail:", 5) == 0)
        return -EINVAL;
    if (strncmp(path, "crash:", 6) == 0) {
        volatile int *nowhere = (volatile int *)(uintptr_t)(path[0] == 'c' ? 0 : 1);
        return *nowhere;
    }
    if (strncmp(path, "hang:", 5) == 0) {
        struct timespec ts = {60, 0};
        nanosleep(&ts, NULL);
        return 0;
    }
    struct report *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    snprintf(r->path, sizeof r->path, "%s", path);
    r->call = call;
    r->caller_tid = syscall(SYS_gettid);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    int e = pthread_create(&th, &attr, report_thread, r);
    pthread_attr_destroy(&attr);
    if (e) {
        free(r);
        return -e;
    }
    return 0;
}

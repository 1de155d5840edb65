/* namespaces.c — which of a process's namespaces (/proc/PID/ns/NAME) are ours, and the handle
 * to enter one (vcinject.h): the controller's sockets are made in the target's network
 * namespace, a tree gets one listener per network namespace, a status query runs as the
 * target's user when it lives in another user namespace.  Like every /proc read of the
 * project, here in the injector, not in the command line. */
#include "vcinject.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

/* NAME is one of the kernel's: net, user, mnt, pid, ... (never a path). */
static int ns_path(pid_t pid, const char *name, char *buf, size_t cap)
{
    int n = pid > 0 ? snprintf(buf, cap, "/proc/%d/ns/%s", (int)pid, name)
                    : snprintf(buf, cap, "/proc/self/ns/%s", name);
    if (n < 0 || (size_t)n >= cap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int target_ns_id(pid_t pid, const char *name, dev_t *dev, ino_t *ino)
{
    char path[64];
    struct stat st;
    if (ns_path(pid, name, path, sizeof path) < 0 || stat(path, &st) < 0)
        return -1;
    *dev = st.st_dev;
    *ino = st.st_ino;
    return 0;
}

int target_ns_other(pid_t pid, const char *name)
{
    dev_t d1, d2;
    ino_t i1, i2;
    if (target_ns_id(pid, name, &d1, &i1) < 0 || target_ns_id(0, name, &d2, &i2) < 0)
        return -1;
    return d1 != d2 || i1 != i2;
}

int target_ns_open(pid_t pid, const char *name)
{
    char path[64];
    if (ns_path(pid, name, path, sizeof path) < 0)
        return -1;
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* unix_names.c — the abstract names a process listens on (vcinject.h: target_unix_names_held,
 * target_holds_listener), from one read of /proc/net/unix and one of /proc/PID/fd.
 *
 * A session whose well-known status name (vcattach-agent-PID) was taken listens on
 * "vcattach-agent-PID-<random>"; anyone can bind any number of such names too.  Trying them
 * one by one in /proc/net/unix order (a connect and a check each) let enough squatted names
 * hide the session: the scan gave up after 16.  Here one read of /proc/net/unix and one of
 * /proc/PID/fd keep only the names whose listening socket (its inode) the process itself
 * holds, so squatters cost one line each of a single read, and whatever is tried is the
 * target's own.  The caller still checks each one when it connects (control_client.c): the
 * sockets may change between this read and the connect.
 */
#include "vcinject.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int by_inode(const void *a, const void *b)
{
    unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
    return (x > y) - (x < y);
}

/* The inodes of pid's socket fds ("socket:[INODE]"), sorted, into a malloc'd array.  Their
 * count, or -1 if /proc/PID/fd cannot be read. */
static long socket_inodes(pid_t pid, unsigned long **out)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (d == NULL) {
        if (dfd >= 0)
            close(dfd);
        return -1;
    }
    unsigned long *v = NULL;
    long n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char link[64];
        ssize_t l = readlinkat(dfd, e->d_name, link, sizeof link - 1);
        unsigned long ino;
        if (l <= 0)
            continue;
        link[l] = '\0';
        if (sscanf(link, "socket:[%lu]", &ino) != 1)
            continue;
        if (n == cap) {
            long bigger_cap = cap ? cap * 2 : 64;
            unsigned long *bigger = realloc(v, (size_t)bigger_cap * sizeof *v);
            if (bigger == NULL) {
                free(v);
                closedir(d);
                return -1;
            }
            v = bigger;
            cap = bigger_cap;
        }
        v[n++] = ino;
    }
    closedir(d);
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, by_inode);
    *out = v;
    return n;
}

/* One line of /proc/net/unix: the abstract name ("@..." cut at its newline) of a listening
 * socket (__SO_ACCEPTCON in Flags) and its inode, or NULL for any other line. */
static char *listening_name(char *line, unsigned long *inode)
{
    unsigned long flags = 0;
    unsigned type = 0, st = 0;
    int at = 0;
    /* Num RefCount Protocol Flags Type St Inode Path */
    if (sscanf(line, "%*s %*s %*s %lx %x %x %lu %n", &flags, &type, &st, inode, &at) < 4 ||
        at <= 0 || !(flags & 0x10000))
        return NULL;
    char *path = line + at;
    path[strcspn(path, "\n")] = '\0';
    return path[0] == '@' ? path : NULL;
}

int target_holds_listener(pid_t pid, const char *name)
{
    /* the inodes of the sockets listening on "@name" (accepted sockets carry the name too,
     * and there may be several lines), one of which /proc/PID/fd must link to */
    unsigned long inodes[8], inode;
    int n = 0;
    FILE *f = fopen("/proc/net/unix", "re");
    if (f == NULL)
        return 0;
    char line[512];
    while (n < 8 && fgets(line, sizeof line, f)) {
        const char *path = listening_name(line, &inode);
        if (path != NULL && strcmp(path + 1, name) == 0)
            inodes[n++] = inode;
    }
    fclose(f);
    if (n == 0)
        return -1;
    unsigned long *mine = NULL;
    long nmine = socket_inodes(pid, &mine);
    int found = 0;
    for (int i = 0; i < n && !found && nmine > 0; i++)
        found = bsearch(&inodes[i], mine, (size_t)nmine, sizeof *mine, by_inode) != NULL;
    free(mine);
    return found;
}

long target_unix_names_held(pid_t pid, const char *prefix, unix_name **names, size_t *others)
{
    *names = NULL;
    *others = 0;
    unsigned long *mine = NULL;
    long nmine = socket_inodes(pid, &mine);
    if (nmine < 0)
        return -1;
    FILE *f = fopen("/proc/net/unix", "re");
    if (f == NULL) {
        free(mine);
        return -1;
    }
    unix_name *v = NULL;
    long n = 0, cap = 0;
    size_t plen = strlen(prefix);
    char line[512];
    while (fgets(line, sizeof line, f)) {
        unsigned long inode = 0;
        char *path = listening_name(line, &inode);
        if (path == NULL)
            continue;
        size_t len = strlen(path);
        if (len - 1 <= plen + 1 || len - 1 >= sizeof(unix_name) ||
            strncmp(path + 1, prefix, plen) != 0 || path[1 + plen] != '-')
            continue;
        if (nmine == 0 || !bsearch(&inode, mine, (size_t)nmine, sizeof *mine, by_inode)) {
            ++*others;
            continue;
        }
        if (n == cap) {
            long bigger_cap = cap ? cap * 2 : 4;
            unix_name *bigger = realloc(v, (size_t)bigger_cap * sizeof *v);
            if (bigger == NULL) {
                free(v);
                free(mine);
                fclose(f);
                return -1;
            }
            v = bigger;
            cap = bigger_cap;
        }
        memcpy(v[n++], path + 1, len); /* the name and its NUL */
    }
    fclose(f);
    free(mine);
    *names = v;
    return n;
}

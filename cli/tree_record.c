/* tree_record.c — the OUT of a `start --subprocesses`, kept for its `stop` (tree_record.h).
 *
 * Why a record: `stop --subprocesses` used to take each part's path and the merged file's
 * name from the members' END replies, and every member (any descendant of the traced process
 * can answer on the agent's status name) could make root read, merge, chmod 0644 and unlink
 * files of its choice.  The names are vcattach's own: OUT from here, OUT.PID.cvf from it.
 */
#include "tree_record.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vcinject.h"

/* Our directory for records, opened and checked: an fd, or -1 (err says why; errno ENOENT
 * when there is none and create is 0). */
static int record_dir(int create, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (geteuid() == 0)
        snprintf(dir, sizeof dir, "/run/vcattach");
    else if (xdg && xdg[0] == '/')
        snprintf(dir, sizeof dir, "%s/vcattach", xdg);
    else {
        snprintf(err, errlen, "no runtime directory (/run for root, $XDG_RUNTIME_DIR)");
        errno = ENOENT;
        return -1;
    }
    if (create && mkdir(dir, 0700) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot open %s: %s", dir, strerror(e));
        errno = e;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
        snprintf(err, errlen, "%s is not ours alone (owner or mode): not used", dir);
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

/* "tree-PID-STARTTIME": a later process with the same pid has another name. */
static int record_name(pid_t root, char *buf, size_t cap)
{
    uint64_t start = target_start_time(root);
    if (start == 0)
        return -1;
    snprintf(buf, cap, "tree-%d-%" PRIu64, (int)root, start);
    return 0;
}

/* Removes the records of trees whose root process is gone (a `start` never stopped). */
static void sweep(int dfd)
{
    int d2 = dup(dfd);
    DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
    if (d == NULL) {
        if (d2 >= 0)
            close(d2);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int pid;
        uint64_t start;
        char tail;
        if (sscanf(e->d_name, "tree-%d-%" SCNu64 "%c", &pid, &start, &tail) == 2 && pid > 0 &&
            target_start_time((pid_t)pid) != start)
            unlinkat(dfd, e->d_name, 0);
    }
    closedir(d);
}

int tree_record_save(pid_t root, const char *out_abs, char *err, size_t errlen)
{
    char name[96], tmp[128];
    if (record_name(root, name, sizeof name) < 0) {
        snprintf(err, errlen, "pid %d is gone", (int)root);
        return -1;
    }
    int dfd = record_dir(1, err, errlen);
    if (dfd < 0)
        return -1;
    sweep(dfd);
    snprintf(tmp, sizeof tmp, ".%s.%d", name, (int)getpid());
    unlinkat(dfd, tmp, 0);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    size_t len = strlen(out_abs);
    int rc = -1;
    if (fd >= 0 && write(fd, out_abs, len) == (ssize_t)len && fsync(fd) == 0 &&
        renameat(dfd, tmp, dfd, name) == 0)
        rc = 0;
    else
        snprintf(err, errlen, "cannot record the tree's output: %s", strerror(errno));
    if (fd >= 0)
        close(fd);
    if (rc < 0)
        unlinkat(dfd, tmp, 0);
    close(dfd);
    return rc;
}

int tree_record_load(pid_t root, char *out_abs, size_t cap, char *err, size_t errlen)
{
    char name[96];
    if (record_name(root, name, sizeof name) < 0)
        return 0;
    int dfd = record_dir(0, err, errlen);
    if (dfd < 0)
        return errno == ENOENT ? 0 : -1;
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    close(dfd);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "cannot read the record of pid %d's tree: %s", (int)root,
                 strerror(errno));
        return -1;
    }
    struct stat st;
    ssize_t n = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        st.st_size > 0 && (size_t)st.st_size < cap)
        n = pread(fd, out_abs, cap - 1, 0);
    close(fd);
    if (n <= 0 || out_abs[0] != '/') {
        snprintf(err, errlen, "the record of pid %d's tree is not ours or not valid", (int)root);
        return -1;
    }
    out_abs[n] = '\0';
    return 1;
}

void tree_record_remove(pid_t root)
{
    char name[96], err[256];
    if (record_name(root, name, sizeof name) < 0)
        return;
    int dfd = record_dir(0, err, sizeof err);
    if (dfd < 0)
        return;
    unlinkat(dfd, name, 0);
    close(dfd);
}

/* atomic_file.c — the one atomic file writer (see atomic_file.h for the protocol and who uses
 * it).  Owns the OUT.tmp life cycle: create, write, fsync, no-replace rename, directory fsync,
 * keep-or-remove.
 */
#include "atomic_file.h"
#include "fd_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

void vc_atomic_init(vc_atomic_file *f)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

int vc_atomic_dirname(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    int n;
    if (slash == NULL)
        n = snprintf(dir, cap, ".");
    else if (slash == path)
        n = snprintf(dir, cap, "/");
    else
        n = snprintf(dir, cap, "%.*s", (int)(slash - path), path);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* A leftover OUT.tmp that force may remove: only a regular file or a symlink of this user.
 * (unlink never follows a symlink; someone else's file in a shared sticky directory is not
 * ours to delete even when we could, e.g. as root.) */
static int leftover_is_ours(const char *tmp)
{
    struct stat st;
    return lstat(tmp, &st) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) &&
           st.st_uid == geteuid();
}

int vc_atomic_open(vc_atomic_file *f, const char *path, mode_t mode, unsigned flags, char *err,
                   size_t errlen)
{
    vc_atomic_init(f);
    f->flags = flags;
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof f->path) {
        snprintf(err, errlen, "output path %s: give a file name shorter than %zu bytes",
                 n ? "too long" : "empty", sizeof f->path);
        errno = n ? ENAMETOOLONG : EINVAL;
        return -errno;
    }
    memcpy(f->path, path, n + 1);
    snprintf(f->tmp, sizeof f->tmp, "%s.tmp", path);
    for (int attempt = 0; attempt < 2; attempt++) {
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (f->fd >= 0)
            break;
        if (errno == EEXIST && (flags & VC_ATOMIC_FORCE) && attempt == 0 &&
            leftover_is_ours(f->tmp) && unlink(f->tmp) == 0)
            continue;
        int e = errno;
        if (e == EEXIST)
            snprintf(err, errlen, "%s exists (a trace kept there, or left by an interrupted run?): "
                                  "move it away or remove it, or pass --force",
                     f->tmp);
        else if (e == EACCES || e == EPERM || e == EROFS)
            snprintf(err, errlen, "cannot write in the directory of %s: %s; choose a directory "
                                  "you can write to with -o",
                     f->path, strerror(e));
        else
            snprintf(err, errlen, "cannot create %s: %s", f->tmp, strerror(e));
        errno = e;
        return -e;
    }
    f->tmp_ours = 1;
    /* Exactly `mode`, whatever the umask (the agent runs under the target's). */
    if (fchmod(f->fd, mode) < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot set the mode of %s: %s", f->tmp, strerror(e));
        vc_atomic_abort(f);
        errno = e;
        return -e;
    }
    return 0;
}

int vc_atomic_write(vc_atomic_file *f, const void *buf, size_t len, char *err, size_t errlen)
{
    if (f->fd < 0 || vc_write_all(f->fd, buf, len) < 0) {
        int e = f->fd < 0 ? EBADF : errno;
        snprintf(err, errlen, "cannot write %s: %s", f->tmp[0] ? f->tmp : "the output",
                 strerror(e));
        errno = e;
        return -e;
    }
    return 0;
}

/* rename(tmp, path) that never replaces an existing path.  renameat2 through syscall(): the
 * agent .so must load under an older glibc than the one it was built on.  Where the kernel
 * or filesystem lacks RENAME_NOREPLACE, link() refuses an existing name just as atomically;
 * where hard links are missing too (vfat), a check-then-rename is the best left. */
static int rename_noreplace(const char *tmp, const char *path)
{
    if (syscall(SYS_renameat2, AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
    if (link(tmp, path) == 0) {
        unlink(tmp);
        return 0;
    }
    if (errno == EEXIST)
        return -1;
    struct stat st;
    if (lstat(path, &st) == 0) {
        errno = EEXIST;
        return -1;
    }
    return rename(tmp, path);
}

/* The rename is on disk only once the directory is: fsync it.  A failure here is not the
 * trace's (OUT is complete and in place), so it is not reported. */
static void sync_dir(const char *path)
{
    char dir[PATH_MAX];
    if (vc_atomic_dirname(path, dir, sizeof dir) < 0)
        return;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}

int vc_atomic_commit(vc_atomic_file *f, char *err, size_t errlen)
{
    if (f->fd < 0) {
        snprintf(err, errlen, "internal error: commit of %s, which is not open", f->path);
        errno = EBADF;
        return -EBADF;
    }
    int fd = f->fd;
    f->fd = -1;
    int bad = fsync(fd) < 0;
    int e = bad ? errno : 0;
    if (close(fd) < 0 && !bad)
        bad = 1, e = errno;
    if (bad) {
        snprintf(err, errlen, "cannot write %s: %s", f->tmp, strerror(e));
        errno = e;
        return -e;
    }
    int rc = (f->flags & VC_ATOMIC_FORCE) ? rename(f->tmp, f->path)
                                          : rename_noreplace(f->tmp, f->path);
    if (rc < 0) {
        e = errno;
        /* Keep the data: OUT.tmp is whole and on disk, and the operator may want it. */
        f->tmp_ours = 0;
        f->kept = 1;
        if (e == EEXIST)
            snprintf(err, errlen, "%s already exists (it appeared after vcattach checked it) and "
                                  "was not replaced: the trace is kept in %s; rename it, or use "
                                  "--force to replace the file",
                     f->path, f->tmp);
        else
            snprintf(err, errlen, "cannot rename %s to %s: %s; the trace is kept in %s",
                     f->tmp, f->path, strerror(e), f->tmp);
        errno = e;
        return -e;
    }
    f->tmp_ours = 0;
    sync_dir(f->path);
    return 0;
}

void vc_atomic_abort(vc_atomic_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    if (f->tmp_ours)
        unlink(f->tmp);
    f->tmp_ours = 0;
}

/* glibc_floor.c — the libc functions the agent calls that glibc 2.17 (the agents' floor, see
 * scripts/glibc-floor) does not export under their own names, as the system calls they are.
 *
 * Why: the agent must load into a target running any glibc from 2.17 on, whatever glibc built
 * it.  Most symbols only need binding to their old version (the generated header of .symver
 * directives does that), but these have no old version to bind to:
 *   fstat, lstat, stat, fstatat (and their *64 names): exported since glibc 2.33; before,
 *     <sys/stat.h> made them inline calls of __fxstat & co., so an agent built on 2.33+
 *     needs fstat@GLIBC_2.33;
 *   getrandom: glibc 2.25.
 * The agent's link wraps each (-Wl,--wrap=NAME, agent/agent.mk): every call of NAME in the
 * agent and in its copy of common/ comes here instead.  On x86-64 the kernel's struct stat is
 * glibc's (glibc's own stat functions pass it through untouched), and syscall() sets errno
 * and returns -1 exactly as the libc functions do.  A build machine with a glibc older than
 * 2.33 makes no fstat calls (its inline wrappers call __fxstat, which every glibc has), and
 * these are then simply unused.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* Declared here: only the link's --wrap names them. */
int __wrap_fstat(int fd, struct stat *st);
int __wrap_fstat64(int fd, struct stat *st);
int __wrap_lstat(const char *path, struct stat *st);
int __wrap_lstat64(const char *path, struct stat *st);
int __wrap_stat(const char *path, struct stat *st);
int __wrap_stat64(const char *path, struct stat *st);
int __wrap_fstatat(int dirfd, const char *path, struct stat *st, int flags);
int __wrap_fstatat64(int dirfd, const char *path, struct stat *st, int flags);
ssize_t __wrap_getrandom(void *buf, size_t len, unsigned int flags);

int __wrap_fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
    return (int)syscall(SYS_newfstatat, dirfd, path, st, flags);
}

int __wrap_fstat(int fd, struct stat *st)
{
    return (int)syscall(SYS_fstat, fd, st);
}

int __wrap_lstat(const char *path, struct stat *st)
{
    return __wrap_fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

int __wrap_stat(const char *path, struct stat *st)
{
    return __wrap_fstatat(AT_FDCWD, path, st, 0);
}

/* The *64 names (what a file that includes Python.h calls: pyconfig.h sets
 * _FILE_OFFSET_BITS=64) are the same functions on x86-64. */
int __wrap_fstatat64(int dirfd, const char *path, struct stat *st, int flags)
{
    return __wrap_fstatat(dirfd, path, st, flags);
}

int __wrap_fstat64(int fd, struct stat *st)
{
    return __wrap_fstat(fd, st);
}

int __wrap_lstat64(const char *path, struct stat *st)
{
    return __wrap_lstat(path, st);
}

int __wrap_stat64(const char *path, struct stat *st)
{
    return __wrap_stat(path, st);
}

/* getrandom(2) (Linux 3.17): on an older kernel ENOSYS, as from glibc's own. */
ssize_t __wrap_getrandom(void *buf, size_t len, unsigned int flags)
{
    return (ssize_t)syscall(SYS_getrandom, buf, len, flags);
}

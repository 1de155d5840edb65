/* agent_locate.c — which libvcagent-pyXY.so to load, and whether it is safe to (agent_locate.h).
 *
 * The agent runs with the target's privileges inside the target, so a file that another user
 * could have replaced is refused rather than loaded: that would hand them the target process.
 */
#include "agent_locate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int self_dir(char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    return snprintf(out, cap, "%s", exe[0] ? exe : "/") < (int)cap ? 0 : -1;
}

int agent_locate(int major, int minor, char *path, size_t cap, char *err, size_t errlen)
{
    char dirs[2][PATH_MAX];
    int ndirs = 0;
    const char *override = getenv("VCATTACH_AGENT_DIR");
    if (override && *override) {
        snprintf(dirs[ndirs++], PATH_MAX, "%s", override);
    } else {
        char here[PATH_MAX];
        if (self_dir(here, sizeof here) < 0) {
            snprintf(err, errlen, "cannot find vcattach's own directory (/proc/self/exe): "
                                  "set VCATTACH_AGENT_DIR to the directory of the agent builds");
            return -1;
        }
        snprintf(dirs[ndirs++], PATH_MAX, "%s", here);
        if (snprintf(dirs[ndirs], PATH_MAX, "%s/../lib/vcattach", here) < PATH_MAX)
            ndirs++;
    }
    char name[64];
    snprintf(name, sizeof name, "libvcagent-py%d%02d.so", major, minor);
    for (int i = 0; i < ndirs; i++) {
        char candidate[2 * PATH_MAX + 64], resolved[PATH_MAX];
        int len = snprintf(candidate, sizeof candidate, "%s/%s", dirs[i], name);
        if (len > 0 && (size_t)len < sizeof candidate && access(candidate, F_OK) == 0 && realpath(candidate, resolved)) {
            if (strlen(resolved) >= cap) {
                snprintf(err, errlen, "agent path too long: %s", resolved);
                return -1;
            }
            snprintf(path, cap, "%s", resolved);
            return 0;
        }
    }
    snprintf(err, errlen,
             "no agent for Python %d.%d: %s not found in %s%s%s; build it with `make` on a "
             "machine where python%d.%d and its headers (python%d.%d-dev) are installed, "
             "then install it there",
             major, minor, name, dirs[0], ndirs > 1 ? " or " : "", ndirs > 1 ? dirs[1] : "",
             major, minor, major, minor);
    return -1;
}

/* Owned by root or the operator, not writable by group/others. */
static int check_not_replaceable(const char *what, const char *p, char *err, size_t errlen)
{
    struct stat st;
    if (stat(p, &st) < 0) {
        snprintf(err, errlen, "cannot check %s %s: %s", what, p, strerror(errno));
        return -1;
    }
    if (st.st_uid != 0 && st.st_uid != geteuid()) {
        snprintf(err, errlen,
                 "refusing %s %s: owned by uid %u, not by root or you (it would run inside the "
                 "target); reinstall it as root or as yourself",
                 what, p, (unsigned)st.st_uid);
        return -1;
    }
    /* A sticky world-writable directory (/tmp) still lets others create files, not replace
     * ours; anything else writable by group/others is refused. */
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX))) {
        snprintf(err, errlen,
                 "refusing %s %s: writable by group or others (mode %03o; it would run inside "
                 "the target); fix with chmod go-w %s",
                 what, p, (unsigned)(st.st_mode & 0777), p);
        return -1;
    }
    return 0;
}

int agent_check_safe(const char *path, uid_t target_uid, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "agent %s is not a regular file", path);
        return -1;
    }
    if (check_not_replaceable("agent", path, err, errlen) < 0)
        return -1;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        if (check_not_replaceable("agent directory", dir, err, errlen) < 0)
            return -1;
    }
    if (target_uid == 0)
        return 0;
    /* The target opens the agent with its own uid: the file must be readable by it and every
     * directory above it searchable (group membership is not resolved: owner or others). */
    if (!((st.st_uid == target_uid && (st.st_mode & S_IRUSR)) || (st.st_mode & S_IROTH))) {
        snprintf(err, errlen,
                 "agent %s is not readable by the target's user (uid %u): chmod a+r it, or "
                 "install vcattach with `make install`",
                 path, (unsigned)target_uid);
        return -1;
    }
    snprintf(dir, sizeof dir, "%s", path);
    while ((slash = strrchr(dir, '/')) != NULL) {
        if (slash == dir)
            slash[1] = '\0';
        else
            *slash = '\0';
        struct stat ds;
        if (stat(dir, &ds) == 0 &&
            !((ds.st_uid == target_uid && (ds.st_mode & S_IXUSR)) || (ds.st_mode & S_IXOTH))) {
            snprintf(err, errlen,
                     "agent %s is not reachable by the target's user (uid %u): directory %s is "
                     "not searchable by it; install vcattach with `make install` (PREFIX/lib/"
                     "vcattach) or point VCATTACH_AGENT_DIR at a world-readable copy",
                     path, (unsigned)target_uid, dir);
            return -1;
        }
        if (slash == dir)
            break;
    }
    return 0;
}

/* Reads a whole (agent-sized) file.  Returns a malloc'd buffer and *len, or NULL. */
static unsigned char *read_all(int fd, size_t *len)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        st.st_size > (64 << 20))
        return NULL;
    unsigned char *buf = malloc((size_t)st.st_size);
    size_t done = 0;
    while (buf && done < (size_t)st.st_size) {
        ssize_t n = pread(fd, buf + done, (size_t)st.st_size - done, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free(buf);
            return NULL;
        }
        done += (size_t)n;
    }
    *len = done;
    return buf;
}

static int write_all(int fd, const unsigned char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Ours (root or the operator) and not writable by group/others. */
static int owned_and_closed(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && (st.st_uid == 0 || st.st_uid == geteuid()) &&
           !(st.st_mode & (S_IWGRP | S_IWOTH));
}

/* 1 if the file at dfd/name is ours and holds exactly data, else 0. */
static int same_copy(int dfd, const char *name, const unsigned char *data, size_t len)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t have_len = 0;
    unsigned char *have = owned_and_closed(fd) ? read_all(fd, &have_len) : NULL;
    int same = have && have_len == len && memcmp(have, data, len) == 0;
    free(have);
    close(fd);
    return same;
}

int agent_copy_into_target(pid_t pid, const char *agent, char *out, size_t cap, char *err,
                           size_t errlen)
{
    const char *name = strrchr(agent, '/');
    name = name ? name + 1 : agent;
    int src = open(agent, O_RDONLY | O_CLOEXEC);
    size_t len = 0;
    unsigned char *data = src >= 0 ? read_all(src, &len) : NULL;
    if (src >= 0)
        close(src);
    if (!data) {
        snprintf(err, errlen, "cannot read the agent %s: %s", agent, strerror(errno));
        return -1;
    }
    uint64_t hash = 1469598103934665603ull; /* FNV-1a: names the content, not a secret */
    for (size_t i = 0; i < len; i++)
        hash = (hash ^ data[i]) * 1099511628211ull;
    char dirname[64], tmpname[128], root_tmp[64];
    snprintf(dirname, sizeof dirname, ".vcattach-%016llx", (unsigned long long)hash);
    snprintf(root_tmp, sizeof root_tmp, "/proc/%d/root/tmp", (int)pid);

    int rc = -1, dfd = -1;
    int tmpfd = open(root_tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tmpfd < 0) {
        snprintf(err, errlen, "cannot open the target's /tmp (%s): %s", root_tmp,
                 strerror(errno));
        goto out;
    }
    int created = mkdirat(tmpfd, dirname, 0755) == 0;
    dfd = openat(tmpfd, dirname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 || (created && fchmod(dfd, 0755) < 0) || !owned_and_closed(dfd)) {
        snprintf(err, errlen,
                 "refusing /tmp/%s in pid %d's mount namespace: %s; remove it, or run vcattach "
                 "inside the container",
                 dirname, (int)pid, dfd < 0 ? strerror(errno) : "not a directory of ours");
        goto out;
    }
    if (!same_copy(dfd, name, data, len)) {
        snprintf(tmpname, sizeof tmpname, "%s.%d.tmp", name, (int)getpid());
        unlinkat(dfd, tmpname, 0);
        int fd = openat(dfd, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        int ok = fd >= 0 && fchmod(fd, 0644) == 0 && write_all(fd, data, len) == 0 &&
                 fsync(fd) == 0;
        int e = errno;
        if (fd >= 0)
            close(fd);
        if (!ok || renameat(dfd, tmpname, dfd, name) < 0) {
            e = ok ? errno : e;
            unlinkat(dfd, tmpname, 0);
            snprintf(err, errlen, "cannot copy the agent into pid %d's /tmp: %s (a read-only or "
                                  "full /tmp?); run vcattach inside the container",
                     (int)pid, strerror(e));
            goto out;
        }
    }
    if ((size_t)snprintf(out, cap, "/tmp/%s/%s", dirname, name) >= cap) {
        snprintf(err, errlen, "agent path too long");
        goto out;
    }
    rc = 0;
out:
    if (dfd >= 0)
        close(dfd);
    if (tmpfd >= 0)
        close(tmpfd);
    free(data);
    return rc;
}

/* agent_locate.c — which libvcagent-pyXY[-musl].so to load, and whether it is safe to (agent_locate.h).
 *
 * The agent runs with the target's privileges inside the target, so a file that another user
 * could have replaced is refused rather than loaded: that would hand them the target process.
 */
#include "agent_locate.h"
#include "fd_io.h"
#include "vcinject.h"
#include "say.h"

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

/* dirs[i]/name, resolved, if it exists: 0, 1 when none does, or -1 with err. */
static int find_in(char dirs[][PATH_MAX], int ndirs, const char *name, char *path, size_t cap,
                   char *err, size_t errlen)
{
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
    return 1;
}

int agent_locate(int major, int minor, int debug, int musl, char *path, size_t cap, char *err,
                 size_t errlen)
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
    int rc = 1;
    if (debug && !musl) { /* the debug build's own agent, when there is one */
        snprintf(name, sizeof name, "libvcagent-py%d%02dd.so", major, minor);
        rc = find_in(dirs, ndirs, name, path, cap, err, errlen);
    }
    /* a musl target only ever gets a musl agent: never a glibc one, whose libc would be
     * linked into the process beside musl */
    snprintf(name, sizeof name, "libvcagent-py%d%02d%s.so", major, minor, musl ? "-musl" : "");
    if (rc == 1)
        rc = find_in(dirs, ndirs, name, path, cap, err, errlen);
    if (rc <= 0)
        return rc;
    if (musl)
        snprintf(err, errlen,
                 "no musl agent built: %s not found in %s%s%s; build it with `make` where "
                 "musl-gcc (musl-tools) and a musl CPython %d.%d's headers are (scripts/test-root "
                 "musl makes one), or trace the service in a glibc-based image (e.g. "
                 "python:%d.%d-slim rather than -alpine)",
                 name, dirs[0], ndirs > 1 ? " or " : "", ndirs > 1 ? dirs[1] : "", major, minor,
                 major, minor);
    else
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
    if (buf && vc_pread_all(fd, buf, (size_t)st.st_size, 0) != (ssize_t)st.st_size) {
        free(buf); /* shrank meanwhile: not the file we measured */
        return NULL;
    }
    *len = (size_t)st.st_size;
    return buf;
}

#define COPY_DIR_PREFIX "/tmp/.vcattach-agent-"
#define AS_TARGET_TIMEOUT_MS 10000

struct copy_job {
    const char *name;          /* libvcagent-pyXY.so */
    const unsigned char *data; /* the agent's bytes, read by us before the fork */
    size_t len;
    const char *remove;        /* for the removal: the copy's path */
};

/* In the child (the target's user, in its root): a fresh directory with an unpredictable
 * name, the agent in it, created O_EXCL|O_NOFOLLOW through the directory's fd. */
static int copy_in_child(void *arg, char *out, size_t cap)
{
    const struct copy_job *j = arg;
    char dir[64];
    snprintf(dir, sizeof dir, "%sXXXXXX", COPY_DIR_PREFIX);
    if (!mkdtemp(dir)) {
        snprintf(out, cap, "cannot create a directory in the target's /tmp: %s (a read-only "
                           "or full /tmp?); run vcattach inside the container", strerror(errno));
        return 1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    /* Still the directory just made: ours, and not a mount point put over it meanwhile (its
     * device is /tmp's).  Not for our safety (we are the target's user here), for a clear
     * error instead of an agent written somewhere else. */
    struct stat dst, tst;
    if (dfd >= 0 && (fstat(dfd, &dst) < 0 || stat("/tmp", &tst) < 0 ||
                     dst.st_uid != getuid() || dst.st_dev != tst.st_dev)) {
        snprintf(out, cap, "the agent's copy directory %s in the target's /tmp was replaced "
                           "(a mount point or another owner): refused", dir);
        close(dfd);
        return 1;
    }
    int fd = dfd < 0 ? -1 : openat(dfd, j->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
                                                     O_CLOEXEC, 0644);
    int ok = fd >= 0 && fchmod(dfd, 0755) == 0 && fchmod(fd, 0644) == 0 &&
             vc_write_all(fd, j->data, j->len) == 0 && fsync(fd) == 0;
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    if (!ok) {
        snprintf(out, cap, "cannot copy the agent into the target's /tmp: %s; run vcattach "
                           "inside the container", strerror(e));
        return 1;
    }
    snprintf(out, cap, "%s/%s", dir, j->name);
    return 0;
}

/* In the child: the copy and its directory removed (the target has it mapped by now). */
static int remove_in_child(void *arg, char *out, size_t cap)
{
    const struct copy_job *j = arg;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", j->remove);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return 1;
    *slash = '\0';
    if (unlink(j->remove) < 0 || rmdir(dir) < 0) {
        snprintf(out, cap, "cannot remove %s: %s", j->remove, strerror(errno));
        return 1;
    }
    return 0;
}

/* target_find_mapped's test: the mapped file has exactly our agent's content. */
struct same_content {
    const unsigned char *data;
    size_t len;
};

static int has_same_content(void *ctx, int fd)
{
    const struct same_content *c = ctx;
    size_t have_len = 0;
    unsigned char *have = read_all(fd, &have_len);
    int same = have && have_len == c->len && memcmp(have, c->data, c->len) == 0;
    free(have);
    return same;
}

/* A copy made by an earlier attach and still loaded in the target, with our content: its
 * path (as it was dlopen'ed: dlopen of the same name returns the loaded object even though
 * the file is gone), so that a re-attach reuses the agent already there instead of loading a
 * second one.  1 found, 0 not. */
static int loaded_copy(pid_t pid, const char *name, const unsigned char *data, size_t len,
                       char *out, size_t cap)
{
    struct same_content c = {.data = data, .len = len};
    return target_find_mapped(pid, COPY_DIR_PREFIX, name, has_same_content, &c, out, cap);
}

int agent_copy_into_target(pid_t pid, uid_t uid, gid_t gid, const char *agent, char *out,
                           size_t cap, int *made, char *err, size_t errlen)
{
    *made = 0;
    const char *name = strrchr(agent, '/');
    name = name ? name + 1 : agent;
    int src = open(agent, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    size_t len = 0;
    unsigned char *data = src >= 0 ? read_all(src, &len) : NULL;
    if (src >= 0)
        close(src);
    if (!data) {
        snprintf(err, errlen, "cannot read the agent %s: %s", agent, strerror(errno));
        return -1;
    }
    int rc = 0;
    if (!loaded_copy(pid, name, data, len, out, cap)) {
        struct copy_job job = {.name = name, .data = data, .len = len};
        char made_path[PATH_MAX];
        rc = as_target_run(pid, uid, gid, copy_in_child, &job, made_path, sizeof made_path,
                           AS_TARGET_TIMEOUT_MS, err, errlen);
        /* The child ran as the target's user: what it says is only trusted in its shape. */
        if (rc == 0 && (strncmp(made_path, COPY_DIR_PREFIX, strlen(COPY_DIR_PREFIX)) != 0 ||
                        strstr(made_path, "..") || strchr(made_path, '\n') ||
                        strlen(made_path) >= cap)) {
            snprintf(err, errlen, "unexpected path of the agent's copy in pid %d", (int)pid);
            rc = -1;
        }
        if (rc == 0) {
            snprintf(out, cap, "%s", made_path);
            *made = 1;
        }
    }
    free(data);
    return rc;
}

void agent_copy_remove(pid_t pid, uid_t uid, gid_t gid, const char *path)
{
    struct copy_job job = {.remove = path};
    char out[16], err[256];
    if (as_target_run(pid, uid, gid, remove_in_child, &job, out, sizeof out,
                      AS_TARGET_TIMEOUT_MS, err, sizeof err) < 0)
        say("vcattach: warning: %s\n", err);
}

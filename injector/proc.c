/* proc.c — the project's one /proc parser (see proc.h): internal to libvcinject.a; the CLI
 * reaches what it needs of it through vcinject.h (target_facts.c, proc_tree.c).
 *
 * Everything is parsed from text the kernel writes, with bounded buffers, and every failure is a
 * return code: the target may exit at any moment, so ENOENT/ESRCH are ordinary outcomes. */
#include "proc.h"
#include "fd_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static int cmp_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

int proc_list_tasks(pid_t pid, pid_t **tids, size_t *n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return errno == ENOENT ? -ESRCH : -errno;
    size_t cap = 16, cnt = 0;
    pid_t *v = malloc(cap * sizeof *v);
    if (!v) {
        closedir(d);
        return -ENOMEM;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long t = strtol(e->d_name, &end, 10);
        if (*end || t <= 0)
            continue;
        if (cnt == cap) {
            pid_t *nv = realloc(v, 2 * cap * sizeof *v);
            if (!nv) {
                free(v);
                closedir(d);
                return -ENOMEM;
            }
            v = nv;
            cap *= 2;
        }
        v[cnt++] = (pid_t)t;
    }
    closedir(d);
    if (cnt == 0) { /* a zombie process has an empty task list */
        free(v);
        return -ESRCH;
    }
    qsort(v, cnt, sizeof *v, cmp_pid);
    *tids = v;
    *n = cnt;
    return 0;
}

int proc_read_maps(pid_t pid, struct proc_maps *maps)
{
    char path[64];
    maps->v = NULL;
    maps->n = 0;
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? -ESRCH : -errno;
    int rc = proc_maps_parse(f, maps);
    fclose(f);
    return rc;
}

int proc_maps_parse(FILE *f, struct proc_maps *maps)
{
    maps->v = NULL;
    maps->n = 0;
    size_t cap = 0;
    char *line = NULL;
    size_t linecap = 0;
    int rc = 0;
    while (getline(&line, &linecap, f) > 0) {
        struct proc_map m;
        unsigned long long s, e, off, ino;
        int pathpos = 0;
        memset(&m, 0, sizeof m);
        if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu %n", &s, &e, m.perms, &off, &m.dev_major,
                   &m.dev_minor, &ino, &pathpos) < 7)
            continue;
        m.start = s;
        m.end = e;
        m.offset = off;
        m.inode = ino;
        char *p = line + pathpos;
        size_t len = strcspn(p, "\n");
        p[len] = 0;
        m.path = strdup(p);
        if (!m.path) {
            rc = -ENOMEM;
            break;
        }
        if (maps->n == cap) {
            size_t ncap = cap ? 2 * cap : 128;
            struct proc_map *nv = realloc(maps->v, ncap * sizeof *nv);
            if (!nv) {
                free(m.path);
                rc = -ENOMEM;
                break;
            }
            maps->v = nv;
            cap = ncap;
        }
        maps->v[maps->n++] = m;
    }
    free(line);
    if (rc == 0 && maps->n == 0)
        rc = -ESRCH; /* exited, or a kernel thread: nothing mapped */
    if (rc)
        proc_free_maps(maps);
    return rc;
}

void proc_free_maps(struct proc_maps *maps)
{
    for (size_t i = 0; i < maps->n; i++)
        free(maps->v[i].path);
    free(maps->v);
    maps->v = NULL;
    maps->n = 0;
}

const struct proc_map *proc_map_at(const struct proc_maps *maps, uint64_t addr)
{
    for (size_t i = 0; i < maps->n; i++)
        if (addr >= maps->v[i].start && addr < maps->v[i].end)
            return &maps->v[i];
    return NULL;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

const struct proc_map *proc_find_module(const struct proc_maps *maps,
                                        int (*match)(const char *basename))
{
    for (size_t i = 0; i < maps->n; i++) {
        const struct proc_map *m = &maps->v[i];
        if (m->offset == 0 && m->path[0] == '/' && match(base_name(m->path)))
            return m;
    }
    return NULL;
}

int proc_is_glibc_name(const char *b)
{
    return strcmp(b, "libc.so.6") == 0 || (strncmp(b, "libc-2.", 7) == 0 && strstr(b, ".so"));
}

int proc_is_musl_name(const char *b)
{
    return strncmp(b, "ld-musl-", 8) == 0 || strncmp(b, "libc.musl-", 10) == 0;
}

int proc_is_libc_name(const char *b)
{
    return proc_is_glibc_name(b) || proc_is_musl_name(b);
}

const struct proc_map *proc_find_inode(const struct proc_maps *maps, dev_t dev, uint64_t inode)
{
    /* Device numbers in maps can differ from stat's on overlay filesystems; the inode alone
     * is the fallback when no mapping matches both. */
    const struct proc_map *by_inode = NULL;
    for (size_t i = 0; i < maps->n; i++) {
        const struct proc_map *m = &maps->v[i];
        if (m->offset != 0 || m->inode != inode || m->path[0] != '/')
            continue;
        if (m->dev_major == major(dev) && m->dev_minor == minor(dev))
            return m;
        if (!by_inode)
            by_inode = m;
    }
    return by_inode;
}

const struct proc_map *proc_find_path(const struct proc_maps *maps, const char *path)
{
    for (size_t i = 0; i < maps->n; i++)
        if (maps->v[i].offset == 0 && strcmp(maps->v[i].path, path) == 0)
            return &maps->v[i];
    return NULL;
}

const char *proc_map_target_path(pid_t pid, const char *shown)
{
    char link[64], root[PATH_MAX];
    snprintf(link, sizeof link, "/proc/%d/root", (int)pid);
    ssize_t n = readlink(link, root, sizeof root - 1);
    if (n <= 1) /* "/" (or unreadable): the maps already name the target's paths */
        return shown;
    root[n] = '\0';
    return !strncmp(shown, root, (size_t)n) && shown[n] == '/' ? shown + n : shown;
}

const struct proc_map *proc_find_loaded(pid_t pid, const struct proc_maps *maps,
                                        const char *path)
{
    size_t n = strlen(path);
    for (size_t i = 0; i < maps->n; i++) {
        if (maps->v[i].offset != 0)
            continue;
        const char *p = proc_map_target_path(pid, maps->v[i].path);
        if (!strncmp(p, path, n) && (p[n] == '\0' || !strcmp(p + n, " (deleted)")))
            return &maps->v[i];
    }
    return NULL;
}

int proc_read_text(const char *path, char *buf, size_t cap)
{
    if (cap == 0)
        return -EINVAL;
    /* O_NOFOLLOW|O_NONBLOCK: a path under /proc/PID/ names the target's files; never follow a
     * last symlink there, never block on a FIFO put in the way. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    ssize_t n = vc_read_all(fd, buf, cap - 1);
    int e = n < 0 ? errno : 0;
    size_t len = n < 0 ? 0 : (size_t)n;
    close(fd);
    buf[len] = 0;
    return e && len == 0 ? -e : (int)len;
}

char proc_task_state(pid_t pid, pid_t tid)
{
    char path[96], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    if (proc_read_text(path, buf, sizeof buf) <= 0)
        return 0;
    /* comm may contain spaces and parentheses: the state follows the LAST ')' */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2])
        return 0;
    return p[2];
}

int proc_stat_read(pid_t pid, struct proc_stat *st)
{
    char path[64], buf[1024];
    memset(st, 0, sizeof *st);
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (proc_read_text(path, buf, sizeof buf) <= 0)
        return -ESRCH;
    return proc_stat_parse(buf, st);
}

int proc_stat_parse(const char *buf, struct proc_stat *st)
{
    memset(st, 0, sizeof *st);
    /* comm may contain spaces and parentheses: the fields follow the LAST ')' */
    const char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2])
        return -ESRCH;
    st->state = p[2];
    /* field 3 is the state; count the spaces to each later field */
    int field = 3;
    for (const char *q = p + 3; *q; q++) {
        if (*q != ' ')
            continue;
        field++;
        if (field == 4)
            st->ppid = (pid_t)strtol(q + 1, NULL, 10);
        else if (field == 9)
            st->flags = strtoul(q + 1, NULL, 10);
        else if (field == 22) {
            st->start_time = strtoull(q + 1, NULL, 10);
            break;
        }
    }
    return 0;
}

/* PF_KTHREAD in the flags field of /proc/PID/stat: a kernel thread has no user memory to
 * inject into.  Told apart up front, before any question about its (the host's) filesystem,
 * which a check run in a chroot or container cannot even see. */
#define VC_PF_KTHREAD 0x00200000UL
int proc_kernel_thread(pid_t pid)
{
    struct proc_stat st;
    return proc_stat_read(pid, &st) == 0 && (st.flags & VC_PF_KTHREAD) != 0;
}

char proc_state(pid_t pid)
{
    struct proc_stat st;
    return proc_stat_read(pid, &st) == 0 ? st.state : 0;
}

int proc_alive(pid_t pid)
{
    char s = proc_state(pid);
    return s != 0 && s != 'Z' && s != 'X';
}

/* The value of "Field:" in the text of a status file (leading blanks skipped) into out.
 * 0, or -1 if the field is absent. */
static int status_value(const char *buf, const char *field, char *out, size_t cap)
{
    size_t flen = strlen(field);
    for (const char *line = buf; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len > flen && !strncmp(line, field, flen) && line[flen] == ':') {
            const char *v = line + flen + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            snprintf(out, cap, "%.*s", (int)(len - (size_t)(v - line)), v);
            return 0;
        }
        if (!nl)
            break;
        line = nl + 1;
    }
    return -1;
}

/* Four ids of a Uid:/Gid: line into v.  0, or -1. */
static int status_ids(const char *buf, const char *field, unsigned v[4])
{
    char line[128];
    if (status_value(buf, field, line, sizeof line) < 0)
        return -1;
    return sscanf(line, "%u %u %u %u", &v[0], &v[1], &v[2], &v[3]) == 4 ? 0 : -1;
}

/* A numeric field, or dflt when absent. */
static long status_long(const char *buf, const char *field, long dflt)
{
    char v[128];
    if (status_value(buf, field, v, sizeof v) < 0)
        return dflt;
    char *end;
    long n = strtol(v, &end, 10);
    return end == v ? dflt : n;
}

int proc_status_read(pid_t pid, pid_t tid, struct proc_status *st)
{
    char path[96], buf[8192];
    memset(st, 0, sizeof *st);
    if (pid <= 0)
        snprintf(path, sizeof path, "/proc/self/status");
    else if (tid > 0)
        snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
    else
        snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    int r = proc_read_text(path, buf, sizeof buf);
    if (r <= 0)
        return r == -ENOENT || r == 0 ? -ESRCH : r;
    return proc_status_parse(buf, pid, tid, st);
}

int proc_status_parse(const char *buf, pid_t pid, pid_t tid, struct proc_status *st)
{
    char v[256];
    memset(st, 0, sizeof *st);
    unsigned u[4], g[4];
    if (status_ids(buf, "Uid", u) < 0 || status_ids(buf, "Gid", g) < 0)
        return -EINVAL;
    for (int i = 0; i < 4; i++) {
        st->uid[i] = (uid_t)u[i];
        st->gid[i] = (gid_t)g[i];
    }
    status_value(buf, "Name", st->name, sizeof st->name);
    if (status_value(buf, "State", v, sizeof v) == 0)
        st->state = v[0];
    st->ppid = (pid_t)status_long(buf, "PPid", 0);
    st->tracer = (pid_t)status_long(buf, "TracerPid", 0);
    st->seccomp = (int)status_long(buf, "Seccomp", 0);
    st->own_pid = tid > 0 ? tid : pid > 0 ? pid : getpid();
    if (status_value(buf, "NSpid", v, sizeof v) == 0) { /* the last number: innermost view */
        size_t n = strlen(v);
        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            n--;
        size_t e = n;
        while (n > 0 && v[n - 1] >= '0' && v[n - 1] <= '9')
            n--;
        if (n < e && atoi(v + n) > 0)
            st->own_pid = (pid_t)atoi(v + n);
    }
    if (status_value(buf, "CapEff", v, sizeof v) == 0)
        st->cap_eff = strtoull(v, NULL, 16);
    st->shadow_stack = status_value(buf, "x86_Thread_features", v, sizeof v) == 0 &&
                       strstr(v, "shstk") != NULL;
    return 0;
}

int proc_same_file(pid_t pid, const char *path)
{
    char theirs[PATH_MAX + 64];
    struct stat a, b;
    if (proc_root_path(pid, path, theirs, sizeof theirs) < 0)
        return 0;
    return stat(path, &a) == 0 && stat(theirs, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

int proc_tracer_pid(pid_t pid, pid_t tid)
{
    struct proc_status st;
    return proc_status_read(pid, tid, &st) == 0 ? (int)st.tracer : -1;
}

long proc_task_syscall(pid_t pid, pid_t tid)
{
    char path[96], buf[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
    if (proc_read_text(path, buf, sizeof buf) <= 0)
        return -2;
    if (strncmp(buf, "running", 7) == 0)
        return -1;
    char *end;
    long nr = strtol(buf, &end, 10);
    return end == buf ? -2 : nr;
}

/* The file really mapped there: a regular file with the inode /proc/PID/maps names. */
static int is_mapped_file(int fd, const struct proc_map *m)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_ino == m->inode;
}

/* path resolved inside the target's root (absolute symlinks stay in it), no symlink at the
 * end, no magic link on the way; O_NONBLOCK: a FIFO or device put there cannot block us.
 * The kernel has openat2 since 5.6; without it, no fallback by path (the map_files entry is
 * the way then). */
static int open_in_root_how(pid_t pid, const char *path, uint64_t flags)
{
#ifdef SYS_openat2
    char root[64];
    snprintf(root, sizeof root, "/proc/%d/root", (int)pid);
    int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0)
        return -errno;
    struct open_how how = {
        .flags = flags | O_NOFOLLOW | O_CLOEXEC,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    int fd = (int)syscall(SYS_openat2, rfd, path, &how, sizeof how);
    int e = errno;
    close(rfd);
    return fd >= 0 ? fd : -e;
#else
    (void)pid, (void)path, (void)flags;
    return -ENOSYS;
#endif
}

static int open_in_root(pid_t pid, const char *path)
{
    return open_in_root_how(pid, path, O_RDONLY | O_NONBLOCK);
}

/* stat() of path as the target sees it, resolved inside its root (an absolute symlink there
 * cannot point us at a file of the host), without opening the file itself (O_PATH).  Where
 * openat2 is missing (kernels before 5.6, valgrind), a stat through /proc/PID/root: only a
 * stat, nothing opened, and the method's dlopen resolves the name in the target anyway. */
static int stat_in_root(pid_t pid, const char *path, struct stat *st)
{
    int fd = open_in_root_how(pid, path, O_PATH);
    if (fd == -ENOSYS) {
        char theirs[PATH_MAX + 64];
        if (proc_root_path(pid, path, theirs, sizeof theirs) < 0) {
            errno = ENAMETOOLONG;
            return -1;
        }
        return stat(theirs, st);
    }
    if (fd < 0) {
        errno = -fd;
        return -1;
    }
    int r = fstat(fd, st);
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

/* Whether the target has `path` mapped although the name is gone ("PATH (deleted)"): an agent
 * copy removed after an earlier attach, which dlopen still finds by that name. */
static int mapped_deleted(pid_t pid, const char *path)
{
    struct proc_maps maps;
    if (proc_read_maps(pid, &maps) < 0)
        return 0;
    int found = proc_find_loaded(pid, &maps, path) != NULL;
    proc_free_maps(&maps);
    return found;
}

int proc_loaded_and_gone(pid_t pid, const char *path)
{
    struct stat sb;
    return stat_in_root(pid, path, &sb) < 0 && errno == ENOENT && mapped_deleted(pid, path);
}

int proc_open_mapped(pid_t pid, const struct proc_map *m)
{
    /* 1. /proc/PID/map_files/START-END: the mapped inode itself, even deleted or in another
     *    mount namespace (root only).  It is a magic link: stat it first, so that nothing but
     *    a regular file is ever opened (mappings of devices exist). */
    char mf[96];
    struct stat st;
    snprintf(mf, sizeof mf, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, m->start, m->end);
    if (stat(mf, &st) == 0 && S_ISREG(st.st_mode)) {
        int fd = open(mf, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0 && is_mapped_file(fd, m))
            return fd;
        if (fd >= 0)
            close(fd);
    }
    /* 2. The path, as the target sees it. */
    int fd = open_in_root(pid, m->path);
    if (fd < 0)
        return fd;
    /* Another inode (the file was replaced since) is still the best there is, as long as it
     * is a regular file: the caller only reads symbols from it. */
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        return fd;
    close(fd);
    return -ENOEXEC;
}

int proc_root_path(pid_t pid, const char *path, char *buf, size_t len)
{
    int n = snprintf(buf, len, "/proc/%d/root%s%s", (int)pid, path[0] == '/' ? "" : "/", path);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int proc_other_root(pid_t pid)
{
    char path[64];
    struct stat a, b;
    snprintf(path, sizeof path, "/proc/%d/ns/mnt", (int)pid);
    if (stat(path, &a) == 0 && stat("/proc/self/ns/mnt", &b) == 0 &&
        (a.st_ino != b.st_ino || a.st_dev != b.st_dev))
        return 1;
    snprintf(path, sizeof path, "/proc/%d/root", (int)pid);
    if (stat(path, &a) < 0 || stat("/proc/self/root", &b) < 0)
        return 0;
    return a.st_dev != b.st_dev || a.st_ino != b.st_ino;
}

int proc_check_agent(pid_t pid, const char *agent_path, uid_t uid, gid_t gid, char *err,
                     size_t errlen)
{
    if (!agent_path || agent_path[0] != '/') {
        snprintf(err, errlen, "agent path must be absolute (got '%s')",
                 agent_path ? agent_path : "(null)");
        return -EINVAL;
    }
    struct stat sb;
    if (stat_in_root(pid, agent_path, &sb) < 0) {
        int e = errno;
        if (e == ENOENT && mapped_deleted(pid, agent_path))
            return 0; /* loaded already: dlopen returns that one */
        if (e == EACCES || e == EPERM) {
            snprintf(err, errlen, "permission denied to process %d's files (/proc/%d/root): run "
                     "as the target's user or with CAP_SYS_PTRACE", (int)pid, (int)pid);
            return -EPERM;
        }
        snprintf(err, errlen, "agent %s not found in the target's filesystem (%s): build it "
                 "(make) or copy it where pid %d can see it", agent_path, strerror(e), (int)pid);
        return -ENOENT;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "agent %s is not a regular file", agent_path);
        return -EINVAL;
    }
    int readable = uid == 0 || (sb.st_mode & S_IROTH) ||
                   (sb.st_uid == uid && (sb.st_mode & S_IRUSR)) ||
                   (sb.st_gid == gid && (sb.st_mode & S_IRGRP));
    if (!readable) {
        snprintf(err, errlen, "agent %s is not readable by the target's uid %d: chmod a+r it or "
                 "install it in a readable place", agent_path, (int)uid);
        return -EACCES;
    }
    return 0;
}

int proc_read_maps_or_explain(pid_t pid, struct proc_maps *out, char *err, size_t errlen)
{
    int r = proc_read_maps(pid, out);
    if (r == -ESRCH)
        snprintf(err, errlen, "process %d has no memory map (exited, or a kernel thread)",
                 (int)pid);
    else if (r < 0)
        snprintf(err, errlen, "cannot read /proc/%d/maps: permission denied (run as the "
                 "target's user or with CAP_SYS_PTRACE)", (int)pid);
    return r;
}

/* ---- processes --------------------------------------------------------------------------- */

long proc_list_pids(pid_t **out)
{
    DIR *d = opendir("/proc");
    if (d == NULL)
        return -1;
    size_t n = 0, cap = 256;
    pid_t *pids = malloc(cap * sizeof *pids);
    struct dirent *e;
    while (pids != NULL && (e = readdir(d)) != NULL) {
        char *end;
        long v = strtol(e->d_name, &end, 10);
        if (*end || v <= 0 || v > INT_MAX)
            continue;
        if (n == cap) {
            pid_t *bigger = realloc(pids, 2 * cap * sizeof *bigger);
            if (bigger == NULL) {
                free(pids);
                pids = NULL;
                break;
            }
            pids = bigger;
            cap *= 2;
        }
        pids[n++] = (pid_t)v;
    }
    closedir(d);
    if (pids == NULL)
        return -1;
    *out = pids;
    return (long)n;
}

pid_t proc_parent(pid_t pid)
{
    struct proc_stat st;
    if (proc_stat_read(pid, &st) < 0)
        return -1;
    return st.state == 'Z' || st.state == 'X' ? -1 : st.ppid;
}

long proc_age_ms(pid_t pid)
{
    struct proc_stat st;
    char up[64];
    if (proc_stat_read(pid, &st) < 0 || proc_read_text("/proc/uptime", up, sizeof up) < 0)
        return -1;
    long hz = sysconf(_SC_CLK_TCK);
    double age = strtod(up, NULL) - (double)st.start_time / (double)(hz > 0 ? hz : 100);
    return age < 0 ? 0 : (long)(age * 1000.0);
}

void proc_cmdline(pid_t pid, char *buf, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0) { /* a kernel thread or a zombie: its comm */
        char comm[64] = "?";
        snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
        if (proc_read_text(path, comm, sizeof comm) >= 0)
            comm[strcspn(comm, "\n")] = '\0';
        snprintf(buf, cap, "%s", comm);
        return;
    }
    proc_cmdline_text(buf, (size_t)n);
}

void proc_cmdline_text(char *buf, size_t n)
{
    while (n > 0 && buf[n - 1] == '\0')
        n--;
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\0' || buf[i] == '\n')
            buf[i] = ' ';
    buf[n] = '\0';
}

void proc_exe(pid_t pid, char *buf, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, buf, cap - 1);
    buf[n > 0 ? n : 0] = '\0';
}

/* proc_tree.c — owns vcinject.h's "processes, as /proc shows them" (target_alive,
 * target_descendants, target_find_mapped, ...): the questions the CLI's tree workflow asks
 * every 100 ms and the agent lookup asks once, answered over proc.c's readers so that the CLI
 * never parses /proc itself.
 *
 * Why one pass over every /proc/N/stat and not /proc/PID/task/T/children: `children` is only
 * complete when the children are not being reaped or reparented concurrently, and needs
 * CONFIG_PROC_CHILDREN; one pass gives every parent link at once and is what the 100 ms poll
 * of a running tree trace costs (a few hundred small reads).
 */
#include "vcinject.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proc.h"
#include "bounded_read.h"

int target_alive(pid_t pid)
{
    return proc_alive(pid);
}

int target_same_file(pid_t pid, const char *path)
{
    return proc_same_file(pid, path);
}

/* (ppid, pid) pairs sorted by parent: each process's children are one contiguous run. */
struct link {
    pid_t ppid, pid;
};

/* The comparators count their calls in *steps (qsort_r's argument). */
static int by_parent(const void *a, const void *b, void *steps)
{
    const struct link *x = a, *y = b;
    ++*(unsigned long long *)steps;
    if (x->ppid != y->ppid)
        return x->ppid < y->ppid ? -1 : 1;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

static int by_pid(const void *a, const void *b, void *steps)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    ++*(unsigned long long *)steps;
    return (x > y) - (x < y);
}

/* First index of links[0 .. n) whose parent is ppid (n if none): binary search, each probe
 * counted in *steps. */
static long first_child(const struct link *links, long n, pid_t ppid, unsigned long long *steps)
{
    long lo = 0, hi = n;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        ++*steps;
        if (links[mid].ppid < ppid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Why not one pass per tree level with a scan for each parent: that was O(n^2) in the number
 * of processes on the host, which any local user can raise (0.8 s at 30 000, every 100 ms).
 * Sorting the links by parent and walking the children runs breadth first is O(n log n);
 * a link that points back into the walked set (a pid reused while we read) cannot loop, since
 * each link is visited once at most (out[] never exceeds n). */
long target_descendants_count(const pid_t *pids, const pid_t *ppids, long n, pid_t root,
                              pid_t *out, unsigned long long *steps)
{
    *steps = 0;
    struct link *links = malloc((size_t)(n ? n : 1) * sizeof *links);
    if (links == NULL)
        return -1;
    long m = 0;
    for (long i = 0; i < n; i++)
        if (ppids[i] > 0 && pids[i] != root)
            links[m++] = (struct link){ppids[i], pids[i]};
    *steps += (unsigned long long)n;
    qsort_r(links, (size_t)m, sizeof *links, by_parent, steps);
    long k = 0;
    pid_t parent = root;
    for (long next = 0;; parent = out[next++]) {
        for (long i = first_child(links, m, parent, steps); i < m && links[i].ppid == parent;
             i++) {
            if (k == m)
                break; /* a cycle of reused pids: every link is taken already */
            out[k++] = links[i].pid;
            ++*steps;
        }
        if (next >= k)
            break;
    }
    free(links);
    qsort_r(out, (size_t)k, sizeof *out, by_pid, steps);
    return k;
}

long target_descendants_of(const pid_t *pids, const pid_t *ppids, long n, pid_t root,
                           pid_t *out)
{
    unsigned long long steps;
    return target_descendants_count(pids, ppids, n, root, out, &steps);
}

long target_descendants(pid_t root, pid_t **out)
{
    pid_t *pids = NULL;
    long n = proc_list_pids(&pids);
    if (n < 0)
        return -1;
    pid_t *ppids = malloc((size_t)(n ? n : 1) * sizeof *ppids);
    pid_t *kids = malloc((size_t)(n ? n : 1) * sizeof *kids);
    long k = -1;
    if (ppids != NULL && kids != NULL) {
        for (long i = 0; i < n; i++)
            ppids[i] = proc_parent(pids[i]);
        k = target_descendants_of(pids, ppids, n, root, kids);
    }
    free(pids);
    free(ppids);
    if (k < 0) {
        free(kids);
        return -1;
    }
    *out = kids;
    return k;
}

uint64_t target_start_time(pid_t pid)
{
    struct proc_stat st;
    return proc_stat_read(pid, &st) == 0 && st.state != 'Z' && st.state != 'X' ? st.start_time
                                                                              : 0;
}

int target_owner(pid_t pid, uid_t *uid)
{
    struct proc_status st;
    if (proc_status_read(pid, 0, &st) != 0)
        return -1;
    *uid = st.uid[1];
    return 0;
}

int target_descends_from(pid_t pid, pid_t root)
{
    for (int depth = 0; depth < 64 && pid > 1; depth++) {
        pid_t pp = proc_parent(pid);
        if (pp == root)
            return 1;
        if (pp <= 0)
            return 0;
        pid = pp;
    }
    return 0;
}

/* ---- pidfds: identities that are not reused ------------------------------------------- */

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#define PIDFS_MAGIC 0x50494446 /* "PIDF": pidfds have a pidfs inode of their own (6.9+) */
/* PIDFD_GET_INFO's first version (linux/pidfd.h, 6.13): the fields this file reads. */
struct vc_pidfd_info {
    uint64_t mask;
    uint64_t cgroupid;
    uint32_t pid, tgid, ppid;
    uint32_t ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    uint32_t spare0[1];
};
#define VC_PIDFD_INFO_PID 1ull
#define VC_PIDFD_GET_INFO _IOWR(0xFF, 11, struct vc_pidfd_info)

int target_pidfd_open(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int target_peer_pidfd(int sock)
{
    int fd = -1;
    socklen_t len = sizeof fd;
    if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) != 0 || len != sizeof fd)
        return -1;
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) { /* it comes close-on-exec; make sure */
        close(fd);
        return -1;
    }
    return fd;
}

pid_t target_pidfd_pid(int pidfd)
{
    char path[64], line[128];
    long seen = -1;
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
    FILE *f = fopen(path, "re");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Pid: %ld", &seen) == 1)
            break;
    if (f)
        fclose(f);
    if (seen <= 0 || syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) != 0)
        return -1; /* not in our pid namespace, exited, or not a pidfd */
    return (pid_t)seen;
}

uint64_t target_pidfd_id(int pidfd)
{
    struct statfs fs;
    struct stat st;
    if (pidfd < 0 || fstatfs(pidfd, &fs) != 0 || (unsigned long)fs.f_type != PIDFS_MAGIC ||
        fstat(pidfd, &st) != 0)
        return 0;
    return (uint64_t)st.st_ino;
}

int target_pidfd_parent(int pidfd, pid_t *ppid)
{
    struct vc_pidfd_info info;
    memset(&info, 0, sizeof info);
    info.mask = VC_PIDFD_INFO_PID;
    if (ioctl(pidfd, VC_PIDFD_GET_INFO, &info) != 0 || !(info.mask & VC_PIDFD_INFO_PID))
        return -1;
    *ppid = (pid_t)info.ppid;
    return 0;
}

int target_has_agent(pid_t pid)
{
    struct proc_maps maps;
    if (proc_read_maps(pid, &maps) != 0)
        return -1;
    int found = 0;
    for (size_t i = 0; i < maps.n && !found; i++)
        found = strstr(maps.v[i].path, "/libvcagent-py") != NULL;
    proc_free_maps(&maps);
    return found;
}

struct cmdline_read {
    pid_t pid;
};

static int cmdline_read(void *arg, void *buf, size_t cap)
{
    const struct cmdline_read *r = arg;
    proc_cmdline(r->pid, buf, cap);
    return 0;
}

/* /proc/PID/cmdline reads the target's memory (its argument pages, which it may have moved
 * into a FUSE-backed mapping that never answers): read in a child with a deadline
 * (bounded_read.h); "?" when it did not finish. */
void target_cmdline(pid_t pid, char *buf, size_t cap)
{
    struct cmdline_read r = {.pid = pid};
    if (cap == 0)
        return;
    if (bounded_read("cmdline", cmdline_read, &r, buf, cap, 1000) < 0)
        snprintf(buf, cap, "?");
    buf[cap - 1] = '\0';
}

void target_exe(pid_t pid, char *buf, size_t cap)
{
    proc_exe(pid, buf, cap);
}

long target_age_ms(pid_t pid)
{
    return proc_age_ms(pid);
}

pid_t target_own_pid(pid_t pid)
{
    struct proc_status st;
    return proc_status_read(pid, 0, &st) == 0 && st.own_pid > 0 ? st.own_pid : pid;
}

int target_threads(pid_t pid, pid_t **tids, size_t *n)
{
    return proc_list_tasks(pid, tids, n);
}

pid_t target_thread_own_tid(pid_t pid, pid_t tid)
{
    struct proc_status st;
    return proc_status_read(pid, tid, &st) == 0 && st.own_pid > 0 ? st.own_pid : tid;
}

char target_thread_state(pid_t pid, pid_t tid)
{
    return proc_task_state(pid, tid);
}

int target_find_mapped(pid_t pid, const char *dir_prefix, const char *name,
                       int (*match)(void *ctx, int fd), void *ctx, char *out, size_t cap)
{
    struct proc_maps maps;
    if (proc_read_maps(pid, &maps) < 0)
        return 0;
    int found = 0;
    for (size_t i = 0; i < maps.n && !found; i++) {
        const struct proc_map *m = &maps.v[i];
        char path[PATH_MAX];
        /* the name the target dlopen'ed: a re-attach's dlopen of it returns this copy */
        snprintf(path, sizeof path, "%s", proc_map_target_path(pid, m->path));
        size_t plen = strlen(path);
        if (plen > 10 && !strcmp(path + plen - 10, " (deleted)"))
            path[plen -= 10] = '\0';
        const char *base = strrchr(path, '/');
        if (m->offset != 0 || strncmp(path, dir_prefix, strlen(dir_prefix)) != 0 || !base ||
            strcmp(base + 1, name) != 0 || plen >= cap)
            continue;
        int fd = proc_open_mapped(pid, m); /* the mapped inode itself: regular files only */
        if (fd < 0)
            continue;
        if (match(ctx, fd) == 1) {
            memcpy(out, path, plen + 1);
            found = 1;
        }
        close(fd);
    }
    proc_free_maps(&maps);
    return found;
}

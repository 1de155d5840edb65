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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

long target_descendants(pid_t root, pid_t **out)
{
    pid_t *pids = NULL;
    long n = proc_list_pids(&pids);
    if (n < 0)
        return -1;
    pid_t *ppids = malloc((size_t)(n ? n : 1) * sizeof *ppids);
    unsigned char *in = calloc((size_t)(n ? n : 1), 1);
    if (ppids == NULL || in == NULL) {
        free(pids);
        free(ppids);
        free(in);
        return -1;
    }
    for (long i = 0; i < n; i++)
        ppids[i] = proc_parent(pids[i]);
    /* Mark descendants until none is added (one pass per level of the tree, usually 2-3). */
    for (int changed = 1; changed;) {
        changed = 0;
        for (long i = 0; i < n; i++) {
            if (in[i] || pids[i] == root || ppids[i] < 0)
                continue;
            int parent_in = ppids[i] == root;
            for (long j = 0; j < n && !parent_in; j++)
                parent_in = in[j] && pids[j] == ppids[i];
            if (parent_in)
                in[i] = 1, changed = 1;
        }
    }
    long k = 0;
    for (long i = 0; i < n; i++)
        if (in[i])
            pids[k++] = pids[i];
    free(in);
    free(ppids);
    /* readdir order is pid order in practice; sort to be sure (insertion: small lists) */
    for (long i = 1; i < k; i++)
        for (long j = i; j > 0 && pids[j - 1] > pids[j]; j--) {
            pid_t t = pids[j];
            pids[j] = pids[j - 1];
            pids[j - 1] = t;
        }
    *out = pids;
    return k;
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
        snprintf(path, sizeof path, "%s", m->path);
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

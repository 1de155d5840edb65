/* tree.c — process-tree discovery from /proc (tree.h).
 *
 * Why a scan of /proc/N/stat and not /proc/PID/task/T/children: `children` is only complete
 * when the children are not being reaped or reparented concurrently, and needs
 * CONFIG_PROC_CHILDREN; one scan of every stat file (a few hundred small reads) gives every
 * parent link at once and is what the 100 ms poll of a running tree trace costs.
 */
#include "tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc.h"

/* The parent pid from /proc/PID/stat (after the last ')': the comm may hold anything). */
static pid_t parent_of(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (proc_read_text(path, buf, sizeof buf) < 0)
        return -1;
    const char *p = strrchr(buf, ')');
    char state;
    int ppid;
    if (p == NULL || sscanf(p + 1, " %c %d", &state, &ppid) != 2)
        return -1;
    return state == 'Z' || state == 'X' ? -1 : (pid_t)ppid;
}

long tree_descendants(pid_t root, pid_t **out)
{
    DIR *d = opendir("/proc");
    if (d == NULL)
        return -1;
    size_t n = 0, cap = 256;
    pid_t *pids = malloc(cap * sizeof *pids), *ppids = malloc(cap * sizeof *ppids);
    struct dirent *e;
    while (pids && ppids && (e = readdir(d)) != NULL) {
        char *end;
        long v = strtol(e->d_name, &end, 10);
        if (*end || v <= 0)
            continue;
        pid_t pp = parent_of((pid_t)v);
        if (pp < 0)
            continue;
        if (n == cap) {
            cap *= 2;
            pid_t *a = realloc(pids, cap * sizeof *a);
            if (a)
                pids = a;
            pid_t *b = a ? realloc(ppids, cap * sizeof *b) : NULL;
            if (!a || !b) {
                free(b ? b : ppids);
                free(pids);
                pids = ppids = NULL;
                break;
            }
            ppids = b;
        }
        pids[n] = (pid_t)v;
        ppids[n++] = pp;
    }
    closedir(d);
    if (pids == NULL || ppids == NULL) {
        free(pids);
        free(ppids);
        return -1;
    }
    /* Mark descendants: repeat until no new one (depth of the tree passes, usually 2-3). */
    unsigned char *in = calloc(n ? n : 1, 1);
    if (in == NULL) {
        free(pids);
        free(ppids);
        return -1;
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < n; i++) {
            if (in[i] || pids[i] == root)
                continue;
            int parent_in = ppids[i] == root;
            for (size_t j = 0; j < n && !parent_in; j++)
                parent_in = in[j] && pids[j] == ppids[i];
            if (parent_in)
                in[i] = 1, changed = 1;
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (in[i])
            pids[k++] = pids[i];
    free(in);
    free(ppids);
    /* readdir order is pid order in practice; sort to be sure (insertion: small lists) */
    for (size_t i = 1; i < k; i++)
        for (size_t j = i; j > 0 && pids[j - 1] > pids[j]; j--) {
            pid_t t = pids[j];
            pids[j] = pids[j - 1];
            pids[j - 1] = t;
        }
    *out = pids;
    return (long)k;
}

int tree_descends_from(pid_t pid, pid_t root)
{
    for (int depth = 0; depth < 64 && pid > 1; depth++) {
        pid_t pp = parent_of(pid);
        if (pp == root)
            return 1;
        if (pp <= 0)
            return 0;
        pid = pp;
    }
    return 0;
}

int tree_has_agent(pid_t pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    int found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = strstr(line, "/libvcagent-py") != NULL;
    fclose(f);
    return found;
}

void tree_cmdline(pid_t pid, char *buf, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0) {
        char comm[64] = "?";
        snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
        if (proc_read_text(path, comm, sizeof comm) >= 0)
            comm[strcspn(comm, "\n")] = '\0';
        snprintf(buf, cap, "%s", comm);
        return;
    }
    while (n > 0 && buf[n - 1] == '\0')
        n--;
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '\0' || buf[i] == '\n')
            buf[i] = ' ';
    buf[n] = '\0';
}

void tree_exe(pid_t pid, char *buf, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, buf, cap - 1);
    buf[n > 0 ? n : 0] = '\0';
}

long tree_age_ms(pid_t pid)
{
    char path[64], buf[1024], up[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (proc_read_text(path, buf, sizeof buf) < 0 || proc_read_text("/proc/uptime", up, sizeof up) < 0)
        return -1;
    const char *p = strrchr(buf, ')');
    if (p == NULL)
        return -1;
    /* field 22 (starttime, clock ticks since boot); p points at the end of field 2 */
    unsigned long long start = 0;
    int field = 2;
    for (const char *q = p + 1; *q && field < 22; q++)
        if (*q == ' ' && ++field == 22)
            start = strtoull(q + 1, NULL, 10);
    long hz = sysconf(_SC_CLK_TCK);
    double uptime = strtod(up, NULL);
    double age = uptime - (double)start / (double)(hz > 0 ? hz : 100);
    return age < 0 ? 0 : (long)(age * 1000.0);
}

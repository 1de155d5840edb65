/* tree_kin.c — the tree's members by pidfs identity (see tree_kin.h). */
#include "tree_kin.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vcinject.h"

#define KIN_DEPTH 64 /* parent links walked at most (a tree deeper than this is refused) */

static int has(const struct tree_kin *k, uint64_t id)
{
    if (k->slots == NULL || id == 0)
        return 0;
    for (size_t i = (size_t)(id * 0x9E3779B97F4A7C15ull) & k->mask;; i = (i + 1) & k->mask) {
        if (k->slots[i] == id)
            return 1;
        if (k->slots[i] == 0)
            return 0;
    }
}

static void put(struct tree_kin *k, uint64_t id)
{
    if (id == 0 || has(k, id))
        return;
    if ((k->n + 1) * 2 > k->mask + 1) {
        size_t cap = k->slots ? (k->mask + 1) * 2 : 1024;
        uint64_t *bigger = calloc(cap, sizeof *bigger);
        if (bigger == NULL)
            return; /* not recorded: a live member is judged again from its parents */
        uint64_t *old = k->slots;
        size_t oldcap = old ? k->mask + 1 : 0;
        k->slots = bigger;
        k->mask = cap - 1;
        k->n = 0;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i])
                put(k, old[i]);
        free(old);
    }
    size_t i = (size_t)(id * 0x9E3779B97F4A7C15ull) & k->mask;
    while (k->slots[i] != 0)
        i = (i + 1) & k->mask;
    k->slots[i] = id;
    k->n++;
}

int kin_init(struct tree_kin *k, pid_t root)
{
    memset(k, 0, sizeof *k);
    int fd = target_pidfd_open(root);
    pid_t ppid;
    uint64_t id = target_pidfd_id(fd);
    int info = fd >= 0 && target_pidfd_parent(fd, &ppid) == 0;
    if (fd >= 0)
        close(fd);
    if (id == 0 || !info)
        return -1;
    k->on = 1;
    k->root = id;
    put(k, id);
    return 0;
}

void kin_free(struct tree_kin *k)
{
    free(k->slots);
    memset(k, 0, sizeof *k);
}

int kin_judge(struct tree_kin *k, int pidfd, uint64_t id, int *reaped)
{
    *reaped = 0;
    if (!k->on || id == 0)
        return 0;
    uint64_t chain[KIN_DEPTH];
    int n = 0, fd = pidfd, kin = 0;
    for (uint64_t cur = id; n < KIN_DEPTH; n++) {
        if (has(k, cur)) {
            kin = 1;
            break;
        }
        chain[n] = cur;
        pid_t ppid;
        if (target_pidfd_parent(fd, &ppid) != 0) {
            *reaped = n == 0; /* the peer itself is gone: no parent to ask */
            break;
        }
        int pfd = ppid > 0 ? target_pidfd_open(ppid) : -1;
        uint64_t pid_id = target_pidfd_id(pfd);
        if (fd != pidfd)
            close(fd);
        fd = pfd;
        /* A parent is older than its child: a pid reused since (the parent gone) is younger. */
        if (pfd < 0 || pid_id == 0 || pid_id >= cur)
            break;
        cur = pid_id;
    }
    if (fd != pidfd && fd >= 0)
        close(fd);
    for (int i = 0; kin && i < n; i++)
        put(k, chain[i]);
    return kin;
}

uint64_t kin_note(struct tree_kin *k, pid_t pid)
{
    if (!k->on)
        return 0;
    int fd = target_pidfd_open(pid);
    uint64_t id = target_pidfd_id(fd);
    int reaped;
    int kin = id != 0 && kin_judge(k, fd, id, &reaped);
    if (fd >= 0)
        close(fd);
    return kin ? id : 0;
}

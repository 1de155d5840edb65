/* tree_kin.h — who belongs to a traced tree, by identities that are never reused (tree_kin.c).
 *
 * A `--subprocesses` trace accepts a connection on its control socket only from the traced
 * process or one of its descendants (SECURITY.md 8).  Judged by pid and start time, a worker
 * that exited (and was reaped) between its connect and vcattach's look could not be told from
 * a stranger who got its pid: it was turned away, and its trace with it.  Judged by its pidfd
 * (SO_PEERPIDFD: the very process that connected, even once gone) and the pidfs identities of
 * its parents, nothing can be reused: a process is kin when its identity was recorded as the
 * tree's while it lived (the root, the descendants found in /proc or announced by the kernel
 * at their fork, peers judged before), or when it is alive and its parent chain — each parent
 * older than its child, which a reused pid never is — reaches a recorded one.  A peer that is
 * neither (a stranger; or one reaped before it could be recorded, which never ran a line of
 * its own) is refused.
 */
#ifndef VC_TREE_KIN_H
#define VC_TREE_KIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct tree_kin {
    int on;              /* the kernel gives pidfs identities and parents (else: pids) */
    uint64_t root;       /* the root's identity */
    uint64_t *slots;     /* open addressing, 0 empty */
    size_t mask, n;
};

/* Records the root.  0; -1 when the kernel lacks pidfs identities or PIDFD_GET_INFO (k->on
 * is 0: the caller judges by pid and start time, as before). */
int kin_init(struct tree_kin *k, pid_t root);
void kin_free(struct tree_kin *k);
/* 1 if the process of pidfd (identity id) is kin: recorded, or alive with a parent chain that
 * reaches a recorded process; what the walk found on the way is recorded.  0 otherwise;
 * *reaped set when it could not be asked (it is gone and was never recorded). */
int kin_judge(struct tree_kin *k, int pidfd, uint64_t id, int *reaped);
/* pid is believed the tree's (a walk of /proc, a fork the kernel announced): its identity if
 * it is kin (recorded), else 0. */
uint64_t kin_note(struct tree_kin *k, pid_t pid);

#endif /* VC_TREE_KIN_H */

/* tree_members.c — the member table of a tree trace (tree_run.h): one member per process the
 * run has seen, found by pid and told apart from a later process with the same pid by its
 * start time; each member's state, and its share of the --buffer-mb budget, taken from the
 * reserve when it joins and given back when it ends.  The table is bounded: ended non-Python
 * processes are forgotten beyond what -v lists (VERBOSE_KEEP). */
#include "tree_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "monotonic.h"
#include "test_seam.h"
#include "tree_budget.h"
#include "vcinject.h"
#include "say.h"

/* The member of pid: the newest one (pids wrap: an earlier process that had it may still hold
 * its trace, for the build; whether the newest is the process now behind the pid, the caller
 * asks same_process or the peer's identity). */
struct member *tree_find(struct tree_run *r, pid_t pid)
{
    for (size_t i = r->n; i-- > 0;)
        if (r->m[i].pid == pid)
            return &r->m[i];
    return NULL;
}

/* m made the member of the process now behind pid (its identity read now); its command
 * line is the caller's to set. */
static void bind_slot(struct tree_run *r, struct member *m, pid_t pid)
{
    memset(m, 0, sizeof *m);
    m->pid = pid;
    m->fd = -1;
    m->window_fd = -1;
    m->helper_fd = -1;
    m->since = vc_monotonic_ms();
    m->start_time = target_start_time(pid);
    m->ino = pid == r->opt->pid ? r->kin.root : kin_note(&r->kin, pid);
    m->late = r->t0 != 0;
    m->own_pid = target_own_pid(pid);
}

/* A new slot at the end of the table (which may move), bound to pid; NULL out of memory. */
struct member *tree_new_slot(struct tree_run *r, pid_t pid)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        struct member *bigger = realloc(r->m, cap * sizeof *bigger);
        if (bigger == NULL)
            return NULL;
        r->m = bigger;
        r->cap = cap;
    }
    struct member *m = &r->m[r->n++];
    bind_slot(r, m, pid);
    return m;
}

struct member *tree_add(struct tree_run *r, pid_t pid)
{
    struct member *m = tree_new_slot(r, pid);
    if (m != NULL) { /* read at once: a pool's worker may be gone by the time it is examined */
        target_cmdline(pid, m->name, sizeof m->name);
        target_exe(pid, m->exe, sizeof m->exe);
    }
    return m;
}

/* Whether the process now behind m->pid is the one m was made for (same start time; a
 * member stays itself when it is reparented). */
int tree_same_process(const struct member *m)
{
    return m->start_time != 0 && target_start_time(m->pid) == m->start_time;
}

/* A member that holds nothing (no connection, no part, no budget share) and whose process is
 * gone takes the slot of a newcomer with its pid: the old one is forgotten. */
int tree_holds_nothing(const struct member *m)
{
    return m->fd < 0 && m->sp == NULL && (m->st == M_SKIPPED || m->st == M_LOST) &&
           (m->share_mb == 0 || m->share_returned);
}

/* The slot of a member that holds nothing, for the new process that has its pid (as a skipped
 * one: the caller examines it like a newcomer). */
void tree_rebind(struct tree_run *r, struct member *m)
{
    tree_catch_release(r, m->pid);
    bind_slot(r, m, m->pid);
    target_cmdline(m->pid, m->name, sizeof m->name);
    m->st = M_SKIPPED;
}

/* How many members -v keeps before tree_compact() forgets the gone ones: VERBOSE_KEEP, or the
 * test-only VCATTACH_TEST_VERBOSE_KEEP=N (tests/system/test_security_tree.py), so that a test
 * reaches the bound with a few dozen helpers instead of 4096. */
static size_t verbose_keep(void)
{
    const char *v = VC_SEAM(VERBOSE_KEEP);
    long n = v ? atol(v) : 0;
    return n > 0 && n < VERBOSE_KEEP ? (size_t)n : VERBOSE_KEEP;
}

/* Drops the skipped non-Python members whose process is gone: the table would otherwise grow
 * by one slot for every short-lived helper (a shell, `sleep`) ever seen in the tree.  Only
 * their count is kept, for the summary line; members print_result always lists (lost,
 * refused) stay.  With -v (which lists them) only beyond verbose_keep() members. */
void tree_compact(struct tree_run *r)
{
    if (r->n > r->peak)
        r->peak = r->n;
    if (r->opt->verbose && r->n < verbose_keep())
        return;
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++) {
        struct member *m = &r->m[i];
        if (i > 0 && m->st == M_SKIPPED && !m->python && tree_holds_nothing(m) &&
            !tree_same_process(m)) {
            r->skipped_gone++;
            r->unseen_gone += m->unseen != 0;
            continue;
        }
        if (k != i)
            r->m[k] = *m;
        k++;
    }
    r->n = k;
}

void tree_set_state(struct member *m, enum mstate st)
{
    m->st = st;
    m->since = vc_monotonic_ms();
}

int tree_active(const struct member *m)
{
    return m->st == M_CONNECT || m->st == M_STARTING || m->st == M_RUNNING ||
           m->st == M_STOPPING || m->st == M_RETRY;
}

/* Processes counted against --max-processes: every one traced or being traced. */
size_t tree_traced_count(const struct tree_run *r)
{
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++)
        k += tree_active(&r->m[i]) || r->m[i].st == M_DONE ||
             (r->m[i].st == M_LOST && r->m[i].share_mb);
    return k;
}

/* The records received from a member so far (every generation, --last), and the calls it
 * dropped at the source (*dropped, may be NULL). */
uint64_t tree_member_records(const struct member *m, uint64_t *dropped)
{
    uint64_t records = 0, d = 0, disk, total = m->rotated_records, drops = 0;
    const struct spool *gens[2] = {m->prev, m->sp};
    for (int g = 0; g < 2; g++)
        if (gens[g] != NULL) {
            spool_progress(gens[g], &records, &d, &disk);
            total += records;
            drops += d;
        }
    if (dropped != NULL)
        *dropped = drops;
    return total;
}

/* Ends a member's connection; its budget share goes back to the reserve. */
void tree_finish(struct tree_run *r, struct member *m, enum mstate st, const char *why)
{
    if (m->fd >= 0)
        close(m->fd);
    m->fd = -1;
    m->await_hello = 0;
    if (m->window_fd >= 0 && st != M_RETRY)
        close(m->window_fd);
    if (st != M_RETRY)
        m->window_fd = -1;
    if (why)
        snprintf(m->why, sizeof m->why, "%s", why);
    if (m->share_mb && !m->share_returned && st != M_RETRY) {
        r->reserve_mb += m->share_mb;
        m->share_returned = 1;
    }
    if (st == M_LOST && m->sp != NULL) { /* a done member's spool waits for the build */
        m->lost_calls = tree_member_records(m, NULL);
        spool_close(m->sp, 1);
        spool_close(m->prev, 1);
        m->sp = m->prev = NULL;
    }
    tree_set_state(m, st);
}

/* A newcomer's share of the budget, taken from the reserve; 0 if the reserve is spent.
 * At most 1/8 of the budget, and at most a quarter of what the reserve holds (never below
 * the smallest share): a pool forks its workers at once, and a reserve handed out in 1/8ths
 * served two of them while the others went untraced; in quarters of what is left, the default
 * 64 MiB reserve serves a dozen at once (16, 12, 9, 6, 5, 4, 3, 2 MiB...), each streaming what
 * it records, and every share comes back when its process ends. */
unsigned tree_share_for(struct tree_run *r)
{
    unsigned want = r->budget_mb / 8 > TREE_MIN_SHARE_MB ? r->budget_mb / 8 : TREE_MIN_SHARE_MB;
    if (!r->opt->buffer_mb && want > DEFAULT_SHARE_MAX_MB)
        want = DEFAULT_SHARE_MAX_MB;
    unsigned quarter = r->reserve_mb / 4 > TREE_MIN_SHARE_MB ? r->reserve_mb / 4
                                                             : TREE_MIN_SHARE_MB;
    if (want > quarter)
        want = quarter;
    if (want > r->reserve_mb)
        want = r->reserve_mb;
    if (want < TREE_MIN_SHARE_MB)
        return 0;
    r->reserve_mb -= want;
    return want;
}

/* tree_budget.h — the memory a process tree's trace may take in its targets, shared by the
 * two ways to trace a tree (tree_trace.c for `trace --subprocesses`, tree_sessions.c for
 * `start --subprocesses`): one budget, split in shares, none below the smallest window that
 * still traces (SECURITY.md's budget table gives the figures). */
#ifndef VC_TREE_BUDGET_H
#define VC_TREE_BUDGET_H

#include "attach_options.h"

#define TREE_DEFAULT_BUDGET_MB 256 /* the whole tree's windows, without --buffer-mb */
#define TREE_MIN_SHARE_MB 2        /* no process gets less (it would drop nearly everything) */

/* The tree's budget in MiB: --buffer-mb, or the default. */
static inline unsigned tree_budget_mb(const struct cli_options *opt)
{
    return opt->buffer_mb ? opt->buffer_mb : TREE_DEFAULT_BUDGET_MB;
}

#endif /* VC_TREE_BUDGET_H */

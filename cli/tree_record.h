/* tree_record.h — what `start --subprocesses` chose, kept where only vcattach writes, for the
 * `stop --subprocesses` that comes later: the absolute OUT of the tree whose root is (pid,
 * start time).  stop takes every path from here, never from a member's reply (SECURITY.md 8).
 *
 * The records live in /run/vcattach (root) or $XDG_RUNTIME_DIR/vcattach (others): a directory
 * of ours, mode 0700, opened O_NOFOLLOW and checked (owner, mode) before every use.
 */
#ifndef VC_TREE_RECORD_H
#define VC_TREE_RECORD_H

#include <stddef.h>
#include <sys/types.h>

/* Records out_abs for the tree of root.  0, or -1 with one line in err. */
int tree_record_save(pid_t root, const char *out_abs, char *err, size_t errlen);
/* The OUT recorded for the tree of root (the same process: start time included): 1 with
 * out_abs, 0 none, -1 a record that cannot be trusted or read (err says why). */
int tree_record_load(pid_t root, char *out_abs, size_t cap, char *err, size_t errlen);
/* Forgets the record of root's tree (no-op when there is none). */
void tree_record_remove(pid_t root);

#endif /* VC_TREE_RECORD_H */

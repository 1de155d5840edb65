/* tree.h — a process tree as /proc shows it (read through injector/proc.c): the descendants
 * of a pid, whether a process already has our agent mapped (a fork child of a traced process,
 * or one traced before), its command line, executable and age.  The tree workflow itself is
 * cmd_tree.c.
 */
#ifndef VC_TREE_H
#define VC_TREE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Every live descendant of root (children, grandchildren, …; not root), in pid order, into a
 * malloc'd array.  Returns the count, or -1 if /proc cannot be read. */
long tree_descendants(pid_t root, pid_t **out);

/* 1 if pid descends from root (its parent chain reaches root), else 0. */
int tree_descends_from(pid_t pid, pid_t root);

/* 1 if pid has a libvcagent-py*.so mapped, 0 if not, -1 if its maps cannot be read. */
int tree_has_agent(pid_t pid);

/* The process's command line, NULs as spaces, cut to cap (at least its comm). */
void tree_cmdline(pid_t pid, char *buf, size_t cap);

/* How long ago the process started (ms), or -1 if it is gone. */
long tree_age_ms(pid_t pid);

/* The target of /proc/PID/exe ("" if unreadable): changes when the process execs. */
void tree_exe(pid_t pid, char *buf, size_t cap);

#endif /* VC_TREE_H */

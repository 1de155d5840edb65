/* proc.h — the one /proc parser of the project: what the injector and the CLI's preflight read
 * about a target (its threads, its memory map, its status fields, each thread's scheduler
 * state, tracer and current syscall) and how to reach the target's files from our mount
 * namespace.  Read-only; nothing here stops or changes the target. */
#ifndef VC_PROC_H
#define VC_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One line of /proc/PID/maps. */
struct proc_map {
    uint64_t start, end, offset;
    uint64_t inode;
    unsigned dev_major, dev_minor;
    char perms[5];
    char *path; /* "" for anonymous mappings; owned by the proc_maps */
};

struct proc_maps {
    struct proc_map *v;
    size_t n;
};

/* Thread ids listed in /proc/PID/task, ascending.  Returns 0, or -errno (ESRCH: no such pid). */
int proc_list_tasks(pid_t pid, pid_t **tids, size_t *n);

int proc_read_maps(pid_t pid, struct proc_maps *maps);
/* proc_read_maps with a one-line message for the injection methods: exited / kernel thread,
 * or permission.  Returns 0 or the negative errno. */
int proc_read_maps_or_explain(pid_t pid, struct proc_maps *out, char *err, size_t errlen);
void proc_free_maps(struct proc_maps *maps);
/* The mapping that contains addr, or NULL. */
const struct proc_map *proc_map_at(const struct proc_maps *maps, uint64_t addr);
/* The file-offset-0 mapping of the first mapped file whose basename satisfies match(),
 * or NULL. */
const struct proc_map *proc_find_module(const struct proc_maps *maps,
                                        int (*match)(const char *basename));
/* The offset-0 mapping of the file with this device and inode (the st_dev/st_ino of the
 * target's view of it), or NULL. */
const struct proc_map *proc_find_inode(const struct proc_maps *maps, dev_t dev, uint64_t inode);
/* The offset-0 mapping of the file named path, or NULL. */
const struct proc_map *proc_find_path(const struct proc_maps *maps, const char *path);

/* Reads a small text file (a /proc entry) into buf, NUL-terminated, at most cap - 1 bytes,
 * opened O_NOFOLLOW|O_NONBLOCK (never a last symlink, never a FIFO's wait).  Returns the
 * length, or -errno. */
int proc_read_text(const char *path, char *buf, size_t cap);
/* A line of /proc/PID/status ("TracerPid", "Uid", "NSpid", …; pid <= 0: /proc/self/status):
 * copies its value (leading blanks skipped) into out.  Returns 0, or -1 if the process or the
 * field is absent. */
int proc_status_field(pid_t pid, const char *field, char *out, size_t cap);
/* The process state letter from /proc/PID/stat ('R', 'S', 'T', 'Z', …), or 0 if gone. */
char proc_state(pid_t pid);
/* 1 while the process exists and is not a zombie, else 0. */
int proc_alive(pid_t pid);
/* 1 if path names the same file for us and for pid (through /proc/PID/root), else 0. */
int proc_same_file(pid_t pid, const char *path);

/* State letter of /proc/PID/task/TID/stat (R, S, D, T, t, Z, …), or 0 if it cannot be read. */
char proc_task_state(pid_t pid, pid_t tid);
/* TracerPid of /proc/PID/task/TID/status: >= 0, or -1 if unreadable. */
int proc_tracer_pid(pid_t pid, pid_t tid);
/* Real uid/gid of the process (Uid:/Gid: of /proc/PID/status). 0 or -errno. */
int proc_ids(pid_t pid, uid_t *uid, gid_t *gid);
/* Syscall number the thread is blocked in (first field of /proc/PID/task/TID/syscall),
 * -1 if running in user space, -2 if unknown.  Needs the thread stopped or blocked. */
long proc_task_syscall(pid_t pid, pid_t tid);

/* Opens a file the target has mapped, read-only, the way that works across mount namespaces:
 * /proc/PID/map_files/START-END (the exact mapped inode), else PATH resolved inside the
 * target's root (openat2 RESOLVE_IN_ROOT, O_NOFOLLOW|O_NONBLOCK).  Only ever a regular file:
 * the target's user names these paths and could put a FIFO or a device there.  Returns an fd
 * or -errno. */
int proc_open_mapped(pid_t pid, const struct proc_map *m);

/* "/proc/PID/root" + path into buf: the target's view of an absolute path. */
int proc_root_path(pid_t pid, const char *path, char *buf, size_t len);

/* 1 when the target sees another filesystem than ours: another root directory (chroot) or
 * another mount namespace (a container), so that a path names another file for it than for
 * us.  0 when it is the same view (or it cannot be told). */
int proc_other_root(pid_t pid);

/* The checks both injection methods make before touching anything: the process exists and is
 * not a zombie, is not stopped by job control, is not traced already, and the agent file exists
 * at agent_path in the target's mount namespace as a regular file the target's uid can read.
 * 0, or -errno with one line in err naming the problem and the fix. */
int proc_check_injectable(pid_t pid, const char *agent_path, char *err, size_t errlen);

/* ---- processes (the CLI's process trees, cli/tree.c) ---- */

/* Every pid in /proc, into a malloc'd array.  Returns the count, or -1. */
long proc_list_pids(pid_t **out);
/* The parent pid from /proc/PID/stat, or -1 if the process is gone or a zombie. */
pid_t proc_parent(pid_t pid);
/* How long ago the process started (ms), or -1 if it is gone. */
long proc_age_ms(pid_t pid);
/* The command line, NULs as spaces, cut to cap ("" if unreadable: its comm then). */
void proc_cmdline(pid_t pid, char *buf, size_t cap);
/* The target of /proc/PID/exe ("" if unreadable). */
void proc_exe(pid_t pid, char *buf, size_t cap);

#endif /* VC_PROC_H */

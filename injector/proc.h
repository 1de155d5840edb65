/* proc.h — internal to libvcinject.a: the one /proc parser of the project, what the injector
 * reads about a target (its threads, its memory map, its stat and status fields, each
 * thread's scheduler state, tracer and current syscall) and how to reach the target's files
 * from our mount namespace.  The CLI gets these answers through vcinject.h (target_facts.c,
 * proc_tree.c), never from here.  Read-only; nothing here stops or changes the target. */
#ifndef VC_PROC_H
#define VC_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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
/* proc_read_maps's parser, on any stream of /proc/PID/maps text (the fuzz harness,
 * tests/fuzz/fuzz_proc.c, feeds it bytes: the paths in it are the target's user's).  0,
 * -ESRCH when no line parses, -ENOMEM; maps is empty on failure. */
int proc_maps_parse(FILE *f, struct proc_maps *maps);
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
/* Predicates for proc_find_module: glibc's libc ("libc.so.6", before 2.34 "libc-2.N.so"),
 * musl's ("ld-musl-x86_64.so.1", Alpine's "libc.musl-x86_64.so.1"), either. */
int proc_is_glibc_name(const char *basename);
int proc_is_musl_name(const char *basename);
int proc_is_libc_name(const char *basename);
/* The offset-0 mapping of the file with this device and inode (the st_dev/st_ino of the
 * target's view of it), or NULL. */
const struct proc_map *proc_find_inode(const struct proc_maps *maps, dev_t dev, uint64_t inode);
/* The offset-0 mapping of the file named path, or NULL. */
const struct proc_map *proc_find_path(const struct proc_maps *maps, const char *path);
/* A mapping's path as the target names it: the kernel writes /proc/PID/maps from the reader's
 * root, so a chrooted target's files show under ROOT (its root in our view), which is cut
 * off.  Returns shown itself, or a pointer into it. */
const char *proc_map_target_path(pid_t pid, const char *shown);
/* The offset-0 mapping of the file the target names path, loaded and maybe deleted since
 * (" (deleted)"), or NULL. */
const struct proc_map *proc_find_loaded(pid_t pid, const struct proc_maps *maps,
                                        const char *path);
/* 1 when the target has path mapped although no file has that name any more (an earlier
 * attach's copy of the agent, removed since), else 0. */
int proc_loaded_and_gone(pid_t pid, const char *path);

/* Reads a small text file (a /proc entry) into buf, NUL-terminated, at most cap - 1 bytes,
 * opened O_NOFOLLOW|O_NONBLOCK (never a last symlink, never a FIFO's wait).  Returns the
 * length, or -errno. */
int proc_read_text(const char *path, char *buf, size_t cap);

/* What the project reads of /proc/PID/status, parsed in one place (proc_status_read): every
 * caller that needs a status field gets it from here, so the format is handled once. */
struct proc_status {
    char name[64];                /* Name: */
    char state;                   /* the letter of State: */
    uid_t uid[4];                 /* Uid: real, effective, saved, fs */
    gid_t gid[4];                 /* Gid: */
    pid_t ppid;                   /* PPid: */
    pid_t tracer;                 /* TracerPid: */
    pid_t own_pid;                /* the last NSpid: field (the pid, or the thread's id, in
                                     its own namespace); pid (tid) when absent */
    int seccomp;                  /* Seccomp: 0 none, 1 strict, 2 filter (0 when absent) */
    unsigned long long cap_eff;   /* CapEff: */
    int shadow_stack;             /* x86_Thread_features: has shstk (CET, kernels 6.6+) */
};
/* Reads /proc/PID/status (pid <= 0: /proc/self/status; tid > 0: that thread's
 * /proc/PID/task/TID/status) once.  Returns 0, -ESRCH when the process is gone, -EINVAL
 * when Uid:/Gid: are missing, or another -errno. */
int proc_status_read(pid_t pid, pid_t tid, struct proc_status *st);
/* proc_status_read's parser, on the NUL-terminated text of a status file (pid and tid as
 * given to proc_status_read: the own_pid when NSpid is absent).  0 or -EINVAL. */
int proc_status_parse(const char *buf, pid_t pid, pid_t tid, struct proc_status *st);

/* What the project reads of /proc/PID/stat (after the "(comm)", which may hold anything). */
struct proc_stat {
    char state;                   /* R S D T t Z X */
    pid_t ppid;
    unsigned long flags;          /* PF_* (PF_KTHREAD: a kernel thread) */
    uint64_t start_time;          /* clock ticks since boot (field 22) */
};
/* Returns 0, or -ESRCH when the process is gone (or the file unparsable). */
int proc_stat_read(pid_t pid, struct proc_stat *st);
/* proc_stat_read's parser, on the NUL-terminated text of a stat file.  0 or -ESRCH. */
int proc_stat_parse(const char *buf, struct proc_stat *st);
/* 1 for a kernel thread (PF_KTHREAD), else 0. */
int proc_kernel_thread(pid_t pid);

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

/* The agent file as the ptrace and gdb methods will dlopen it: an absolute path naming, in
 * the target's root, a regular file that the target's ids (fsuid, fsgid) can read (or a file
 * the target still has mapped under that name although it was deleted: dlopen returns that
 * one).  0, or -errno with one line in err naming the problem and the fix. */
int proc_check_agent(pid_t pid, const char *agent_path, uid_t uid, gid_t gid, char *err,
                     size_t errlen);

/* ---- processes (process trees, proc_tree.c) ---- */

/* Every pid in /proc, into a malloc'd array.  Returns the count, or -1. */
long proc_list_pids(pid_t **out);
/* The parent pid from /proc/PID/stat, or -1 if the process is gone or a zombie. */
pid_t proc_parent(pid_t pid);
/* How long ago the process started (ms), or -1 if it is gone. */
long proc_age_ms(pid_t pid);
/* The command line, NULs as spaces, cut to cap ("" if unreadable: its comm then). */
void proc_cmdline(pid_t pid, char *buf, size_t cap);
/* proc_cmdline's rewrite of the n bytes read into buf (n < its size): trailing NULs dropped,
 * NULs and newlines made spaces, NUL-terminated at the end. */
void proc_cmdline_text(char *buf, size_t n);
/* The target of /proc/PID/exe ("" if unreadable). */
void proc_exe(pid_t pid, char *buf, size_t cap);

#endif /* VC_PROC_H */

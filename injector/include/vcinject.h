/* vcinject.h — the one public header of libvcinject.a: what the CLI may know of a target
 * process and how it loads the agent into one.  Everything else in injector/ (proc.h, elf.h,
 * ptrace.h, remote_call.h, safepoint.h, debug_offsets.h, the methods' method.h) is internal:
 * cli/ is compiled with -Iinjector/include only, so it cannot reach them.
 *
 * Four parts:
 *   1. the target's facts, one snapshot of /proc/PID read once (ids, state, tracer, comm,
 *      namespaces, the CPython found in it), tied to a pidfd so that a recycled pid is never
 *      mistaken for the process that was examined; preflight judges the snapshot, and the
 *      injector re-checks what can change (uids, state, tracer) right before it touches the
 *      target;
 *   2. small questions about processes (alive, descendants, command line, has our agent, ...)
 *      that the tree workflow asks every 100 ms;
 *   3. inject(): the method chosen (auto: remote-exec on 3.14+ when the target allows it,
 *      else ptrace), run with SIGINT/SIGTERM/SIGHUP blocked for ptrace/gdb (an injection is
 *      never cut in half), and auto's fallback from remote-exec to ptrace;
 *   4. a helper process in the target's filesystem with the target's credentials, for
 *      whatever must be created where the target's user can reach it.
 *
 * ptrace and gdb do exactly two calls in the target, on one thread stopped at a safe point:
 *     handle = dlopen(agent_path, RTLD_NOW | RTLD_LOCAL)      (a no-op if already loaded)
 *     rc     = vc_agent_connect(control_path)                  (spawns the agent thread)
 * and leave every thread running, with every register restored, on every path (also when
 * the injecting process is killed: see method.h).  remote-exec (CPython 3.14+, PEP 768)
 * stops nothing and runs no code of ours: it asks the interpreter, through memory writes, to
 * run a small loader script (written into the target's /tmp, removed again) at a thread's
 * next evaluation breaker; the script makes the same two calls through ctypes.
 */
#ifndef VC_VCINJECT_H
#define VC_VCINJECT_H

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- 1. the target's facts ------------------------------------------------------------- */

struct target_python {
    int major, minor, micro;      /* micro = -1 when only the X.Y is known */
    int free_threaded;            /* a "t" build (python3.13t): no GIL, another ABI */
    int debug;                    /* a Py_DEBUG ("d") build: the agents' ABI but for refcount
                                   * totals (docs/builds.md) */
    int trace_refs;               /* Py_TRACE_REFS: a larger object header, another ABI */
    char capi_file[PATH_MAX];     /* the ELF exporting the C-API, as mapped (target's view) */
    char how[64];                 /* where the version came from: "Py_Version", "soname", … */
};

/* The C library a target runs on: what decides whether an agent (a glibc library, loading
 * into glibc 2.17 and newer) can be loaded into it at all. */
enum target_libc_kind {
    TARGET_LIBC_UNKNOWN = 0,      /* none mapped (a static executable) or unreadable */
    TARGET_LIBC_GLIBC,
    TARGET_LIBC_MUSL,             /* Alpine's: ld-musl-*, libc.musl-* */
};

struct target_libc {
    enum target_libc_kind kind;
    int glibc_minor;              /* glibc: N of the newest GLIBC_2.N its libc defines (its
                                   * release, or the last one that added symbols), -1 when its
                                   * versions could not be read */
    char path[PATH_MAX];          /* the library as mapped (target's view), "" when none */
};

struct target_facts {
    pid_t pid;
    int pidfd;                    /* pidfd_open(pid) at the read, -1 where the kernel has none */
    uint64_t start_time;          /* field 22 of /proc/PID/stat: with pid, the process's identity */
    uid_t uid[4];                 /* real, effective, saved, fs (Uid: of /proc/PID/status) */
    gid_t gid[4];
    char state;                   /* R S D T t Z X (of /proc/PID/stat) */
    pid_t tracer;                 /* TracerPid of the main thread, 0 when none */
    pid_t ppid;
    pid_t own_pid;                /* the pid the target sees for itself (last NSpid field) */
    int seccomp;                  /* 0 none, 1 strict, 2 filter */
    int kernel_thread;
    int dumpable;                 /* 0: /proc/PID is root's although the target's euid is not */
    char comm[64];
    char exe[PATH_MAX];           /* target of /proc/PID/exe, "" when unreadable */
    int other_mnt_ns;             /* another mount namespace, or chrooted (another "/") */
    int other_user_ns;
    int other_net_ns;
    int python;                   /* 1 CPython, 0 not (python_why says what was looked at),
                                     -1 could not be examined (python_why says why) */
    struct target_python py;
    char python_why[512];
    struct target_libc libc;
};

/* Reads the facts of pid once: /proc/PID/{stat,status,exe,root} and its namespaces
 * (/proc/PID/ns/...), and its maps and mapped ELF files for the CPython and C library
 * detection.  Reads only; nothing is stopped.  A process that is not Python is not an error
 * (f->python says).
 * Returns 0, or -1 with one line in err when the process does not exist or has gone
 * ("no such process: pid N ..."). */
int target_facts_read(pid_t pid, struct target_facts *f, char *err, size_t errlen);

/* Closes the pidfd (every path; safe twice, and on a zeroed struct with pidfd -1). */
void target_facts_release(struct target_facts *f);

/* Whether vcattach may ptrace this target at all: uids / CAP_SYS_PTRACE, dumpability, Yama
 * ptrace_scope, a seccomp filter or LSM that blocks ptrace for vcattach itself (probed on a
 * child of ours).  0, or -1 with one line (cause and fix) in err. */
int target_ptrace_permitted(const struct target_facts *f, char *err, size_t errlen);

/* Right before the target is touched: is it still the process of the snapshot (pidfd still
 * open on a live process, same start time), with the same uids, not a zombie, not stopped,
 * no thread traced by anyone?  0, or -1 with one line in err. */
int target_facts_recheck(const struct target_facts *f, char *err, size_t errlen);
/* The same for a process this very process holds (a caught one): our tracing is not refused. */
int target_facts_recheck_ours(const struct target_facts *f, char *err, size_t errlen);

/* CPython detection alone (what target_facts_read does for f->py): 1 CPython with *py
 * filled, 0 not (err says what was looked at), -1 could not be examined (err says why). */
int target_python_detect(pid_t pid, struct target_python *py, char *err, size_t errlen);

/* C library detection alone (what target_facts_read does for f->libc), from the maps and the
 * version definitions of the libc mapped; reads only. */
void target_libc_detect(pid_t pid, struct target_libc *libc);

/* ---- 2. processes, as /proc shows them ------------------------------------------------- */

/* 1 while the process exists and is not a zombie, else 0. */
int target_alive(pid_t pid);
/* 1 if path names the same file for us and for pid (through /proc/PID/root), else 0. */
int target_same_file(pid_t pid, const char *path);
/* Every live descendant of root (not root), in pid order, into a malloc'd array.  Returns the
 * count, or -1 if /proc cannot be read. */
long target_descendants(pid_t root, pid_t **out);
/* The walk behind target_descendants, over a snapshot: pids[i]'s parent is ppids[i] (<= 0:
 * none).  Writes the descendants of root, in pid order, into out (room for n); returns their
 * count, or -1 out of memory.  O(n log n): exposed for its unit test (tests/unit). */
long target_descendants_of(const pid_t *pids, const pid_t *ppids, long n, pid_t root,
                           pid_t *out);
/* The same walk, which also counts its steps into *steps: the comparisons of its sorts, the
 * probes of its binary searches, the links read and taken.  Their growth with n is what the
 * unit test checks (a count, not a time: the same on any machine). */
long target_descendants_count(const pid_t *pids, const pid_t *ppids, long n, pid_t root,
                              pid_t *out, unsigned long long *steps);
/* Field 22 of /proc/PID/stat (with the pid, the process's identity: a reused pid has another
 * one), or 0 if the process is gone or a zombie. */
uint64_t target_start_time(pid_t pid);
/* The effective uid of pid: 0 with *uid, -1 if it is gone. */
int target_owner(pid_t pid, uid_t *uid);
/* 1 if pid descends from root (its parent chain reaches root), else 0. */
int target_descends_from(pid_t pid, pid_t root);
/* Process identities that are never reused (pidfs, Linux 6.9+): a pidfd refers to one
 * process for good, and its inode number (target_pidfd_id) is unique for the boot and grows
 * with every process created — a parent's is always lower than its child's.  A pid and a start
 * time are reused; these are not.  Each function returns -1 (errno) or 0 where the kernel has
 * no such thing, and the caller falls back to pids and start times. */
/* A pidfd of pid (close-on-exec), or -1. */
int target_pidfd_open(pid_t pid);
/* The pidfd of a connected Unix socket's peer (SO_PEERPIDFD, Linux 6.5+; it refers to the
 * process that connected even once it has exited), or -1. */
int target_peer_pidfd(int sock);
/* The pid (as we see it) of the pidfd's process while it runs, or -1 (exited, or not in
 * our pid namespace). */
pid_t target_pidfd_pid(int pidfd);
/* The pidfd's process identity: its pidfs inode number, or 0 (not pidfs: no identity). */
uint64_t target_pidfd_id(int pidfd);
/* The pidfd's process's parent pid, as we see it (PIDFD_GET_INFO, Linux 6.13+): 0 with
 * *ppid (0 when its parent is not in our pid namespace), -1 when it has been reaped or the
 * kernel cannot tell. */
int target_pidfd_parent(int pidfd, pid_t *ppid);
/* 1 if pid has a libvcagent-py*.so mapped, 0 if not, -1 if its maps cannot be read. */
int target_has_agent(pid_t pid);
/* The command line, NULs as spaces, cut to cap (at least its comm). */
void target_cmdline(pid_t pid, char *buf, size_t cap);
/* The target of /proc/PID/exe ("" if unreadable): changes when the process execs. */
void target_exe(pid_t pid, char *buf, size_t cap);
/* How long ago the process started (ms), or -1 if it is gone. */
long target_age_ms(pid_t pid);
/* The pid the target sees for itself (last NSpid field; pid when unknown). */
pid_t target_own_pid(pid_t pid);
/* Its threads: the ids in /proc/PID/task, ascending, malloc'd into *tids (the caller frees).
 * 0, or -errno (-ESRCH: gone). */
int target_threads(pid_t pid, pid_t **tids, size_t *n);
/* A thread's id in the target's own pid namespace (last NSpid field; tid when unknown). */
pid_t target_thread_own_tid(pid_t pid, pid_t tid);
/* A thread's state letter (R running or runnable, S, D, T, t, Z, ...), 0 if unreadable. */
char target_thread_state(pid_t pid, pid_t tid);
/* Namespaces (namespaces.c): NAME is the kernel's (net, user, mnt, ...); pid 0 is our own
 * process.  target_ns_id: the namespace's identity, 0 or -1 (errno: gone).  target_ns_other:
 * 1 when pid's NAME namespace is not ours, 0 when it is, -1 unknown (errno).  target_ns_open:
 * an fd (close-on-exec) for setns(2), or -1 (errno). */
int target_ns_id(pid_t pid, const char *name, dev_t *dev, ino_t *ino);
int target_ns_other(pid_t pid, const char *name);
int target_ns_open(pid_t pid, const char *name);
/* The abstract Unix socket names a process listens on (unix_names.c): how `status`/`stop`
 * find a session whose well-known name was squatted, however many other names a squatter
 * binds next to it.  One name, without its leading NUL, as /proc/net/unix lists it. */
typedef char unix_name[108];
/* The listening sockets named "PREFIX-*" in our network namespace whose socket is one of
 * pid's own fds, in the order listed, into a malloc'd array (*names, to free).  *others
 * counts the "PREFIX-*" names held by anyone else.  Returns how many are pid's, or -1 if
 * /proc/net/unix or /proc/PID/fd cannot be read (or out of memory). */
long target_unix_names_held(pid_t pid, const char *prefix, unix_name **names, size_t *others);
/* Does pid hold the socket listening on the abstract name?  SO_PEERCRED cannot say: a
 * listening socket keeps the pid of whoever called listen(), which may have exited (handing
 * the socket to another process) and been reused by the target since.  1 yes, 0 no (or
 * unreadable: not proven), -1 nobody listens there. */
int target_holds_listener(pid_t pid, const char *name);
/* For a file pid has mapped at file offset 0 whose path (" (deleted)" removed) starts with
 * dir_prefix and ends in "/" + name: calls match(ctx, fd) with that very inode opened
 * read-only (a regular file only), until match returns 1; its path goes into out.  1 found,
 * 0 not. */
int target_find_mapped(pid_t pid, const char *dir_prefix, const char *name,
                       int (*match)(void *ctx, int fd), void *ctx, char *out, size_t cap);

/* ---- 3. injection ---------------------------------------------------------------------- */

enum inject_method { INJECT_AUTO = 0, INJECT_REMOTE_EXEC, INJECT_PTRACE, INJECT_GDB };

enum inject_status {
    INJECT_OK = 0,
    INJECT_UNTOUCHED = 1, /* failed before anything ran in the target (safe to retry/report) */
    INJECT_FAILED = 2,    /* failed after a call ran in the target; target state restored */
};

/* Waits up to wait_ms for the agent to connect back: 1 connected, 0 not yet, -1 give up
 * (interrupted, target gone, a broken connection).  It may return 0 early (a tree's loop
 * returns after handling any other member's frames): the injector calls it again until its
 * own deadline. */
typedef int (*inject_wait_fn)(void *ctx, int wait_ms);

/* What `method` means for this target, reading only: INJECT_AUTO becomes remote-exec on
 * 3.14+ when the target accepts remote-exec requests (debug offsets readable and known,
 * remote debugging enabled), else ptrace; an explicit method stays.  Returns 0 with *chosen,
 * or -1 with one line in err when an explicit remote-exec cannot be used (before 3.14,
 * disabled, an unknown layout): a preflight failure, nothing touched.  When auto does not
 * pick remote-exec on 3.14+, why goes into note (else note is ""). */
int inject_choose(const struct target_facts *t, enum inject_method method,
                  enum inject_method *chosen, char *note, size_t notelen, char *err,
                  size_t errlen);

struct tracee; /* the injector's: a thread it holds in a ptrace-stop (caught, 3c below) */

struct inject_request {
    const struct target_facts *target; /* preflighted; re-checked before anything is done */
    enum inject_method method;         /* what inject_choose chose: not INJECT_AUTO */
    int fallback;                      /* remote-exec not taken (untouched): go on with ptrace */
    const char *agent_path;            /* the agent as the target sees it */
    const char *control_path;          /* the control socket the agent connects to */
    int timeout_ms;                    /* ptrace/gdb: the whole injection (every wait bounded) */
    int rexec_timeout_ms;              /* remote-exec: until a thread takes the request */
    inject_wait_fn wait_connected;     /* remote-exec: the agent connecting back */
    void *wait_ctx;
    volatile sig_atomic_t *cancel;     /* non-zero: no fallback, stop waiting */
    int verbose;                       /* progress lines on stderr */
    /* ptrace: the process's only thread, caught at its start by this very process (3c:
     * inject_catch's held): injected where it stands if that is a safe point, without a
     * seize, so it runs nothing between its catch and the agent's load.  Its tracer (us) is
     * not refused; the injection owns it from then on and lets it go on every path (another
     * method lets it go first).  NULL: none. */
    struct tracee *caught;
};

struct inject_result {
    enum inject_method used;           /* the method that ran last */
    int connected;                     /* remote-exec: the agent already connected */
    char fell_back[512];               /* "" or why remote-exec gave way to ptrace */
};

/* Loads the agent with req->method (and, with req->fallback, ptrace after a remote-exec that
 * nothing took).  Returns an inject_status; when not INJECT_OK, one line in err (an
 * untouched target's line ends in "(the target was not changed)"). */
int inject(const struct inject_request *req, struct inject_result *res, char *err,
           size_t errlen);

/* ---- 3b. holding a young process until its agent has its hooks in (hold.c) ------------- */

struct inject_hold {
    int total_ms;      /* from the seize to the detach */
    int held_ms;       /* of it, kept stopped at system calls (the rest: stepping between them) */
    int stops;         /* system-call stops seen */
    int held_stops;    /* ... at which it was kept */
    const char *ended; /* why the hold ended (a static phrase) */
};

/* After a ptrace or gdb injection into a process at its start (a pool's spawned worker):
 * its main thread (pid) is run from system call to system call and kept at those CPython
 * makes without the GIL while the agent (agent_path, the target's view, exporting
 * vc_agent_phase) waits for vcattach or for the GIL, so that the process runs none of its
 * own code before its hooks are in; at most budget_ms.  Only the main thread is held, nothing
 * of it is written, and a kill of the caller at any instant lets it go on.  0 with *res (also
 * when the process ended, or the agent had nothing left to wait for), or -1 with err (the
 * agent not found or too old, the thread not seizable): then nothing was held. */
int inject_hold_until_hooked(pid_t pid, const char *agent_path, int budget_ms,
                             struct inject_hold *res, char *err, size_t errlen);

/* ---- 3c. catching a new interpreter at its start, before it is injected (catch.c) ------- */

struct inject_catch {
    int64_t start_ns;  /* the seize (pt_now_ns's clock: CLOCK_MONOTONIC) */
    int caught;        /* it was kept at the start of CPython's initialization */
    int caught_ms;     /* ... this long after the seize (-1: not caught) */
    int stops;         /* system-call stops seen before */
    int unsafe;        /* such calls passed over: not at a safe point for an injection */
    char at[128];      /* the file whose call it was kept at */
    const char *ended; /* why the catch ended, when it ended by itself (a static phrase) */
    int hold_ms;       /* the hold's budget (on_caught's bound) */
    struct tracee *held; /* while on_caught runs: the thread, kept at that call's exit */
};

/* A process that has just exec'd an interpreter (pid: its only thread) is run from system
 * call to system call until its first call that shows CPython's initialization under way
 * (past the loader and libc's start, before any Python code), and kept at that call's exit
 * while on_caught(arg, res) runs: on_caught must return within res->hold_ms, or hand
 * res->held to inject() (inject_request.caught), whose own bounds apply then.  Without
 * on_caught it is kept hold_ms.  The stepping before gives up after step_ms or when no such
 * call comes.  The caller releases it early by being killed (the kernel detaches the thread,
 * which goes on from that call): meant for a child process that does nothing else.
 * Only the main thread is seized, nothing of it is written; pidfd (the process's, opened while
 * it was known to be the one meant; -1: none) says whether the pid seized is still its.
 * 0 (caught or not: *res says), or
 * -1 when the thread could not be seized at all. */
int inject_catch_at_start(pid_t pid, int pidfd, int step_ms, int hold_ms, struct inject_catch *res,
                          void (*on_caught)(void *arg, struct inject_catch *res), void *arg);

/* "auto", "remote-exec", "ptrace", "gdb". */
const char *inject_method_name(enum inject_method m);

/* ---- 4. a helper process as the target's user (as_target.c) ---------------------------- */

/* Whatever vcattach must create where the target can see it (the agent's copy in a container's
 * /tmp, the remote-exec loader script) is created by a short-lived child that entered the
 * target's mount namespace, chrooted to the target's root and dropped to the target's uid and
 * gid (no supplementary groups).  The target's user owns that /tmp (or can mount over any name
 * in it, in its own namespaces) and can swap any name for a symlink or a mount point at any
 * instant; as that user, the child can only do what the user could do anyway, so no race there
 * can make root write, chmod, chown or unlink a file of the host (SECURITY.md).
 *
 * as_target_run runs fn(arg, out, outcap) in such a child; fn returns 0 and puts its result
 * text in out, or non-zero with a one-line reason in out.  The child is killed after
 * timeout_ms.  Returns 0 with out filled, or -1 with err (fn's reason, or why the child could
 * not be started). */
int as_target_run(pid_t pid, uid_t uid, gid_t gid, int (*fn)(void *arg, char *out, size_t cap),
                  void *arg, char *out, size_t outcap, int timeout_ms, char *err,
                  size_t errlen);

/* The same child without entering the target's filesystem: only its uid and gid (e.g. to talk
 * to a target in another user namespace, which sees root as an unmapped uid). */
int as_target_user_run(pid_t pid, uid_t uid, gid_t gid,
                       int (*fn)(void *arg, char *out, size_t cap), void *arg, char *out,
                       size_t outcap, int timeout_ms, char *err, size_t errlen);

/* The most a child's result (out, or its reason) can hold, NUL included. */
#define AS_TARGET_OUT_MAX 8192

#endif /* VC_VCINJECT_H */

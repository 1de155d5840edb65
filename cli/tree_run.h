/* tree_run.h — the state of one `trace --subprocesses` run, shared by the files that make it
 * (private to them): tree_trace.c (the loop: discovery, injection, the members' frames),
 * tree_members.c (the member table, each member's state and its budget share),
 * tree_listeners.c (a listening socket per network namespace) and tree_result.c (OUT from the members' spools, the account printed per process). */
#ifndef VC_TREE_RUN_H
#define VC_TREE_RUN_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "attach_options.h"
#include "control_client.h"
#include "preflight.h"
#include "vcinject.h"
#include "proc_events.h"
#include "spool.h"
#include "trace_sink.h"
#include "tree_kin.h"

#define DEFAULT_SHARE_MAX_MB CLI_WINDOW_MB /* without --buffer-mb, no process gets more */
#define VERBOSE_KEEP 4096          /* -v lists skipped processes: kept up to this many members */
#define MAX_NETNS 16               /* listening sockets: one per network namespace of the tree */

enum mstate {
    M_CONNECT,   /* injected (or forked with the agent): waiting for its connection */
    M_STARTING,  /* CONFIG sent, waiting for STARTED */
    M_RUNNING,
    M_STOPPING,  /* STOP sent (or the agent stopped by itself): DATA until END */
    M_RETRY,     /* its interpreter was not initialized (or loaded) yet: inject again after
                    retry_ms */
    M_DONE,      /* its trace is in its part file */
    M_LOST,      /* traced or about to be, but no trace came: why says why */
    M_SKIPPED,   /* not traced: not Python, refused, over the bound or the budget */
};

struct member {
    pid_t pid;               /* as we (the host) see it: SO_PEERCRED's, /proc's */
    pid_t own_pid;           /* as it sees itself (last NSpid field): differs in a container */
    int lis;                 /* the listener (network namespace) its agent was told of */
    uint64_t start_time;     /* with pid, the process's identity: a reused pid is a stranger */
    uint64_t ino;            /* its pidfs identity if it is the tree's (tree_kin.h), else 0 */
    enum mstate st;
    int fd;                  /* its control connection */
    int await_hello;         /* connected, its HELLO not read yet (since hello_since, ms) */
    int64_t hello_since;
    int window_fd;           /* the memfd its agent records into (protocol.h), or -1 */
    struct spool_chunk_mark last_chunk; /* the last CHUNK it sent (for reading its window) */
    uint64_t salvaged;       /* records read from its window after it ended */
    uint64_t lost_calls;     /* lost: the calls received from it and left out */
    int late;                /* born (or first seen) during the trace */
    int renamed;             /* it exec'd since its name was read: read it again */
    int execd;               /* it exec'd after its session ended (a fork child's preexec_fn
                                traced, then its program): the program is a member of its own */
    int window_read;         /* ... and it could be read */
    struct spool *sp;        /* what it streams while it traces: OUT.PID.spool (spool.h) */
    struct spool *prev;      /* --last: its generation before sp (OUT.PID.spool.prev), or NULL */
    uint64_t rotated_records; /* --last: the records of its generations dropped so far */
    int ended_early;         /* its connection ended before END: its trace up to then is kept */
    int forked;              /* joined by itself (a fork child) */
    int parent_traced;       /* forked while its parent's hooks were in (the kernel said so,
                                or its HELLO): its agent connects at its fork, before any code
                                of its own */
    int parent_starting;     /* forked while its parent's session was starting: it may have
                                no session of its own (it is injected soon) */
    int python;              /* preflight said CPython (for M_SKIPPED: refused, not foreign) */
    int unseen;              /* M_SKIPPED: ended before its executable could be read (what it
                                ran, Python or not, is not known) */
    int retries;
    int retry_ms;            /* M_RETRY: how long after `since` */
    pid_t helper;            /* the child of ours injecting it (inject_aside), or 0 */
    int helper_not_ours;     /* ... a catcher (the watcher's child, reaped by it): no waitpid */
    int helper_fd;           /* its report (struct aside_report), -1 when none */
    unsigned share_mb;
    int share_returned;      /* its share went back to the reserve */
    int64_t since;           /* when it entered its state (ms) */
    int64_t born_ms;         /* when the kernel announced its fork (ms), 0 if not seen */
    int64_t ended_ms;        /* when the kernel announced its exit (ms), 0 if not seen */
    int64_t exec_ms;         /* ... its last exec (ms), 0 if not seen */
    int64_t inject_ms;       /* when its injection began (ms) */
    int64_t heard_ms;        /* when its last frame came (ms), 0 before the first */
    int first_stop;          /* running when the tree began to stop: sent STOP then */
    int stop_sent;           /* STOP sent (once, whether the send succeeded or not) */
    uint64_t bytes;
    char exe[256];           /* for skipped ones: re-examined when it execs */
    char name[160];
    char why[320];
    char end[512];           /* END text */
};

/* A listening control socket in one network namespace: an agent connects to an abstract
 * name, which exists only in the namespace the socket was made in (control_client.c), so a
 * tree whose processes live in several (the containers of a pod, a process that entered a new
 * one) gets one per namespace, made when its first member there is injected. */
struct listener {
    struct ctl_conn ctl;      /* its fd is the listener, never accepted through ctl_accept */
    dev_t dev;                /* the namespace: /proc/PID/ns/net's identity */
    ino_t ino;
};

/* A process held at its start by a catcher (tree_catch.c), a child of the watcher. */
#define TREE_MAX_CATCHES 64
struct tree_catch {
    pid_t pid;     /* the process held */
    pid_t catcher;
    int go;        /* the pipe that tells the catcher to inject (its write end) */
    int rep;       /* its report once it injects (a helper's: struct aside_report) */
    int pidfd;     /* the catcher's: released through it (never by a pid reused meanwhile) */
};

struct tree_run {
    const struct cli_options *opt;
    struct listener lis[MAX_NETNS]; /* [0]: the root's namespace */
    size_t nlis;
    struct member *m;
    size_t n, cap;
    unsigned budget_mb, reserve_mb;
    unsigned initial_share_mb; /* what each process found at attach gets */
    int stopping;
    int64_t t0;
    char out_dir[PATH_MAX];
    char out_abs[PATH_MAX];
        char *buf;               /* one frame (VC_MSG_MAX + 1) */
    uint64_t received;       /* spool bytes of every process: capped by --max-trace-mb */
    size_t skipped_gone;     /* non-Python members dropped from m[] once their process ended */
    size_t unseen_gone;      /* ... of them, those that ended unseen (member.unseen) */
    size_t peak;             /* the most members m[] held at once (reported with -v) */
    uint64_t last_ns;        /* --last: only the final part of the trace is kept (0: all) */
    struct tree_kin kin;     /* the tree's processes by identity (tree_kin.h) */
    struct proc_events *pev; /* the kernel's forks, execs, exits (proc_events.h), or NULL */
    int discover_now;        /* a member forked or exec'd: look at /proc without waiting */
    /* catching new interpreters at their start (tree_catch.c) */
    pid_t catch_watcher;     /* the child that starts a catcher at each exec, 0 none */
    int catch_sock;          /* its notes of the catchers it started, -1 none */
    struct tree_catch catches[TREE_MAX_CATCHES]; /* processes held now, by pid */
    size_t ncatches;
};

/* ---- the member table (tree_members.c) ---------------------------------------------------- */

/* The member of pid: the newest one (pids wrap: an earlier process that had it may still hold
 * its trace, for the build; whether the newest is the process now behind the pid, the caller
 * asks tree_same_process or the peer's identity).  NULL if none. */
struct member *tree_find(struct tree_run *r, pid_t pid);
/* A new member for pid (M_CONNECT, named from its command line), or NULL (out of memory:
 * said).  tree_new_slot is the same without the name. */
struct member *tree_add(struct tree_run *r, pid_t pid);
struct member *tree_new_slot(struct tree_run *r, pid_t pid);
/* Is the member's process still the one behind its pid (its start time)? */
int tree_same_process(const struct member *m);
/* A member that holds nothing (no connection, no part, no budget share) of a gone process:
 * tree_rebind gives its slot to the new process with its pid. */
int tree_holds_nothing(const struct member *m);
void tree_rebind(struct tree_run *r, struct member *m);
/* Drops the members of ended non-Python processes beyond what -v lists. */
void tree_compact(struct tree_run *r);
void tree_set_state(struct member *m, enum mstate st);
/* Connected or about to be (its state still moves). */
int tree_active(const struct member *m);
/* The members traced or being traced: what --max-processes bounds. */
size_t tree_traced_count(const struct tree_run *r);
/* The records of its spools (and --last's rotated ones); *dropped: theirs dropped. */
uint64_t tree_member_records(const struct member *m, uint64_t *dropped);
/* Ends a member's connection in state st (why: the account's reason); its budget share goes
 * back to the reserve (but for M_RETRY). */
void tree_finish(struct tree_run *r, struct member *m, enum mstate st, const char *why);
/* A newcomer's share of the budget, taken from the reserve; 0 if the reserve is spent. */
unsigned tree_share_for(struct tree_run *r);

/* ---- catching a new interpreter at its start (tree_catch.c) ------------------------------ */

/* Whether an executable's name says it is an interpreter ("python3.12", "python3.14-dbg"). */
int tree_exe_names_python(const char *exe);
/* From the start of the trace: a child of ours (the watcher) starts a catcher for every
 * descendant that exec's an interpreter, at once, which holds it at the start of its
 * initialization until it is injected or let go (or its own bound); nothing with
 * --method remote-exec.  tree_catch_end stops it all. */
void tree_catch_start(struct tree_run *r);
void tree_catch_end(struct tree_run *r);
/* Lets pid's process go (kills its catcher): right before it is injected, and at every end
 * of its examination.  A no-op without a catcher. */
void tree_catch_release(struct tree_run *r, pid_t pid);
/* The catcher holding pid's process, 0 if none. */
pid_t tree_catcher_of(struct tree_run *r, pid_t pid);
/* Instead of letting m's process go and injecting it from a new helper: its catcher injects
 * it with t and method (ptrace only) where it holds it, without letting it run, then reports
 * as a helper does (m->helper, m->helper_fd: tree_inject_report).  0 handed over, or -1 (no
 * catcher, another method, or it is gone): the caller lets it go and injects as usual. */
int tree_catch_inject(struct tree_run *r, struct member *m, const struct target_info *t,
                      enum inject_method method);
void tree_catch_release_all(struct tree_run *r);

/* ---- injecting aside (tree_trace.c) ------------------------------------------------------- */

/* In a child of ours (a helper, or a catcher handed the injection): injects pid (t, method)
 * to connect to ctl's listener, holds it after if it is young (exec_ms: when it exec'd, 0 not
 * known), and writes its struct aside_report to report_fd. */
void tree_inject_report(const struct tree_run *r, pid_t pid, int64_t exec_ms,
                        struct target_info *t, struct ctl_conn *ctl, enum inject_method method,
                        int report_fd);
void tree_catch_release_all(struct tree_run *r);

/* ---- the listeners (tree_listeners.c) ----------------------------------------------------- */

/* The listener in pid's network namespace, made there (ctl_listen enters it for the socket)
 * when it is the first member in it.  Its index in r->lis, or -1 with err. */
int tree_listener_for(struct tree_run *r, pid_t pid, char *err, size_t errlen);
/* Closes every listener (at the end of the run). */
void tree_listeners_close(struct tree_run *r);

/* ---- the result (tree_result.c) ------------------------------------------------------------ */

/* OUT from every done member's spool, then the spools go.  0, or -1 after printing why (the
 * spools stay, for `vcattach recover`).  *nparts: the processes in OUT; *unnamed: the records
 * of threads that never got a name. */
int tree_write_merged(struct tree_run *r, struct trace_sink *sink, size_t *nparts,
                      uint64_t *unnamed);
/* The summary line and the account of every process. */
void tree_print_result(struct tree_run *r, const struct trace_sink *sink, int64_t traced,
                       uint64_t unnamed);

#endif /* VC_TREE_RUN_H */

/* attach.h — the steps every attach takes, for one process (trace_process.c) and for each
 * process of a tree (tree_trace.c, tree_sessions.c), so that the two cannot drift apart:
 *
 *   signals     SIGINT/SIGTERM/SIGHUP only count (attach_interrupts; the second one sets
 *               attach_abandon), SIGPIPE ignored; every wait re-checks them
 *   preflight   preflight_target + the --hook checks against the target's version
 *   method      auto/remote-exec/ptrace/gdb for this target (inject_choose), refusals as
 *               preflight failures
 *   names       OUT when none is given, the agent's fallback file, a tree's part names
 *   CONFIG      the text every agent of the session gets (deadline, buffer, hook, filters)
 *   injection   the agent's copy for a target that cannot see it, inject() (auto's fallback
 *               inside, signals blocked inside), the copy removed again
 *
 * What comes after the injection (accept, CONFIG, the wait, the transfer) differs between a
 * single session and a tree and stays with each workflow.
 */
#ifndef VC_ATTACH_H
#define VC_ATTACH_H

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "attach_options.h"
#include "control_client.h"
#include "preflight.h"
#include "vcinject.h"

/* Bounds shared by every workflow (ms). */
#define ATTACH_INJECT_TIMEOUT_MS 10000
/* remote-exec: how long a thread may take to reach an evaluation breaker before the request
 * is withdrawn (a busy interpreter takes it within its 5 ms switch interval; a thread blocked
 * in C never does) */
#define ATTACH_REXEC_TIMEOUT_MS 2000
#define ATTACH_ACCEPT_TIMEOUT_MS 10000
#define ATTACH_STARTED_TIMEOUT_MS 15000 /* the agent must get the GIL to install its hooks */
/* The agent's own deadline is a backstop behind our STOP (which is the normal stop). */
#define ATTACH_DEADLINE_GRACE_MS 3000

/* ---- signals ---------------------------------------------------------------------------- */

extern volatile sig_atomic_t attach_interrupts; /* Ctrl-C (SIGINT/SIGTERM/SIGHUP) count */
extern volatile sig_atomic_t attach_abandon;    /* set by the second one */

struct attach_signals {
    struct sigaction old[3];
    struct sigaction old_pipe;
};

/* Installs the counting handlers (no SA_RESTART: blocking calls return EINTR) and ignores
 * SIGPIPE; resets both counters. */
void attach_signals_install(struct attach_signals *saved);
void attach_signals_restore(const struct attach_signals *saved);

/* ---- preflight and method --------------------------------------------------------------- */

/* preflight_target, then the --hook choice against the target's version.  0 with *t filled
 * (release with preflight_release), or -1 with one line in err (nothing to release). */
int attach_preflight(const struct cli_options *opt, pid_t pid, struct target_info *t, char *err,
                     size_t errlen);
/* The same for a process a child of ours (held_by) holds at its start (tree_catch.h): that
 * tracer, and the tracing stop it keeps the process in, are not refused. */
int attach_preflight_held(const struct cli_options *opt, pid_t pid, pid_t held_by,
                          struct target_info *t, char *err, size_t errlen);

/* The injection method for this target: --method, with auto resolved (inject_choose).
 * 0 with *m, or -1 with one line in err (an explicit remote-exec that cannot be used).
 * auto's reason for not using remote-exec is printed with -v. */
int attach_choose_method(const char *cmd, const struct cli_options *opt,
                         const struct target_info *t, enum inject_method *m, char *err,
                         size_t errlen);

/* ---- names -------------------------------------------------------------------------------- */

/* "vcattach-PID-DATE-TIME.cvf" (tree: "vcattach-PID-tree-DATE-TIME.cvf"), in the current
 * directory: OUT when -o is not given. */
void attach_default_output(pid_t pid, int tree, char *buf, size_t cap);
/* OUT without its ".cvf": the stem the other names are made from. */
void attach_output_stem(const char *out, char *buf, size_t cap);
/* What the agent writes if vcattach vanishes: OUT.partial.cvf, or for a tree's member
 * OUT.PID.partial.cvf (pid > 0). */
void attach_fallback_name(const char *out, pid_t pid, char *buf, size_t cap);
/* A `start --subprocesses` member's own output: OUT.PID.cvf. */
void attach_part_name(const char *out, pid_t pid, char *buf, size_t cap);
/* 1 if the directory of the absolute path `file` is the same directory for pid (through
 * /proc/PID/root), else 0. */
int attach_dir_shared(pid_t pid, const char *file);
/* The fallback name (attach_fallback_name(out, member)) as pid can write it: unchanged when
 * OUT's directory is the same for pid, else the same base name in pid's own /tmp (a target
 * in another mount namespace or root).  *moved says which.  0, or -1 if it does not fit. */
int attach_fallback_for(pid_t pid, const char *out, pid_t member, char *buf, size_t cap,
                        int *moved);

/* ---- CONFIG --------------------------------------------------------------------------------- */

/* The CONFIG text of a session: output, fallback, deadline (start: -t; trace: -t plus the
 * grace), buffer, hook, filters, force, detach for start.  0, or -1 if it does not fit. */
int attach_build_config(const struct cli_options *opt, const char *output, const char *fallback,
                        char *cfg, size_t cap);

/* ---- injection ---------------------------------------------------------------------------- */

/* Loads the agent into t with method m, the agent connecting to c's listening socket: first a
 * copy of the agent in the target's /tmp when it cannot see ours (removed again once loaded),
 * then inject().  remote-exec waits for the agent's connection itself (c->fd >= 0 after it);
 * with auto, a request nothing took falls back to ptrace (said on stderr unless -q).
 * 0; -1 with one line in err when the agent could not be made visible to the target (nothing
 * was injected); with the injector's line in err when the injection failed, -2 if nothing ran
 * in the target (INJECT_UNTOUCHED: another try is safe), -3 if a call did (INJECT_FAILED: it
 * was abandoned, a crashed dlopen may have left the loader half done: never tried again). */
int attach_inject(const struct cli_options *opt, struct target_info *t, struct ctl_conn *c,
                  enum inject_method m, char *err, size_t errlen);
/* attach_inject with the caller's own wait for remote-exec's connection (a tree: its one
 * listener takes the connections of every member, and the wait goes through its loop).
 * wait(ctx, ms): 1 connected, 0 not yet, -1 give up (vcinject.h's inject_wait_fn). */
int attach_inject_waiting(const struct cli_options *opt, struct target_info *t,
                          struct ctl_conn *c, enum inject_method m, inject_wait_fn wait,
                          void *ctx, char *err, size_t errlen);
/* attach_inject_waiting, then then(then_ctx) right after a successful injection, before
 * anything else (the agent's copy is removed after it): a tree holds a young process there,
 * before it can run on (tree_trace.c). */
int attach_inject_then(const struct cli_options *opt, struct target_info *t,
                       struct ctl_conn *c, enum inject_method m, inject_wait_fn wait, void *ctx,
                       void (*then)(void *then_ctx), void *then_ctx, char *err, size_t errlen);

#endif /* VC_ATTACH_H */

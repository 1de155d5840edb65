/* inject.c — owns vcinject.h part 3: inject_choose, inject and inject_method_name, the one
 * door from the CLI to the injection methods (method.h).
 *
 * Why here and not in the CLI: which method suits a target (remote-exec needs 3.14+ and a
 * target that accepts it), auto's fallback from a remote-exec that nothing took to ptrace, the
 * last re-check of the target before it is touched, and the signals blocked around ptrace/gdb
 * (an injection is never cut in half) are rules of injecting, the same for every caller (one
 * target, a tree).  What stays with the caller is its own end of the session: the control
 * socket, and waiting for the agent to connect (req->wait_connected), which remote-exec needs
 * while its request is posted.
 */
#include "vcinject.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "method.h"
#include "proc.h"
#include "ptrace.h"
#include "rexec_script.h"
#include "watchdog.h"

#define UNTOUCHED_NOTE " (the target was not changed)"
/* The ptrace method ends by its own deadline; past it by this much, it is stuck in the kernel
 * (watchdog.h). */
#define WATCHDOG_GRACE_MS 5000

const char *inject_method_name(enum inject_method m)
{
    switch (m) {
    case INJECT_AUTO:
        return "auto";
    case INJECT_REMOTE_EXEC:
        return "remote-exec";
    case INJECT_PTRACE:
        return "ptrace";
    case INJECT_GDB:
        return "gdb";
    }
    return "?";
}

int inject_choose(const struct target_facts *t, enum inject_method method,
                  enum inject_method *chosen, char *note, size_t notelen, char *err,
                  size_t errlen)
{
    if (note && notelen)
        note[0] = '\0';
    *chosen = method == INJECT_AUTO ? INJECT_PTRACE : method;
    if (method != INJECT_REMOTE_EXEC && method != INJECT_AUTO)
        return 0;
    if (t->py.major != 3 || t->py.minor < 14) {
        if (method == INJECT_AUTO)
            return 0;
        snprintf(err, errlen, "--method remote-exec needs Python 3.14+ (PEP 768) and pid %d "
                 "runs %d.%d: use --method ptrace", (int)t->pid, t->py.major, t->py.minor);
        return -1;
    }
    char why[512];
    if (inject_remote_exec_check(t->pid, why, sizeof why) == INJECT_OK) {
        *chosen = INJECT_REMOTE_EXEC;
        return 0;
    }
    if (method == INJECT_REMOTE_EXEC) {
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    if (note && notelen)
        snprintf(note, notelen, "%s", why);
    return 0;
}

/* The caller's wait, seen through: cancel honoured before each slice, and a give-up (-1)
 * remembered, since it forbids the fallback (interrupted, target gone, a broken connection). */
struct wait_through {
    const struct inject_request *req;
    int gave_up;
};

static int wait_through(void *ctx, int wait_ms)
{
    struct wait_through *w = ctx;
    if (w->req->cancel && *w->req->cancel) {
        w->gave_up = 1;
        return -1;
    }
    int r = w->req->wait_connected(w->req->wait_ctx, wait_ms);
    if (r < 0)
        w->gave_up = 1;
    return r;
}

/* PEP 768: the loader script in the target's /tmp, the request, and the script removed again
 * whatever happened (once the agent connected it is no longer read).  An inject_status;
 * *gave_up when the caller's wait ended it (no fallback then). */
static int run_remote_exec(const struct inject_request *req, int *gave_up, char *err,
                           size_t errlen)
{
    const struct target_facts *t = req->target;
    *gave_up = 0;
    if (!req->wait_connected) {
        snprintf(err, errlen, "remote-exec: no wait for the agent's connection was given");
        return INJECT_UNTOUCHED;
    }
    struct method_request m = {
        .pid = t->pid,
        .agent_path = req->agent_path,
        .control_path = req->control_path,
        .timeout_ms = req->rexec_timeout_ms,
        .verbose = req->verbose,
    };
    struct rexec_script script;
    if (rexec_script_create(t->pid, req->agent_path, req->control_path, &script, err, errlen) <
        0)
        return INJECT_UNTOUCHED;
    if (req->verbose)
        fprintf(stderr, "vcattach: remote-exec: script %s (target's view)\n", script.path);
    struct wait_through w = {.req = req};
    int script_in_use = 0;
    int st = inject_remote_exec(&m, script.path, wait_through, &w, &script_in_use, err, errlen);
    if (!script_in_use)
        rexec_script_remove(&script);
    *gave_up = w.gave_up;
    return st;
}

/* ptrace or gdb, with SIGINT/SIGTERM/SIGHUP blocked (pending ones are delivered after). */
static int run_ptrace_or_gdb(const struct inject_request *req, enum inject_method method,
                             char *err, size_t errlen)
{
    const struct target_facts *t = req->target;
    if (proc_check_agent(t->pid, req->agent_path, t->uid[3], t->gid[3], err, errlen) < 0)
        return INJECT_UNTOUCHED;
    struct method_request m = {
        .pid = t->pid,
        .agent_path = req->agent_path,
        .control_path = req->control_path,
        .timeout_ms = req->timeout_ms,
        .verbose = req->verbose,
        .facts = t,
        .caught = method == INJECT_PTRACE ? req->caught : NULL,
    };
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, &old);
    int st;
    if (method == INJECT_GDB) {
        st = inject_gdb(&m, err, errlen); /* gdb is a process of its own, killed at its bound */
    } else {
        /* ptrace reads the target's memory from this very process: its last bound */
        struct watchdog w;
        int ms = (m.timeout_ms > 0 ? m.timeout_ms : 10000) + WATCHDOG_GRACE_MS;
        int armed = watchdog_arm(&w, ms, t->pid) == 0;
        st = inject_ptrace(&m, err, errlen);
        if (armed)
            watchdog_disarm(&w);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return st;
}

/* A caught thread the method did not take (another method, or a refusal before it ran) is
 * let go here: the injection owns it from the call on (vcinject.h inject_request.caught). */
static void let_caught_go(const struct inject_request *req)
{
    if (req->caught == NULL || req->target == NULL)
        return;
    struct tracee_group g = {.pid = req->target->pid, .t = req->caught, .n = 1, .cap = 1};
    pt_detach(&g, req->caught);
}

static int inject_once(const struct inject_request *req, struct inject_result *res, char *err,
                       size_t errlen);

int inject(const struct inject_request *req, struct inject_result *res, char *err,
           size_t errlen)
{
    if (req->caught != NULL && req->method != INJECT_PTRACE)
        let_caught_go(req); /* another method needs the thread free (gdb: its own tracer) */
    int st = inject_once(req, res, err, errlen);
    let_caught_go(req);
    return st;
}

static int inject_once(const struct inject_request *req, struct inject_result *res, char *err,
                       size_t errlen)
{
    memset(res, 0, sizeof *res);
    err[0] = '\0';
    enum inject_method method = req->method;
    res->used = method;
    if (!req->target || method == INJECT_AUTO || !req->agent_path || !req->control_path) {
        snprintf(err, errlen, "inject: no target, no agent or control path, or method auto "
                 "(choose it with inject_choose)" UNTOUCHED_NOTE);
        return INJECT_UNTOUCHED;
    }
    int held = req->caught != NULL && req->method == INJECT_PTRACE;
    if ((held ? target_facts_recheck_ours : target_facts_recheck)(req->target, err, errlen) < 0) {
        if (method != INJECT_REMOTE_EXEC && strlen(err) + sizeof UNTOUCHED_NOTE < errlen)
            strcat(err, UNTOUCHED_NOTE);
        return INJECT_UNTOUCHED;
    }
    if (method == INJECT_REMOTE_EXEC) {
        int gave_up;
        int st = run_remote_exec(req, &gave_up, err, errlen);
        if (st == INJECT_OK)
            res->connected = 1;
        if (st != INJECT_UNTOUCHED || !req->fallback || gave_up ||
            (req->cancel && *req->cancel))
            return st;
        snprintf(res->fell_back, sizeof res->fell_back, "%s", err);
        err[0] = '\0';
        method = res->used = INJECT_PTRACE;
        /* the remote-exec wait took time: the target is re-checked before ptrace too */
        if (target_facts_recheck(req->target, err, errlen) < 0) {
            if (strlen(err) + sizeof UNTOUCHED_NOTE < errlen)
                strcat(err, UNTOUCHED_NOTE);
            return INJECT_UNTOUCHED;
        }
    }
    int st = run_ptrace_or_gdb(req, method, err, errlen);
    if (st == INJECT_UNTOUCHED && strlen(err) + sizeof UNTOUCHED_NOTE < errlen)
        strcat(err, UNTOUCHED_NOTE);
    return st;
}

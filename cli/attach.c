/* attach.c — the steps every attach takes, one process or each process of a tree (attach.h).
 *
 * Why one file: the single-target and the tree workflow used to carry a copy each of the
 * signal handling, the output names, the method choice and the injection, and the copies
 * drifted (the tree checked --hook monitoring but not --hook eval).  Everything here prints
 * nothing of its own except auto's fallback notice and -v progress: errors go back as one
 * line, and each workflow decides what a failure means for it (an exit code for a single
 * target, a skipped member for a tree).
 */
#include "attach.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent_locate.h"
#include "commands.h"
#include "say.h"

volatile sig_atomic_t attach_interrupts;
volatile sig_atomic_t attach_abandon;

static const int handled_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_HANDLED (sizeof handled_signals / sizeof handled_signals[0])

static void on_interrupt(int sig)
{
    (void)sig;
    if (++attach_interrupts >= 2)
        attach_abandon = 1;
}

void attach_signals_install(struct attach_signals *saved)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt; /* no SA_RESTART: blocking calls return EINTR */
    sigemptyset(&sa.sa_mask);
    attach_interrupts = attach_abandon = 0;
    for (size_t i = 0; i < N_HANDLED; i++)
        sigaction(handled_signals[i], &sa, &saved->old[i]);
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &saved->old_pipe);
}

void attach_signals_restore(const struct attach_signals *saved)
{
    for (size_t i = 0; i < N_HANDLED; i++)
        sigaction(handled_signals[i], &saved->old[i], NULL);
    sigaction(SIGPIPE, &saved->old_pipe, NULL);
}

/* --hook against what the target runs: monitoring needs 3.12+, the frame evaluator 3.9-3.13
 * and --no-c-calls (it sees Python calls only).  0, or -1 with err. */
static int check_hook(const struct cli_options *opt, const struct target_info *t, char *err,
                      size_t errlen)
{
    const struct target_python *py = &t->f.py;
    if (!strcmp(opt->hook, "monitoring") && py->minor < 12) {
        snprintf(err, errlen, "--hook monitoring needs Python 3.12+ and pid %d runs %d.%d: use "
                              "--hook profile (or auto)", (int)t->f.pid, py->major, py->minor);
        return -1;
    }
    if (strcmp(opt->hook, "eval") != 0)
        return 0;
    if (!opt->no_c_calls) {
        snprintf(err, errlen, "--hook eval sees Python calls only: add --no-c-calls (or use "
                              "--hook auto to trace C calls too)");
        return -1;
    }
    if (py->minor < 9 || py->minor > 13) {
        snprintf(err, errlen, "--hook eval needs Python 3.9-3.13 and pid %d runs %d.%d: use "
                              "--hook auto", (int)t->f.pid, py->major, py->minor);
        return -1;
    }
    return 0;
}

int attach_preflight(const struct cli_options *opt, pid_t pid, struct target_info *t, char *err,
                     size_t errlen)
{
    return attach_preflight_held(opt, pid, 0, t, err, errlen);
}

int attach_preflight_held(const struct cli_options *opt, pid_t pid, pid_t held_by,
                          struct target_info *t, char *err, size_t errlen)
{
    if (preflight_target(pid, held_by, t, err, errlen) < 0)
        return -1;
    if (check_hook(opt, t, err, errlen) < 0) {
        preflight_release(t);
        return -1;
    }
    return 0;
}

static enum inject_method method_of(enum cli_method m)
{
    switch (m) {
    case CLI_METHOD_PTRACE: return INJECT_PTRACE;
    case CLI_METHOD_GDB: return INJECT_GDB;
    case CLI_METHOD_REMOTE_EXEC: return INJECT_REMOTE_EXEC;
    default: return INJECT_AUTO;
    }
}

int attach_choose_method(const char *cmd, const struct cli_options *opt,
                         const struct target_info *t, enum inject_method *m, char *err,
                         size_t errlen)
{
    char note[512] = "";
    if (inject_choose(&t->f, method_of(opt->method), m, note, sizeof note, err, errlen) < 0)
        return -1;
    if (note[0] && opt->verbose)
        say("%s: not using remote-exec: %s; using ptrace\n", cmd, note);
    return 0;
}

/* ---- names -------------------------------------------------------------------------------- */

void attach_default_output(pid_t pid, int tree, char *buf, size_t cap)
{
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    snprintf(buf, cap, "vcattach-%d-%s%s.cvf", (int)pid, tree ? "tree-" : "", stamp);
}

void attach_output_stem(const char *out, char *buf, size_t cap)
{
    size_t n = strlen(out);
    if (n > 4 && !strcmp(out + n - 4, ".cvf"))
        n -= 4;
    snprintf(buf, cap, "%.*s", (int)n, out);
}

void attach_fallback_name(const char *out, pid_t pid, char *buf, size_t cap)
{
    char stem[PATH_MAX];
    attach_output_stem(out, stem, sizeof stem);
    if (pid > 0)
        snprintf(buf, cap, "%s.%d.partial.cvf", stem, (int)pid);
    else
        snprintf(buf, cap, "%s.partial.cvf", stem);
}

void attach_part_name(const char *out, pid_t pid, char *buf, size_t cap)
{
    char stem[PATH_MAX];
    attach_output_stem(out, stem, sizeof stem);
    snprintf(buf, cap, "%s.%d.cvf", stem, (int)pid);
}

int attach_dir_shared(pid_t pid, const char *file)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return 0;
    slash[slash == dir ? 1 : 0] = '\0';
    return target_same_file(pid, dir);
}

int attach_fallback_for(pid_t pid, const char *out, pid_t member, char *buf, size_t cap,
                        int *moved)
{
    char name[PATH_MAX + 64];
    attach_fallback_name(out, member, name, sizeof name);
    *moved = !attach_dir_shared(pid, out);
    if (*moved) { /* the agent writes it in its own view: its /tmp (preflight checked it) */
        const char *base = strrchr(name, '/');
        char in_tmp[sizeof name + 8];
        snprintf(in_tmp, sizeof in_tmp, "/tmp/%s", base ? base + 1 : name);
        return snprintf(buf, cap, "%s", in_tmp) < (int)cap ? 0 : -1;
    }
    return snprintf(buf, cap, "%s", name) < (int)cap ? 0 : -1;
}

/* ---- CONFIG --------------------------------------------------------------------------------- */

static int append_u64(char *cfg, size_t cap, size_t *used, const char *key, uint64_t v)
{
    char num[32];
    snprintf(num, sizeof num, "%llu", (unsigned long long)v);
    return vc_kv_append(cfg, cap, used, key, num);
}

int attach_build_config(const struct cli_options *opt, const char *output, const char *fallback,
                        char *cfg, size_t cap)
{
    size_t used = 0;
    cfg[0] = '\0';
    uint64_t deadline = 0;
    if (opt->mode == CLI_START)
        deadline = opt->duration_ms;
    else if (opt->duration_ms)
        deadline = opt->duration_ms + ATTACH_DEADLINE_GRACE_MS;
    int rc = vc_kv_append(cfg, cap, &used, "output", output);
    rc |= vc_kv_append(cfg, cap, &used, "fallback", fallback);
    rc |= append_u64(cfg, cap, &used, "duration_ms", deadline);
    /* Records stream while tracing (docs/protocol.md "Streaming"): to vcattach (trace), or
     * into the agent's own spool next to OUT (start).  The window is the target's growth:
     * 32 MiB for trace; start's agent also holds 8 MiB of spool in memory, so 24 + 8. */
    rc |= vc_kv_append(cfg, cap, &used, "stream", "1");
    rc |= append_u64(cfg, cap, &used, "buffer_mb", opt->buffer_mb ? opt->buffer_mb
                                                   : opt->mode == CLI_START ? CLI_START_WINDOW_MB
                                                                            : CLI_WINDOW_MB);
    rc |= vc_kv_append(cfg, cap, &used, "hook", opt->hook);
    /* The filters: part of the config every process of the session gets. */
    for (unsigned i = 0; i < opt->n_include; i++)
        rc |= vc_kv_append(cfg, cap, &used, "include", opt->include[i]);
    for (unsigned i = 0; i < opt->n_exclude; i++)
        rc |= vc_kv_append(cfg, cap, &used, "exclude", opt->exclude[i]);
    if (opt->no_c_calls)
        rc |= vc_kv_append(cfg, cap, &used, "no_c_calls", "1");
    if (opt->null_hook)
        rc |= vc_kv_append(cfg, cap, &used, "null_hook", "1");
    if (opt->no_tasks)
        rc |= vc_kv_append(cfg, cap, &used, "tasks", "0");
    if (opt->max_depth)
        rc |= append_u64(cfg, cap, &used, "max_depth", opt->max_depth);
    if (opt->min_dur_ns)
        rc |= append_u64(cfg, cap, &used, "min_dur_ns", opt->min_dur_ns);
    if (opt->mode == CLI_START) {
        rc |= vc_kv_append(cfg, cap, &used, "detach", "1");
        if (opt->force) /* the agent writes OUT itself: it may replace one only when told */
            rc |= vc_kv_append(cfg, cap, &used, "force", "1");
        if (opt->last_ms) /* its own spool keeps the final DUR (agent/stream.c) */
            rc |= append_u64(cfg, cap, &used, "last_ms", opt->last_ms);
    }
    return rc ? -1 : 0;
}

/* ---- injection ---------------------------------------------------------------------------- */

/* remote-exec's wait for the agent: the control socket's accept, in the slices the injector
 * asks for.  A connection that broke after accept() (no greeting) ends the wait for good. */
struct agent_wait {
    struct ctl_conn *c;
    int broken;
    char err[512];
};

static int wait_agent(void *ctx, int wait_ms)
{
    struct agent_wait *w = ctx;
    if (w->broken)
        return -1;
    if (w->c->fd >= 0)
        return 1;
    if (attach_interrupts || !target_alive(w->c->pid))
        return -1;
    if (ctl_accept(w->c, wait_ms, &attach_interrupts, w->err, sizeof w->err) == 0)
        return 1;
    if (w->c->fd >= 0) {
        w->broken = 1;
        return -1;
    }
    return attach_interrupts || !target_alive(w->c->pid) ? -1 : 0;
}

int attach_inject(const struct cli_options *opt, struct target_info *t, struct ctl_conn *c,
                  enum inject_method m, char *err, size_t errlen)
{
    struct agent_wait w = {.c = c};
    int st = attach_inject_waiting(opt, t, c, m, wait_agent, &w, err, errlen);
    if (w.broken && st <= -2)
        snprintf(err, errlen, "%s", w.err);
    return st;
}

int attach_inject_waiting(const struct cli_options *opt, struct target_info *t,
                          struct ctl_conn *c, enum inject_method m, inject_wait_fn wait,
                          void *ctx, char *err, size_t errlen)
{
    return attach_inject_then(opt, t, c, m, wait, ctx, NULL, NULL, err, errlen);
}

int attach_inject_then(const struct cli_options *opt, struct target_info *t,
                       struct ctl_conn *c, enum inject_method m, inject_wait_fn wait, void *ctx,
                       void (*then)(void *then_ctx), void *then_ctx, char *err, size_t errlen)
{
    int copy_made = 0; /* a copy of the agent to remove once the target has loaded it */
    if (t->agent_needs_copy) {
        if (agent_copy_into_target(t->f.pid, t->f.uid[1], t->f.gid[1], t->agent,
                                   t->agent_in_target, sizeof t->agent_in_target, &copy_made,
                                   err, errlen) < 0)
            return -1;
        if (opt->verbose && copy_made)
            say("vcattach: agent copied into the target's mount namespace as %s\n",
                    t->agent_in_target);
        else if (opt->verbose)
            say("vcattach: agent already loaded in the target as %s: reused\n",
                    t->agent_in_target);
    }
    struct inject_request req = {
        .target = &t->f,
        .method = m,
        .fallback = opt->method == CLI_METHOD_AUTO,
        .agent_path = t->agent_in_target,
        .control_path = c->target_path,
        .timeout_ms = ATTACH_INJECT_TIMEOUT_MS,
        .rexec_timeout_ms = ATTACH_REXEC_TIMEOUT_MS,
        .wait_connected = wait,
        .wait_ctx = ctx,
        .cancel = &attach_interrupts,
        .verbose = opt->verbose,
        .caught = t->caught,
    };
    struct inject_result res;
    memset(&res, 0, sizeof res);
    int st = inject(&req, &res, err, errlen);
    if (st == INJECT_OK && then != NULL)
        then(then_ctx);
    if (copy_made) /* loaded (mapped) or not, the copy's name is not needed any more */
        agent_copy_remove(t->f.pid, t->f.uid[1], t->f.gid[1], t->agent_in_target);
    if (res.fell_back[0] && !opt->quiet)
        say("vcattach: remote-exec: %s; falling back to ptrace\n", res.fell_back);
    return st == INJECT_OK ? 0 : st == INJECT_FAILED ? -3 : -2;
}

/* tree_sessions.c — `start|stop|status --subprocesses` (tree_sessions.h).
 *
 * start attaches each Python process of the tree with the single-target workflow
 * (trace_process.c), its share of the --buffer-mb budget and its own part name
 * (attach.c's OUT.PID.cvf); stop asks each session of the tree through its status socket and,
 * when every part has the common name of one `start --subprocesses`, merges them
 * (trace/merge.c) into OUT.cvf and removes them.
 */
#include "tree_sessions.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach.h"
#include "commands.h"
#include "control_client.h"
#include "merge.h"
#include "trace_process.h"
#include "trace_sink.h"
#include "vcinject.h"

#define DEFAULT_BUDGET_MB 256
#define MIN_SHARE_MB 2
#define STOP_WAIT_MS 60000 /* each agent writes its file before it answers */

/* opt->pid and its Python descendants (at most --max-processes), into a malloc'd array.
 * Returns the count (the root always first), or 0 when out of memory; *over counts the
 * processes left out by the bound. */
static size_t python_tree(const struct cli_options *opt, pid_t **out, size_t *over)
{
    pid_t *kids = NULL;
    long n = target_descendants(opt->pid, &kids);
    if (n < 0)
        n = 0;
    pid_t *all = malloc(((size_t)n + 1) * sizeof *all);
    if (all == NULL) {
        free(kids);
        return 0;
    }
    all[0] = opt->pid;
    size_t total = 1;
    for (long i = 0; i < n; i++) {
        struct target_python py;
        char e[256];
        if (target_python_detect(kids[i], &py, e, sizeof e) == 1)
            all[total++] = kids[i];
        else if (opt->verbose)
            fprintf(stderr, "vcattach start: pid %d skipped: not a CPython process\n",
                    (int)kids[i]);
    }
    free(kids);
    *over = total > opt->max_processes ? total - opt->max_processes : 0;
    *out = all;
    return *over ? opt->max_processes : total;
}

int tree_start(const struct cli_options *opt)
{
    char out[PATH_MAX], stem[PATH_MAX], part[PATH_MAX + 32];
    if (opt->output)
        snprintf(out, sizeof out, "%s", opt->output);
    else
        attach_default_output(opt->pid, 1, out, sizeof out);
    attach_output_stem(out, stem, sizeof stem);
    pid_t *all = NULL;
    size_t over = 0, total = python_tree(opt, &all, &over);
    if (total == 0) {
        fprintf(stderr, "vcattach start: out of memory\n");
        return VC_EXIT_FAIL;
    }
    unsigned budget = opt->buffer_mb ? opt->buffer_mb : DEFAULT_BUDGET_MB;
    unsigned share = budget / (unsigned)total;
    if (share < MIN_SHARE_MB)
        share = MIN_SHARE_MB;
    size_t started = 0;
    int root_rc = VC_EXIT_FAIL;
    for (size_t i = 0; i < total; i++) {
        struct cli_options one = *opt;
        one.pid = all[i];
        one.subprocesses = 0;
        one.quiet = 1;
        one.buffer_mb = share;
        attach_part_name(out, all[i], part, sizeof part);
        one.output = part;
        int rc = trace_process(&one);
        if (i == 0)
            root_rc = rc;
        if (rc == VC_EXIT_OK)
            started++;
        else
            fprintf(stderr, "vcattach start: pid %d not traced (see above); the others go on\n",
                    (int)all[i]);
    }
    free(all);
    if (root_rc != VC_EXIT_OK && started == 0)
        return root_rc;
    if (!opt->quiet) {
        char dur[32];
        size_t kids = started - (root_rc == VC_EXIT_OK);
        cli_format_duration(opt->duration_ms, dur, sizeof dur);
        printf("vcattach: tracing pid %d and %zu Python subprocess%s for %s (%u MiB buffer "
               "each), each writing %s.PID.cvf; `vcattach stop --pid %d --subprocesses` stops "
               "them and merges the traces into %s.cvf%s\n",
               (int)opt->pid, kids, kids == 1 ? "" : "es", dur, share, stem, (int)opt->pid,
               stem, over ? " (processes over --max-processes not traced)" : "");
    }
    return VC_EXIT_OK;
}

/* What `stop --subprocesses` learned from the sessions of a tree. */
struct stopped {
    char (*parts)[PATH_MAX]; /* each session's output, as it reported it */
    size_t found, nparts;
    char base[PATH_MAX];     /* the common OUT of a `start --subprocesses`, "" if none */
    int same_base, failed;
    unsigned long long events, threads, drops;
};

static unsigned long long text_u64(const char *text, const char *key)
{
    char v[32];
    return vc_kv_get(text, key, v, sizeof v) > 0 ? strtoull(v, NULL, 10) : 0;
}

/* One session's END (after STOP): its counts, and its part if it has the common name. */
static void note_stopped(const char *cmd, struct stopped *s, pid_t pid, const char *reply,
                         const char *output)
{
    char v[32];
    long status = vc_kv_get(reply, "status", v, sizeof v) > 0 ? atol(v) : 0;
    char agent_err[1024];
    if (status && vc_kv_get(reply, "error", agent_err, sizeof agent_err) > 0) {
        fprintf(stderr, "%s: the agent in pid %d: %s\n", cmd, (int)pid, agent_err);
        s->failed = 1;
        return;
    }
    if (status) {
        fprintf(stderr, "%s: the agent in pid %d could not write %s (%s)\n", cmd, (int)pid,
                output, strerror((int)-status));
        s->failed = 1;
        return;
    }
    s->events += text_u64(reply, "events");
    s->threads += text_u64(reply, "threads");
    s->drops += text_u64(reply, "drops");
    /* OUT.PID.cvf: the common base of a `start --subprocesses` */
    char suffix[48], b[PATH_MAX];
    snprintf(suffix, sizeof suffix, ".%d.cvf", (int)pid);
    size_t ol = strlen(output), sl = strlen(suffix);
    if (ol > sl && !strcmp(output + ol - sl, suffix)) {
        snprintf(b, sizeof b, "%.*s", (int)(ol - sl), output);
        if (!s->base[0])
            snprintf(s->base, sizeof s->base, "%s", b);
        else if (strcmp(s->base, b))
            s->same_base = 0;
    } else {
        s->same_base = 0;
    }
    snprintf(s->parts[s->nparts++], PATH_MAX, "%s", output);
}

/* Asks one process's session (STATUS or STOP); what it says goes into *s. */
static void ask_one(const struct cli_options *opt, uint32_t request, pid_t pid,
                    struct stopped *s)
{
    const char *cmd = request == VC_MSG_STOP ? "vcattach stop" : "vcattach status";
    char reply[4096], err[512], output[PATH_MAX] = "?";
    int r = ctl_query(pid, request, reply, sizeof reply,
                      request == VC_MSG_STOP ? STOP_WAIT_MS : 2000, err, sizeof err);
    if (r < 0) {
        fprintf(stderr, "%s: pid %d: %s\n", cmd, (int)pid, err);
        s->failed = 1;
        return;
    }
    if (r == 0)
        return;
    s->found++;
    vc_kv_get(reply, "output", output, sizeof output);
    if (request == VC_MSG_STOP) {
        note_stopped(cmd, s, pid, reply, output);
        return;
    }
    char state[32] = "running", v[32];
    vc_kv_get(reply, "state", state, sizeof state);
    if (!opt->quiet)
        printf("vcattach: session %s in pid %d: %s threads, output %s\n", state, (int)pid,
               vc_kv_get(reply, "threads", v, sizeof v) > 0 ? v : "?", output);
}

/* The parts of one `start --subprocesses` merged into BASE.cvf, then removed.  An exit code. */
static int merge_parts(const struct cli_options *opt, const struct stopped *s)
{
    char merged[PATH_MAX + 8], err[1024];
    snprintf(merged, sizeof merged, "%s.cvf", s->base);
    struct trace_sink sink;
    memset(&sink, 0, sizeof sink);
    sink.fd = -1;
    const char **paths = calloc(s->nparts, sizeof *paths);
    for (size_t i = 0; paths && i < s->nparts; i++)
        paths[i] = s->parts[i];
    int rc = VC_EXIT_OK;
    if (paths == NULL || sink_open_file(&sink, merged, 1, err, sizeof err) < 0 ||
        vct_cvf_merge(paths, s->nparts, cvf_sink_fd, (void *)(intptr_t)sink.fd, err,
                      sizeof err) < 0 ||
        sink_commit(&sink, err, sizeof err) < 0) {
        fprintf(stderr, "vcattach stop: merging the traces into %s failed: %s; the parts stay\n",
                merged, paths ? err : "out of memory");
        sink_abort(&sink);
        rc = VC_EXIT_FAIL;
    } else {
        for (size_t i = 0; i < s->nparts; i++)
            unlink(s->parts[i]);
        if (!opt->quiet)
            printf("vcattach: pid %d and its subprocesses: %zu processes traced: %llu events, "
                   "%llu threads, %llu dropped -> %s\n", (int)opt->pid, s->nparts, s->events,
                   s->threads, s->drops, sink.path);
    }
    free(paths);
    return rc;
}

int tree_stop(const struct cli_options *opt, uint32_t request)
{
    const char *cmd = request == VC_MSG_STOP ? "vcattach stop" : "vcattach status";
    if (!target_alive(opt->pid)) {
        fprintf(stderr, "%s: no such process: pid %d\n", cmd, (int)opt->pid);
        return VC_EXIT_FAIL;
    }
    pid_t *kids = NULL;
    long n = target_descendants(opt->pid, &kids);
    if (n < 0)
        n = 0;
    struct stopped s;
    memset(&s, 0, sizeof s);
    s.same_base = 1;
    s.parts = calloc((size_t)n + 1, sizeof *s.parts);
    for (long i = -1; i < n && s.parts; i++)
        ask_one(opt, request, i < 0 ? opt->pid : kids[i], &s);
    free(kids);
    int rc = s.failed ? VC_EXIT_FAIL : VC_EXIT_OK;
    if (!s.found) {
        if (!opt->quiet)
            printf("vcattach: no session is running in pid %d or its subprocesses\n",
                   (int)opt->pid);
        rc = VC_EXIT_FAIL;
    } else if (request == VC_MSG_STOP && s.nparts && (!s.same_base || !s.base[0])) {
        printf("vcattach: stopped %zu sessions; their traces: ", s.nparts);
        for (size_t i = 0; i < s.nparts; i++)
            printf("%s%s", i ? ", " : "", s.parts[i]);
        printf(" (`vcattach convert A B ... -o ONE.cvf` merges them)\n");
    } else if (request == VC_MSG_STOP && s.nparts && merge_parts(opt, &s) != VC_EXIT_OK) {
        rc = VC_EXIT_FAIL;
    }
    free(s.parts);
    return rc;
}

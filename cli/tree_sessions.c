/* tree_sessions.c — `start|stop|status --subprocesses` (tree_sessions.h).
 *
 * start attaches each Python process of the tree with the single-target workflow
 * (trace_process.c), its share of the --buffer-mb budget and its own part name
 * (attach.c's OUT.PID.cvf); stop asks each session of the tree through its status socket and
 * merges the parts vcattach itself named (OUT from tree_record.c, OUT.PID.cvf from it; a
 * member's reply is only compared with that name, never opened) into OUT and removes them;
 * a part that is refused or does not decode (tree_merge.c) is named, stays, and the others
 * are merged (exit 1: the trace is incomplete).
 */
#include "tree_sessions.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "commands.h"
#include "control_client.h"
#include "session_query.h"
#include "trace_process.h"
#include "trace_sink.h"
#include "tree_budget.h"
#include "tree_merge.h"
#include "tree_record.h"
#include "vcinject.h"
#include "human.h"
#include "say.h"
#include "test_seam.h"

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
            say("vcattach start: pid %d skipped: not a CPython process\n",
                    (int)kids[i]);
    }
    free(kids);
    *over = total > opt->max_processes ? total - opt->max_processes : 0;
    *out = all;
    return *over ? opt->max_processes : total;
}

int tree_start(const struct cli_options *opt)
{
    char given[PATH_MAX], out[PATH_MAX], stem[PATH_MAX], part[PATH_MAX + 32], err[512];
    if (opt->output)
        snprintf(given, sizeof given, "%s", opt->output);
    else
        attach_default_output(opt->pid, 1, given, sizeof given);
    /* Absolute, and recorded: stop takes OUT and every part name from this record. */
    if (sink_absolute_path(given, out, sizeof out, err, sizeof err) < 0) {
        say("vcattach start: %s\n", err);
        return VC_EXIT_FAIL;
    }
    if (tree_record_save(opt->pid, out, err, sizeof err) < 0)
        say("vcattach start: warning: %s; `stop --subprocesses` will not merge the "
                        "traces\n", err);
    attach_output_stem(out, stem, sizeof stem);
    pid_t *all = NULL;
    size_t over = 0, total = python_tree(opt, &all, &over);
    if (total == 0) {
        say("vcattach start: out of memory\n");
        return VC_EXIT_FAIL;
    }
    unsigned budget = tree_budget_mb(opt);
    unsigned share = budget / (unsigned)total;
    if (share < TREE_MIN_SHARE_MB)
        share = TREE_MIN_SHARE_MB;
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
            say("vcattach start: pid %d not traced (see above); the others go on\n",
                    (int)all[i]);
    }
    free(all);
    if (root_rc != VC_EXIT_OK && started == 0)
        return root_rc;
    if (!opt->quiet) {
        char dur[32];
        size_t kids = started - (root_rc == VC_EXIT_OK);
        vc_human_ms(opt->duration_ms, dur, sizeof dur);
        say_out("vcattach: tracing pid %d and %zu Python subprocess%s for %s (%u MiB buffer "
               "each), each writing %s.PID.cvf; `vcattach stop --pid %d --subprocesses` stops "
               "them and merges the traces into %s.cvf%s\n",
               (int)opt->pid, kids, kids == 1 ? "" : "es", dur, share, stem, (int)opt->pid,
               stem, over ? " (processes over --max-processes not traced)" : "");
    }
    return VC_EXIT_OK;
}

/* One part of the tree's trace: the file vcattach named OUT.PID.cvf, and who may own it. */
struct part {
    pid_t pid;
    uid_t owner;             /* the member's euid when it was asked (root is accepted too) */
    char path[PATH_MAX + 32]; /* OUT.PID.cvf: the name vcattach chose (and the member reported) */
};

/* What `stop --subprocesses` learned from the sessions of a tree. */
struct stopped {
    struct part *parts;      /* sessions whose output is the name vcattach chose for them */
    size_t found, nparts;
    char out[PATH_MAX];      /* the tree's OUT, from tree_record ("" when none) */
    int strangers;           /* sessions whose output is not a name vcattach chose */
    int failed;
    unsigned long long events, threads, drops;
};

static unsigned long long text_u64(const char *text, const char *key)
{
    char v[32];
    return vc_kv_get(text, key, v, sizeof v) > 0 ? strtoull(v, NULL, 10) : 0;
}

/* One session's END (after STOP): its counts, and its part if its name is the one vcattach
 * chose for this pid (OUT.PID.cvf of the recorded OUT).  A member's reply names no path that
 * root then opens: any descendant can answer on the agent's status name. */
static void note_stopped(const char *cmd, struct stopped *s, pid_t pid, uid_t owner,
                         const char *reply, const char *output)
{
    char v[32];
    long status = vc_kv_get(reply, "status", v, sizeof v) > 0 ? atol(v) : 0;
    char agent_err[1024];
    if (status && vc_kv_get(reply, "error", agent_err, sizeof agent_err) > 0) {
        say("%s: the agent in pid %d: %s\n", cmd, (int)pid, agent_err);
        s->failed = 1;
        return;
    }
    if (status) {
        say("%s: the agent in pid %d could not write %s (%s)\n", cmd, (int)pid,
                output, strerror((int)-status));
        s->failed = 1;
        return;
    }
    s->events += text_u64(reply, "events");
    s->threads += text_u64(reply, "threads");
    s->drops += text_u64(reply, "drops");
    char want[PATH_MAX + 32];
    if (s->out[0])
        attach_part_name(s->out, pid, want, sizeof want);
    struct part *p = &s->parts[s->nparts];
    if (!s->out[0] || strcmp(output, want) != 0) {
        s->strangers++;
        say_out("vcattach: the session in pid %d wrote %s: not a part of this tree's trace%s\n",
               (int)pid, output, s->out[0] ? " (not merged)" : "");
        return;
    }
    p->pid = pid;
    p->owner = owner;
    snprintf(p->path, sizeof p->path, "%s", want);
    s->nparts++;
}

/* Asks one process's session (STATUS or STOP); what it says goes into *s. */
static void ask_one(const struct cli_options *opt, uint32_t request, pid_t pid,
                    struct stopped *s)
{
    const char *cmd = request == VC_MSG_STOP ? "vcattach stop" : "vcattach status";
    char reply[4096], err[512], output[PATH_MAX] = "?";
    uid_t owner = 0;
    uint64_t born = target_start_time(pid);
    if (target_owner(pid, &owner) < 0)
        return; /* gone */
    int r = ctl_query(pid, request, reply, sizeof reply,
                      request == VC_MSG_STOP ? STOP_WAIT_MS : 2000, err, sizeof err);
    if (r < 0) {
        say("%s: pid %d: %s\n", cmd, (int)pid, err);
        s->failed = 1;
        return;
    }
    if (r == 0)
        return;
    s->found++;
    vc_kv_get(reply, "output", output, sizeof output);
    if (request == VC_MSG_STOP) {
        uint64_t now = target_start_time(pid);
        if (now != 0 && now != born) { /* another process got the pid meanwhile */
            say("%s: pid %d changed while it was asked: its reply is ignored\n",
                    cmd, (int)pid);
            s->failed = 1;
            return;
        }
        note_stopped(cmd, s, pid, owner, reply, output);
        return;
    }
    char state[32] = "running", v[32];
    vc_kv_get(reply, "state", state, sizeof state);
    if (!opt->quiet)
        say_out("vcattach: session %s in pid %d: %s threads, output %s\n", state, (int)pid,
               vc_kv_get(reply, "threads", v, sizeof v) > 0 ? v : "?", output);
}

/* One part, opened in OUT's directory without following a link or blocking, checked (a
 * regular file of the member's user or root) and copied with pread into a memfd of ours: the
 * merge maps that copy, never a file someone else can truncate (SIGBUS) or swap.  The memfd,
 * or -1 with err; *st is the part's identity, for the unlink. */
static int part_copy(int dfd, const struct part *p, struct stat *st, char *err, size_t errlen)
{
    const char *base = strrchr(p->path, '/');
    base = base ? base + 1 : p->path;
    int fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%.512s: %s", p->path, strerror(errno));
        return -1;
    }
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode) ||
        (st->st_uid != p->owner && st->st_uid != 0)) {
        snprintf(err, errlen, "%.512s: not a regular file of pid %d's user: refused", p->path,
                 (int)p->pid);
        close(fd);
        return -1;
    }
    int mfd = memfd_create("vcattach-part.cvf", MFD_CLOEXEC);
    if (mfd < 0) {
        snprintf(err, errlen, "memfd_create: %s", strerror(errno));
        close(fd);
        return -1;
    }
    static char buf[1 << 16];
    off_t off = 0, size = st->st_size; /* no more than it had: a file that grows is cut */
    while (off < size) {
        size_t want = size - off < (off_t)sizeof buf ? (size_t)(size - off) : sizeof buf;
        ssize_t n = pread(fd, buf, want, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || write(mfd, buf, (size_t)n) != n)
            break; /* truncated meanwhile: the copy is shorter, the merge says it is malformed */
        off += n;
    }
    close(fd);
    return mfd;
}

/* The parts copied for a merge: a private memfd each, its path for the merge, and the
 * identity of the file it was copied from (only that file is removed afterwards). */
struct copies {
    size_t n;
    int *fds;
    size_t *part;          /* index into stopped.parts */
    struct tree_part *tp;  /* what the merge takes (tree_merge.h): ok once checked */
    struct stat *ids;
    char (*names)[32];     /* "/proc/self/fd/N" */
};

static void copies_free(struct copies *c)
{
    for (size_t i = 0; c->fds && i < c->n; i++)
        close(c->fds[i]);
    free(c->fds);
    free(c->part);
    free(c->tp);
    free(c->ids);
    free(c->names);
}

/* Copies every part that passes part_copy's checks.  0, or -1 when out of memory. */
static int copy_parts(int dfd, const struct stopped *s, struct copies *c, int *rc)
{
    size_t cap = s->nparts ? s->nparts : 1;
    memset(c, 0, sizeof *c);
    c->fds = malloc(cap * sizeof *c->fds);
    c->part = malloc(cap * sizeof *c->part);
    c->tp = calloc(cap, sizeof *c->tp);
    c->ids = calloc(cap, sizeof *c->ids);
    c->names = calloc(cap, sizeof *c->names);
    if (!c->fds || !c->part || !c->tp || !c->ids || !c->names)
        return -1;
    for (size_t i = 0; i < s->nparts; i++) {
        char err[1024];
        int mfd = part_copy(dfd, &s->parts[i], &c->ids[c->n], err, sizeof err);
        if (mfd < 0) {
            say("vcattach stop: pid %d: %s; not merged\n", (int)s->parts[i].pid,
                    err);
            *rc = VC_EXIT_FAIL;
            continue;
        }
        c->fds[c->n] = mfd;
        c->part[c->n] = i;
        snprintf(c->names[c->n], sizeof c->names[c->n], "/proc/self/fd/%d", mfd);
        c->tp[c->n] = (struct tree_part){.pid = s->parts[i].pid, .path = c->names[c->n],
                                         .name = s->parts[i].path};
        c->n++;
    }
    return 0;
}

/* Removes the merged parts: unlinkat in OUT's directory, and only the very file that was
 * copied (not a name swapped meanwhile).  A part left out of the merge stays. */
static void remove_merged(int dfd, const struct stopped *s, const struct copies *c)
{
    for (size_t k = 0; k < c->n; k++) {
        if (!c->tp[k].ok)
            continue;
        const char *path = s->parts[c->part[k]].path;
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        struct stat now;
        if (fstatat(dfd, base, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
            now.st_dev == c->ids[k].st_dev && now.st_ino == c->ids[k].st_ino)
            unlinkat(dfd, base, 0);
    }
}

/* Test-only fault injection (test_seam.h, not in the product): VCATTACH_TEST_MERGE_PAUSE_MS=N (tests/system/test_security_tree.py)
 * makes stop sleep N ms (at most 5 s) after it looked at OUT and before it writes, so that a
 * test can plant a file there in that window.  Unset, it does nothing. */
static void test_pause(void)
{
    const char *v = VC_SEAM(MERGE_PAUSE_MS);
    long ms = v ? strtol(v, NULL, 10) : 0;
    if (ms > 0) {
        ms = ms > 5000 ? 5000 : ms;
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* The parts of one `start --subprocesses` merged into OUT, then removed.  An exit code. */
static int merge_parts(const struct cli_options *opt, const struct stopped *s)
{
    char dir[PATH_MAX], err[1024];
    snprintf(dir, sizeof dir, "%s", s->out);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        say("vcattach stop: cannot open %s: %s; the parts stay\n", dir,
                strerror(errno));
        return VC_EXIT_FAIL;
    }
    int rc = VC_EXIT_OK;
    struct copies c;
    int copied = copy_parts(dfd, s, &c, &rc);
    /* A part that does not decode is named and left out; the others are merged. */
    size_t ok = copied < 0 ? 0 : tree_parts_check("vcattach stop", c.tp, c.n);
    if (copied == 0 && ok < c.n)
        rc = VC_EXIT_FAIL;
    /* The operator's own OUT is replaced as before; a file or link someone else made there
     * (a member of the tree, say), before this look or while the merge runs, is not written
     * over: OUT absent now means a rename that replaces nothing. */
    struct stat ost;
    int force = lstat(s->out, &ost) == 0 && ost.st_uid == geteuid();
    test_pause();
    struct trace_sink sink;
    memset(&sink, 0, sizeof sink);
    sink.fd = -1;
    if (copied < 0) {
        say("vcattach stop: out of memory; the parts stay\n");
        rc = VC_EXIT_FAIL;
    } else if (ok == 0) {
        say("vcattach stop: no part to merge into %s\n", s->out);
        rc = VC_EXIT_FAIL;
    } else if (sink_open_file(&sink, s->out, force, err, sizeof err) < 0 ||
               tree_parts_merge(c.tp, c.n, sink.fd, err, sizeof err) < 0 ||
               sink_commit(&sink, err, sizeof err) < 0) {
        say("vcattach stop: merging the traces into %s failed: %s; the parts stay\n",
                s->out, err);
        sink_abort(&sink);
        rc = VC_EXIT_FAIL;
    } else {
        remove_merged(dfd, s, &c);
        if (!opt->quiet)
            say_out("vcattach: pid %d and its subprocesses: %zu processes traced: %llu events, "
                   "%llu threads, %llu dropped -> %s\n", (int)opt->pid, ok, s->events,
                   s->threads, s->drops, sink.path);
    }
    copies_free(&c);
    close(dfd);
    return rc;
}

int tree_stop(const struct cli_options *opt, uint32_t request)
{
    const char *cmd = request == VC_MSG_STOP ? "vcattach stop" : "vcattach status";
    if (!target_alive(opt->pid)) {
        say("%s: no such process: pid %d\n", cmd, (int)opt->pid);
        return VC_EXIT_FAIL;
    }
    struct stopped s;
    memset(&s, 0, sizeof s);
    char err[512];
    if (request == VC_MSG_STOP &&
        tree_record_load(opt->pid, s.out, sizeof s.out, err, sizeof err) < 0)
        say("%s: %s; the traces are not merged\n", cmd, err);
    pid_t *kids = NULL;
    long n = target_descendants(opt->pid, &kids);
    if (n < 0)
        n = 0;
    s.parts = calloc((size_t)n + 1, sizeof *s.parts);
    for (long i = -1; i < n && s.parts; i++)
        ask_one(opt, request, i < 0 ? opt->pid : kids[i], &s);
    free(kids);
    int rc = s.failed ? VC_EXIT_FAIL : VC_EXIT_OK;
    if (!s.found) {
        if (!opt->quiet)
            say_out("vcattach: no session is running in pid %d or its subprocesses\n",
                   (int)opt->pid);
        rc = VC_EXIT_FAIL;
    } else if (request == VC_MSG_STOP && s.nparts && merge_parts(opt, &s) != VC_EXIT_OK) {
        rc = VC_EXIT_FAIL;
    } else if (request == VC_MSG_STOP && s.strangers && !s.out[0]) {
        say_out("vcattach: stopped %d session%s not started by `start --subprocesses` on pid "
               "%d (`vcattach convert A B ... -o ONE.cvf` merges their traces)\n", s.strangers,
               s.strangers == 1 ? "" : "s", (int)opt->pid);
    }
    /* The sessions are stopped: no later stop could merge them (the parts that stay are
     * named above), so the record goes, whatever happened. */
    if (request == VC_MSG_STOP)
        tree_record_remove(opt->pid);
    free(s.parts);
    return rc;
}

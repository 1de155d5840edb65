/* tree_result.c — the end of a tree trace (tree_run.h): OUT built in one pass over every done
 * member's spool (spool_build_tree), and the account printed per process (traced, lost, not
 * traced, skipped, with its reason), every name from the target sanitized for the terminal. */
#include "tree_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "human.h"
#include "ns_pid.h"
#include "say.h"
#include "term.h"
#include "text.h"

static const char *state_word(const struct member *m)
{
    switch (m->st) {
    case M_DONE: return "traced";
    case M_LOST: return "lost";
    case M_SKIPPED: return m->python ? "not traced" : "skipped";
    default: return "unfinished";
    }
}

static unsigned long long end_u64(const struct member *m, const char *key)
{
    char v[32];
    return vc_kv_get(m->end, key, v, sizeof v) > 0 ? strtoull(v, NULL, 10) : 0;
}

int tree_write_merged(struct tree_run *r, struct trace_sink *sink, size_t *nparts,
                      uint64_t *unnamed)
{
    char err[1024];
    struct spool **sps = calloc(2 * r->n + 1, sizeof *sps);
    size_t *first = calloc(r->n + 1, sizeof *first);
    if (sps == NULL || first == NULL) {
        free(sps);
        free(first);
        say("vcattach: out of memory while merging\n");
        return -1;
    }
    size_t k = 0, g = 0; /* each process's generations, oldest first (--last: two) */
    for (size_t i = 0; i < r->n; i++)
        if (r->m[i].st == M_DONE && r->m[i].sp != NULL) {
            first[k++] = g;
            if (r->m[i].prev != NULL)
                sps[g++] = r->m[i].prev;
            sps[g++] = r->m[i].sp;
        }
    first[k] = g;
    *nparts = k;
    struct spool_stats st;
    memset(&st, 0, sizeof st); /* no part (k == 0): nothing refused, nothing unnamed */
    int rc = k ? spool_build_tree(sps, g, first, r->last_ns, cvf_sink_fd,
                                  (void *)(intptr_t)sink->fd, &st, err, sizeof err)
               : 0;
    free(sps);
    free(first);
    if (rc != 0) {
        say("vcattach: building the trace of the tree failed: %s\n", err);
        return -1;
    }
    char refused[512];
    if (spool_refusals(&st, refused, sizeof refused))
        say("vcattach: %s\n", refused);
    *unnamed = k ? st.unnamed : 0;
    off_t size = lseek(sink->fd, 0, SEEK_CUR);
    sink->bytes = size > 0 ? (uint64_t)size : 0;
    if (sink_commit(sink, err, sizeof err) < 0) {
        say("vcattach: %s\n", err);
        return -1;
    }
    for (size_t i = 0; i < r->n; i++) { /* written: the spools go */
        spool_close(r->m[i].prev, 1);
        spool_close(r->m[i].sp, 1);
        r->m[i].sp = r->m[i].prev = NULL;
    }
    return 0;
}

/* One line of the tree's account: what became of this process, with its numbers (its
 * calls, or what was lost and why). */
static void print_member(const struct member *m)
{
    char label[96];
    ns_pid_label(m->pid, m->own_pid, label, sizeof label);
    /* its command line and the reasons (an agent's or a loader's words) are its user's text:
     * the whole line goes through the one terminal sanitizer */
    vc_text line;
    vc_text_init(&line, 8192);
    vc_text_printf(&line, "  pid %s %s%s: %s", label, m->forked ? "(forked) " : "",
                   state_word(m), m->name);
    if (m->st == M_DONE) {
        vc_text_printf(&line, " — %llu events, %llu threads, %u MiB buffer",
                       end_u64(m, "events"), end_u64(m, "threads"), m->share_mb);
        unsigned long long drops = end_u64(m, "drops");
        if (drops)
            vc_text_printf(&line, ", %llu calls dropped", drops);
    }
    if (m->why[0] && (m->st != M_DONE || m->ended_early))
        vc_text_printf(&line, " — %s", m->why);
    if (m->st == M_DONE && m->salvaged)
        vc_text_printf(&line, " (%llu of its events read from its window, never sent)",
                       (unsigned long long)m->salvaged);
    if (m->st == M_LOST && m->lost_calls)
        vc_text_printf(&line, " (%llu calls it had sent are left out)",
                       (unsigned long long)m->lost_calls);
    vc_term_fputs(stdout, vc_text_str(&line), 0);
    vc_text_free(&line);
    putchar('\n');
}

void tree_print_result(struct tree_run *r, const struct trace_sink *sink, int64_t traced,
                       uint64_t unnamed)
{
    unsigned long long events = 0, threads = 0, drops = 0, interps = 0;
    size_t done = 0, lost = 0, skipped = 0, refused = 0, unseen = r->unseen_gone;
    for (size_t i = 0; i < r->n; i++) {
        const struct member *m = &r->m[i];
        if (m->st == M_DONE) {
            done++;
            events += end_u64(m, "events");
            threads += end_u64(m, "threads");
            drops += end_u64(m, "drops");
            interps += end_u64(m, "interps_untraced"); /* 3.12+: agent/interps.c */
        } else if (m->st == M_SKIPPED && !m->python && m->unseen) {
            unseen++;
        } else if (m->st == M_SKIPPED && !m->python) {
            skipped++;
        } else if (m->st == M_SKIPPED) {
            refused++;
        } else {
            lost++;
        }
    }
    skipped += r->skipped_gone - r->unseen_gone;
    char size[32];
    vc_human_bytes(sink->bytes, size, sizeof size);
    if (!r->opt->quiet) {
        char root[96];
        ns_pid_label(r->opt->pid, r->n ? r->m[0].own_pid : 0, root, sizeof root);
        say_out("vcattach: pid %s and its subprocesses in %.1fs: %zu process%s traced", root,
               (double)traced / 1000.0, done, done == 1 ? "" : "es");
        if (lost)
            say_out(", %zu lost", lost);
        if (refused)
            say_out(", %zu not traced", refused);
        if (skipped)
            say_out(", %zu non-Python skipped", skipped);
        if (unseen) /* Python or not: gone before its executable could be read */
            say_out(", %zu ended unseen", unseen);
        say_out(": %llu events, %llu threads, %llu dropped%s", events, threads, drops,
               drops ? " (vcattach did not keep up: see the \"vcattach dropped\" instants)" : "");
        if (unnamed) /* records whose function's name never came: kept, under a placeholder */
            say_out("; %llu calls of functions whose names never came (\"unknown function "
                   "0x…\")", (unsigned long long)unnamed);
        if (interps) /* before ", SIZE -> OUT": what follows the arrow is where the trace is */
            say_out("; %llu sub-interpreter%s not traced (CPython 3.12+: ended before hooked, or "
                   "--hook profile)", interps, interps == 1 ? "" : "s");
        say_out(", %s -> %s\n", size, sink->path);
    }
    /* Every Python process the tree made during the trace has its line (a pool's workers,
     * whatever became of them), and every one present at attach that was not traced to the
     * end; non-Python ones are counted above (listed with -v). */
    for (size_t i = 0; i < r->n; i++) {
        const struct member *m = &r->m[i];
        int python = !(m->st == M_SKIPPED && !m->python);
        int always = python && (m->late || m->st != M_DONE || m->ended_early);
        if (!r->opt->quiet && (always || r->opt->verbose))
            print_member(m);
    }
    if (r->opt->verbose && !r->opt->quiet)
        say_out("  (member table: %zu entries at most; %zu more non-Python processes skipped, "
               "gone, not listed)\n", r->n > r->peak ? r->n : r->peak, r->skipped_gone);
    fflush(stdout);
}

/* spool_build.c — a spool (spool.h) to a .cvf: the process and thread names, every lane as
 * FEE groups, each thread's CPU clock samples as a counter group ("cpu TID", key "ms": the
 * thread's cumulative on-CPU milliseconds; docs/cvf-format.md), then the agent's instants
 * with one instant per range of calls it dropped.
 *
 * A lane is read segment by segment and written in pieces of at most PIECE events, each its
 * own FEE group of the lane's (pid, tid, name): memory stays bounded by a piece and a segment
 * whatever the trace's length, and the reader appends groups of one name as it always did.
 * Records are converted with the clock's last fit (common/tick_map.h), the same conversion
 * the agent applies when it writes a trace itself, so a streamed trace and an agent-written
 * one of the same calls are the same file up to group boundaries.
 */
#include "spool_impl.h"
#include "fd_io.h"
#include "json_scan.h"
#include "text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PIECE (1u << 20)

struct build {
    struct spool *sp;    /* the newest generation: names, threads, clock, instants */
    struct spool **all;  /* every generation, oldest first */
    size_t nall;
    uint64_t cutoff;     /* --last: calls that end before this raw time are left out */
    uint64_t cutoff_ns;  /* ... processes: the same moment on the shared clock (0: none) */
    int processes;       /* all[] are several processes (of a tree), each its generations */
    /* processes: all[first[p] .. first[p+1]) are process p's generations, oldest first (its
     * newest names its keys and threads); cut[p] its --last cutoff (raw, its clock) */
    const size_t *first;
    size_t nprocs;
    uint64_t *cut;
    cvf_writer *w;
    struct spool_stats *st;
    cvf_fee_event *piece;
    size_t n, cap;       /* piece grows to PIECE events as lanes need it */
    vc_text args;        /* a marked piece's args list */
    unsigned char *seg;  /* one segment's bytes */
    size_t seg_cap;
    vc_text tasks;       /* the "vcattach task" instants, comma-separated (write_tasks) */
    char *err;
    size_t errlen;
};

static size_t proc_of(const struct build *b, size_t g);

static int build_fail(struct build *b, const char *what)
{
    snprintf(b->err, b->errlen, "building the trace from the spool failed: %s", what);
    return -1;
}

static int writer_fail(struct build *b)
{
    return build_fail(b, cvf_writer_error(b->w)->msg);
}

/* What the trace readers read in the args of a marked event (agent/emit.c writes the same). */
static const char *const mark_args[] = {"{}", "{\"vcattach\":\"resume\"}",
                                        "{\"vcattach\":\"at_attach\"}",
                                        "{\"vcattach\":\"at_attach\",\"blocked\":\""};

static const struct spool_thread *lane_thread(const struct spool *sp, const struct spool_lane *l)
{
    if (l->owner >= sp->threads_cap || sp->threads[l->owner].tid <= 0)
        return NULL;
    return &sp->threads[l->owner];
}

static const char *lane_name(const struct spool *sp, const struct spool_lane *l)
{
    return l->id < sp->names_cap ? sp->names[l->id] : NULL;
}

/* The args list of n events with the lane's mark (b->args).  0, or -1 when it passes
 * SPOOL_ARGS_MAX or memory ran out. */
static int make_args(struct build *b, const struct spool_lane *l, const struct spool_thread *t,
                     size_t n)
{
    char blocked[64] = "";
    if (l->mark == 3 && t->blocked) { /* the agent's text: only what a wchan can hold */
        size_t k = 0;
        for (const char *c = t->blocked; *c && k + 1 < sizeof blocked; c++)
            blocked[k++] = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                                   (*c >= '0' && *c <= '9') || *c == '_' || *c == ' '
                               ? *c
                               : '?';
        blocked[k] = '\0';
    }
    /* Every element is the same text: made once, then copied (a generator's lane holds
     * millions of resumes, and a formatted print each was a tenth of the build's time). */
    char elem[sizeof blocked + 64];
    vc_text e;
    vc_text_fixed(&e, elem, sizeof elem);
    if (vc_text_printf(&e, ",%s%s%s", mark_args[l->mark], l->mark == 3 ? blocked : "",
                       l->mark == 3 ? "\"}" : "") != 0)
        return -1;
    vc_text_rollback(&b->args, 0);
    vc_text_putc(&b->args, '[');
    for (size_t i = 0; i < n; i++)
        vc_text_put(&b->args, elem + (i == 0), e.len - (i == 0));
    return vc_text_putc(&b->args, ']');
}

static int events_sorted(const cvf_fee_event *e, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (e[i].ts < e[i - 1].ts || (e[i].ts == e[i - 1].ts && e[i].dur < e[i - 1].dur))
            return 0;
    return 1;
}

/* The piece so far as one FEE group. */
static int write_piece(struct build *b, const struct spool_lane *l)
{
    size_t n = b->n;
    b->n = 0;
    if (n == 0)
        return 0;
    const struct spool_thread *t = lane_thread(b->sp, l);
    const char *name = lane_name(b->sp, l);
    char placeholder[40];
    if (t == NULL) { /* no track to put them on */
        b->st->unthreaded += n;
        return 0;
    }
    if (name == NULL) { /* the process ended before its agent named the function: kept */
        snprintf(placeholder, sizeof placeholder, "unknown function 0x%x", (unsigned)l->id);
        name = placeholder;
        b->st->unnamed += n;
    }
    if (!events_sorted(b->piece, n))
        cvf_fee_sort(b->piece, n);
    if (l->mark != 0 && make_args(b, l, t, n) != 0)
        return build_fail(b, "out of memory for the marks of a piece");
    if (cvf_write_fee_group(b->w, b->sp->pid, (uint64_t)t->tid, name, b->piece, n,
                            l->mark ? b->args.buf : NULL, l->mark ? b->args.len : 0) != 0)
        return writer_fail(b);
    b->st->events += n;
    return 0;
}

static int add_event(struct build *b, const struct spool_lane *l, uint64_t start, uint64_t dur)
{
    if (start + dur < b->cutoff)
        return 0;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        cvf_fee_event *bigger = realloc(b->piece, cap * sizeof *bigger);
        if (bigger == NULL)
            return build_fail(b, "out of memory");
        b->piece = bigger;
        b->cap = cap;
    }
    const vc_tick_map *map = &b->sp->clock;
    int64_t ts = vc_tick_map_ticks(map, start);
    int64_t end = vc_tick_map_ticks(map, start + dur);
    b->piece[b->n++] = (cvf_fee_event){ts, end > ts ? (uint64_t)(end - ts) : 0};
    return b->n == PIECE ? write_piece(b, l) : 0;
}

/* count records encoded in [p, end) from `first`. */
static int decode(struct build *b, const struct spool_lane *l, const unsigned char *p,
                  const unsigned char *end, uint64_t first, uint32_t count)
{
    uint64_t prev = first;
    for (uint32_t k = 0; k < count; k++) {
        uint64_t z, dur;
        p = spool_get_varint(p, end, &z);
        if (p != NULL)
            p = spool_get_varint(p, end, &dur);
        if (p == NULL)
            return build_fail(b, "a lane segment is corrupt");
        prev += (uint64_t)spool_unzigzag(z);
        if (add_event(b, l, prev, dur) != 0)
            return -1;
    }
    return 0;
}

static int build_lane(struct build *b, const struct spool *from, const struct spool_lane *l)
{
    for (uint32_t s = 0; s < l->nsegs; s++) {
        const struct spool_segment *g = &l->segs[s];
        if (g->bytes > b->seg_cap) {
            unsigned char *bigger = realloc(b->seg, g->bytes);
            if (bigger == NULL)
                return build_fail(b, "out of memory");
            b->seg = bigger;
            b->seg_cap = g->bytes;
        }
        if (vc_pread_all(from->fd, b->seg, g->bytes, (off_t)g->offset) != (ssize_t)g->bytes)
            return build_fail(b, strerror(errno));
        if (decode(b, l, b->seg, b->seg + g->bytes, g->first, g->count) != 0)
            return -1;
    }
    if (l->buf_count && decode(b, l, l->buf, l->buf + l->buf_len, l->buf_first, l->buf_count) != 0)
        return -1;
    return write_piece(b, l);
}

static int by_tid(const void *a, const void *b)
{
    const struct spool_thread *x = *(const struct spool_thread *const *)a;
    const struct spool_thread *y = *(const struct spool_thread *const *)b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x < y ? -1 : x > y; /* the first state of a tid names it */
}

/* Thread names: each OS thread with records once (emit.c's rule: the pid's thread is the
 * main thread whatever it is called).  Sorted by tid: an agent may claim 65,536 threads. */
static int write_names(struct build *b)
{
    struct spool *sp = b->sp;
    const char *pname = sp->process_name && sp->process_name[0] ? sp->process_name : "python";
    if (cvf_write_process_name(b->w, sp->pid, sp->pid, pname) != 0)
        return writer_fail(b);
    const struct spool_thread **order = malloc((sp->threads_cap + 1) * sizeof *order);
    if (order == NULL)
        return build_fail(b, "out of memory");
    size_t n = 0;
    for (uint32_t i = 0; i < sp->threads_cap; i++)
        if (sp->threads[i].tid > 0 && sp->threads[i].has_records)
            order[n++] = &sp->threads[i];
    qsort(order, n, sizeof *order, by_tid);
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        const struct spool_thread *t = order[k];
        if (k > 0 && order[k - 1]->tid == t->tid)
            continue;
        char fallback[32];
        snprintf(fallback, sizeof fallback, "Thread-%d", (int)t->tid);
        const char *name = (uint64_t)t->tid == sp->pid ? "MainThread" : t->name ? t->name : fallback;
        if (cvf_write_thread_name(b->w, sp->pid, (uint64_t)t->tid, name) != 0)
            rc = writer_fail(b);
        b->st->threads++;
    }
    free(order);
    return rc;
}

/* The head of a thread-scoped instant, up to its args' opening brace. */
static void put_instant_head(vc_text *json, int first, const char *name, uint64_t pid,
                             long long tid, double ts_us)
{
    vc_text_printf(json,
                   "%s{\"ph\":\"i\",\"name\":\"%s\",\"cat\":\"INSTANT\",\"pid\":%llu,"
                   "\"tid\":%lld,\"ts\":%.3f,\"s\":\"t\",\"args\":{",
                   first ? "" : ",", name, (unsigned long long)pid, tid, ts_us);
}

/* A record of the instants list, refused whole (and counted) when it does not fit the list's
 * cap: what came before stays. */
static int end_instant(struct build *b, vc_text *json, size_t mark)
{
    if (!json->failed && json->len < json->max) /* the list's ']' always has its byte */
        return 1;
    vc_text_rollback(json, mark);
    b->st->instants_refused++;
    return 0;
}

/* The agent's own instants (a JSON list from EVENTS; nothing when the process ended before
 * it could send them), without their brackets, appended to json. */
static void put_agent_events(struct build *b, vc_text *json, const struct spool *sp)
{
    size_t epos, nitems = 0;
    const char *ewhat;
    cvf_span *items = NULL;
    if (sp->events_json && sp->events_len >= 2 && sp->events_json[0] == '[' &&
        sp->events_json[sp->events_len - 1] == ']' &&
        cvf_json_scan(sp->events_json, sp->events_len, &items, &nitems, &epos, &ewhat) == 0 &&
        nitems > 0) {
        size_t mark = vc_text_mark(json);
        if (json->len > 1)
            vc_text_putc(json, ',');
        vc_text_put(json, sp->events_json + 1, sp->events_len - 2);
        end_instant(b, json, mark);
    }
    free(items);
}

/* One "vcattach dropped" instant per range of `from`'s lost calls that ends after the cutoff,
 * on its thread's track as `names` (the same process) knows it. */
static void put_drops(struct build *b, vc_text *json, const struct spool *names,
                      const struct spool *from, uint64_t cutoff)
{
    for (size_t i = 0; i < from->ndrops; i++) {
        const struct spool_drop *d = &from->drops[i];
        if (d->start + d->dur < cutoff)
            continue;
        int32_t tid = d->owner < names->threads_cap ? names->threads[d->owner].tid : 0;
        double ts = (double)vc_tick_map_ns(&names->clock, d->start) / 1000.0;
        double te = (double)vc_tick_map_ns(&names->clock, d->start + d->dur) / 1000.0;
        size_t mark = vc_text_mark(json);
        put_instant_head(json, json->len <= 1, "vcattach dropped", names->pid,
                         tid > 0 ? tid : (int32_t)names->pid, ts);
        vc_text_printf(json, "\"calls\":%llu,\"until\":%.3f}}", (unsigned long long)d->calls,
                       te);
        end_instant(b, json, mark);
    }
}

/* ---- asyncio tasks: one counter group per thread, an instant per task ---------------------- */

struct step_row {
    int32_t tid;
    uint32_t task;
    uint64_t raw;
};

static int by_tid_then_raw(const void *a, const void *b)
{
    const struct step_row *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x->raw < y->raw ? -1 : x->raw > y->raw;
}

static int by_task_then_raw(const void *a, const void *b)
{
    const struct step_row *x = a, *y = b;
    if (x->task != y->task)
        return x->task < y->task ? -1 : 1;
    return x->raw < y->raw ? -1 : x->raw > y->raw;
}

/* The task steps of `names`'s process (every spool of it in all[g0, g1)) that the trace
 * keeps: of a named thread with calls, not before the --last cut.  *out (malloc'd), or -1. */
static long task_rows(struct build *b, const struct spool *names, size_t g0, size_t g1,
                      struct step_row **out)
{
    size_t n = 0;
    for (size_t g = g0; g < g1; g++)
        n += b->all[g]->nsteps;
    *out = NULL;
    if (n == 0)
        return 0;
    struct step_row *rows = malloc(n * sizeof *rows);
    if (rows == NULL)
        return -1;
    size_t m = 0;
    for (size_t g = g0; g < g1; g++)
        for (size_t i = 0; i < b->all[g]->nsteps; i++) {
            const struct spool_task_step *s = &b->all[g]->steps[i];
            if (s->owner >= names->threads_cap || names->threads[s->owner].tid <= 0 ||
                !names->threads[s->owner].has_records || s->raw < b->cutoff)
                continue;
            rows[m++] = (struct step_row){names->threads[s->owner].tid, s->task, s->raw};
        }
    *out = rows;
    return (long)m;
}

/* "task TID" counters (key "id": the task whose step begins at each ts; docs/cvf-format.md). */
static int write_task_counters(struct build *b, const struct spool *names, struct step_row *rows,
                               size_t m)
{
    int64_t *ts = malloc((m ? m : 1) * sizeof *ts);
    cvf_counter_value *vals = malloc((m ? m : 1) * sizeof *vals);
    if (ts == NULL || vals == NULL) {
        free(ts);
        free(vals);
        return build_fail(b, "out of memory for task steps");
    }
    qsort(rows, m, sizeof *rows, by_tid_then_raw);
    static const char *const keys[] = {"id"};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < m;) {
        size_t nts = 0;
        int32_t tid = rows[i].tid;
        for (; i < m && rows[i].tid == tid; i++) {
            int64_t t = (int64_t)vc_tick_map_ns(&names->clock, rows[i].raw);
            while (nts > 0 && t <= ts[nts - 1])
                nts--; /* the same ns: the later step stays */
            ts[nts] = t;
            vals[nts].tag = CVF_COUNTER_LONG;
            vals[nts].v.i = rows[i].task;
            nts++;
        }
        char name[32];
        snprintf(name, sizeof name, "task %d", (int)tid);
        if (cvf_write_counter_group(b->w, names->pid, (uint64_t)tid, name, keys, 1, ts, nts,
                                    vals) != 0)
            rc = writer_fail(b);
        b->st->task_steps += nts;
    }
    free(ts);
    free(vals);
    return rc;
}

struct name_row {
    uint32_t task;
    uint32_t order; /* newer generation, later arrival: higher */
    const char *name;
};

static int by_task_newest_first(const void *a, const void *b)
{
    const struct name_row *x = a, *y = b;
    if (x->task != y->task)
        return x->task < y->task ? -1 : 1;
    return x->order > y->order ? -1 : x->order < y->order;
}

/* One "vcattach task" instant per task with a kept step, at its first one, on that thread:
 * args {"task": number, "name": its newest name, "" when none came}, appended to b->tasks
 * (without brackets).  rows are sorted here by (task, raw). */
static int put_tasks(struct build *b, const struct spool *names, size_t g0, size_t g1,
                     struct step_row *rows, size_t m)
{
    qsort(rows, m, sizeof *rows, by_task_then_raw);
    size_t nnames = 0;
    for (size_t g = g0; g < g1; g++)
        nnames += b->all[g]->ntask_names;
    struct name_row *nr = malloc((nnames ? nnames : 1) * sizeof *nr);
    if (nr == NULL)
        return build_fail(b, "out of memory for task names");
    size_t k = 0;
    for (size_t g = g0; g < g1; g++)
        for (size_t i = 0; i < b->all[g]->ntask_names; i++, k++)
            nr[k] = (struct name_row){b->all[g]->task_names[i].task, (uint32_t)k,
                                      b->all[g]->task_names[i].name};
    qsort(nr, nnames, sizeof *nr, by_task_newest_first);
    vc_text *json = &b->tasks;
    size_t j = 0;
    for (size_t i = 0; i < m; i++) {
        if (i > 0 && rows[i - 1].task == rows[i].task)
            continue;
        while (j < nnames && nr[j].task < rows[i].task)
            j++;
        const char *name = j < nnames && nr[j].task == rows[i].task ? nr[j].name : "";
        size_t mark = vc_text_mark(json);
        put_instant_head(json, json->len == 0, "vcattach task", names->pid, rows[i].tid,
                         (double)vc_tick_map_ns(&names->clock, rows[i].raw) / 1000.0);
        vc_text_printf(json, "\"task\":%u,\"name\":\"", rows[i].task);
        vc_text_json(json, name, strlen(name));
        vc_text_puts(json, "\"}}");
        b->st->tasks += (uint64_t)end_instant(b, json, mark);
    }
    free(nr);
    return 0;
}

/* One process's tasks: its counters written, its instants kept for write_instants. */
static int write_tasks_of(struct build *b, const struct spool *names, size_t g0, size_t g1)
{
    struct step_row *rows;
    long m = task_rows(b, names, g0, g1, &rows);
    if (m < 0)
        return build_fail(b, "out of memory for task steps");
    int rc = m > 0 ? write_task_counters(b, names, rows, (size_t)m) : 0;
    if (rc == 0 && m > 0)
        rc = put_tasks(b, names, g0, g1, rows, (size_t)m);
    free(rows);
    return rc;
}


/* The other events: generations of one process (the newest's instants, every generation's
 * drops, the --last cut) or several processes (each one's instants and drops), as one JSON list
 * of at most SPOOL_INSTANTS_MAX bytes (beyond: instants refused whole, counted). */
static int write_instants(struct build *b)
{
    struct spool *sp = b->sp;
    vc_text json;
    vc_text_init(&json, SPOOL_INSTANTS_MAX);
    vc_text_putc(&json, '[');
    for (size_t g = 0; g < b->nall; g++) {
        size_t p = proc_of(b, g);
        const struct spool *names = b->processes ? b->all[b->first[p + 1] - 1] : sp;
        if (g == (b->processes ? b->first[p + 1] : b->nall) - 1) {
            put_agent_events(b, &json, names);
            size_t mark = vc_text_mark(&json);
            spool_sched_instant(&json, names);
            end_instant(b, &json, mark);
        }
        put_drops(b, &json, names, b->all[g], b->processes ? b->cut[p] : b->cutoff);
    }
    if (b->tasks.len > 0) {
        size_t mark = vc_text_mark(&json);
        if (json.len > 1)
            vc_text_putc(&json, ',');
        vc_text_put(&json, b->tasks.buf, b->tasks.len);
        end_instant(b, &json, mark);
    }
    if (b->processes) { /* one instant for the tree, on its first process's track */
        sp = b->all[b->first[1] - 1];
        b->cutoff = b->cut[0];
    }
    if (b->cutoff && (!b->processes || b->cutoff_ns)) { /* where the kept window begins */
        size_t mark = vc_text_mark(&json);
        vc_text_printf(&json,
                       "%s{\"ph\":\"i\",\"name\":\"vcattach last\",\"cat\":\"INSTANT\","
                       "\"pid\":%llu,\"tid\":%llu,\"ts\":%.3f,\"s\":\"p\",\"args\":"
                       "{\"note\":\"calls that ended before this were left out (--last)\"}}",
                       json.len > 1 ? "," : "", (unsigned long long)sp->pid,
                       (unsigned long long)sp->pid,
                       (double)vc_tick_map_ns(&sp->clock, b->cutoff) / 1000.0);
        end_instant(b, &json, mark);
    }
    int rc = vc_text_putc(&json, ']') == 0 ? 0 : build_fail(b, "out of memory for the instants");
    if (rc == 0 && cvf_write_other_events(b->w, json.buf, json.len) != 0)
        rc = writer_fail(b);
    vc_text_free(&json);
    return rc;
}

/* ---- CPU clock samples: one counter group per thread --------------------------------------- */

struct cpu_row {
    int32_t tid;
    uint64_t raw, cpu_ns;
};

static int by_tid_raw(const void *a, const void *b)
{
    const struct cpu_row *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->raw != y->raw)
        return x->raw < y->raw ? -1 : 1;
    return x->cpu_ns < y->cpu_ns ? -1 : x->cpu_ns > y->cpu_ns;
}

/* The samples of `names`'s process (from every spool of it in all[g0, g1)), as counter groups.
 * A sample of a thread never named, or before the --last cut, is left out.  Timestamps that
 * the clock maps to the same ns keep the last sample; a value lower than the one before it (a
 * hostile agent: a CPU clock never goes back) is raised to it, so the line never falls. */
static int write_cpu_of(struct build *b, const struct spool *names, size_t g0, size_t g1)
{
    size_t n = 0;
    for (size_t g = g0; g < g1; g++)
        n += b->all[g]->ncpu;
    if (n == 0)
        return 0;
    struct cpu_row *rows = malloc(n * sizeof *rows);
    int64_t *ts = malloc(n * sizeof *ts);
    cvf_counter_value *vals = malloc(n * sizeof *vals);
    if (rows == NULL || ts == NULL || vals == NULL) {
        free(rows);
        free(ts);
        free(vals);
        return build_fail(b, "out of memory for CPU samples");
    }
    size_t m = 0;
    for (size_t g = g0; g < g1; g++)
        for (size_t i = 0; i < b->all[g]->ncpu; i++) {
            const struct spool_cpu *c = &b->all[g]->cpu[i];
            if (c->owner >= names->threads_cap || names->threads[c->owner].tid <= 0 ||
                !names->threads[c->owner].has_records || c->raw < b->cutoff)
                continue;
            rows[m++] = (struct cpu_row){names->threads[c->owner].tid, c->raw, c->cpu_ns};
        }
    qsort(rows, m, sizeof *rows, by_tid_raw);
    static const char *const keys[] = {"ms"};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < m;) {
        size_t nts = 0;
        int32_t tid = rows[i].tid;
        uint64_t top = 0;
        for (; i < m && rows[i].tid == tid; i++) {
            int64_t t = (int64_t)vc_tick_map_ns(&names->clock, rows[i].raw);
            if (rows[i].cpu_ns > top)
                top = rows[i].cpu_ns;
            while (nts > 0 && t <= ts[nts - 1])
                nts--; /* the same ns (the map never goes back): the later one stays */
            ts[nts] = t;
            vals[nts].tag = CVF_COUNTER_FLOAT;
            vals[nts].v.f = (double)top / 1e6;
            nts++;
        }
        char name[32];
        snprintf(name, sizeof name, "cpu %d", (int)tid);
        if (cvf_write_counter_group(b->w, names->pid, (uint64_t)tid, name, keys, 1, ts, nts,
                                    vals) != 0)
            rc = writer_fail(b);
        b->st->cpu_samples += nts;
    }
    free(rows);
    free(ts);
    free(vals);
    return rc;
}

static int write_sched_of(struct build *b, const struct spool *names, size_t g0, size_t g1)
{
    int rc = spool_sched_write(b->w, names, b->all, g0, g1, &b->st->sched_changes);
    return rc == -1 ? build_fail(b, "out of memory for scheduler events")
           : rc    ? writer_fail(b)
                   : 0;
}

/* write_cpu_of or write_tasks_of for each process: every spool of a tree, or the generations
 * of one process together (the newest names its threads). */
static int per_process(struct build *b,
                       int (*fn)(struct build *, const struct spool *, size_t, size_t))
{
    if (b->processes) {
        for (size_t p = 0; p < b->nprocs; p++) {
            b->cutoff = b->cut[p];
            int rc = fn(b, b->all[b->first[p + 1] - 1], b->first[p], b->first[p + 1]);
            if (rc != 0)
                return rc;
        }
        return 0;
    }
    return fn(b, b->all[b->nall - 1], 0, b->nall);
}

/* The process of generation g (processes only). */
static size_t proc_of(const struct build *b, size_t g)
{
    size_t p = 0;
    while (b->processes && p + 1 < b->nprocs && g >= b->first[p + 1])
        p++;
    return p;
}

/* --last over processes (a tree): the kept window ends at the newest call of any of them, on
 * the one clock they share (CLOCK_MONOTONIC); each process's cutoff in its own raw clock. */
static void tree_cutoffs(struct build *b, uint64_t last_ns)
{
    uint64_t newest_ns = 0;
    for (size_t g = 0; g < b->nall; g++) {
        const struct spool *newest = b->all[b->first[proc_of(b, g) + 1] - 1];
        uint64_t ns = b->all[g]->records ? vc_tick_map_ns(&newest->clock, b->all[g]->last_raw)
                                         : 0;
        if (ns > newest_ns)
            newest_ns = ns;
    }
    uint64_t cut_ns = newest_ns > last_ns ? newest_ns - last_ns : 0;
    for (size_t p = 0; p < b->nprocs; p++) {
        const vc_tick_map *m = &b->all[b->first[p + 1] - 1]->clock;
        double raw = (double)m->raw0 + ((double)cut_ns - (double)m->ns0) / m->ns_per_raw;
        b->cut[p] = last_ns == 0 || raw <= 0 ? 0 : raw >= 1.8e19 ? UINT64_MAX : (uint64_t)raw;
    }
    b->cutoff_ns = last_ns ? cut_ns : 0;
}

/* Generations of one process (first NULL), or processes each with its generations (all[first[p]
 * .. first[p + 1]), nprocs of them). */
static int build(struct spool **sps, size_t n, const size_t *first, size_t nprocs,
                 uint64_t last_ns, cvf_sink_fn sink, void *ctx, struct spool_stats *st,
                 char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    int processes = first != NULL;
    struct build b = {.sp = sps[n - 1], .all = sps, .nall = n, .processes = processes,
                      .first = first, .nprocs = nprocs, .st = st, .err = err, .errlen = errlen};
    vc_text_init(&b.args, SPOOL_ARGS_MAX);
    vc_text_init(&b.tasks, SPOOL_INSTANTS_MAX);
    if (processes && (b.cut = calloc(nprocs, sizeof *b.cut)) == NULL)
        return build_fail(&b, "out of memory");
    uint64_t newest = 0;
    const struct spool *clocked = NULL; /* a tree's processes share one raw clock (the TSC) */
    for (size_t g = 0; g < n && processes && clocked == NULL; g++)
        if (sps[g]->have_clock)
            clocked = sps[g];
    for (size_t g = 0; g < n; g++) {
        if (!sps[g]->have_clock) /* nothing came but maybe records: another process's fit, or
                                    any sane rate (clock.c's) */
            sps[g]->clock = clocked ? clocked->clock : (vc_tick_map){0, 0, 1.0 / 2.5};
        st->records += sps[g]->records;
        st->dropped += sps[g]->dropped;
        st->drop_ranges += sps[g]->ndrops;
        st->spool_bytes += sps[g]->file_bytes;
        st->names_refused += sps[g]->names_refused;
        st->marks_lost += sps[g]->cpu_lost + sps[g]->tasks_lost;
        if (sps[g]->last_raw > newest)
            newest = sps[g]->last_raw;
    }
    if (processes)
        tree_cutoffs(&b, last_ns);
    if (last_ns && !processes) {
        double raw = (double)last_ns / b.sp->clock.ns_per_raw; /* the rate is > 0 (spool.c) */
        uint64_t back = raw < 1.8e19 ? (uint64_t)raw : UINT64_C(18000000000000000000);
        b.cutoff = newest > back ? newest - back : 0;
    }
    b.w = cvf_writer_new(sink, ctx);
    int rc = b.w ? 0 : build_fail(&b, "out of memory");
    for (size_t p = 0; rc == 0 && p < (processes ? nprocs : 1); p++) {
        b.sp = processes ? sps[first[p + 1] - 1] : sps[n - 1];
        rc = write_names(&b);
    }
    for (size_t g = 0; g < n; g++) {
        if (processes) { /* its process's newest generation names it; its cutoff */
            size_t p = proc_of(&b, g);
            b.sp = sps[first[p + 1] - 1];
            b.cutoff = b.cut[p];
        }
        for (uint32_t i = 0; rc == 0 && i < sps[g]->nlanes; i++)
            rc = build_lane(&b, sps[g], &sps[g]->lanes[i]);
    }
    b.sp = sps[n - 1];
    if (rc == 0)
        rc = per_process(&b, write_cpu_of);
    if (rc == 0)
        rc = per_process(&b, write_sched_of);
    if (rc == 0)
        rc = per_process(&b, write_tasks_of);
    if (rc == 0)
        rc = write_instants(&b);
    if (rc == 0 && cvf_writer_finish(b.w) != 0)
        rc = writer_fail(&b);
    st->cvf_bytes = b.w ? cvf_writer_bytes(b.w) : 0;
    cvf_writer_free(b.w);
    free(b.cut);
    free(b.piece);
    vc_text_free(&b.tasks);
    vc_text_free(&b.args);
    free(b.seg);
    return rc;
}

int spool_build_many(struct spool **sps, size_t n, uint64_t last_ns, cvf_sink_fn sink,
                     void *ctx, struct spool_stats *st, char *err, size_t errlen)
{
    return build(sps, n, NULL, 1, last_ns, sink, ctx, st, err, errlen);
}

int spool_build_processes(struct spool **sps, size_t n, cvf_sink_fn sink, void *ctx,
                          struct spool_stats *st, char *err, size_t errlen)
{
    return spool_build_tree(sps, n, NULL, 0, sink, ctx, st, err, errlen);
}

int spool_build_tree(struct spool **sps, size_t n, const size_t *first, uint64_t last_ns,
                     cvf_sink_fn sink, void *ctx, struct spool_stats *st, char *err,
                     size_t errlen)
{
    size_t *one = NULL, nprocs = 0;
    if (first == NULL) { /* one generation each */
        if ((one = malloc((n + 1) * sizeof *one)) == NULL) {
            memset(st, 0, sizeof *st);
            snprintf(err, errlen, "building the trace from the spool failed: out of memory");
            return -1;
        }
        for (size_t g = 0; g <= n; g++)
            one[g] = g;
        first = one;
    }
    while (first[nprocs] < n)
        nprocs++;
    int rc = build(sps, n, first, nprocs, last_ns, sink, ctx, st, err, errlen);
    free(one);
    return rc;
}

int spool_build(struct spool *sp, cvf_sink_fn sink, void *ctx, struct spool_stats *st,
                char *err, size_t errlen)
{
    return build(&sp, 1, NULL, 1, 0, sink, ctx, st, err, errlen);
}

int spool_refusals(const struct spool_stats *st, char *buf, size_t cap)
{
    if (st->names_refused + st->instants_refused + st->marks_lost == 0)
        return 0;
    vc_text t;
    vc_text_fixed(&t, buf, cap);
    vc_text_puts(&t, "kept less than the agent sent (its budgets, SECURITY.md):");
    if (st->names_refused)
        vc_text_printf(&t, " %llu names refused (past %llu MiB of names: their calls are "
                       "unnamed),", (unsigned long long)st->names_refused,
                       (unsigned long long)(SPOOL_NAMES_MAX >> 20));
    if (st->instants_refused)
        vc_text_printf(&t, " %llu instants refused (past %zu MiB),",
                       (unsigned long long)st->instants_refused, SPOOL_INSTANTS_MAX >> 20);
    if (st->marks_lost)
        vc_text_printf(&t, " %llu CPU samples or task marks not kept,",
                       (unsigned long long)st->marks_lost);
    if (t.len > 0 && buf[t.len - 1] == ',')
        buf[t.len - 1] = '\0';
    return 1;
}

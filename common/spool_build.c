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
    int processes;       /* all[] are processes of a tree, not generations of one */
    cvf_writer *w;
    struct spool_stats *st;
    cvf_fee_event *piece;
    size_t n, cap;       /* piece grows to PIECE events as lanes need it */
    char *args;          /* a marked piece's args list */
    size_t args_cap;
    unsigned char *seg;  /* one segment's bytes */
    size_t seg_cap;
    char *tasks_json;    /* the "vcattach task" instants, comma-separated (write_tasks) */
    size_t tasks_len;
    char *err;
    size_t errlen;
};

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

/* The args list of n events with the lane's mark.  0 or -1. */
static int make_args(struct build *b, const struct spool_lane *l, const struct spool_thread *t,
                     size_t n, size_t *len)
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
    const char *one = mark_args[l->mark];
    size_t each = strlen(one) + (l->mark == 3 ? strlen(blocked) + 2 : 0) + 1;
    size_t need = 2 + n * each + 1;
    if (need > b->args_cap) {
        char *bigger = realloc(b->args, need);
        if (bigger == NULL)
            return -1;
        b->args = bigger;
        b->args_cap = need;
    }
    /* Every element is the same text: made once, then copied (a generator's lane holds
     * millions of resumes, and a formatted print each was a tenth of the build's time). */
    char elem[sizeof blocked + 64];
    size_t elen = (size_t)snprintf(elem, sizeof elem, ",%s%s%s", one, l->mark == 3 ? blocked : "",
                                   l->mark == 3 ? "\"}" : "");
    if (elen >= sizeof elem)
        return -1;
    size_t used = 0;
    b->args[used++] = '[';
    for (size_t i = 0; i < n; i++) {
        memcpy(b->args + used, elem + (i == 0), elen - (i == 0));
        used += elen - (i == 0);
    }
    b->args[used++] = ']';
    *len = used;
    return 0;
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
    if (t == NULL || name == NULL) {
        b->st->unnamed += n;
        return 0;
    }
    if (!events_sorted(b->piece, n))
        cvf_fee_sort(b->piece, n);
    size_t alen = 0;
    if (l->mark != 0 && make_args(b, l, t, n, &alen) != 0)
        return build_fail(b, "out of memory");
    if (cvf_write_fee_group(b->w, b->sp->pid, (uint64_t)t->tid, name, b->piece, n,
                            l->mark ? b->args : NULL, alen) != 0)
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

/* The agent's instants (when it sent them: a process killed before its stop did not) and one
 * "vcattach dropped" instant per range of calls lost at the source, on its thread's track. */
/* The agent's own instants (a JSON list from EVENTS; nothing when the process ended before
 * it could send them), without their brackets, after what json holds. */
static size_t put_agent_events(char *json, size_t used, const struct spool *sp)
{
    size_t epos, nitems = 0;
    const char *ewhat;
    cvf_span *items = NULL;
    if (sp->events_json && sp->events_len >= 2 && sp->events_json[0] == '[' &&
        sp->events_json[sp->events_len - 1] == ']' &&
        cvf_json_scan(sp->events_json, sp->events_len, &items, &nitems, &epos, &ewhat) == 0 &&
        nitems > 0) {
        if (used > 1)
            json[used++] = ',';
        memcpy(json + used, sp->events_json + 1, sp->events_len - 2);
        used += sp->events_len - 2;
    }
    free(items);
    return used;
}

/* One "vcattach dropped" instant per range of `from`'s lost calls that ends after the cutoff,
 * on its thread's track as `names` (the same process) knows it. */
static size_t put_drops(char *json, size_t used, size_t cap, const struct spool *names,
                        const struct spool *from, uint64_t cutoff)
{
    for (size_t i = 0; i < from->ndrops; i++) {
        const struct spool_drop *d = &from->drops[i];
        if (d->start + d->dur < cutoff)
            continue;
        int32_t tid = d->owner < names->threads_cap ? names->threads[d->owner].tid : 0;
        double ts = (double)vc_tick_map_ns(&names->clock, d->start) / 1000.0;
        double te = (double)vc_tick_map_ns(&names->clock, d->start + d->dur) / 1000.0;
        used += (size_t)snprintf(json + used, cap - used,
                                 "%s{\"ph\":\"i\",\"name\":\"vcattach dropped\",\"cat\":"
                                 "\"INSTANT\",\"pid\":%llu,\"tid\":%lld,\"ts\":%.3f,\"s\":\"t\","
                                 "\"args\":{\"calls\":%llu,\"until\":%.3f}}",
                                 used > 1 ? "," : "", (unsigned long long)names->pid,
                                 (long long)(tid > 0 ? tid : (int32_t)names->pid), ts,
                                 (unsigned long long)d->calls, te);
    }
    return used;
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

/* Appends name as the inside of a JSON string: quotes, backslashes and control characters
 * escaped, bytes that are not well-formed UTF-8 (an agent may send anything) as '?'. */
static size_t put_json_text(char *json, size_t used, const char *name)
{
    const unsigned char *p = (const unsigned char *)name;
    while (*p) {
        unsigned c = *p;
        size_t len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                                  : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        int ok = len > 0;
        for (size_t k = 1; ok && k < len; k++)
            ok = (p[k] & 0xc0) == 0x80;
        if (ok && len >= 3) { /* no overlong form, no surrogate, nothing past U+10FFFF */
            unsigned c1 = p[1];
            ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0) &&
                 !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
        }
        if (!ok) {
            json[used++] = '?';
            p++;
        } else if (c == '"' || c == '\\') {
            json[used++] = '\\';
            json[used++] = (char)c;
            p++;
        } else if (c < 0x20) {
            used += (size_t)sprintf(json + used, "\\u%04x", c);
            p++;
        } else {
            memcpy(json + used, p, len);
            used += len;
            p += len;
        }
    }
    return used;
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
 * args {"task": number, "name": its newest name, "" when none came}, appended to b->tasks_json
 * (without brackets).  rows are sorted here by (task, raw). */
static int put_tasks(struct build *b, const struct spool *names, size_t g0, size_t g1,
                     struct step_row *rows, size_t m)
{
    qsort(rows, m, sizeof *rows, by_task_then_raw);
    size_t ntasks = 0, nnames = 0;
    for (size_t i = 0; i < m; i++)
        ntasks += i == 0 || rows[i - 1].task != rows[i].task;
    for (size_t g = g0; g < g1; g++)
        nnames += b->all[g]->ntask_names;
    struct name_row *nr = malloc((nnames ? nnames : 1) * sizeof *nr);
    size_t cap = b->tasks_len + ntasks * (160 + 6 * SPOOL_TASK_NAME_MAX) + 1;
    char *json = realloc(b->tasks_json, cap);
    if (nr == NULL || json == NULL) {
        free(nr);
        if (json != NULL)
            b->tasks_json = json;
        return build_fail(b, "out of memory for task names");
    }
    b->tasks_json = json;
    size_t k = 0;
    for (size_t g = g0; g < g1; g++)
        for (size_t i = 0; i < b->all[g]->ntask_names; i++, k++)
            nr[k] = (struct name_row){b->all[g]->task_names[i].task, (uint32_t)k,
                                      b->all[g]->task_names[i].name};
    qsort(nr, nnames, sizeof *nr, by_task_newest_first);
    size_t used = b->tasks_len, j = 0;
    for (size_t i = 0; i < m; i++) {
        if (i > 0 && rows[i - 1].task == rows[i].task)
            continue;
        while (j < nnames && nr[j].task < rows[i].task)
            j++;
        const char *name = j < nnames && nr[j].task == rows[i].task ? nr[j].name : "";
        used += (size_t)snprintf(json + used, cap - used,
                                 "%s{\"ph\":\"i\",\"name\":\"vcattach task\",\"cat\":"
                                 "\"INSTANT\",\"pid\":%llu,\"tid\":%lld,\"ts\":%.3f,\"s\":\"t\","
                                 "\"args\":{\"task\":%u,\"name\":\"",
                                 used > 0 ? "," : "", (unsigned long long)names->pid,
                                 (long long)rows[i].tid,
                                 (double)vc_tick_map_ns(&names->clock, rows[i].raw) / 1000.0,
                                 rows[i].task);
        used = put_json_text(json, used, name);
        used += (size_t)snprintf(json + used, cap - used, "\"}}");
        b->st->tasks++;
    }
    b->tasks_len = used;
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
 * drops, the --last cut) or several processes (each one's instants and drops). */
static int write_instants(struct build *b)
{
    struct spool *sp = b->sp;
    size_t cap = 512;
    for (size_t g = 0; g < b->nall; g++)
        cap += b->all[g]->ndrops * 192 + (b->all[g]->events_json ? b->all[g]->events_len + 1 : 0);
    cap += b->tasks_len + 1;
    char *json = malloc(cap);
    if (json == NULL)
        return build_fail(b, "out of memory");
    size_t used = 0;
    json[used++] = '[';
    for (size_t g = 0; g < b->nall; g++) {
        const struct spool *names = b->processes ? b->all[g] : sp;
        if (b->processes || g == b->nall - 1)
            used = put_agent_events(json, used, names);
        used = put_drops(json, used, cap, names, b->all[g], b->cutoff);
    }
    if (b->tasks_len > 0) {
        if (used > 1)
            json[used++] = ',';
        memcpy(json + used, b->tasks_json, b->tasks_len);
        used += b->tasks_len;
    }
    if (b->cutoff) /* where the kept window begins (--last) */
        used += (size_t)snprintf(json + used, cap - used,
                                 "%s{\"ph\":\"i\",\"name\":\"vcattach last\",\"cat\":\"INSTANT\","
                                 "\"pid\":%llu,\"tid\":%llu,\"ts\":%.3f,\"s\":\"p\",\"args\":"
                                 "{\"note\":\"calls that ended before this were left out (--last)\"}}",
                                 used > 1 ? "," : "", (unsigned long long)sp->pid,
                                 (unsigned long long)sp->pid,
                                 (double)vc_tick_map_ns(&sp->clock, b->cutoff) / 1000.0);
    json[used++] = ']';
    int rc = cvf_write_other_events(b->w, json, used);
    free(json);
    return rc != 0 ? writer_fail(b) : 0;
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

/* write_cpu_of or write_tasks_of for each process: every spool of a tree, or the generations
 * of one process together (the newest names its threads). */
static int per_process(struct build *b,
                       int (*fn)(struct build *, const struct spool *, size_t, size_t))
{
    if (b->processes) {
        for (size_t g = 0; g < b->nall; g++) {
            int rc = fn(b, b->all[g], g, g + 1);
            if (rc != 0)
                return rc;
        }
        return 0;
    }
    return fn(b, b->all[b->nall - 1], 0, b->nall);
}

/* Generations of one process (processes 0) or one spool per process of a tree. */
static int build(struct spool **sps, size_t n, int processes, uint64_t last_ns, cvf_sink_fn sink,
                 void *ctx, struct spool_stats *st, char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    struct build b = {.sp = sps[n - 1], .all = sps, .nall = n, .processes = processes,
                      .st = st, .err = err, .errlen = errlen};
    uint64_t newest = 0;
    for (size_t g = 0; g < n; g++) {
        if (!sps[g]->have_clock) /* nothing came but maybe records: any sane rate (clock.c's) */
            sps[g]->clock = (vc_tick_map){0, 0, 1.0 / 2.5};
        st->records += sps[g]->records;
        st->dropped += sps[g]->dropped;
        st->drop_ranges += sps[g]->ndrops;
        st->spool_bytes += sps[g]->file_bytes;
        if (sps[g]->last_raw > newest)
            newest = sps[g]->last_raw;
    }
    if (last_ns && !processes) {
        double raw = (double)last_ns / b.sp->clock.ns_per_raw; /* the rate is > 0 (spool.c) */
        uint64_t back = raw < 1.8e19 ? (uint64_t)raw : UINT64_C(18000000000000000000);
        b.cutoff = newest > back ? newest - back : 0;
    }
    b.w = cvf_writer_new(sink, ctx);
    int rc = b.w ? 0 : build_fail(&b, "out of memory");
    for (size_t g = processes ? 0 : n - 1; rc == 0 && g < n; g++) {
        b.sp = sps[g];
        rc = write_names(&b);
    }
    for (size_t g = 0; g < n; g++) {
        if (processes)
            b.sp = sps[g];
        for (uint32_t i = 0; rc == 0 && i < sps[g]->nlanes; i++)
            rc = build_lane(&b, sps[g], &sps[g]->lanes[i]);
    }
    b.sp = sps[n - 1];
    if (rc == 0)
        rc = per_process(&b, write_cpu_of);
    if (rc == 0)
        rc = per_process(&b, write_tasks_of);
    if (rc == 0)
        rc = write_instants(&b);
    if (rc == 0 && cvf_writer_finish(b.w) != 0)
        rc = writer_fail(&b);
    st->cvf_bytes = b.w ? cvf_writer_bytes(b.w) : 0;
    cvf_writer_free(b.w);
    free(b.piece);
    free(b.tasks_json);
    free(b.args);
    free(b.seg);
    return rc;
}

int spool_build_many(struct spool **sps, size_t n, uint64_t last_ns, cvf_sink_fn sink,
                     void *ctx, struct spool_stats *st, char *err, size_t errlen)
{
    return build(sps, n, 0, last_ns, sink, ctx, st, err, errlen);
}

int spool_build_processes(struct spool **sps, size_t n, cvf_sink_fn sink, void *ctx,
                          struct spool_stats *st, char *err, size_t errlen)
{
    return build(sps, n, 1, 0, sink, ctx, st, err, errlen);
}

int spool_build(struct spool *sp, cvf_sink_fn sink, void *ctx, struct spool_stats *st,
                char *err, size_t errlen)
{
    return build(&sp, 1, 0, 0, sink, ctx, st, err, errlen);
}

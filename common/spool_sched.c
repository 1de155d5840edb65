/* spool_sched.c — the scheduler's state changes of a traced process's threads in a spool and
 * in the .cvf built from it (spool.h "spool_add_sched"; spool_build.c calls the writers).
 *
 * Apart from spool.c because they do not come from the agent: vcattach records them itself
 * (cli/sched_events.c) and they never pass through the spool file.  In the .cvf, each thread's
 * changes are one counter group "sched TID" with two keys, "on_cpu" and "runnable" (1 or 0
 * from that timestamp on; both 0: blocked), a step track that any viewer draws, and one
 * instant "vcattach sched" says how they were recorded and what was lost
 * (docs/cvf-format.md).  trace/sched_split.c reads them back.
 */
#include "spool_impl.h"
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int spool_add_sched(struct spool *sp, int32_t tid, uint64_t ns, unsigned state)
{
    if (sp->nsched >= SPOOL_MAX_SCHED || state > 2) {
        sp->sched_info.lost++;
        return -1;
    }
    if (sp->nsched == sp->sched_cap) {
        size_t cap = sp->sched_cap ? sp->sched_cap * 2 : 4096;
        struct spool_sched *s = realloc(sp->sched, cap * sizeof *s);
        if (s == NULL) {
            sp->sched_info.lost++;
            return -1;
        }
        sp->sched = s;
        sp->sched_cap = cap;
    }
    sp->sched[sp->nsched++] = (struct spool_sched){tid, (uint8_t)state, ns};
    return 0;
}

void spool_set_sched_info(struct spool *sp, const struct spool_sched_info *info)
{
    uint64_t capped = sp->sched_info.lost; /* what the cap refused stays counted */
    sp->sched_info = *info;
    sp->sched_info.lost += capped;
    sp->sched_info.why[sizeof sp->sched_info.why - 1] = '\0';
}

struct sched_row {
    int32_t tid;
    uint8_t state;
    uint64_t ns, seq; /* seq: arrival order, which decides between equal times */
};

static int by_tid_ns(const void *a, const void *b)
{
    const struct sched_row *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->ns != y->ns)
        return x->ns < y->ns ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int thread_named(const struct spool *names, int32_t tid)
{
    for (uint32_t i = 0; i < names->threads_cap; i++)
        if (names->threads[i].tid == tid && names->threads[i].has_records)
            return 1;
    return 0;
}

/* One thread's rows [i, j) as its counter group.  0, or -1 when the writer failed. */
static int write_thread(cvf_writer *w, uint64_t pid, const struct sched_row *r, size_t nr,
                        int64_t *ts, cvf_counter_value *vals)
{
    size_t nts = 0;
    for (size_t i = 0; i < nr; i++) {
        if (nts > 0 && (int64_t)r[i].ns == ts[nts - 1])
            nts--; /* the same ns: the later state stays */
        ts[nts] = (int64_t)r[i].ns;
        vals[2 * nts].tag = vals[2 * nts + 1].tag = CVF_COUNTER_LONG;
        vals[2 * nts].v.i = r[i].state == 2;
        vals[2 * nts + 1].v.i = r[i].state == 1;
        nts++;
    }
    for (size_t k = nts; k-- > 1;) /* the format's values are diffed: SAME as the row before */
        for (int key = 0; key < 2; key++)
            if (vals[2 * k + key].v.i == vals[2 * (k - 1) + key].v.i)
                vals[2 * k + key].tag = CVF_COUNTER_SAME;
    static const char *const keys[] = {"on_cpu", "runnable"};
    char name[32];
    snprintf(name, sizeof name, "sched %d", (int)r[0].tid);
    return cvf_write_counter_group(w, pid, (uint64_t)r[0].tid, name, keys, 2, ts, nts, vals);
}

int spool_sched_write(cvf_writer *w, const struct spool *names, struct spool *const *all,
                      size_t g0, size_t g1, uint64_t *written)
{
    size_t n = 0;
    for (size_t g = g0; g < g1; g++)
        n += all[g]->nsched;
    if (n == 0)
        return 0;
    struct sched_row *rows = malloc(n * sizeof *rows);
    int64_t *ts = malloc(n * sizeof *ts);
    cvf_counter_value *vals = malloc(2 * n * sizeof *vals);
    if (rows == NULL || ts == NULL || vals == NULL) {
        free(rows);
        free(ts);
        free(vals);
        return -1;
    }
    size_t m = 0;
    for (size_t g = g0; g < g1; g++)
        for (size_t i = 0; i < all[g]->nsched; i++) {
            const struct spool_sched *s = &all[g]->sched[i];
            rows[m] = (struct sched_row){s->tid, s->state, s->ns, m};
            m++;
        }
    qsort(rows, m, sizeof *rows, by_tid_ns);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < m;) {
        size_t j = i;
        while (j < m && rows[j].tid == rows[i].tid)
            j++;
        if (thread_named(names, rows[i].tid)) {
            rc = write_thread(w, names->pid, rows + i, j - i, ts, vals) == 0 ? 0 : -2;
            *written += j - i;
        }
        i = j;
    }
    free(rows);
    free(ts);
    free(vals);
    return rc;
}

void spool_sched_instant(vc_text *json, const struct spool *sp)
{
    const struct spool_sched_info *in = &sp->sched_info;
    if (!in->recorded && !in->why[0])
        return; /* not asked for (--no-sched) or an agent-written spool */
    /* at the first state (else the session's start): a viewer's timeline starts there */
    uint64_t ns = sp->have_clock ? sp->clock.ns0 : 0;
    for (size_t i = 0; i < sp->nsched; i++)
        if (i == 0 || sp->sched[i].ns < ns)
            ns = sp->sched[i].ns;
    if (json->len > 1)
        vc_text_putc(json, ',');
    vc_text_printf(json,
                   "{\"ph\":\"i\",\"name\":\"vcattach sched\",\"cat\":\"INSTANT\",\"pid\":%llu,"
                   "\"tid\":%llu,\"ts\":%.3f,\"s\":\"p\",\"args\":{\"recorded\":%d,"
                   "\"threads\":%llu,\"switches\":%llu,\"lost\":%llu,\"refused\":%llu,"
                   "\"why\":\"",
                   (unsigned long long)sp->pid, (unsigned long long)sp->pid,
                   (double)ns / 1000.0, in->recorded,
                   (unsigned long long)in->threads, (unsigned long long)in->switches,
                   (unsigned long long)in->lost, (unsigned long long)in->refused);
    for (const char *p = in->why; *p; p++) /* our own text, but kept valid JSON */
        if (*p != '"' && *p != '\\' && (unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f)
            vc_text_putc(json, *p);
    vc_text_put(json, "\"}}", 3);
}

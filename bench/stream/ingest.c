/* ingest.c — what vcattach's side of a stream costs per call: the records of a real trace
 * fed to the spool (common/spool.c) as the agent sends them, timed.
 *
 * Why: in a streaming session the agent drops calls when vcattach does not drain its window
 * fast enough, and on a busy service vcattach shares the cores with the target.  Its cost per
 * call is the spool's ingest (sorting records into lanes, delta-encoding them, writing lanes
 * out), which this measures apart from the socket and the target.
 *
 * How: every X event of TRACE.cvf becomes a wire record (start, dur, key of its name), each
 * thread's records ordered by end as an agent emits them (a call's record is written when it
 * returns), packed into CHUNK frames of a 64 KiB chunk's worth, threads taken in turn.  The
 * frames are fed to a fresh spool in /tmp REPS times; the best rep is printed (ns per record,
 * records per second).  Not asserted: a benchmark.
 *
 *   ingest TRACE.cvf [REPS]
 */
#include "cvf_reader.h"
#include "protocol.h"
#include "spool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PER_CHUNK (65536 / sizeof(struct vc_wire_record))

struct thread_recs {
    uint64_t pid, tid;
    struct vc_wire_record *r;
    size_t n, cap;
};

struct loaded {
    struct thread_recs *t;
    size_t nt;
    char **names;
    size_t nnames;
};

static uint32_t name_id(struct loaded *L, const char *name)
{
    /* a trace has thousands of names at most: a linear search is fine at load time */
    for (size_t i = 0; i < L->nnames; i++)
        if (strcmp(L->names[i], name) == 0)
            return (uint32_t)i;
    char **n = realloc(L->names, (L->nnames + 1) * sizeof *n);
    if (n == NULL || (n[L->nnames] = strdup(name)) == NULL) {
        fprintf(stderr, "ingest: out of memory\n");
        exit(1);
    }
    L->names = n;
    return (uint32_t)L->nnames++;
}

static int on_group(void *ctx, const cvf_fee_group *g)
{
    struct loaded *L = ctx;
    struct thread_recs *t = NULL;
    for (size_t i = 0; i < L->nt; i++)
        if (L->t[i].pid == g->pid && L->t[i].tid == g->tid)
            t = &L->t[i];
    if (t == NULL) {
        struct thread_recs *nt = realloc(L->t, (L->nt + 1) * sizeof *nt);
        if (nt == NULL)
            return 1;
        L->t = nt;
        t = &L->t[L->nt++];
        memset(t, 0, sizeof *t);
        t->pid = g->pid, t->tid = g->tid;
    }
    uint32_t id = name_id(L, g->name);
    if (t->n + g->count > t->cap) {
        size_t cap = (t->n + g->count) * 2;
        struct vc_wire_record *r = realloc(t->r, cap * sizeof *r);
        if (r == NULL)
            return 1;
        t->r = r, t->cap = cap;
    }
    for (size_t i = 0; i < g->count; i++)
        t->r[t->n++] = (struct vc_wire_record){(uint64_t)g->ts[i] * 10, g->dur[i] * 10, id, 0};
    return 0;
}

/* By end, as a thread's records are written; an inner call ending with its caller first. */
static int by_end(const void *a, const void *b)
{
    const struct vc_wire_record *x = a, *y = b;
    uint64_t ex = x->start + x->dur, ey = y->start + y->dur;
    if (ex != ey)
        return ex < ey ? -1 : 1;
    return x->start > y->start ? -1 : x->start < y->start;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One rep: every record through a fresh spool.  Seconds, or a negative value on error. */
static double feed(const struct loaded *L, unsigned char *frame, size_t *records)
{
    char path[64], err[256];
    snprintf(path, sizeof path, "/tmp/vc-ingest-%d.spool", (int)getpid());
    struct spool *sp;
    if (spool_create(&sp, path, 1, err, sizeof err) != 0) {
        fprintf(stderr, "ingest: %s\n", err);
        return -1;
    }
    size_t *pos = calloc(L->nt, sizeof *pos);
    if (pos == NULL)
        return -1;
    *records = 0;
    double t0 = now_s();
    for (int more = 1; more;) {
        more = 0;
        for (size_t i = 0; i < L->nt; i++) {
            const struct thread_recs *t = &L->t[i];
            size_t n = t->n - pos[i] < PER_CHUNK ? t->n - pos[i] : PER_CHUNK;
            if (n == 0)
                continue;
            uint32_t owner = (uint32_t)i, count = (uint32_t)n;
            memcpy(frame, &owner, 4);
            memcpy(frame + 4, &count, 4);
            memcpy(frame + 8, t->r + pos[i], n * sizeof *t->r);
            if (spool_add(sp, VC_MSG_CHUNK, frame, 8 + n * sizeof *t->r, err, sizeof err) != 0) {
                fprintf(stderr, "ingest: %s\n", err);
                free(pos);
                spool_close(sp, 1);
                return -1;
            }
            pos[i] += n, *records += n;
            more |= pos[i] < t->n;
        }
    }
    int rc = spool_flush(sp, err, sizeof err);
    double dt = now_s() - t0;
    free(pos);
    spool_close(sp, 1);
    return rc == 0 ? dt : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: ingest TRACE.cvf [REPS]\n");
        return 2;
    }
    int reps = argc == 3 ? atoi(argv[2]) : 5;
    if (reps < 1)
        reps = 1;
    void *data;
    size_t size;
    cvf_error e;
    if (cvf_map_file(argv[1], &data, &size, &e) != 0) {
        fprintf(stderr, "ingest: cannot read %s\n", argv[1]);
        return 1;
    }
    struct loaded L = {0};
    cvf_visitor v = {.fee_group = on_group};
    if (cvf_read(data, size, &v, &L, CVF_READ_SKIP_JSON, &e) != 0) {
        fprintf(stderr, "ingest: %s is not a readable .cvf\n", argv[1]);
        return 1;
    }
    cvf_unmap_file(data, size);
    if (L.nt > 65535) {
        fprintf(stderr, "ingest: more threads than a spool takes\n");
        return 1;
    }
    for (size_t i = 0; i < L.nt; i++)
        qsort(L.t[i].r, L.t[i].n, sizeof *L.t[i].r, by_end);
    unsigned char *frame = malloc(8 + PER_CHUNK * sizeof(struct vc_wire_record));
    if (frame == NULL)
        return 1;
    double best = 0;
    size_t records = 0;
    for (int k = 0; k < reps; k++) {
        double dt = feed(&L, frame, &records);
        if (dt < 0)
            return 1;
        if (k == 0 || dt < best)
            best = dt;
    }
    printf("ingest: %zu records, %zu threads, %zu keys: best of %d %.1f ns/record, "
           "%.1f M records/s\n", records, L.nt, L.nnames, reps,
           records ? best * 1e9 / (double)records : 0.0, records / best / 1e6);
    for (size_t i = 0; i < L.nt; i++)
        free(L.t[i].r);
    for (size_t i = 0; i < L.nnames; i++)
        free(L.names[i]);
    free(L.t);
    free(L.names);
    free(frame);
    return 0;
}

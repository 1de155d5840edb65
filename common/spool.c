/* spool.c — receiving a streamed trace into its spool (see spool.h): checking each frame,
 * sorting records into lanes, writing lanes to the spool file, and replaying a spool file.
 *
 * The hot part is on_chunk: a hash lookup of the record's group, a lane whose last start is
 * not after the record's (in practice the first: a thread's records come in the order its
 * calls end, which is start order except for a key nested in itself), and two varints.
 */
#include "spool_impl.h"
#include "fd_io.h"
#include "monotonic.h"
#include "protocol.h"
#include "utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#define SPOOL_MAGIC "VCSPOOL1"
#define SPOOL_MEM_MAX ((uint64_t)64 << 20) /* lane bytes held before they go to the file */
#define SPOOL_FLUSH_MS 250 /* ... and at least this often: what a kill can lose */
#define SPOOL_IOV 1020     /* iovecs per writev (IOV_MAX is 1024) */

int spool_frame_type(uint32_t type)
{
    return type >= VC_MSG_CHUNK && type <= VC_MSG_EVENTS;
}

static int bad(char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "malformed stream from the agent: %s", what);
    return -1;
}

/* No memory for what the agent sent: the trace ends there, what came before stays (-2). */
static int out_of_memory(char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "out of memory for the %s the agent sent: the trace ends here", what);
    return -2;
}

/* ---- the file ------------------------------------------------------------------------------- */

static int file_failed(struct spool *sp, char *err, size_t errlen, int e)
{
    snprintf(err, errlen, "writing the spool %.300s failed: %s%s", sp->path, strerror(e),
             e == ENOSPC ? " (the disk is full: the trace ends here)" : "");
    return -2;
}

/* Writes iov[0..n) in full at the end of the file; a failure cuts the file back to where it
 * was (a record cut in half would end a replay early).  0 or -2 + err. */
static int write_iov(struct spool *sp, struct iovec *iov, int n, size_t total, char *err,
                     size_t errlen)
{
    if (sp->limit && sp->file_bytes + total > sp->limit) {
        sp->at_limit = 1;
        snprintf(err, errlen, "the spool reached --max-trace-mb (%llu MiB): the trace ends here",
                 (unsigned long long)(sp->limit >> 20));
        return -2;
    }
    size_t done = 0;
    int i = 0;
    while (done < total) {
        ssize_t w = writev(sp->fd, iov + i, n - i);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : ENOSPC;
            if (ftruncate(sp->fd, (off_t)sp->file_bytes) != 0)
                (void)0; /* the replay stops at the cut record anyway */
            lseek(sp->fd, (off_t)sp->file_bytes, SEEK_SET);
            return file_failed(sp, err, errlen, e);
        }
        done += (size_t)w;
        for (; i < n && w > 0; i++) {
            size_t take = (size_t)w < iov[i].iov_len ? (size_t)w : iov[i].iov_len;
            iov[i].iov_base = (char *)iov[i].iov_base + take;
            iov[i].iov_len -= take;
            w -= (ssize_t)take;
            if (iov[i].iov_len)
                break;
        }
    }
    sp->file_bytes += total;
    return 0;
}

/* One record: u32 type | u32 len | a | b (b may be NULL). */
static int write_rec(struct spool *sp, uint32_t type, const void *a, size_t alen, const void *b,
                     size_t blen, char *err, size_t errlen)
{
    if (sp->replaying)
        return 0;
    uint32_t head[2] = {type, (uint32_t)(alen + blen)};
    struct iovec iov[3] = {{head, 8}, {(void *)a, alen}, {(void *)b, blen}};
    return write_iov(sp, iov, b ? 3 : 2, 8 + alen + blen, err, errlen);
}

/* ---- lanes -------------------------------------------------------------------------------- */

static int grow(void **p, uint32_t *cap, uint32_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    uint32_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (q == NULL)
        return -1;
    memset((char *)q + (size_t)*cap * size, 0, (size_t)(c - *cap) * size);
    *p = q;
    *cap = c;
    return 0;
}

static int groups_rehash(struct spool *sp)
{
    uint32_t cap = sp->group_mask ? (sp->group_mask + 1) * 2 : 4096;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return -1;
    for (uint32_t i = 0; i < sp->nlanes; i++) {
        struct spool_lane *l = &sp->lanes[i];
        /* a group's first lane has the lowest index: it takes the slot, the others follow it */
        uint32_t h = spool_group_hash(l->owner, l->id, l->mark) & (cap - 1);
        for (;; h = (h + 1) & (cap - 1)) {
            if (slots[h] == 0) {
                slots[h] = i + 1;
                break;
            }
            struct spool_lane *o = &sp->lanes[slots[h] - 1];
            if (o->owner == l->owner && o->id == l->id && o->mark == l->mark)
                break; /* its group's head is there already */
        }
    }
    free(sp->group_slots);
    sp->group_slots = slots;
    sp->group_mask = cap - 1;
    return 0;
}

/* A new lane of the group; it joins the chain after `prev` (UINT32_MAX: a new group). */
static int lane_new(struct spool *sp, uint32_t owner, uint32_t id, uint32_t mark, uint32_t prev,
                    uint32_t *out)
{
    if (sp->nlanes >= SPOOL_MAX_LANES)
        return -1;
    if (grow((void **)&sp->lanes, &sp->lanes_cap, sp->nlanes + 1, sizeof *sp->lanes) != 0)
        return -1;
    uint32_t i = sp->nlanes++;
    struct spool_lane *l = &sp->lanes[i];
    memset(l, 0, sizeof *l);
    l->owner = owner, l->id = id, l->mark = mark, l->sorted = 1, l->next = UINT32_MAX;
    if (prev != UINT32_MAX) {
        sp->lanes[prev].next = i;
    } else if ((uint64_t)sp->nlanes * 2 > (uint64_t)sp->group_mask + 1) {
        if (groups_rehash(sp) != 0)
            return -1; /* (the rehash placed the new lane too) */
    } else {
        uint32_t h = spool_group_hash(owner, id, mark) & sp->group_mask;
        while (sp->group_slots[h] != 0)
            h = (h + 1) & sp->group_mask;
        sp->group_slots[h] = i + 1;
    }
    *out = i;
    return 0;
}

/* The last lane of a group, or UINT32_MAX if the group has none yet. */
static uint32_t group_last_lane(struct spool *sp, uint32_t owner, uint32_t id, uint32_t mark)
{
    if (sp->group_mask == 0)
        return UINT32_MAX;
    uint32_t h = spool_group_hash(owner, id, mark) & sp->group_mask;
    for (;; h = (h + 1) & sp->group_mask) {
        uint32_t s = sp->group_slots[h];
        if (s == 0)
            return UINT32_MAX;
        struct spool_lane *l = &sp->lanes[s - 1];
        if (l->owner == owner && l->id == id && l->mark == mark) {
            uint32_t i = s - 1;
            while (sp->lanes[i].next != UINT32_MAX)
                i = sp->lanes[i].next;
            return i;
        }
    }
}

/* The lane a record starting at `start` goes to: the first of its group whose last start is
 * not after it, else a new one, else (too many) the group's first, which loses its order. */
static int lane_for(struct spool *sp, uint32_t owner, uint32_t id, uint32_t mark, uint64_t start,
                    uint32_t *out)
{
    if (sp->group_mask == 0 && groups_rehash(sp) != 0)
        return -1;
    uint32_t h = spool_group_hash(owner, id, mark) & sp->group_mask;
    for (;; h = (h + 1) & sp->group_mask) {
        uint32_t s = sp->group_slots[h];
        if (s == 0)
            return lane_new(sp, owner, id, mark, UINT32_MAX, out);
        struct spool_lane *l = &sp->lanes[s - 1];
        if (l->owner == owner && l->id == id && l->mark == mark)
            break;
    }
    uint32_t i = sp->group_slots[h] - 1, last = i, n = 0;
    for (; i != UINT32_MAX; last = i, i = sp->lanes[i].next, n++)
        if (sp->lanes[i].count == 0 || sp->lanes[i].last_start <= start) {
            *out = i;
            return 0;
        }
    if (n < SPOOL_LANES_PER_GROUP)
        return lane_new(sp, owner, id, mark, last, out);
    *out = sp->group_slots[h] - 1;
    sp->lanes[*out].sorted = 0;
    return 0;
}

static int lane_append(struct spool *sp, struct spool_lane *l, uint64_t start, uint64_t dur)
{
    if (l->buf_len + 20 > l->buf_cap) {
        uint32_t cap = l->buf_cap ? l->buf_cap * 2 : 256;
        unsigned char *b = realloc(l->buf, cap);
        if (b == NULL)
            return -1;
        sp->mem_bytes += cap - l->buf_cap;
        l->buf = b;
        l->buf_cap = cap;
    }
    if (l->buf_count == 0)
        l->buf_first = l->buf_prev = start, l->buf_last_end = 0;
    if (start + dur > l->buf_last_end)
        l->buf_last_end = start + dur;
    unsigned char *p = l->buf + l->buf_len;
    p = spool_put_varint(p, spool_zigzag((int64_t)(start - l->buf_prev)));
    p = spool_put_varint(p, dur);
    sp->mem_used += (uint64_t)(p - (l->buf + l->buf_len));
    l->buf_len = (uint32_t)(p - l->buf);
    l->buf_count++;
    l->buf_prev = start;
    l->last_start = start > l->last_start || l->count == 0 ? start : l->last_start;
    l->count++;
    return 0;
}

static int add_segment(struct spool_lane *l, uint64_t offset, uint64_t first, uint32_t count,
                       uint32_t bytes)
{
    if (grow((void **)&l->segs, &l->segs_cap, l->nsegs + 1, sizeof *l->segs) != 0)
        return -1;
    l->segs[l->nsegs++] = (struct spool_segment){offset, first, count, bytes};
    return 0;
}

/* The flush of many lanes in few writev calls: each lane adds its LANE record (the first
 * time) and a SEGMENT record; heads live here until the batch is written. */
struct flush_batch {
    struct iovec iov[SPOOL_IOV];
    uint32_t heads[SPOOL_IOV][8]; /* a LANE record (2 + 4 words) or a SEGMENT head (2 + 6) */
    uint32_t lanes[SPOOL_IOV / 3];
    int n, nheads, nlanes;
    size_t total;
};

static void batch_put(struct flush_batch *fb, void *p, size_t len)
{
    fb->iov[fb->n++] = (struct iovec){p, len};
    fb->total += len;
}

/* Writes the batch and moves its lanes' bytes to their segment lists. */
static int batch_write(struct spool *sp, struct flush_batch *fb, char *err, size_t errlen)
{
    if (fb->n == 0)
        return 0;
    uint64_t at = sp->file_bytes;
    uint64_t *offsets = malloc((size_t)fb->nlanes * sizeof *offsets);
    if (offsets == NULL) {
        snprintf(err, errlen, "out of memory for the spool's index");
        return -2;
    }
    /* where each lane's bytes land: walk the batch as it will be written */
    for (int i = 0, k = 0; i < fb->n; i++) {
        if (k < fb->nlanes && fb->iov[i].iov_base == sp->lanes[fb->lanes[k]].buf)
            offsets[k++] = at;
        at += fb->iov[i].iov_len;
    }
    int rc = write_iov(sp, fb->iov, fb->n, fb->total, err, errlen);
    for (int k = 0; rc == 0 && k < fb->nlanes; k++) {
        struct spool_lane *l = &sp->lanes[fb->lanes[k]];
        if (add_segment(l, offsets[k], l->buf_first, l->buf_count, l->buf_len) != 0) {
            snprintf(err, errlen, "out of memory for the spool's index");
            rc = -2;
            break;
        }
        l->declared = 1;
        /* A busy lane keeps its buffer (growing it again costs page faults on every flush),
         * as long as the buffers kept stay within the memory bound. */
        if (l->buf_len < l->buf_cap / 4 || sp->mem_bytes > sp->mem_max / 2) {
            sp->mem_bytes -= l->buf_cap;
            free(l->buf);
            l->buf = NULL;
            l->buf_cap = 0;
        }
        l->buf_len = l->buf_count = 0;
    }
    sp->mem_used = 0;
    free(offsets);
    fb->n = fb->nheads = fb->nlanes = 0;
    fb->total = 0;
    return rc;
}

static int batch_lane(struct spool *sp, struct flush_batch *fb, uint32_t i, char *err,
                      size_t errlen)
{
    struct spool_lane *l = &sp->lanes[i];
    if (l->buf_count == 0)
        return 0;
    if (fb->n + 3 > SPOOL_IOV || fb->nlanes == SPOOL_IOV / 3) {
        int rc = batch_write(sp, fb, err, errlen);
        if (rc != 0)
            return rc;
    }
    if (!l->declared) {
        uint32_t *h = fb->heads[fb->nheads++];
        h[0] = SPOOL_REC_LANE, h[1] = 16, h[2] = i, h[3] = l->owner, h[4] = l->id, h[5] = l->mark;
        batch_put(fb, h, 24);
    }
    uint32_t *h = fb->heads[fb->nheads++];
    h[0] = SPOOL_REC_SEGMENT, h[1] = 24 + l->buf_len, h[2] = i, h[3] = l->buf_count;
    memcpy(&h[4], &l->buf_first, 8);
    memcpy(&h[6], &l->buf_last_end, 8);
    batch_put(fb, h, 32);
    fb->lanes[fb->nlanes++] = i;
    batch_put(fb, l->buf, l->buf_len);
    return 0;
}

/* The disk must keep room for the .cvf built from the spool at the end, next to it.  That .cvf
 * holds what the file holds, the lanes still in memory and the agent's last window, and
 * measured 0.67-0.93 of the spool's size (busy 4-thread and asyncio targets, 3-75 MB spools;
 * the high end with a 16 MB spool whose lanes were not yet written).  So the spool takes no
 * more once the free space falls below its own size plus what is in memory plus 8 MiB (the
 * agent's 32 MiB window encodes to ~3 MiB): it uses at most about half the free space. */
static int disk_has_room(struct spool *sp, char *err, size_t errlen)
{
    struct statvfs v;
    if (sp->replaying || fstatvfs(sp->fd, &v) != 0)
        return 0;
    uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
    uint64_t reserve = sp->file_bytes + sp->mem_bytes + ((uint64_t)8 << 20);
    if (avail >= reserve)
        return 0;
    snprintf(err, errlen, "the disk of the spool %.300s is nearly full (%llu MiB free): the "
             "trace ends here, leaving room to write it", sp->path,
             (unsigned long long)(avail >> 20));
    return -2;
}

int spool_flush(struct spool *sp, char *err, size_t errlen)
{
    int room = disk_has_room(sp, err, errlen);
    if (room != 0)
        return room;
    static struct flush_batch fb; /* large: not on the stack; one spool flushes at a time */
    fb.n = fb.nheads = fb.nlanes = 0;
    fb.total = 0;
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < sp->nlanes; i++)
        rc = batch_lane(sp, &fb, i, err, errlen);
    if (rc == 0)
        rc = batch_write(sp, &fb, err, errlen);
    sp->last_flush_ms = vc_monotonic_ms();
    return rc;
}

/* ---- the agent's frames ----------------------------------------------------------------- */

static struct spool_thread *thread_slot(struct spool *sp, uint32_t owner)
{
    if (owner >= SPOOL_MAX_OWNERS ||
        grow((void **)&sp->threads, &sp->threads_cap, owner + 1, sizeof *sp->threads) != 0)
        return NULL;
    return &sp->threads[owner];
}

static int add_drop(struct spool *sp, uint32_t owner, uint64_t start, uint64_t dur,
                    uint64_t calls, char *err, size_t errlen)
{
    if (sp->ndrops >= SPOOL_MAX_DROPS) { /* counted, not kept: an agent may send any number */
        sp->dropped += calls;
        return 0;
    }
    if (sp->ndrops == sp->drops_cap) {
        size_t cap = sp->drops_cap ? sp->drops_cap * 2 : 64;
        struct spool_drop *d = realloc(sp->drops, cap * sizeof *d);
        if (d == NULL)
            return out_of_memory(err, errlen, "drop ranges");
        sp->drops = d;
        sp->drops_cap = cap;
    }
    sp->drops[sp->ndrops++] = (struct spool_drop){owner, start, dur, calls};
    sp->dropped += calls;
    struct {
        uint32_t owner, pad;
        uint64_t start, dur, calls;
    } rec = {owner, 0, start, dur, calls};
    return write_rec(sp, SPOOL_REC_DROP, &rec, sizeof rec, NULL, 0, err, errlen);
}

/* Keeps one CPU clock sample (memory only: the file gets the chunk's samples at once). */
static int add_cpu(struct spool *sp, uint32_t owner, uint64_t raw, uint64_t cpu_ns)
{
    if (sp->ncpu >= SPOOL_MAX_CPU) { /* an agent may send any number */
        sp->cpu_lost++;
        return 0;
    }
    if (sp->ncpu == sp->cpu_cap) {
        size_t cap = sp->cpu_cap ? sp->cpu_cap * 2 : 1024;
        struct spool_cpu *c = realloc(sp->cpu, cap * sizeof *c);
        if (c == NULL)
            return -1;
        sp->cpu = c;
        sp->cpu_cap = cap;
    }
    sp->cpu[sp->ncpu++] = (struct spool_cpu){owner, raw, cpu_ns};
    return 0;
}

/* Keeps one task step's start (memory; the file gets the chunk's steps at once). */
static int add_task_step(struct spool *sp, uint32_t owner, uint64_t raw, uint64_t task)
{
    if (task == 0 || task > UINT32_MAX || sp->nsteps >= SPOOL_MAX_TASK_STEPS) {
        sp->tasks_lost++; /* an agent may send any number, or nonsense */
        return 0;
    }
    if (sp->nsteps == sp->steps_cap) {
        size_t cap = sp->steps_cap ? sp->steps_cap * 2 : 1024;
        struct spool_task_step *s = realloc(sp->steps, cap * sizeof *s);
        if (s == NULL)
            return -1;
        sp->steps = s;
        sp->steps_cap = cap;
    }
    sp->steps[sp->nsteps++] = (struct spool_task_step){owner, (uint32_t)task, raw};
    return 0;
}

/* Keeps part `part` (16 bytes) of task `task`'s name.  A task's parts come one after the
 * other: they join the last entry when it is the same task's. */
static int add_task_name(struct spool *sp, uint32_t task, uint32_t part, const unsigned char *b16)
{
    if (task == 0 || part >= VC_WIRE_TASK_NAME_PARTS) {
        sp->tasks_lost++;
        return 0;
    }
    struct spool_task_name *n = sp->ntask_names ? &sp->task_names[sp->ntask_names - 1] : NULL;
    if (n == NULL || n->task != task || part == 0) {
        if (sp->ntask_names >= SPOOL_MAX_TASK_NAMES) {
            sp->tasks_lost++;
            return 0;
        }
        if (sp->ntask_names == sp->task_names_cap) {
            size_t cap = sp->task_names_cap ? sp->task_names_cap * 2 : 256;
            struct spool_task_name *v = realloc(sp->task_names, cap * sizeof *v);
            if (v == NULL)
                return -1;
            sp->task_names = v;
            sp->task_names_cap = cap;
        }
        n = &sp->task_names[sp->ntask_names++];
        memset(n, 0, sizeof *n);
        n->task = task;
    }
    memcpy(n->name + 16 * part, b16, 16); /* name[48] stays NUL: a C string whatever came */
    return 0;
}

/* The (start, dur) of a CHUNK's `n` records whose id is `id` (CPU samples, task steps) as
 * one spool record of `type`: u32 owner | u32 count | count x (u64 start | u64 dur). */
static int write_pairs(struct spool *sp, uint32_t type, uint32_t id, uint32_t owner,
                       const unsigned char *recs, uint32_t count, uint32_t n, char *err,
                       size_t errlen)
{
    uint64_t *pairs = malloc((size_t)n * 16);
    if (pairs == NULL)
        return out_of_memory(err, errlen, "CPU samples or task steps");
    uint32_t k = 0;
    for (uint32_t i = 0; i < count && k < n; i++) {
        struct vc_wire_record r;
        memcpy(&r, recs + (size_t)i * sizeof r, sizeof r);
        if (r.id == id) {
            pairs[2 * k] = r.start;
            pairs[2 * k + 1] = r.dur;
            k++;
        }
    }
    uint32_t head[2] = {owner, k};
    int rc = write_rec(sp, type, head, 8, pairs, (size_t)k * 16, err, errlen);
    free(pairs);
    return rc;
}

/* What a CHUNK's records add up to, and its task name records as the file takes them (one
 * TASK_NAME record of 32 bytes each, all written at once: a chunk may hold thousands). */
struct chunk_tally {
    uint32_t ncpu, nsteps, nmarks;
    unsigned char *names;
    size_t names_len, names_cap;
};

/* One record of owner's CHUNK.  0, -1 (malformed) or -2 (a budget or memory: the trace ends). */
static int on_record(struct spool *sp, uint32_t owner, const struct vc_wire_record *r,
                     struct chunk_tally *c, char *err, size_t errlen)
{
    if (r->id == VC_WIRE_TASK) {
        if (add_task_step(sp, owner, r->start, r->dur) != 0)
            return out_of_memory(err, errlen, "task steps");
        c->nsteps++;
        c->nmarks++;
        return 0;
    }
    if (r->id <= VC_WIRE_TASK_NAME_0 && r->id > VC_WIRE_TASK_NAME_0 - VC_WIRE_TASK_NAME_PARTS) {
        unsigned char b16[16];
        memcpy(b16, &r->start, 8);
        memcpy(b16 + 8, &r->dur, 8);
        uint32_t part = VC_WIRE_TASK_NAME_0 - r->id;
        if (add_task_name(sp, r->flags, part, b16) != 0 || c->names_len + 32 > c->names_cap)
            return out_of_memory(err, errlen, "task names");
        uint32_t head[4] = {SPOOL_REC_TASK_NAME, 24, r->flags, part};
        memcpy(c->names + c->names_len, head, 16);
        memcpy(c->names + c->names_len + 16, b16, 16);
        c->names_len += 32;
        c->nmarks++;
        return 0;
    }
    if (r->id == VC_WIRE_CPU) {
        if (add_cpu(sp, owner, r->start, r->dur) != 0)
            return out_of_memory(err, errlen, "CPU samples");
        c->ncpu++;
        return 0;
    }
    if (r->id == VC_WIRE_DROPPED)
        return add_drop(sp, owner, r->start, r->dur, r->flags, err, errlen);
    if (r->id >= SPOOL_MAX_IDS)
        return bad(err, errlen, "a record's key is out of range");
    uint32_t mark = r->flags & VC_WIRE_AT_ATTACH_INNER ? 3
                    : r->flags & VC_WIRE_AT_ATTACH     ? 2
                    : r->flags & VC_WIRE_RESUME        ? 1
                                                       : 0;
    if (sp->records == 0 || r->start + r->dur < sp->first_raw)
        sp->first_raw = r->start + r->dur; /* by ends: a call open since attach is not a span */
    if (r->start + r->dur > sp->last_raw)
        sp->last_raw = r->start + r->dur;
    uint32_t lane;
    if (lane_for(sp, owner, r->id, mark, r->start, &lane) != 0 ||
        lane_append(sp, &sp->lanes[lane], r->start, r->dur) != 0) {
        if (sp->nlanes < SPOOL_MAX_LANES)
            return out_of_memory(err, errlen, "records");
        snprintf(err, errlen, "the agent's calls need more than %u lanes (threads x "
                 "functions): the trace ends here", SPOOL_MAX_LANES);
        return -2;
    }
    sp->records++;
    return 0;
}

static int on_chunk(struct spool *sp, const unsigned char *p, size_t len, char *err,
                    size_t errlen)
{
    uint32_t owner, count;
    if (len < 8)
        return bad(err, errlen, "short CHUNK");
    memcpy(&owner, p, 4);
    memcpy(&count, p + 4, 4);
    if ((len - 8) / sizeof(struct vc_wire_record) != count || (len - 8) % sizeof(struct vc_wire_record))
        return bad(err, errlen, "CHUNK length does not match its count");
    struct spool_thread *t = thread_slot(sp, owner);
    if (t == NULL)
        return bad(err, errlen, "CHUNK of an impossible thread");
    struct chunk_tally c = {0};
    c.names_cap = (size_t)count * 32;
    if (count > 0 && (c.names = malloc(c.names_cap)) == NULL)
        return out_of_memory(err, errlen, "task names");
    int rc = 0;
    for (uint32_t k = 0; rc == 0 && k < count; k++) {
        struct vc_wire_record r;
        memcpy(&r, p + 8 + (size_t)k * sizeof r, sizeof r);
        rc = on_record(sp, owner, &r, &c, err, errlen);
    }
    if (rc == 0 && c.names_len > 0) {
        struct iovec iov = {c.names, c.names_len};
        rc = write_iov(sp, &iov, 1, c.names_len, err, errlen);
    }
    free(c.names);
    if (rc == 0 && c.ncpu > 0)
        rc = write_pairs(sp, SPOOL_REC_CPU, VC_WIRE_CPU, owner, p + 8, count, c.ncpu, err,
                         errlen);
    if (rc == 0 && c.nsteps > 0)
        rc = write_pairs(sp, SPOOL_REC_TASKS, VC_WIRE_TASK, owner, p + 8, count, c.nsteps,
                         err, errlen);
    if (rc != 0)
        return rc;
    if (c.ncpu + c.nmarks < count) /* CPU samples and task marks alone make no thread track */
        t->has_records = 1;
    /* by the records held, by the buffers allocated for them (a lane's buffer starts at 256
     * bytes: a million lanes of one record each would hold 256 MiB), or by the clock */
    if (sp->mem_used > sp->mem_max / 2 || sp->mem_bytes > sp->mem_max ||
        vc_monotonic_ms() - sp->last_flush_ms > SPOOL_FLUSH_MS)
        return spool_flush(sp, err, errlen);
    return 0;
}

static char *dup_n(const unsigned char *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s != NULL) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

/* A name as root keeps it: up to its first NUL, cut to `max` bytes at a character boundary,
 * every stray byte made '?' (one member's bytes must never make the merged trace unreadable),
 * and counted against the spool's SPOOL_NAMES_MAX.  NULL when refused (counted) or no memory. */
static char *keep_name(struct spool *sp, const unsigned char *p, size_t n, size_t max)
{
    n = strnlen((const char *)p, n);
    n = vc_utf8_cut((const char *)p, n, max);
    if (sp->name_bytes + n + 1 > SPOOL_NAMES_MAX) {
        sp->names_refused++;
        return NULL;
    }
    char *s = dup_n(p, n);
    if (s != NULL) {
        vc_utf8_repair(s, n);
        sp->name_bytes += n + 1;
    }
    return s;
}

static void drop_name(struct spool *sp, char **name)
{
    if (*name != NULL) {
        sp->name_bytes -= strlen(*name) + 1;
        free(*name);
        *name = NULL;
    }
}

/* What a frame leaves for the spool file: the names as root keeps them (cut, repaired, within
 * the budget), so that the file holds no more than memory does; NULL buf when replaying. */
struct kept {
    unsigned char *buf; /* at least the frame's length: what is kept is never longer */
    size_t len;
};

static void kept_put(struct kept *k, const void *p, size_t n)
{
    if (k->buf != NULL) {
        memcpy(k->buf + k->len, p, n);
        k->len += n;
    }
}

static void kept_name(struct kept *k, const char *name)
{
    if (name != NULL)
        kept_put(k, name, strlen(name));
}

static int on_names(struct spool *sp, const unsigned char *p, size_t len, struct kept *k,
                    char *err, size_t errlen)
{
    for (size_t off = 0; off < len;) {
        uint32_t id, n;
        if (len - off < 8)
            return bad(err, errlen, "short NAMES entry");
        memcpy(&id, p + off, 4);
        memcpy(&n, p + off + 4, 4);
        off += 8;
        if (n > len - off || id >= SPOOL_MAX_IDS)
            return bad(err, errlen, "NAMES entry out of range");
        if (grow((void **)&sp->names, &sp->names_cap, id + 1, sizeof *sp->names) != 0)
            return out_of_memory(err, errlen, "names");
        drop_name(sp, &sp->names[id]);
        sp->names[id] = keep_name(sp, p + off, n, CVF_NAME_MAX);
        off += n;
        if (sp->names[id] != NULL) {
            uint32_t head[2] = {id, (uint32_t)strlen(sp->names[id])};
            kept_put(k, head, 8);
            kept_name(k, sp->names[id]);
        }
    }
    return 0;
}

static int on_threads(struct spool *sp, const unsigned char *p, size_t len, struct kept *k,
                      char *err, size_t errlen)
{
    for (size_t off = 0; off < len;) {
        uint32_t owner, nl, bl;
        int32_t tid;
        if (len - off < 16)
            return bad(err, errlen, "short THREADS entry");
        memcpy(&owner, p + off, 4);
        memcpy(&tid, p + off + 4, 4);
        memcpy(&nl, p + off + 8, 4);
        memcpy(&bl, p + off + 12, 4);
        off += 16;
        if (nl > len - off || bl > len - off - nl || tid <= 0)
            return bad(err, errlen, "THREADS entry out of range");
        struct spool_thread *t = thread_slot(sp, owner);
        if (t == NULL)
            return bad(err, errlen, "THREADS entry of an impossible thread");
        t->tid = tid;
        drop_name(sp, &t->name);
        drop_name(sp, &t->blocked);
        t->name = nl ? keep_name(sp, p + off, nl, CVF_NAME_MAX) : NULL;
        t->blocked = keep_name(sp, p + off + nl, bl, SPOOL_BLOCKED_MAX);
        off += (size_t)nl + bl;
        uint32_t head[4] = {owner, (uint32_t)tid, t->name ? (uint32_t)strlen(t->name) : 0,
                            t->blocked ? (uint32_t)strlen(t->blocked) : 0};
        kept_put(k, head, 16);
        kept_name(k, t->name);
        kept_name(k, t->blocked);
    }
    return 0;
}

static int on_frame(struct spool *sp, uint32_t type, const unsigned char *p, size_t len,
                    struct kept *k, char *err, size_t errlen)
{
    switch (type) {
    case VC_MSG_CHUNK:
        return on_chunk(sp, p, len, err, errlen);
    case VC_MSG_NAMES:
        return on_names(sp, p, len, k, err, errlen);
    case VC_MSG_THREADS:
        return on_threads(sp, p, len, k, err, errlen);
    case VC_MSG_CLOCK: {
        struct vc_wire_clock c;
        if (len != sizeof c)
            return bad(err, errlen, "CLOCK of the wrong size");
        memcpy(&c, p, sizeof c);
        if (!(c.ns_per_raw > 1e-6 && c.ns_per_raw < 1e6))
            return bad(err, errlen, "CLOCK with an impossible rate");
        sp->clock = (vc_tick_map){c.raw0, c.ns0, c.ns_per_raw};
        sp->have_clock = 1;
        kept_put(k, p, len);
        return 0;
    }
    case VC_MSG_META:
        if (len < 8 || len > 8 + 65536)
            return bad(err, errlen, "META of the wrong size");
        memcpy(&sp->pid, p, 8);
        drop_name(sp, &sp->process_name);
        sp->process_name = keep_name(sp, p + 8, len - 8, CVF_NAME_MAX);
        kept_put(k, p, 8);
        kept_name(k, sp->process_name);
        return 0;
    case VC_MSG_EVENTS:
        free(sp->events_json);
        sp->events_json = dup_n(p, len);
        sp->events_len = sp->events_json ? len : 0;
        kept_put(k, p, len);
        return sp->events_json ? 0 : out_of_memory(err, errlen, "instants");
    default:
        return bad(err, errlen, "unknown frame");
    }
}

int spool_add(struct spool *sp, uint32_t type, const void *payload, size_t len, char *err,
              size_t errlen)
{
    if (!spool_frame_type(type) || len > VC_MSG_MAX)
        return bad(err, errlen, "unknown frame");
    /* everything but records goes to the file as it is kept, for a replay (records are in
     * the lanes) */
    struct kept k = {NULL, 0};
    if (type != VC_MSG_CHUNK && !sp->replaying && (k.buf = malloc(len ? len : 1)) == NULL)
        return out_of_memory(err, errlen, "frames");
    int rc = on_frame(sp, type, payload, len, &k, err, errlen);
    if (rc == 0 && k.buf != NULL)
        rc = write_rec(sp, type, k.buf, k.len, NULL, 0, err, errlen);
    free(k.buf);
    return rc;
}

/* ---- life ----------------------------------------------------------------------------------- */

static struct spool *spool_alloc(const char *path, char *err, size_t errlen)
{
    struct spool *sp = calloc(1, sizeof *sp);
    if (sp == NULL || strlen(path) >= sizeof sp->path) {
        free(sp);
        snprintf(err, errlen, "out of memory, or spool path too long: %.200s", path);
        return NULL;
    }
    snprintf(sp->path, sizeof sp->path, "%s", path);
    sp->fd = -1;
    sp->mem_max = SPOOL_MEM_MAX;
    sp->last_flush_ms = vc_monotonic_ms();
    return sp;
}

int spool_create(struct spool **out, const char *path, uint64_t pid, char *err, size_t errlen)
{
    struct spool *sp = spool_alloc(path, err, errlen);
    if (sp == NULL)
        return -1;
    sp->pid = pid;
    sp->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    char magic[16] = SPOOL_MAGIC;
    if (sp->fd < 0 || vc_write_all(sp->fd, magic, sizeof magic) != 0) {
        snprintf(err, errlen, "cannot create the spool %.300s: %s%s", path, strerror(errno),
                 errno == EEXIST ? " (a vcattach running or killed left it: `vcattach recover` "
                                   "it, or remove it)" : "");
        if (sp->fd >= 0)
            unlink(path);
        spool_close(sp, 0);
        return -1;
    }
    memcpy(&sp->pid, &pid, sizeof pid);
    sp->file_bytes = sizeof magic;
    *out = sp;
    return 0;
}

/* A LANE record: the next lane's owner, id and kind, in the order the lanes were made. */
static int replay_lane(struct spool *sp, const unsigned char *p, char *err, size_t errlen)
{
    uint32_t d[4], lane;
    memcpy(d, p, 16);
    if (d[0] != sp->nlanes || d[1] >= SPOOL_MAX_OWNERS || d[2] >= SPOOL_MAX_IDS || d[3] > 3)
        return bad(err, errlen, "spool lane out of order");
    uint32_t prev = group_last_lane(sp, d[1], d[2], d[3]);
    if (lane_new(sp, d[1], d[2], d[3], prev, &lane) != 0)
        return bad(err, errlen, "out of memory");
    sp->lanes[lane].declared = 1;
    struct spool_thread *t = thread_slot(sp, d[1]);
    if (t != NULL)
        t->has_records = 1;
    return 0;
}

/* A SEGMENT record: count records of a known lane, at file offset at + 24. */
static int replay_segment(struct spool *sp, const unsigned char *p, size_t len, uint64_t at,
                          char *err, size_t errlen)
{
    uint32_t lane, count;
    uint64_t first, last;
    memcpy(&lane, p, 4);
    memcpy(&count, p + 4, 4);
    memcpy(&first, p + 8, 8);
    memcpy(&last, p + 16, 8);
    if (lane >= sp->nlanes || count == 0)
        return bad(err, errlen, "spool segment of an unknown lane");
    struct spool_lane *l = &sp->lanes[lane];
    if (add_segment(l, at + 24, first, count, (uint32_t)(len - 24)) != 0)
        return bad(err, errlen, "out of memory");
    l->count += count;
    sp->records += count;
    if (sp->records == count || first < sp->first_raw)
        sp->first_raw = first;
    if (last > sp->last_raw)
        sp->last_raw = last;
    return 0;
}

/* A TASKS or CPU record: an owner, a count, then count pairs of u64, each given to add. */
static int replay_pairs(struct spool *sp, const unsigned char *p, size_t len,
                        int (*add)(struct spool *, uint32_t, uint64_t, uint64_t),
                        const char *what, char *err, size_t errlen)
{
    uint32_t owner, count;
    memcpy(&owner, p, 4);
    memcpy(&count, p + 4, 4);
    if ((len - 8) / 16 != count || (len - 8) % 16 != 0 || owner >= SPOOL_MAX_OWNERS)
        return bad(err, errlen, what);
    for (uint32_t k = 0; k < count; k++) {
        uint64_t pair[2];
        memcpy(pair, p + 8 + (size_t)k * 16, 16);
        if (add(sp, owner, pair[0], pair[1]) != 0)
            return bad(err, errlen, "out of memory");
    }
    return 0;
}

/* Replays one record of the file: each kind checked for its length before it is read. */
static int replay_rec(struct spool *sp, uint32_t type, const unsigned char *p, size_t len,
                      uint64_t at, char *err, size_t errlen)
{
    if (spool_frame_type(type) && type != VC_MSG_CHUNK) {
        struct kept none = {NULL, 0};
        return on_frame(sp, type, p, len, &none, err, errlen);
    }
    if (type == SPOOL_REC_LANE && len == 16)
        return replay_lane(sp, p, err, errlen);
    if (type == SPOOL_REC_SEGMENT && len >= 24)
        return replay_segment(sp, p, len, at, err, errlen);
    if (type == SPOOL_REC_DROP && len == 32) {
        struct spool_drop d;
        memcpy(&d.owner, p, 4);
        memcpy(&d.start, p + 8, 8);
        memcpy(&d.dur, p + 16, 8);
        memcpy(&d.calls, p + 24, 8);
        return add_drop(sp, d.owner, d.start, d.dur, d.calls, err, errlen);
    }
    if (type == SPOOL_REC_TASKS && len >= 8)
        return replay_pairs(sp, p, len, add_task_step, "spool task steps out of range", err,
                            errlen);
    if (type == SPOOL_REC_TASK_NAME && len == 24) {
        uint32_t task, part;
        memcpy(&task, p, 4);
        memcpy(&part, p + 4, 4);
        return add_task_name(sp, task, part, p + 8) != 0 ? bad(err, errlen, "out of memory") : 0;
    }
    if (type == SPOOL_REC_CPU && len >= 8)
        return replay_pairs(sp, p, len, add_cpu, "spool CPU samples out of range", err, errlen);
    return bad(err, errlen, "unknown spool record");
}

int spool_open(struct spool **out, const char *path, char *err, size_t errlen)
{
    struct spool *sp = spool_alloc(path, err, errlen);
    if (sp == NULL)
        return -1;
    sp->replaying = 1;
    sp->fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    char magic[16];
    if (sp->fd < 0 || fstat(sp->fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        vc_pread_all(sp->fd, magic, sizeof magic, 0) != (ssize_t)sizeof magic || memcmp(magic, SPOOL_MAGIC, 8) != 0) {
        snprintf(err, errlen, "%.300s is not a vcattach spool (%s)", path,
                 sp->fd < 0 ? strerror(errno) : "bad header");
        spool_close(sp, 0);
        return -1;
    }
    /* A spool is written front to back and never has a hole; a file with one (its user may
     * have written it: a `start` session's spool) would claim gigabytes of records it never
     * stored, each built into the trace. */
    off_t hole = lseek(sp->fd, 0, SEEK_HOLE);
    if (hole >= 0 && hole < st.st_size) {
        snprintf(err, errlen, "%.300s is not a spool vcattach wrote (it has a hole at byte "
                 "%lld)", path, (long long)hole);
        spool_close(sp, 0);
        return -1;
    }
    unsigned char *buf = malloc(VC_MSG_MAX + 64);
    uint64_t at = sizeof magic, size = (uint64_t)st.st_size;
    int rc = buf ? 0 : bad(err, errlen, "out of memory");
    while (rc == 0 && at + 8 <= size) {
        uint32_t head[2];
        if (vc_pread_all(sp->fd, head, 8, (off_t)at) != 8 || at + 8 + head[1] > size)
            break; /* cut short by the kill: everything before it counts */
        /* a segment's bytes stay in the file (it may be larger than a frame): its head only */
        uint32_t want = head[0] == SPOOL_REC_SEGMENT && head[1] > 24 ? 24 : head[1];
        if (want > VC_MSG_MAX + 64) {
            rc = bad(err, errlen, "a spool record is too large");
            break;
        }
        if (vc_pread_all(sp->fd, buf, want, (off_t)(at + 8)) != (ssize_t)want)
            break;
        rc = replay_rec(sp, head[0], buf, head[1], at + 8, err, errlen);
        at += 8 + (uint64_t)head[1];
    }
    free(buf);
    sp->file_bytes = at;
    if (rc != 0) {
        spool_close(sp, 0);
        return -1;
    }
    *out = sp;
    return 0;
}

uint64_t spool_span_ns(const struct spool *sp)
{
    if (sp->records == 0 || sp->last_raw < sp->first_raw)
        return 0;
    vc_tick_map map = sp->have_clock ? sp->clock : (vc_tick_map){0, 0, 1.0 / 2.5};
    return vc_tick_map_span(&map, sp->last_raw - sp->first_raw);
}

/* What a new generation needs to stand alone: every name, every thread, the clock, the
 * process and the instants, as the frames an agent sends (so the file replays alone). */
static int seed_names(const struct spool *from, struct spool *to, char *err, size_t errlen)
{
    unsigned char *buf = malloc(VC_MSG_MAX);
    if (buf == NULL)
        return bad(err, errlen, "out of memory");
    size_t used = 0;
    int rc = 0;
    for (uint32_t id = 0; rc == 0 && id <= from->names_cap; id++) {
        const char *name = id < from->names_cap ? from->names[id] : NULL;
        size_t n = name ? strlen(name) : 0;
        if (used && (id == from->names_cap || used + 8 + n > VC_MSG_MAX)) {
            rc = spool_add(to, VC_MSG_NAMES, buf, used, err, errlen);
            used = 0;
        }
        if (name == NULL || n + 8 > VC_MSG_MAX)
            continue;
        uint32_t head[2] = {id, (uint32_t)n};
        memcpy(buf + used, head, 8);
        memcpy(buf + used + 8, name, n);
        used += 8 + n;
    }
    free(buf);
    return rc;
}

static int seed_threads(const struct spool *from, struct spool *to, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < from->threads_cap; i++) {
        const struct spool_thread *t = &from->threads[i];
        if (t->tid <= 0)
            continue;
        size_t nl = t->name ? strlen(t->name) : 0, bl = t->blocked ? strlen(t->blocked) : 0;
        unsigned char frame[16 + 2048];
        if (nl > 1024 || bl > 1024)
            continue;
        uint32_t head[4] = {i, (uint32_t)t->tid, (uint32_t)nl, (uint32_t)bl};
        memcpy(frame, head, 16);
        memcpy(frame + 16, t->name ? t->name : "", nl);
        memcpy(frame + 16 + nl, t->blocked ? t->blocked : "", bl);
        int rc = spool_add(to, VC_MSG_THREADS, frame, 16 + nl + bl, err, errlen);
        if (rc != 0)
            return rc;
        to->threads[i].has_records = t->has_records;
    }
    return 0;
}

int spool_rotate(const struct spool *from, const char *path, struct spool **out, char *err,
                 size_t errlen)
{
    struct spool *sp;
    if (spool_create(&sp, path, from->pid, err, errlen) != 0)
        return -1;
    sp->limit = from->limit; /* a generation holds what the one before it may */
    sp->mem_max = from->mem_max;
    int rc = seed_names(from, sp, err, errlen);
    if (rc == 0)
        rc = seed_threads(from, sp, err, errlen);
    if (rc == 0 && from->have_clock) {
        struct vc_wire_clock c = {from->clock.raw0, from->clock.ns0, from->clock.ns_per_raw};
        rc = spool_add(sp, VC_MSG_CLOCK, &c, sizeof c, err, errlen);
    }
    if (rc == 0 && from->process_name) {
        size_t n = strlen(from->process_name);
        unsigned char *meta = malloc(8 + n);
        rc = meta ? 0 : bad(err, errlen, "out of memory");
        if (meta) {
            memcpy(meta, &from->pid, 8);
            memcpy(meta + 8, from->process_name, n);
            rc = spool_add(sp, VC_MSG_META, meta, 8 + n, err, errlen);
            free(meta);
        }
    }
    if (rc != 0) {
        spool_close(sp, 1);
        return rc;
    }
    *out = sp;
    return 0;
}

int spool_next_generation(struct spool **cur, struct spool **prev, uint64_t *dropped_records,
                          uint64_t *dropped_bytes, char *err, size_t errlen)
{
    char path[PATH_MAX], older[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s", (*cur)->path);
    if (snprintf(older, sizeof older, "%s.prev", path) >= (int)sizeof older) {
        snprintf(err, errlen, "spool path too long: %.300s", path);
        return -2;
    }
    int rc = spool_flush(*cur, err, errlen);
    if (rc == -2 && (*cur)->at_limit)
        rc = 0; /* a generation at its cap keeps in memory what its file could not take */
    if (rc == 0 && *prev != NULL) {
        if (dropped_records != NULL)
            *dropped_records += (*prev)->records;
        if (dropped_bytes != NULL)
            *dropped_bytes += (*prev)->file_bytes;
        spool_close(*prev, 1);
        *prev = NULL;
    }
    if (rc == 0)
        rc = spool_rename(*cur, older, err, errlen);
    struct spool *next = NULL;
    if (rc == 0 && spool_rotate(*cur, path, &next, err, errlen) != 0)
        rc = -2;
    if (rc != 0)
        return rc;
    next->limit = (*cur)->limit; /* the new generation is bound as the old one was */
    next->mem_max = (*cur)->mem_max;
    *prev = *cur;
    *cur = next;
    return 0;
}

void spool_set_memory(struct spool *sp, uint64_t max_bytes)
{
    sp->mem_max = max_bytes;
}

void spool_set_limit(struct spool *sp, uint64_t max_bytes)
{
    sp->limit = max_bytes;
}

int spool_at_limit(const struct spool *sp)
{
    return sp->at_limit;
}

void spool_progress(const struct spool *sp, uint64_t *records, uint64_t *dropped,
                    uint64_t *disk_bytes)
{
    *records = sp->records;
    *dropped = sp->dropped;
    *disk_bytes = sp->file_bytes;
}

int spool_rename(struct spool *sp, const char *path, char *err, size_t errlen)
{
    if (strlen(path) >= sizeof sp->path || rename(sp->path, path) != 0) {
        snprintf(err, errlen, "cannot rename the spool %.300s: %s", sp->path, strerror(errno));
        return -2;
    }
    snprintf(sp->path, sizeof sp->path, "%s", path);
    return 0;
}

int spool_thread_known(const struct spool *sp, uint32_t owner)
{
    return owner < sp->threads_cap && sp->threads[owner].tid > 0;
}

uint64_t spool_thread_count(const struct spool *sp)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < sp->threads_cap; i++)
        n += sp->threads[i].tid > 0 && sp->threads[i].has_records;
    return n;
}

const char *spool_path(const struct spool *sp)
{
    return sp->path;
}

void spool_close(struct spool *sp, int remove_file)
{
    if (sp == NULL)
        return;
    if (sp->fd >= 0)
        close(sp->fd);
    if (remove_file && !sp->replaying)
        unlink(sp->path);
    for (uint32_t i = 0; i < sp->names_cap; i++)
        free(sp->names[i]);
    for (uint32_t i = 0; i < sp->threads_cap; i++) {
        free(sp->threads[i].name);
        free(sp->threads[i].blocked);
    }
    for (uint32_t i = 0; i < sp->nlanes; i++) {
        free(sp->lanes[i].buf);
        free(sp->lanes[i].segs);
    }
    free(sp->names);
    free(sp->threads);
    free(sp->lanes);
    free(sp->group_slots);
    free(sp->drops);
    free(sp->cpu);
    free(sp->sched);
    free(sp->steps);
    free(sp->task_names);
    free(sp->process_name);
    free(sp->events_json);
    free(sp);
}

/* merge.c — several .cvf files into one (merge.h; vctrace.h part 5). */
#include "merge.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cvf_reader.h"

enum pass { P_PROCESS, P_THREAD, P_FEE, P_COUNTER, P_OTHER, P_INFO, P_COUNT };

typedef struct name_key {
    uint64_t pid, tid;
    int kind;
} name_key;

typedef struct merge_ctx {
    cvf_writer *w;
    enum pass pass;
    int write_failed;
    /* names already written (a pid traced twice appears in two inputs) */
    name_key *names;
    size_t nnames, names_cap;
    /* other events: one JSON list built from every input's elements */
    char *other;
    size_t other_len, other_cap;
    size_t other_items;
    int info_done;
} merge_ctx;

static int seen_name(merge_ctx *m, int kind, uint64_t pid, uint64_t tid)
{
    for (size_t i = 0; i < m->nnames; i++)
        if (m->names[i].kind == kind && m->names[i].pid == pid && m->names[i].tid == tid)
            return 1;
    if (m->nnames == m->names_cap) {
        size_t cap = m->names_cap ? m->names_cap * 2 : 64;
        name_key *bigger = realloc(m->names, cap * sizeof *bigger);
        if (bigger == NULL)
            return 0; /* written twice rather than not at all */
        m->names = bigger;
        m->names_cap = cap;
    }
    m->names[m->nnames++] = (name_key){pid, tid, kind};
    return 0;
}

static int on_process(void *ctx, uint64_t pid, uint64_t tid, const char *name)
{
    merge_ctx *m = ctx;
    if (m->pass != P_PROCESS || seen_name(m, 0, pid, tid))
        return 0;
    return cvf_write_process_name(m->w, pid, tid, name) ? (m->write_failed = 1) : 0;
}

static int on_thread(void *ctx, uint64_t pid, uint64_t tid, const char *name)
{
    merge_ctx *m = ctx;
    if (m->pass != P_THREAD || seen_name(m, 1, pid, tid))
        return 0;
    return cvf_write_thread_name(m->w, pid, tid, name) ? (m->write_failed = 1) : 0;
}

static int on_fee(void *ctx, const cvf_fee_group *g)
{
    merge_ctx *m = ctx;
    if (m->pass != P_FEE)
        return 0;
    cvf_fee_event *ev = malloc(g->count * sizeof *ev);
    if (ev == NULL)
        return m->write_failed = 1;
    for (size_t i = 0; i < g->count; i++)
        ev[i] = (cvf_fee_event){g->ts[i], g->dur[i]};
    int rc = cvf_write_fee_group(m->w, g->pid, g->tid, g->name, ev, g->count,
                                 g->has_args ? g->args_json : NULL,
                                 g->has_args ? g->args_len : 0);
    free(ev);
    return rc ? (m->write_failed = 1) : 0;
}

static int on_counter(void *ctx, const cvf_counter_group *g)
{
    merge_ctx *m = ctx;
    if (m->pass != P_COUNTER)
        return 0;
    return cvf_write_counter_group(m->w, g->pid, g->tid, g->name, g->keys, g->nkeys, g->ts_ns,
                                   g->nts, g->values)
               ? (m->write_failed = 1)
               : 0;
}

static int other_append(merge_ctx *m, const char *s, size_t len)
{
    if (m->other_len + len + 2 > m->other_cap) {
        size_t cap = (m->other_len + len + 2) * 2;
        char *bigger = realloc(m->other, cap);
        if (bigger == NULL)
            return -1;
        m->other = bigger;
        m->other_cap = cap;
    }
    memcpy(m->other + m->other_len, s, len);
    m->other_len += len;
    return 0;
}

static int on_other(void *ctx, const cvf_json_record *r)
{
    merge_ctx *m = ctx;
    if (m->pass != P_OTHER)
        return 0;
    for (size_t i = 0; i < r->nitems; i++) {
        if ((m->other_items++ && other_append(m, ",", 1) != 0) ||
            other_append(m, r->json + r->items[i].off, r->items[i].len) != 0)
            return m->write_failed = 1;
    }
    return 0;
}

static int on_info(void *ctx, const cvf_json_record *r)
{
    merge_ctx *m = ctx;
    if (m->pass != P_INFO || m->info_done)
        return 0;
    m->info_done = 1;
    return cvf_write_file_info(m->w, r->json, r->len) ? (m->write_failed = 1) : 0;
}

int vct_cvf_merge(const char *const *paths, size_t n, cvf_sink_fn sink, void *ctx, char *err,
                  size_t errlen)
{
    merge_ctx m = {0};
    void **data = calloc(n ? n : 1, sizeof *data);
    size_t *size = calloc(n ? n : 1, sizeof *size);
    m.w = cvf_writer_new(sink, ctx);
    int rc = -1;
    if (data == NULL || size == NULL || m.w == NULL || other_append(&m, "[", 1) != 0) {
        snprintf(err, errlen, "out of memory while merging traces");
        goto out;
    }
    cvf_error ce;
    for (size_t i = 0; i < n; i++) {
        if (cvf_map_file(paths[i], &data[i], &size[i], &ce) != 0) {
            snprintf(err, errlen, "%s: %s", paths[i], ce.msg);
            goto out;
        }
    }
    cvf_visitor v = {on_process, on_thread, on_fee, on_counter, on_other, on_info};
    for (m.pass = P_PROCESS; m.pass < P_COUNT; m.pass++) {
        if (m.pass == P_INFO) {
            if (other_append(&m, "]", 1) != 0) {
                snprintf(err, errlen, "out of memory while merging traces");
                goto out;
            }
            if (cvf_write_other_events(m.w, m.other, m.other_len) != 0) {
                snprintf(err, errlen, "writing the merged trace: %s", cvf_writer_error(m.w)->msg);
                goto out;
            }
        }
        /* Timings-only passes skip inflating the JSON blobs. */
        unsigned flags = (m.pass == P_FEE || m.pass == P_OTHER || m.pass == P_INFO)
                             ? 0 : CVF_READ_SKIP_JSON;
        for (size_t i = 0; i < n; i++) {
            int r = cvf_read(data[i], size[i], &v, &m, flags, &ce);
            if (r != 0) {
                if (m.write_failed)
                    snprintf(err, errlen, "writing the merged trace: %s",
                             cvf_writer_error(m.w)->msg[0] ? cvf_writer_error(m.w)->msg
                                                           : "out of memory");
                else
                    snprintf(err, errlen, "%s: %s", paths[i], ce.msg);
                goto out;
            }
        }
    }
    if (cvf_writer_finish(m.w) != 0) {
        snprintf(err, errlen, "writing the merged trace: %s", cvf_writer_error(m.w)->msg);
        goto out;
    }
    rc = 0;
out:
    for (size_t i = 0; data && i < n; i++)
        if (data[i] != NULL)
            cvf_unmap_file(data[i], size[i]);
    if (m.w != NULL)
        cvf_writer_free(m.w);
    free(m.names);
    free(m.other);
    free(data);
    free(size);
    return rc;
}

/* The merge writes every counter group again, and the writer takes only ascending timestamps
 * (the format's rule, which the reader does not enforce): a part with a group out of order
 * passed the check and then failed the whole merge, every other member's trace with it
 * (fuzz_cvf_reader found it: tests/fuzz/regressions/cvf_reader/
 * counter-timestamps-descending.cvf).  The check refuses such a part, which is then left out
 * like any malformed one. */
static int counter_ascending(void *ctx, const cvf_counter_group *g)
{
    cvf_error *ce = ctx;
    for (size_t i = 1; i < g->nts; i++)
        if (g->ts_ns[i] < g->ts_ns[i - 1]) {
            ce->offset = g->offset;
            snprintf(ce->msg, sizeof ce->msg, "offset %llu: a counter group's timestamps are "
                     "not ascending (at %zu)", (unsigned long long)g->offset, i);
            return 1;
        }
    return 0;
}

int vct_cvf_check(const char *path, char *err, size_t errlen)
{
    void *data = NULL;
    size_t size = 0;
    cvf_error ce;
    if (cvf_map_file(path, &data, &size, &ce) != 0) {
        snprintf(err, errlen, "%s", ce.msg);
        return -1;
    }
    static const cvf_visitor check = {.counter_group = counter_ascending};
    int rc = cvf_read(data, size, &check, &ce, 0, &ce);
    cvf_unmap_file(data, size);
    if (rc != 0) {
        snprintf(err, errlen, "%s", ce.msg);
        return -1;
    }
    return 0;
}

int vct_cvf_merge_fd(const char *const *paths, size_t n, int fd, char *err, size_t errlen)
{
    return vct_cvf_merge(paths, n, cvf_sink_fd, (void *)(intptr_t)fd, err, errlen);
}

int vct_cvf_merge_to_memfd(const char *const *paths, size_t n, char *err, size_t errlen)
{
    int fd = memfd_create("vcattach-merged.cvf", MFD_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create an in-memory file to merge the traces: %s",
                 strerror(errno));
        return -1;
    }
    if (vct_cvf_merge_fd(paths, n, fd, err, errlen) != 0 || lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

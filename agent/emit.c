/* emit.c — turns a stopped session's records into a .cvf stream and delivers it to a sink.
 *
 * Runs on the agent thread WITHOUT the GIL: everything it reads (chunks, thread table, names)
 * was frozen by the stop.  Per thread, each chunk is sorted in place by (id, start, dur) and
 * the chunks are k-way merged, so each key's events come out as one sorted run: one FEE group
 * per (thread, name) with no second copy of the records (only a reusable run buffer).
 * Raw clock values become CLOCK_MONOTONIC ticks of 10 ns; an event's end is rounded on its
 * own so that nesting survives the rounding.
 */
#include "emit.h"
#include "utf8.h"
#include "atomic_file.h"
#include "fd_io.h"
#include "session.h"
#include "threads.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int record_cmp(const void *a, const void *b)
{
    const vc_record *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->dur != y->dur)
        return x->dur < y->dur ? -1 : 1;
    return 0;
}

typedef struct cursor {
    const vc_record *pos, *end;
} cursor;

static int cursor_less(const cursor *a, const cursor *b)
{
    return record_cmp(a->pos, b->pos) < 0;
}

static void heap_sift_down(cursor *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && cursor_less(&h[l], &h[m]))
            m = l;
        if (r < n && cursor_less(&h[r], &h[m]))
            m = r;
        if (m == i)
            return;
        cursor t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static inline int64_t to_ticks(const vc_clock_map *map, uint64_t raw)
{
    return vc_tick_map_ticks(map, raw);
}

char *vc_emit_process_name(void)
{
    char buf[4096];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return strdup("python");
    while (n > 0 && buf[n - 1] == '\0')
        n--;
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    buf[n] = '\0';
    vc_utf8_repair(buf, (size_t)n); /* an argument in another encoding: readers want UTF-8 */
    return strdup(buf);
}

/* Collects, per thread, the chunks it owns (full FIFO + current chunk). */
static vc_chunk **chunks_by_thread(vc_session *s, size_t **first_out)
{
    size_t total = 0;
    for (vc_chunk *c = s->pool.full_head; c; c = c->next)
        total++;
    for (uint32_t i = 0; i < s->nthreads; i++)
        if (s->threads[i].chunk)
            total++;
    size_t *first = calloc(s->nthreads + 1, sizeof *first);
    vc_chunk **list = calloc(total ? total : 1, sizeof *list);
    if (first == NULL || list == NULL) {
        free(first);
        free(list);
        return NULL;
    }
    for (vc_chunk *c = s->pool.full_head; c; c = c->next)
        first[c->owner + 1]++;
    for (uint32_t i = 0; i < s->nthreads; i++)
        if (s->threads[i].chunk)
            first[i + 1]++;
    for (uint32_t i = 0; i < s->nthreads; i++)
        first[i + 1] += first[i];
    size_t *fill = calloc(s->nthreads ? s->nthreads : 1, sizeof *fill);
    if (fill == NULL) {
        free(first);
        free(list);
        return NULL;
    }
    for (vc_chunk *c = s->pool.full_head; c; c = c->next)
        list[first[c->owner] + fill[c->owner]++] = c;
    for (uint32_t i = 0; i < s->nthreads; i++)
        if (s->threads[i].chunk)
            list[first[i] + fill[i]++] = s->threads[i].chunk;
    free(fill);
    *first_out = first;
    return list;
}

/* One emit: the session, the writer and the per-thread chunk lists (list[first[i]] …
 * list[first[i+1]-1] belong to thread i), plus the buffers reused across threads. */
typedef struct emit_ctx {
    vc_session *s;
    cvf_writer *w;
    uint64_t pid;
    vc_clock_map map;
    vc_chunk **list;
    size_t *first;
    cursor *heap;           /* one cursor per chunk of the thread being merged */
    cvf_fee_event *run;     /* one key's events, grown on demand */
    uint8_t *run_marks;     /* [run_cap]: MARK_* of each of them */
    size_t run_cap;
    char *args;             /* the args list of a group of marked events */
    size_t args_cap;
    char *err;
    size_t errlen;
} emit_ctx;

static int emit_oom(emit_ctx *e)
{
    snprintf(e->err, e->errlen, "out of memory while emitting the trace");
    return -1;
}

static int emit_write_failed(emit_ctx *e)
{
    snprintf(e->err, e->errlen, "writing the trace failed: %s", cvf_writer_error(e->w)->msg);
    return -1;
}

static int has_records(const emit_ctx *e, uint32_t i)
{
    return e->first[i + 1] != e->first[i];
}

/* One OS thread can own two states (hook re-installed): only its first state with records
 * names it and counts as a thread. */
static int tid_seen_before(const emit_ctx *e, uint32_t i)
{
    for (uint32_t j = 0; j < i; j++)
        if (vc_thread_track_tid(&e->s->threads[j]) == vc_thread_track_tid(&e->s->threads[i]) &&
            has_records(e, j))
            return 1;
    return 0;
}

/* Sorts every chunk in place by (id, start, dur); returns how many records there are. */
static uint64_t sort_chunks(emit_ctx *e)
{
    uint64_t records = 0;
    for (size_t i = 0; i < e->first[e->s->nthreads]; i++) {
        qsort(e->list[i]->rec, e->list[i]->count, sizeof(vc_record), record_cmp);
        records += e->list[i]->count;
    }
    return records;
}

/* The process name and one name per OS thread with records. */
static int write_names(emit_ctx *e)
{
    vc_session *s = e->s;
    char *pname = vc_emit_process_name();
    if (pname == NULL)
        return emit_oom(e);
    int rc = cvf_write_process_name(e->w, e->pid, e->pid, pname);
    free(pname);
    if (rc != 0)
        return emit_write_failed(e);
    for (uint32_t i = 0; i < s->nthreads; i++) {
        vc_thread *t = &s->threads[i];
        if (!has_records(e, i) || t->tid == 0 || tid_seen_before(e, i))
            continue;
        char fallback_name[32];
        snprintf(fallback_name, sizeof fallback_name, "Thread-%d", (int)t->tid);
        /* The thread whose tid is the pid is the main thread in every process: a fork child
         * made from another thread, or whose threading module kept the parent's objects,
         * still gets its main track named as the viewer and the summary expect. */
        const char *name = (uint64_t)vc_thread_track_tid(t) == e->pid ? "MainThread"
                           : t->name ? t->name : fallback_name;
        if (cvf_write_thread_name(e->w, e->pid, (uint64_t)vc_thread_track_tid(t), name) != 0)
            return emit_write_failed(e);
    }
    return 0;
}

/* A cursor per chunk, as many as the thread with the most chunks needs. */
static int alloc_heap(emit_ctx *e)
{
    size_t maxk = 0;
    for (uint32_t i = 0; i < e->s->nthreads; i++)
        if (e->first[i + 1] - e->first[i] > maxk)
            maxk = e->first[i + 1] - e->first[i];
    e->heap = calloc(maxk ? maxk : 1, sizeof *e->heap);
    return e->heap == NULL ? emit_oom(e) : 0;
}

/* What a record's flags tell the trace readers (trace/model.h reads the same words from the
 * events' args): a resume slice, or a call already running when the thread was seeded. */
enum { MARK_NONE, MARK_RESUME, MARK_AT_ATTACH, MARK_AT_ATTACH_INNER };
static const char *const mark_args[] = {"{}", "{\"vcattach\":\"resume\"}",
                                        "{\"vcattach\":\"at_attach\"}",
                                        "{\"vcattach\":\"at_attach\",\"blocked\":\""};

static uint8_t record_mark(uint32_t flags)
{
    if (flags & VC_REC_AT_ATTACH_INNER)
        return MARK_AT_ATTACH_INNER;
    return flags & VC_REC_AT_ATTACH ? MARK_AT_ATTACH : flags & VC_REC_RESUME ? MARK_RESUME
                                                                             : MARK_NONE;
}

/* Writes one key's m events: the unmarked ones as a plain group, the marked ones (rare: resume
 * slices, calls running at attach) as a group with an args list carrying the mark. */
static int write_key_groups(emit_ctx *e, const vc_thread *t, const char *name, size_t m)
{
    uint64_t tid = (uint64_t)vc_thread_track_tid(t);
    size_t plain = 0, marked = 0;
    for (size_t i = 0; i < m; i++)
        marked += e->run_marks[i] != MARK_NONE;
    if (marked == 0)
        return cvf_write_fee_group(e->w, e->pid, tid, name, e->run, m, NULL, 0) != 0
                   ? emit_write_failed(e)
                   : 0;
    size_t need = 2 + marked * (48 + sizeof t->blocked);
    if (need > e->args_cap) {
        char *bigger = realloc(e->args, need);
        if (bigger == NULL)
            return emit_oom(e);
        e->args = bigger;
        e->args_cap = need;
    }
    /* the plain events are compacted at the front of run[], the marked ones copied to tmp;
     * both keep their (ts, dur) order, as a group must */
    cvf_fee_event *tmp = malloc(marked * sizeof *tmp);
    if (tmp == NULL)
        return emit_oom(e);
    size_t len = 0, k = 0;
    e->args[len++] = '[';
    for (size_t i = 0; i < m; i++) {
        uint8_t mk = e->run_marks[i];
        if (mk == MARK_NONE) {
            e->run[plain++] = e->run[i];
            continue;
        }
        tmp[k++] = e->run[i];
        if (k > 1)
            e->args[len++] = ',';
        size_t l = strlen(mark_args[mk]);
        memcpy(e->args + len, mark_args[mk], l);
        len += l;
        if (mk == MARK_AT_ATTACH_INNER) /* the thread's kernel state at attach (threads.c) */
            len += (size_t)sprintf(e->args + len, "%.*s\"}", (int)(sizeof t->blocked - 1),
                                   t->blocked);
    }
    e->args[len++] = ']';
    int rc = 0;
    if (plain && cvf_write_fee_group(e->w, e->pid, tid, name, e->run, plain, NULL, 0) != 0)
        rc = emit_write_failed(e);
    if (!rc && cvf_write_fee_group(e->w, e->pid, tid, name, tmp, marked, e->args, len) != 0)
        rc = emit_write_failed(e);
    free(tmp);
    return rc;
}

/* Thread i's chunks, k-way merged: one FEE group per key.  *events grows by the events
 * written; *any is set if the thread wrote at least one group. */
static int write_thread_events(emit_ctx *e, uint32_t i, uint64_t *events, int *any)
{
    vc_session *s = e->s;
    vc_thread *t = &s->threads[i];
    cursor *heap = e->heap;
    size_t n = 0;
    for (size_t k = e->first[i]; k < e->first[i + 1]; k++)
        if (e->list[k]->count > 0)
            heap[n++] = (cursor){e->list[k]->rec, e->list[k]->rec + e->list[k]->count};
    for (size_t k = n / 2; k-- > 0;)
        heap_sift_down(heap, n, k);
    while (n > 0) {
        uint32_t id = heap[0].pos->id;
        size_t m = 0;
        while (n > 0 && heap[0].pos->id == id) {
            const vc_record *r = heap[0].pos;
            if (m == e->run_cap) {
                size_t cap = e->run_cap ? e->run_cap * 2 : 4096;
                cvf_fee_event *bigger = realloc(e->run, cap * sizeof *e->run);
                if (bigger == NULL)
                    return emit_oom(e);
                e->run = bigger;
                uint8_t *marks = realloc(e->run_marks, cap);
                if (marks == NULL)
                    return emit_oom(e);
                e->run_marks = marks;
                e->run_cap = cap;
            }
            e->run_marks[m] = record_mark(r->flags);
            int64_t ts = to_ticks(&e->map, r->start);
            int64_t end = to_ticks(&e->map, r->start + r->dur);
            e->run[m].ts = ts;
            e->run[m].dur = end > ts ? (uint64_t)(end - ts) : 0;
            m++;
            if (++heap[0].pos == heap[0].end)
                heap[0] = heap[--n];
            heap_sift_down(heap, n, 0);
        }
        const char *name = id < s->nnames && s->names ? s->names[id] : NULL;
        if (name == NULL || m == 0)
            continue;
        if (write_key_groups(e, t, name, m) != 0)
            return -1;
        *events += m;
        *any = 1;
    }
    return 0;
}

/* One "vcattach interpreter" instant per sub-interpreter track (docs/cvf-format.md): on the
 * track, at attach, args {"interp": id, "os_tid": the OS thread}: which interpreter a track's
 * calls ran in, as data (its name says it too).  Appended to json[0, len) within cap. */
static int interp_instants(const vc_session *s, uint64_t pid, double ts, char *json, int len,
                           size_t cap)
{
    for (uint32_t i = 0; i < s->nthreads && len > 0 && (size_t)len < cap; i++) {
        const vc_thread *t = &s->threads[i];
        int32_t track = vc_thread_track_tid(t);
        int dup = 0;
        for (uint32_t j = 0; j < i && !dup; j++)
            dup = vc_thread_track_tid(&s->threads[j]) == track;
        if (t->interp_id == 0 || t->tid <= 0 || dup)
            continue;
        len += snprintf(json + len, cap - (size_t)len,
                        ",{\"ph\":\"i\",\"name\":\"vcattach interpreter\",\"cat\":\"INSTANT\","
                        "\"pid\":%llu,\"tid\":%lld,\"ts\":%.3f,\"s\":\"t\",\"args\":{\"interp\":%lld,"
                        "\"os_tid\":%d}}",
                        (unsigned long long)pid, (long long)track, ts, (long long)t->interp_id,
                        (int)t->tid);
    }
    return len;
}

/* The attach and detach instants, the detach one with the session's loss counters; with
 * filters in force, a "vcattach filters" instant whose args are the filters (filter.h's
 * JSON), and "filtered":true on the attach instant: a filtered trace is never taken for a
 * full one (`vcattach summary` prints them in its header).  A JSON list (malloc'd, *len), or
 * NULL (out of memory); *dropped: every call lost. */
char *vc_emit_session_events(const vc_session *s, uint64_t pid, const vc_clock_map *map,
                             size_t *len_out, uint64_t *dropped_out)
{
    uint64_t dropped = s->pool.dropped + s->pins.unnamed;
    uint64_t too_deep = 0;
    for (uint32_t i = 0; i < s->nthreads; i++)
        too_deep += s->threads[i].too_deep;
    size_t fcap = 2048 + 2 * VC_FILTER_POOL;
    size_t cap = fcap + (size_t)s->nthreads * 192; /* + interp_instants */
    char *json = malloc(cap);
    char *fjson = malloc(fcap);
    if (json == NULL || fjson == NULL) {
        free(json);
        free(fjson);
        return NULL;
    }
    int filtered = vc_filter_active(&s->filter);
    if (vc_filter_json(&s->filter, fjson, fcap) < 0)
        snprintf(fjson, fcap, "{\"truncated\":true}");
    double attach_us = (double)s->clk_start.ns / 1000.0;
    double detach_us = (double)vc_clock_to_ns(map, s->stop_raw) / 1000.0;
    int len = snprintf(json, cap,
        "[{\"ph\":\"i\",\"name\":\"vcattach attach\",\"cat\":\"INSTANT\",\"pid\":%llu,\"tid\":%llu,"
        "\"ts\":%.3f,\"s\":\"p\",\"args\":{\"backend\":\"%s\",\"null_hook\":%u,\"filtered\":%s}},"
        "{\"ph\":\"i\",\"name\":\"vcattach detach\",\"cat\":\"INSTANT\",\"pid\":%llu,\"tid\":%llu,"
        "\"ts\":%.3f,\"s\":\"p\",\"args\":{\"dropped\":%llu,\"buffer_dropped\":%llu,"
        "\"unnamed\":%llu,\"too_deep\":%llu,\"threads_untraced\":%llu,\"interps_untraced\":%llu,"
        "\"interps_untraced_shared_gil\":%llu}}",
        (unsigned long long)pid, (unsigned long long)pid, attach_us,
        s->backend_name[0] ? s->backend_name : "profile", s->null_hook,
        filtered ? "true" : "false", (unsigned long long)pid, (unsigned long long)pid, detach_us,
        (unsigned long long)(dropped + too_deep), (unsigned long long)s->pool.dropped,
        (unsigned long long)s->pins.unnamed, (unsigned long long)too_deep,
        (unsigned long long)s->threads_untraced, (unsigned long long)s->interps_untraced,
        (unsigned long long)s->interps_untraced_shared);
    if (filtered && len > 0 && (size_t)len < cap)
        len += snprintf(json + len, cap - (size_t)len,
                        ",{\"ph\":\"i\",\"name\":\"vcattach filters\",\"cat\":\"INSTANT\","
                        "\"pid\":%llu,\"tid\":%llu,\"ts\":%.3f,\"s\":\"p\",\"args\":%s}",
                        (unsigned long long)pid, (unsigned long long)pid, attach_us, fjson);
    free(fjson);
    len = interp_instants(s, pid, attach_us, json, len, cap);
    if (len > 0 && (size_t)len + 2 < cap) {
        json[len++] = ']', json[len] = '\0';
    } else {
        free(json);
        return NULL;
    }
    *len_out = (size_t)len;
    *dropped_out = dropped + too_deep;
    return json;
}

static int write_session_instants(emit_ctx *e, struct vc_result *res)
{
    size_t len = 0;
    uint64_t dropped = 0;
    char *json = vc_emit_session_events(e->s, e->pid, &e->map, &len, &dropped);
    int rc = json != NULL ? cvf_write_other_events(e->w, json, len) : -1;
    free(json);
    if (rc != 0)
        return emit_write_failed(e);
    res->dropped = dropped;
    return 0;
}

/* Names, then every thread's events, then the session instants. */
static int write_trace(emit_ctx *e, struct vc_result *res)
{
    vc_session *s = e->s;
    uint64_t records = sort_chunks(e);
    uint64_t events = 0, threads = 0;
    if (write_names(e) != 0 || alloc_heap(e) != 0)
        return -1;
    for (uint32_t i = 0; i < s->nthreads; i++) {
        if (!has_records(e, i) || s->threads[i].tid == 0)
            continue;
        int any = 0;
        if (write_thread_events(e, i, &events, &any) != 0)
            return -1;
        /* Count OS threads, not states. */
        threads += any && !tid_seen_before(e, i);
    }
    if (write_session_instants(e, res) != 0)
        return -1;
    if (cvf_writer_finish(e->w) != 0)
        return emit_write_failed(e);
    res->events = events;
    res->threads = threads;
    res->bytes = cvf_writer_bytes(e->w);
    res->records_bytes = records * sizeof(vc_record);
    return 0;
}

int vc_emit_stream(vc_session *s, cvf_sink_fn sink, void *ctx, struct vc_result *res, char *err,
                   size_t errlen)
{
    emit_ctx e = {.s = s, .pid = (uint64_t)getpid(), .err = err, .errlen = errlen};
    vc_clock_map_make(&e.map, s->clk_start, s->clk_stop);
    e.list = chunks_by_thread(s, &e.first);
    e.w = cvf_writer_new(sink, ctx);
    int rc = -1;
    if (e.list == NULL || e.w == NULL)
        emit_oom(&e);
    else
        rc = write_trace(&e, res);
    if (e.w != NULL)
        cvf_writer_free(e.w);
    free(e.heap);
    free(e.run);
    free(e.run_marks);
    free(e.args);
    free(e.list);
    free(e.first);
    return rc;
}

/* ---- sinks ------------------------------------------------------------------------------- */

/* A file output, through the one atomic writer (common/atomic_file.h, the CLI's too):
 * OUT.tmp, fsync, a rename that replaces an existing OUT only with VC_ATOMIC_FORCE, directory
 * fsync.  When the rename fails the writer keeps OUT.tmp (the whole trace is in it): the
 * session remembers it for END (kept=) and says so on the target's stderr, the one place an
 * operator of a detached `vcattach start` may see it without a `vcattach stop`. */
static int emit_file(vc_session *s, const char *path, mode_t mode, unsigned flags,
                     struct vc_result *res, char *err, size_t errlen)
{
    vc_atomic_file f;
    int rc = vc_atomic_open(&f, path, mode, flags, err, errlen);
    if (rc < 0)
        return rc;
    rc = vc_emit_stream(s, cvf_sink_fd, (void *)(intptr_t)f.fd, res, err, errlen) == 0
             ? vc_atomic_commit(&f, err, errlen)
             : -EIO;
    if (f.kept)
        vc_emit_note_kept(s, f.tmp, err);
    vc_atomic_abort(&f); /* removes OUT.tmp unless renamed or kept */
    return rc;
}

void vc_emit_note_kept(vc_session *s, const char *tmp, const char *err)
{
    snprintf(s->kept_tmp, sizeof s->kept_tmp, "%s", tmp);
    char line[1024];
    int n = snprintf(line, sizeof line, "vcattach agent (pid %d): %s\n", (int)getpid(), err);
    if (n > 0)
        (void)vc_write_all(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static int emit_unix(vc_session *s, const char *path, struct vc_result *res, char *err, size_t errlen)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path) {
        snprintf(err, errlen, "socket path too long: %s", path);
        return -ENAMETOOLONG;
    }
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    /* A stuck reader must not hold the agent forever.  Set before connect: a Unix stream
     * connect to a listener whose backlog is full waits for this long (forever without it). */
    struct timeval tv = {.tv_sec = 10};
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int e = errno;
        snprintf(err, errlen, "cannot connect to unix:%s: %s", path, strerror(e));
        if (fd >= 0)
            close(fd);
        return -e;
    }
    int rc = vc_emit_stream(s, cvf_sink_fd, (void *)(intptr_t)fd, res, err, errlen);
    close(fd);
    return rc == 0 ? 0 : -EIO;
}

int vc_emit(vc_session *s, const char *output, mode_t mode, unsigned flags, struct vc_result *res,
            char *err, size_t errlen)
{
    s->kept_tmp[0] = '\0';
    if (strncmp(output, "fd:", 3) == 0) {
        int fd = atoi(output + 3);
        return vc_emit_stream(s, cvf_sink_fd, (void *)(intptr_t)fd, res, err, errlen) == 0 ? 0 : -EIO;
    }
    if (strncmp(output, "unix:", 5) == 0)
        return emit_unix(s, output + 5, res, err, errlen);
    if (strcmp(output, "control") == 0) {
        snprintf(err, errlen, "output=control without a controller");
        return -EPIPE;
    }
    return emit_file(s, output, mode, flags, res, err, errlen);
}

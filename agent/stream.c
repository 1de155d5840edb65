/* stream.c — the sender of a streaming session (see stream.h).
 *
 * Why the agent thread and never the hook: a send can block (vcattach is slow, its disk is
 * full, it was stopped), and a blocked hook would be a blocked target.  The agent thread may
 * block; the hooks meanwhile run out of chunks and count what they drop (record.c), which is
 * the only price of a slow controller.  A send that fails ends the stream for good: the
 * socket thread sees the controller's EOF and stops the session, whose window then goes to
 * the fallback file (agent.c), so every chunk not sent is kept in the pool's FIFO for it.
 */
#include "stream.h"
#include "channel.h"
#include "cpu_sample.h"
#include "emit.h"
#include "record.h"
#include "threads.h"
#include "protocol.h"
#include "spool.h"
#include "atomic_file.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A controller that takes no frame for this long is taken as gone.  Meanwhile only the
 * agent thread waits (and the stop it would see): the hooks drop and count. */
#define VC_STREAM_SEND_TIMEOUT_MS 30000
/* The NAMES and THREADS frames are cut at this size (the receiver's limit is VC_MSG_MAX). */
#define VC_STREAM_FRAME_MAX (256u << 10)

_Static_assert(sizeof(vc_record) == sizeof(struct vc_wire_record), "wire record layout");
_Static_assert(offsetof(vc_chunk, count) == offsetof(vc_chunk, owner) + 4 &&
                   offsetof(vc_chunk, rec) == offsetof(vc_chunk, owner) + 8,
               "a chunk's owner, count and records are one CHUNK payload");

/* The agent has 8 MiB of lanes in memory at most (the CLI takes 64): with the 24 MiB window
 * `start` asks for, the target grows by 32 MiB at most, as for `trace`. */
#define VC_LOCAL_SPOOL_MEM ((uint64_t)8 << 20)

/* A `start`ed session has no controller: its frames go into its own spool, which the sender
 * thread and the agent thread both feed (one frame at a time). */
static pthread_mutex_t g_spool_lock = PTHREAD_MUTEX_INITIALIZER;

/* start --last: the spool covers the kept duration: it becomes OUTPUT.spool.prev (the one
 * before is dropped) and a new OUTPUT.spool begins with every name and thread, as vcattach's
 * own spool does (cli/trace_stream.c); the build keeps the final part of both.  0 or -1. */
static int next_generation(vc_session *s)
{
    return spool_next_generation(&s->spool, &s->spool_prev, NULL, NULL, s->spool_err,
                                 sizeof s->spool_err) == 0 ? 0 : -1;
}

static int send_frame(vc_session *s, uint32_t type, const void *payload, size_t len)
{
    if (s->stream_broken)
        return -1;
    int rc;
    if (s->spool != NULL) {
        pthread_mutex_lock(&g_spool_lock);
        rc = spool_add(s->spool, type, payload, len, s->spool_err, sizeof s->spool_err);
        if (rc == 0 && type == VC_MSG_CHUNK && s->last_ns &&
            spool_span_ns(s->spool) >= s->last_ns)
            rc = next_generation(s);
        pthread_mutex_unlock(&g_spool_lock);
    } else {
        rc = vc_channel_send(s, type, payload, len, VC_STREAM_SEND_TIMEOUT_MS);
    }
    if (rc != 0) {
        s->stream_broken = 1;
        return -1;
    }
    return 0;
}

/* The CPU samples' CHUNK frames (cpu_sample.c). */
static int send_cpu(vc_session *s, const void *payload, size_t len)
{
    return send_frame(s, VC_MSG_CHUNK, payload, len);
}

/* A chunk's state says vcattach what it has of it, should the process end now (buffer.h):
 * SENDING while the frame goes (received whole or not: vcattach compares it with the last
 * CHUNK it got), SENT once it went. */
static int send_chunk(vc_session *s, vc_chunk *c)
{
    if (c->count == 0)
        return 0;
    __atomic_store_n(&c->state, VC_CHUNK_SENDING, __ATOMIC_RELEASE);
    if (send_frame(s, VC_MSG_CHUNK, &c->owner, 8 + (size_t)c->count * sizeof(vc_record)) != 0) {
        __atomic_store_n(&c->state, VC_CHUNK_UNSENT, __ATOMIC_RELEASE);
        return -1;
    }
    __atomic_store_n(&c->state, VC_CHUNK_SENT, __ATOMIC_RELEASE);
    s->chunks_sent++;
    s->records_sent += c->count;
    return 0;
}

/* The names the hooks put into the window's arena since the last call (names.c), as NAMES
 * frames cut at entries.  Whole entries only: the arena's length is published after each. */
static int send_arena(vc_session *s)
{
    const vc_name_arena *a = &s->pool.arena;
    if (a->base == NULL)
        return 0;
    uint64_t len = __atomic_load_n(a->len, __ATOMIC_ACQUIRE);
    while (s->arena_sent < len) {
        uint64_t from = s->arena_sent, to = from;
        while (to < len && to - from < VC_STREAM_FRAME_MAX) {
            uint32_t n;
            memcpy(&n, a->base + to + 4, 4);
            to += 8 + (uint64_t)n;
        }
        if (send_frame(s, VC_MSG_NAMES, a->base + from, (size_t)(to - from)) != 0)
            return -1;
        s->arena_sent = to;
    }
    return 0;
}

/* The window's clock fit, for vcattach's read of a window whose process ended before the
 * agent's next CLOCK (every 50 ms: a fit over the session so far). */
#define VC_WINDOW_CLOCK_NS (50u * 1000 * 1000)
static void window_clock(vc_session *s)
{
    uint64_t now = vc_clock_mono_ns();
    if (s->pool.head == NULL || now - s->pool.clock_ns < VC_WINDOW_CLOCK_NS)
        return;
    s->pool.clock_ns = now;
    vc_clock_map map;
    vc_clock_map_make(&map, s->clk_start, vc_clock_sample());
    vc_pool_set_clock(&s->pool, map.raw0, map.ns0, map.ns_per_raw);
}

int vc_stream_send_chunks(vc_session *s)
{
    window_clock(s);
    int rc = send_arena(s);
    for (vc_chunk *c = vc_pool_take_outbox(&s->pool), *next; c != NULL; c = next) {
        next = c->next;
        if (rc == 0 && send_chunk(s, c) == 0) {
            vc_pool_give_back(&s->pool, c);
            continue;
        }
        rc = -1;
        vc_pool_fifo_append(&s->pool, c); /* not sent: for the fallback file */
    }
    return rc;
}

/* ---- the sender thread -------------------------------------------------------------------
 * Chunks go out from a thread of their own, not from the agent thread: that one waits for the
 * GIL at each visit, and on a busy target the wait can last tens of milliseconds, while the
 * window (32 MiB) lasts 0.2 s at 7 M calls/s.  This thread never touches Python; it only
 * exchanges the outbox and sends, and samples the threads' CPU clocks (cpu_sample.c: reads
 * that need neither the GIL nor the threads).  Its signals are blocked (inherited from the agent thread);
 * a fork child has no such thread and forgets it. */
#define VC_SEND_SLICE_NS (5 * 1000 * 1000)

static pthread_t g_sender;
static int g_sender_on, g_sender_quit;

static void *sender_main(void *arg)
{
    vc_session *s = arg;
    while (!__atomic_load_n(&g_sender_quit, __ATOMIC_ACQUIRE)) {
        if (vc_stream_send_chunks(s) != 0 || vc_cpu_sample_tick(s, send_cpu) != 0)
            break; /* the controller is gone: the socket thread stops the session */
        struct timespec nap = {0, VC_SEND_SLICE_NS};
        nanosleep(&nap, NULL);
    }
    return NULL;
}

static void forget_sender_in_child(void)
{
    g_sender_on = 0;
}

int vc_stream_start(vc_session *s)
{
    static int atfork_done;
    if (!atfork_done && pthread_atfork(NULL, NULL, forget_sender_in_child) == 0)
        atfork_done = 1;
    if (!atfork_done || g_sender_on)
        return -1;
    (void)vc_cpu_sample_reset(); /* out of memory: no samples, and the trace says so (none) */
    __atomic_store_n(&g_sender_quit, 0, __ATOMIC_RELEASE);
    g_sender_on = pthread_create(&g_sender, NULL, sender_main, s) == 0;
    return g_sender_on ? 0 : -1;
}

void vc_stream_stop(void)
{
    if (!g_sender_on)
        return;
    __atomic_store_n(&g_sender_quit, 1, __ATOMIC_RELEASE);
    pthread_join(g_sender, NULL);
    g_sender_on = 0;
}

/* ---- names and threads: built under the GIL, sent without it ---------------------------- */

static int pending_reserve(vc_session *s, size_t more)
{
    if (s->pending_len + more <= s->pending_cap)
        return 0;
    size_t cap = s->pending_cap ? s->pending_cap : 4096;
    while (cap < s->pending_len + more)
        cap *= 2;
    unsigned char *bigger = realloc(s->pending, cap);
    if (bigger == NULL)
        return -1;
    s->pending = bigger;
    s->pending_cap = cap;
    return 0;
}

static void put_u32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

/* Opens a frame of `type` in s->pending unless the open one (at *frame) is of that type and
 * has room for `more`; returns the frame's offset, or (size_t)-1 (out of memory). */
static size_t frame_for(vc_session *s, uint32_t type, size_t *frame, size_t more)
{
    if (*frame != (size_t)-1) {
        uint32_t len;
        memcpy(&len, s->pending + *frame + 4, 4);
        if (len + more <= VC_STREAM_FRAME_MAX)
            return *frame;
    }
    if (pending_reserve(s, 8) != 0)
        return (size_t)-1;
    *frame = s->pending_len;
    put_u32(s->pending + *frame, type);
    put_u32(s->pending + *frame + 4, 0);
    s->pending_len += 8;
    return *frame;
}

/* Appends `len` bytes to the open frame at `frame`. */
static void frame_put(vc_session *s, size_t frame, const void *data, size_t len)
{
    memcpy(s->pending + s->pending_len, data, len);
    s->pending_len += len;
    uint32_t flen;
    memcpy(&flen, s->pending + frame + 4, 4);
    put_u32(s->pending + frame + 4, flen + (uint32_t)len);
}

static int pend_name(vc_session *s, size_t *frame, uint32_t id, const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n > 4096)
        n = 4096; /* the receiver cuts at 511 bytes anyway (cvf.h) */
    size_t f = frame_for(s, VC_MSG_NAMES, frame, 8 + n);
    if (f == (size_t)-1 || pending_reserve(s, 8 + n) != 0)
        return -1;
    unsigned char head[8];
    put_u32(head, id);
    put_u32(head + 4, (uint32_t)n);
    frame_put(s, f, head, 8);
    frame_put(s, f, name ? name : "", n);
    return 0;
}

static int pend_thread(vc_session *s, size_t *frame, const vc_thread *t)
{
    size_t nl = t->name ? strlen(t->name) : 0, bl = strnlen(t->blocked, sizeof t->blocked);
    if (nl > 1024)
        nl = 1024;
    size_t f = frame_for(s, VC_MSG_THREADS, frame, 16 + nl + bl);
    if (f == (size_t)-1 || pending_reserve(s, 16 + nl + bl) != 0)
        return -1;
    unsigned char head[16];
    put_u32(head, t->index);
    put_u32(head + 4, (uint32_t)vc_thread_track_tid(t)); /* a sub-interpreter's: its own track */
    put_u32(head + 8, (uint32_t)nl);
    put_u32(head + 12, (uint32_t)bl);
    frame_put(s, f, head, 16);
    frame_put(s, f, t->name ? t->name : "", nl);
    frame_put(s, f, t->blocked, bl);
    return 0;
}

/* Threads whose tid is known and whose tid or name was not sent yet (all: every one). */
static void pend_threads(vc_session *s, int all)
{
    size_t frame = (size_t)-1;
    for (uint32_t i = 0; i < s->nthreads; i++) {
        vc_thread *t = &s->threads[i];
        if (t->tid == 0 || (!all && t->announced && t->announced_name == t->name))
            continue;
        if (pend_thread(s, &frame, t) != 0)
            return;
        t->announced = 1;
        t->announced_name = t->name;
    }
}

void vc_stream_collect(vc_session *s)
{
    /* A thread's chunk goes out at each visit even when not full: a process that ends
     * without a stop (a pool worker terminated by SIGTERM, a SIGKILLed worker) loses only
     * what it recorded since the last visit.  Under the GIL no hook is writing it. */
    for (uint32_t i = 0; i < s->nthreads; i++) {
        vc_thread *t = &s->threads[i];
        if (t->chunk != NULL && t->chunk->count > 0) {
            vc_pool_submit(&s->pool, t->chunk);
            t->chunk = NULL;
        }
    }
    size_t frame = (size_t)-1;
    for (; s->names_sent < s->pins.count; s->names_sent++) {
        if (vc_pins_in_arena(&s->pins, s->names_sent))
            continue; /* the sender sends it from the arena */
        char *name = vc_pins_name(&s->pins, s->names_sent);
        int rc = pend_name(s, &frame, s->names_sent, name);
        free(name);
        if (rc != 0)
            break;
    }
    pend_threads(s, 0);
}

static int send_clock(vc_session *s, vc_clock_pair now)
{
    vc_clock_map map;
    vc_clock_map_make(&map, s->clk_start, now);
    struct vc_wire_clock wire = {map.raw0, map.ns0, map.ns_per_raw};
    return send_frame(s, VC_MSG_CLOCK, &wire, sizeof wire);
}

int vc_stream_send_pending(vc_session *s)
{
    int rc = 0;
    for (size_t off = 0; rc == 0 && off + 8 <= s->pending_len;) {
        uint32_t type, len;
        memcpy(&type, s->pending + off, 4);
        memcpy(&len, s->pending + off + 4, 4);
        rc = send_frame(s, type, s->pending + off + 8, len);
        off += 8 + (size_t)len;
    }
    s->pending_len = 0;
    if (rc == 0)
        rc = send_clock(s, vc_clock_sample());
    return rc;
}

/* ---- stop ---------------------------------------------------------------------------------- */

/* The chunks the threads still hold, and their pending drop ranges (one marker record each). */
static int send_thread_leftovers(vc_session *s, uint64_t *markers)
{
    for (uint32_t i = 0; i < s->nthreads; i++) {
        vc_thread *t = &s->threads[i];
        if (t->chunk != NULL) {
            if (send_chunk(s, t->chunk) != 0)
                return -1;
            t->chunk->count = 0; /* sent: the fallback must not write it twice */
        }
        struct {
            uint32_t owner, count;
            vc_record rec;
        } marker = {t->index, 1, {0}};
        if (vc_record_take_drops(t, &marker.rec)) {
            if (send_frame(s, VC_MSG_CHUNK, &marker, sizeof marker) != 0)
                return -1;
            ++*markers;
        }
    }
    return 0;
}

/* The names not sent yet, from the stop's snapshot (the pins are released by now). */
static int send_last_names(vc_session *s)
{
    size_t frame = (size_t)-1;
    s->pending_len = 0;
    for (uint32_t id = s->names_sent; id < s->nnames; id++)
        if (pend_name(s, &frame, id, s->names ? s->names[id] : NULL) != 0)
            return -1;
    pend_threads(s, 1);
    return 0;
}

/* The session's instants (emit.c) and, when the threads' CPU clocks were sampled, a
 * "vcattach cpu" instant saying what the sampling cost (docs/cvf-format.md).  NULL: no memory. */
static char *session_events(vc_session *s, uint64_t pid, const vc_clock_map *map, size_t *len,
                            uint64_t *dropped)
{
    char *events = vc_emit_session_events(s, pid, map, len, dropped);
    struct vc_cpu_stats st;
    vc_cpu_sample_stats(&st);
    if (events == NULL || st.rounds == 0 || *len < 2 || events[*len - 1] != ']')
        return events;
    size_t cap = *len + 400;
    char *more = realloc(events, cap);
    if (more == NULL)
        return events;
    int n = snprintf(more + *len - 1, cap - (*len - 1),
                     ",{\"ph\":\"i\",\"name\":\"vcattach cpu\",\"cat\":\"INSTANT\",\"pid\":%llu,"
                     "\"tid\":%llu,\"ts\":%.3f,\"s\":\"p\",\"args\":{\"rounds\":%llu,\"reads\":%llu,"
                     "\"spent_ms\":%.3f,\"period_ms_min\":%.1f,\"period_ms_max\":%.1f}}]",
                     (unsigned long long)pid, (unsigned long long)pid,
                     (double)vc_clock_to_ns(map, s->stop_raw) / 1000.0,
                     (unsigned long long)st.rounds, (unsigned long long)st.reads,
                     (double)st.spent_ns / 1e6, (double)st.period_min_ns / 1e6,
                     (double)st.period_max_ns / 1e6);
    if (n > 0 && (size_t)n < cap - (*len - 1))
        *len += (size_t)n - 1;
    else
        more[*len - 1] = ']'; /* did not fit: the list as it was */
    return more;
}

static int send_meta(vc_session *s, uint64_t pid, const vc_clock_map *map, struct vc_result *res)
{
    char *pname = vc_emit_process_name();
    size_t plen = pname ? strlen(pname) : 0;
    unsigned char *meta = malloc(8 + plen);
    size_t elen = 0;
    char *events = session_events(s, pid, map, &elen, &res->dropped);
    int rc = -1;
    if (meta != NULL && events != NULL) {
        memcpy(meta, &pid, 8);
        memcpy(meta + 8, pname ? pname : "", plen);
        rc = send_frame(s, VC_MSG_META, meta, 8 + plen);
        if (rc == 0)
            rc = send_frame(s, VC_MSG_EVENTS, events, elen);
    }
    free(meta);
    free(pname);
    free(events);
    return rc;
}

int vc_stream_finish(vc_session *s, struct vc_result *res, char *err, size_t errlen)
{
    uint64_t markers = 0, pid = (uint64_t)getpid();
    vc_clock_map map;
    vc_clock_map_make(&map, s->clk_start, s->clk_stop);
    int rc = vc_stream_send_chunks(s);
    if (rc == 0)
        rc = send_thread_leftovers(s, &markers);
    if (rc == 0)
        rc = vc_cpu_sample_finish(s, send_cpu); /* the sender is joined: this thread's now */
    if (rc == 0 && send_last_names(s) != 0) {
        snprintf(err, errlen, "out of memory while naming the trace's functions");
        return -ENOMEM;
    }
    if (rc == 0)
        rc = vc_stream_send_pending(s);
    if (rc == 0) {
        struct vc_wire_clock wire = {map.raw0, map.ns0, map.ns_per_raw};
        rc = send_frame(s, VC_MSG_CLOCK, &wire, sizeof wire);
    }
    if (rc == 0)
        rc = send_meta(s, pid, &map, res);
    if (rc != 0 && s->spool != NULL) {
        snprintf(err, errlen, "%s", s->spool_err[0] ? s->spool_err : "the spool failed");
        return -EIO;
    }
    if (rc != 0) {
        snprintf(err, errlen, "sending the trace to the controller failed: %s",
                 strerror(errno ? errno : EPIPE));
        return -EPIPE;
    }
    uint64_t threads = 0;
    for (uint32_t i = 0; i < s->nthreads; i++)
        threads += s->threads[i].tid != 0 && s->threads[i].announced;
    res->events = s->records_sent - markers;
    res->threads = threads;
    res->bytes = (s->records_sent) * sizeof(vc_record);
    res->records_bytes = res->bytes;
    return 0;
}

/* ---- a `start`ed session's own spool --------------------------------------------------- */


int vc_stream_open_local(vc_session *s, char *err, size_t errlen)
{
    char path[VC_PATH_MAX + 8];
    if (snprintf(path, sizeof path, "%s.spool", s->output) >= (int)sizeof path) {
        snprintf(err, errlen, "output path too long for its spool: %.300s", s->output);
        return -ENAMETOOLONG;
    }
    if (s->force)
        unlink(path); /* as the target's user, as OUT is replaced (start --force) */
    s->spool_err[0] = '\0';
    if (spool_create(&s->spool, path, (uint64_t)getpid(), err, errlen) != 0)
        return -EEXIST;
    spool_set_memory(s->spool, VC_LOCAL_SPOOL_MEM);
    return 0;
}

static int fd_sink(void *ctx, const void *data, size_t len)
{
    return cvf_sink_fd(ctx, data, len);
}

int vc_stream_write_local(vc_session *s, struct vc_result *res, char *err, size_t errlen)
{
    vc_atomic_file f;
    int rc = vc_atomic_open(&f, s->output, 0644, s->force ? VC_ATOMIC_FORCE : 0, err, errlen);
    if (rc < 0)
        return rc;
    struct spool_stats st;
    struct spool *gens[2] = {s->spool_prev, s->spool}; /* --last: both generations */
    int first = s->spool_prev == NULL;
    rc = spool_build_many(gens + first, 2 - (size_t)first, s->last_ns, fd_sink,
                          (void *)(intptr_t)f.fd, &st, err, errlen) == 0
             ? vc_atomic_commit(&f, err, errlen)
             : -EIO;
    if (f.kept)
        vc_emit_note_kept(s, f.tmp, err);
    vc_atomic_abort(&f);
    if (rc == 0) {
        res->events = st.events;
        res->threads = st.threads;
        res->bytes = st.cvf_bytes;
        res->dropped += st.unthreaded;
        spool_close(s->spool, 1); /* built: the spool goes */
        spool_close(s->spool_prev, 1);
        s->spool = s->spool_prev = NULL;
    }
    return rc;
}

void vc_stream_release(vc_session *s, int owner)
{
    uint64_t records = 0, dropped = 0, bytes;
    if (s->spool != NULL)
        spool_progress(s->spool, &records, &dropped, &bytes);
    /* still here: the trace failed, and the spool is what is left of it (empty: nothing) */
    spool_close(s->spool, owner && records == 0 && dropped == 0 && s->spool_prev == NULL);
    spool_close(s->spool_prev, 0);
    s->spool = s->spool_prev = NULL;
    free(s->pending);
    s->pending = NULL;
    s->pending_len = s->pending_cap = 0;
    s->names_sent = 0;
    s->arena_sent = 0;
    s->stream_broken = 0;
    s->chunks_sent = s->records_sent = 0;
}

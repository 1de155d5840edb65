/* trace_stream.c — a streaming session as `vcattach trace` sees it (see trace_stream.h). */
#include "trace_stream.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control_client.h"
#include "monotonic.h"
#include "protocol.h"
#include "sched_events.h"
#include "term.h"
#include "human.h"
#include "say.h"
#include "trace_watch.h"

#define FRAME_WAIT_MS 10000 /* a frame begun must end within this */

int trace_stream_open(struct trace_stream *ts, const char *out_abs, pid_t pid,
                      uint64_t max_bytes, int force, uint64_t last_ns, char *err, size_t errlen)
{
    memset(ts, 0, sizeof *ts);
    ts->last_ns = last_ns;
    ts->pid = (uint64_t)pid;
    ts->rate_ms = vc_monotonic_ms();
    if (out_abs == NULL)
        return 0;
    char path[PATH_MAX + 8];
    if (snprintf(path, sizeof path, "%s.spool", out_abs) >= (int)sizeof path) {
        snprintf(err, errlen, "output path too long: %s", out_abs);
        return -1;
    }
    struct stat st;
    char prev[PATH_MAX + 16];
    snprintf(prev, sizeof prev, "%s.prev", path);
    const char *stale[] = {path, prev};
    for (int i = 0; i < 2; i++) {
        if (lstat(stale[i], &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (!force) { /* a killed run's only copy of its trace: not ours to remove */
            snprintf(err, errlen, "%s exists (a vcattach running or killed left it: `vcattach "
                     "recover` it, or give --force to replace it)", stale[i]);
            return -1;
        }
        /* -f: the spool an earlier run left is replaced like OUT (said, not silent) */
        if (unlink(stale[i]) == 0)
            say("vcattach: removed the spool an earlier run left: %s\n", stale[i]);
    }
    if (spool_create(&ts->sp, path, (uint64_t)pid, err, errlen) != 0)
        return -1;
    /* --last keeps two generations on disk: each may take half the cap */
    spool_set_limit(ts->sp, last_ns ? max_bytes / 2 : max_bytes);
    ts->rate_ms = vc_monotonic_ms();
    return 0;
}

/* --last: the spool being written covers DUR, or holds its half of --max-trace-mb: it becomes
 * OUT.spool.prev (the one before is dropped) and a new OUT.spool begins with every name and
 * thread, capped as it was.  A generation at its cap keeps in memory what its file could not
 * take (the build reads both).  0 or -2 + why. */
static int rotate(struct trace_stream *ts, char *why, size_t cap)
{
    return spool_next_generation(&ts->sp, &ts->prev, &ts->rotated_records, NULL, why, cap);
}

int trace_stream_on_data(void *ctx, uint32_t type, const void *buf, size_t len, char *err,
                         size_t errlen)
{
    struct trace_stream *ts = ctx;
    if (!spool_frame_type(type)) {
        snprintf(err, errlen, "the agent sent a whole trace to a streaming session");
        ts->broken = 1;
        return -1;
    }
    trace_watch_frame(0, ts->pid, type, buf, len);
    if (ts->sp == NULL) { /* top without -o: the watcher's only */
        if (type == VC_MSG_CHUNK && len >= 8)
            ts->unspooled += (len - 8) / sizeof(struct vc_wire_record);
        return 0;
    }
    if (ts->full && type == VC_MSG_CHUNK) {
        ts->lost_here += len >= 8 ? (len - 8) / sizeof(struct vc_wire_record) : 0;
        return 0;
    }
    char why[512];
    int rc = spool_add(ts->sp, type, buf, len, why, sizeof why);
    if (rc == 0 && type == VC_MSG_CHUNK && ts->last_ns && spool_span_ns(ts->sp) >= ts->last_ns)
        rc = rotate(ts, why, sizeof why);
    uint64_t records, dropped, disk;
    spool_progress(ts->sp, &records, &dropped, &disk);
    if (rc == -2 && ts->last_ns && spool_at_limit(ts->sp) && records > 0) {
        /* the flight recorder's cap: the oldest calls go, not the newest (a generation that
         * holds no call cannot make room: the trace then ends as at any cap) */
        ts->early_rotations++;
        rc = rotate(ts, why, sizeof why);
    }
    if (rc == -2) { /* the disk: the trace ends here, what is spooled stays usable */
        ts->full = 1;
        snprintf(ts->why, sizeof ts->why, "%s", why);
        return 0;
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s", why);
        ts->broken = 1;
        return -1;
    }
    return 0;
}

int trace_stream_pump(struct trace_stream *ts, int fd, int slice_ms, char *end_text, size_t cap,
                      char *err, size_t errlen)
{
    static char *buf;
    if (buf == NULL && (buf = malloc(VC_MSG_MAX + 1)) == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int64_t until = vc_monotonic_ms() + slice_ms;
    int was_full = ts->full;
    for (;;) {
        int64_t left = until - vc_monotonic_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, left > 0 ? (int)left : 0);
        if (r < 0 && errno == EINTR)
            return 0;
        if (r <= 0)
            return 0;
        uint32_t type;
        long n = vc_msg_recv(fd, &type, buf, VC_MSG_MAX + 1, FRAME_WAIT_MS);
        if (n < 0) {
            snprintf(err, errlen, "%s", errno == ECONNRESET ? "the connection ended"
                                                            : strerror(errno));
            return -1;
        }
        if (type == VC_MSG_END) {
            vc_term_sanitize(buf, (size_t)n, VC_MSG_MAX + 1, VC_TERM_KEEP_NEWLINES);
            snprintf(end_text, cap, "%s", buf);
            return 1;
        }
        if (spool_frame_type(type) && trace_stream_on_data(ts, type, buf, (size_t)n, err, errlen) != 0)
            return -1;
        if (ts->full && !was_full)
            return 2;
        if (vc_monotonic_ms() >= until)
            return 0;
    }
}

void trace_stream_progress(struct trace_stream *ts, char *buf, size_t cap)
{
    uint64_t records = ts->unspooled, dropped = 0, disk = 0;
    if (ts->sp != NULL)
        spool_progress(ts->sp, &records, &dropped, &disk);
    if (ts->prev != NULL) { /* --last: both generations are on disk */
        uint64_t r2, d2, b2;
        spool_progress(ts->prev, &r2, &d2, &b2);
        disk += b2;
        records += r2 + ts->rotated_records;
    }
    int64_t now = vc_monotonic_ms();
    if (now - ts->rate_ms >= 1000) {
        ts->rate = (double)(records - ts->rate_records) * 1000.0 / (double)(now - ts->rate_ms);
        ts->rate_ms = now;
        ts->rate_records = records;
    }
    char size[32];
    vc_human_bytes(disk, size, sizeof size);
    snprintf(buf, cap, ": %.1f M events (%.1f M/s), spool %s%s", (double)records / 1e6,
             ts->rate / 1e6, size, dropped ? ", some dropped" : "");
}

void trace_stream_sched_sink(void *ctx, int32_t tid, uint64_t ns, unsigned state)
{
    struct trace_stream *ts = ctx;
    if (ts->sp != NULL)
        spool_add_sched(ts->sp, tid, ns, state); /* beyond its cap: counted lost there */
}

static int sink_adapter(void *ctx, const void *data, size_t len)
{
    char err[256];
    return sink_write(ctx, data, len, err, sizeof err) == 0 ? 0 : -1;
}

int trace_stream_build(struct trace_stream *ts, struct trace_sink *sink, struct spool_stats *st,
                       char *err, size_t errlen)
{
    if (ts->sp == NULL) {
        snprintf(err, errlen, "no spool: nothing to build");
        return -1;
    }
    struct spool *gens[2] = {ts->prev, ts->sp};
    int first = ts->prev == NULL;
    if (spool_build_many(gens + first, 2 - (size_t)first, ts->last_ns, sink_adapter, sink, st,
                         err, errlen) != 0)
        return -1;
    st->dropped += ts->lost_here;
    return 0;
}

void trace_stream_close(struct trace_stream *ts, int built)
{
    sched_events_close(ts->sched, NULL); /* a session that failed before sched_end */
    ts->sched = NULL;
    if (ts->sp == NULL)
        return;
    uint64_t records, dropped, disk;
    spool_progress(ts->sp, &records, &dropped, &disk);
    if (records == 0 && dropped == 0 && ts->prev == NULL)
        built = 1; /* nothing came: nothing to keep */
    if (!built) {
        char err[256];
        if (spool_flush(ts->sp, err, sizeof err) != 0)
            say("vcattach: %s\n", err);
        say("vcattach: what was received is kept in %s%s%s: `vcattach recover %s%s%s "
                        "-o OUT.cvf` makes a trace of it\n",
                ts->prev ? spool_path(ts->prev) : "", ts->prev ? " and " : "", spool_path(ts->sp),
                ts->prev ? spool_path(ts->prev) : "", ts->prev ? " " : "", spool_path(ts->sp));
    }
    spool_close(ts->prev, built);
    spool_close(ts->sp, built);
    ts->prev = ts->sp = NULL;
}

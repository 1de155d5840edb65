/* spool_window.c — what a process left in its window when it ended without sending it
 * (spool.h: spool_add_window; the window's layout is common/protocol.h's).
 *
 * A streaming agent records into a memfd it passed to vcattach (agent/buffer.h).  A process
 * killed while tracing (a pool worker that `with Pool()` ends with SIGTERM, a SIGKILL) has
 * sent only what its agent had handed over: the records of its last moments, and the names of
 * the functions it first called then, are only in that window.  This file reads them from it
 * as the frames the agent would have sent — the clock's fit, NAMES from the arena, THREADS for
 * threads not announced yet, CHUNK for every chunk not sent — and gives them to spool_add,
 * which checks every one as it checks the agent's own frames: the window is the target's
 * memory, hostile like anything it sends.  It is read with pread only (a memfd, checked to be
 * shared memory: a read never blocks), never mapped (a file someone shrinks under a mapping
 * is a SIGBUS), and at most `max_bytes` of it.
 */
#include "spool.h"
#include "fd_io.h"
#include "protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK_HEAD sizeof(struct vc_wire_chunk)
#define WINDOW_CHUNK_BYTES 65536u
#define WINDOW_MAX_RECORDS ((WINDOW_CHUNK_BYTES - CHUNK_HEAD) / sizeof(struct vc_wire_record))
#define NAMES_FRAME_MAX (256u << 10)

static int refuse(char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "its window could not be read: %s", what);
    return -1;
}

void spool_chunk_mark_of(const void *payload, size_t len, struct spool_chunk_mark *mark)
{
    const unsigned char *p = payload;
    memset(mark, 0, sizeof *mark);
    if (len < 8 + sizeof(struct vc_wire_record))
        return;
    memcpy(&mark->owner, p, 4);
    memcpy(&mark->count, p + 4, 4);
    if ((size_t)mark->count * sizeof(struct vc_wire_record) + 8 != len)
        return;
    memcpy(&mark->first, p + 8, sizeof mark->first);
    memcpy(&mark->last, p + len - sizeof mark->last, sizeof mark->last);
    mark->valid = 1;
}

/* The arena's whole entries as NAMES frames (each at most NAMES_FRAME_MAX, cut at entries). */
static int add_names(struct spool *sp, const unsigned char *a, uint64_t len, char *err,
                     size_t errlen)
{
    uint64_t from = 0;
    while (from < len) {
        uint64_t to = from;
        while (to + 8 <= len && to - from < NAMES_FRAME_MAX) {
            uint32_t n;
            memcpy(&n, a + to + 4, 4);
            if (n > len - to - 8)
                break; /* cut short: the entries before it are whole */
            to += 8 + (uint64_t)n;
        }
        if (to == from)
            return 0;
        if (spool_add(sp, VC_MSG_NAMES, a + from, (size_t)(to - from), err, errlen) != 0)
            return -1;
        from = to;
    }
    return 0;
}

/* The thread of a chunk, if the spool does not know it yet: its track tid, unnamed (the
 * builder names it as it names any thread without a name: MainThread for the pid's). */
static int add_thread(struct spool *sp, uint32_t owner, int32_t tid, char *err, size_t errlen)
{
    if (tid <= 0 || spool_thread_known(sp, owner))
        return 0;
    uint32_t entry[4] = {owner, (uint32_t)tid, 0, 0};
    return spool_add(sp, VC_MSG_THREADS, entry, sizeof entry, err, errlen);
}

int spool_add_window(struct spool *sp, int fd, uint64_t max_bytes,
                     const struct spool_chunk_mark *last, struct spool_window_stats *got,
                     char *err, size_t errlen)
{
    memset(got, 0, sizeof *got);
    struct stat st;
    struct vc_wire_window h;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return refuse(err, errlen, "not a regular file");
    if (fcntl(fd, F_GET_SEALS) < 0) /* only shared memory (memfd, tmpfs) answers */
        return refuse(err, errlen, "not a memfd");
    uint64_t size = (uint64_t)st.st_size;
    if (size < sizeof h || size > max_bytes)
        return refuse(err, errlen, "of an impossible size");
    if (vc_pread_all(fd, &h, sizeof h, 0) != (ssize_t)sizeof h ||
        memcmp(h.magic, VC_WINDOW_MAGIC, 8) != 0 || h.head_bytes != sizeof h ||
        h.chunk_bytes != WINDOW_CHUNK_BYTES)
        return refuse(err, errlen, "not a window");
    if (h.arena_off < sizeof h || h.arena_cap > size || h.arena_off > size - h.arena_cap ||
        h.arena_len > h.arena_cap || h.chunks_off > size ||
        h.nchunks > (size - h.chunks_off) / WINDOW_CHUNK_BYTES)
        return refuse(err, errlen, "its layout is out of bounds");
    /* The clock first: the records are read in its terms (a fit left half-written is not
     * used; the spool then keeps the agent's last CLOCK frame). */
    if ((h.clock_seq & 1) == 0 && h.clock.ns_per_raw > 0 &&
        spool_add(sp, VC_MSG_CLOCK, &h.clock, sizeof h.clock, err, errlen) != 0)
        return -1;
    if (h.arena_len > 0) {
        unsigned char *a = malloc(h.arena_len);
        if (a == NULL)
            return refuse(err, errlen, "out of memory");
        int rc = vc_pread_all(fd, a, h.arena_len, (off_t)h.arena_off) == (ssize_t)h.arena_len
                     ? add_names(sp, a, h.arena_len, err, errlen)
                     : refuse(err, errlen, "its names could not be read");
        free(a);
        if (rc != 0)
            return -1;
    }
    unsigned char *buf = malloc(WINDOW_CHUNK_BYTES);
    if (buf == NULL)
        return refuse(err, errlen, "out of memory");
    int rc = 0;
    for (uint64_t i = 0; rc == 0 && i < h.nchunks; i++) {
        off_t at = (off_t)(h.chunks_off + i * WINDOW_CHUNK_BYTES);
        struct vc_wire_chunk c;
        if (vc_pread_all(fd, &c, sizeof c, at) != (ssize_t)sizeof c)
            break;
        if (c.state == VC_CHUNK_SENT || c.count == 0 || c.count > WINDOW_MAX_RECORDS)
            continue;
        size_t len = 8 + (size_t)c.count * sizeof(struct vc_wire_record);
        memcpy(buf, &c.owner, 4);
        memcpy(buf + 4, &c.count, 4);
        if (vc_pread_all(fd, buf + 8, len - 8, at + (off_t)CHUNK_HEAD) != (ssize_t)(len - 8))
            break;
        if (c.state == VC_CHUNK_SENDING && last != NULL && last->valid) {
            struct spool_chunk_mark m;
            spool_chunk_mark_of(buf, len, &m);
            if (m.valid && m.owner == last->owner && m.count == last->count &&
                memcmp(&m.first, &last->first, sizeof m.first) == 0 &&
                memcmp(&m.last, &last->last, sizeof m.last) == 0)
                continue; /* its frame came whole before the process ended */
        }
        rc = add_thread(sp, c.owner, c.tid, err, errlen);
        if (rc == 0)
            rc = spool_add(sp, VC_MSG_CHUNK, buf, len, err, errlen);
        if (rc == 0) {
            got->chunks++;
            got->records += c.count;
        }
    }
    free(buf);
    return rc;
}

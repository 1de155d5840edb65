/* buffer.h — bounded record storage shared by every traced thread.
 *
 * One completed call = one 24-byte record {start, dur, id}.  Records live in fixed 64 KiB
 * chunks carved from a single lazily-touched mmap of buffer_mb.  A thread appends to its own
 * current chunk; a full chunk joins a global FIFO and the thread takes a fresh one from the
 * free list — or, when the pool is exhausted, recycles the globally oldest full chunk, whose
 * records are counted as dropped (oldest calls are lost, newest kept).  Everything runs under
 * the GIL, so there is no lock; the hot path touches only the thread's chunk.
 *
 * Streaming (a `vcattach trace` session): the pool is the in-flight window.  A full chunk goes
 * to the outbox instead of the FIFO; the agent thread takes the whole outbox at once (an
 * atomic exchange, without the GIL), sends it and gives the chunks back through `returned`
 * (an atomic push), which a hook short of chunks takes at once.  Nothing is ever recycled:
 * when the window is full (vcattach does not keep up) a thread drops the calls it makes until
 * a chunk comes back, and notes their number and time range (record.c), which travel as a
 * record of their own.  Only the hooks (one at a time: the GIL) pop; only the agent thread
 * exchanges the outbox and pushes to `returned`: no ABA.
 *
 * The window of a session that streams to vcattach is a memfd that vcattach holds too
 * (vc_pool_init_shared; common/protocol.h "the window"): when the process ends without
 * sending everything (SIGTERM'd pool workers, a SIGKILL), vcattach reads from it what was
 * recorded and not sent.  So each chunk's head says whose it is and whether it was sent, and a
 * record is written whole before the chunk's count includes it (vc_chunk_publish).  A fork
 * child never writes into its parent's window (follow.c gives it its own).
 */
#ifndef VC_BUFFER_H
#define VC_BUFFER_H

#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

#define VC_CHUNK_BYTES 65536u

typedef struct vc_record {
    uint64_t start; /* raw clock (clock.h) */
    uint64_t dur;   /* raw clock units */
    uint32_t id;    /* key id in the pinned table (names.h) */
    uint32_t flags; /* VC_REC_* */
} vc_record;

#define VC_REC_OPEN 1u      /* the call was still running at stop: closed at the stop time */
#define VC_REC_RESUME 2u    /* a generator/coroutine resumed: a slice of a call, not a call */
#define VC_REC_AT_ATTACH 4u /* already running when the thread was seeded (its start is the
                               attach, not the call's) */
#define VC_REC_AT_ATTACH_INNER 8u /* … and the innermost such frame: where the thread was */
#define VC_REC_MASK 0xffu   /* what a record keeps of its frame's flags */
/* Not a record flag: a shadow-stack frame that runs a coroutine (tasks.h: a coroutine whose
 * caller is one is awaited, not a task step).  Masked off when the record is stored. */
#define VC_FRAME_CORO 0x8000u

/* The head is common/protocol.h's struct vc_wire_chunk (static-asserted in buffer.c). */
typedef struct vc_chunk {
    struct vc_chunk *next;     /* free list, FIFO of full chunks, or a thread's list at stop */
    uint32_t state;            /* VC_CHUNK_UNSENT / SENDING / SENT (protocol.h) */
    int32_t tid;               /* its thread's track tid (for vcattach's read of the window) */
    uint32_t owner;            /* index of the thread (session.h) */
    uint32_t count;            /* records used */
    vc_record rec[];
} vc_chunk;

/* The record at rec[n] is written: it becomes part of the chunk.  A release store (a plain
 * store on x86-64): vcattach may read the chunk after the process died between any two
 * instructions, and must never find a count that includes a record not yet written. */
static inline void vc_chunk_publish(vc_chunk *c, uint32_t n)
{
    __atomic_store_n(&c->count, n + 1, __ATOMIC_RELEASE);
}

#define VC_CHUNK_RECORDS ((VC_CHUNK_BYTES - sizeof(vc_chunk)) / sizeof(vc_record))

/* The names arena of a shared window (names.c writes it, stream.c sends it): NAMES entries
 * of the keys named at first sight, `*len` bytes of them whole (a release store). */
typedef struct vc_name_arena {
    unsigned char *base;       /* NULL: no arena (keys are named at the agent's visits) */
    uint64_t cap;
    uint64_t *len;             /* in the window's head, where vcattach reads it too */
} vc_name_arena;

typedef struct vc_pool {
    unsigned char *base;       /* mmap of nchunks * VC_CHUNK_BYTES */
    size_t nchunks;
    size_t carved;             /* chunks handed out at least once (bump allocator) */
    vc_chunk *free_list;
    vc_chunk *full_head, *full_tail; /* FIFO: oldest full chunk first */
    uint64_t dropped;          /* records lost to recycling or to an empty pool */
    size_t prefaulted;         /* chunks [0, prefaulted) have their pages (agent thread only) */
    size_t carved_at_last_prefault;
    int prefault_broken;       /* the kernel has no MADV_POPULATE_WRITE */
    int streaming;             /* full chunks go to the outbox, nothing is recycled */
    vc_chunk *outbox;          /* streaming: full chunks for the sender (atomic LIFO) */
    vc_chunk *returned;        /* streaming: chunks the sender is done with (atomic LIFO) */
    /* a shared window (vc_pool_init_shared): the memfd, its whole mapping, its head */
    int window_fd;             /* -1: a private pool */
    unsigned char *map;        /* NULL for a private pool */
    size_t map_len;            /* of map, or (private) of base */
    struct vc_wire_window *head;
    vc_name_arena arena;
    uint64_t clock_ns;         /* when the head's clock was last written (stream.c) */
} vc_pool;

/* A record whose id is VC_ID_DROPPED stands for calls lost at the source (streaming): `flags`
 * of them, from `start` to `start + dur` (common/protocol.h VC_WIRE_DROPPED). */
#define VC_ID_DROPPED (UINT32_MAX - 2)

int vc_pool_init(vc_pool *pool, uint32_t buffer_mb);
/* The same pool in a window vcattach shares (a memfd: pool->window_fd, passed to vcattach),
 * with its names arena.  0, or -errno (the caller may fall back to vc_pool_init). */
int vc_pool_init_shared(vc_pool *pool, uint32_t buffer_mb);
/* Unmaps the pool and closes its memfd. */
void vc_pool_destroy(vc_pool *pool);
/* In a fork child, before anything else runs in it (an atfork handler, follow.c): the
 * window, if shared, is the parent's: the child takes no chunk from it any more (its hooks
 * drop what they record until follow.c gives it a window of its own).  Memory only. */
void vc_pool_forsake_in_child(vc_pool *pool);
/* The memfd of a shared window, else -1. */
static inline int vc_pool_window_fd(const vc_pool *pool)
{
    return pool->map != NULL ? pool->window_fd : -1;
}
/* At most buffer_mb from now on (a fork child's share, smaller than its parent's window): the
 * chunks not handed out yet beyond it are never used.  Any thread: a bound the hooks read. */
void vc_pool_shrink(vc_pool *pool, uint32_t buffer_mb);
/* The window's clock fit (shared windows only; stream.c), for vcattach's read of it. */
void vc_pool_set_clock(vc_pool *pool, uint64_t raw0, uint64_t ns0, double ns_per_raw);
/* A chunk for thread `owner` whose track tid is `tid` (whose previous chunk, if any, was
 * `full` and goes to the FIFO).  NULL if the pool has nothing to give (the caller drops the
 * record). */
vc_chunk *vc_pool_next_chunk(vc_pool *pool, vc_chunk *full, uint32_t owner, int32_t tid);
/* Populates the pages of the chunks the hooks will take next (agent thread, no GIL needed). */
void vc_pool_prefault(vc_pool *pool);
/* Streaming, GIL held (no hook runs): a thread's chunk goes out before it is full. */
void vc_pool_submit(vc_pool *pool, vc_chunk *c);
/* Streaming, agent thread: every full chunk so far (oldest first), and giving one back. */
vc_chunk *vc_pool_take_outbox(vc_pool *pool);
void vc_pool_give_back(vc_pool *pool, vc_chunk *c);
/* At stop, when the chunks stay in the agent (its fallback file): the outbox joins the FIFO
 * that emit.c reads.  Hooks removed. */
void vc_pool_outbox_to_fifo(vc_pool *pool);
/* A chunk to the end of the FIFO of full chunks (what emit.c writes at stop). */
void vc_pool_fifo_append(vc_pool *pool, vc_chunk *c);
/* Records currently stored (for records_bytes). */
uint64_t vc_pool_records(const vc_pool *pool, vc_chunk *const *current, size_t nthreads);

#endif /* VC_BUFFER_H */

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
 */
#ifndef VC_BUFFER_H
#define VC_BUFFER_H

#include <stddef.h>
#include <stdint.h>

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

typedef struct vc_chunk {
    struct vc_chunk *next;     /* free list, FIFO of full chunks, or a thread's list at stop */
    uint32_t owner;            /* index of the thread (session.h) */
    uint32_t count;            /* records used */
    vc_record rec[];
} vc_chunk;

#define VC_CHUNK_RECORDS ((VC_CHUNK_BYTES - sizeof(vc_chunk)) / sizeof(vc_record))

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
} vc_pool;

/* A record whose id is VC_ID_DROPPED stands for calls lost at the source (streaming): `flags`
 * of them, from `start` to `start + dur` (common/protocol.h VC_WIRE_DROPPED). */
#define VC_ID_DROPPED (UINT32_MAX - 2)

int vc_pool_init(vc_pool *pool, uint32_t buffer_mb);
void vc_pool_destroy(vc_pool *pool);
/* A chunk for thread `owner` (whose previous chunk, if any, was `full` and goes to the FIFO).
 * NULL if the pool has nothing to give (the caller drops the record). */
vc_chunk *vc_pool_next_chunk(vc_pool *pool, vc_chunk *full, uint32_t owner);
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

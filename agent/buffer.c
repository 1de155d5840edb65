/* buffer.c — the chunk pool (see buffer.h): private, or in a window shared with vcattach. */
#include "buffer.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

_Static_assert(sizeof(vc_chunk) == sizeof(struct vc_wire_chunk) &&
                   offsetof(vc_chunk, state) == offsetof(struct vc_wire_chunk, state) &&
                   offsetof(vc_chunk, tid) == offsetof(struct vc_wire_chunk, tid) &&
                   offsetof(vc_chunk, owner) == offsetof(struct vc_wire_chunk, owner) &&
                   offsetof(vc_chunk, count) == offsetof(struct vc_wire_chunk, count),
               "a chunk's head is the window's (common/protocol.h)");

/* The window's layout: its head, the names arena (a process that ends at once names few keys;
 * past it, keys are named at the agent's visits as before), then the chunks. */
#define VC_WINDOW_ARENA_OFF 4096u
#define VC_WINDOW_ARENA_BYTES ((1u << 20) - VC_WINDOW_ARENA_OFF)
#define VC_WINDOW_CHUNKS_OFF (1u << 20)

/* The pool is asked for transparent huge pages (MADV_HUGEPAGE, which THP's default "madvise"
 * mode honours): records are written sequentially, 24 bytes per call, so with 4 KiB pages the
 * hot path took a page fault every 170 calls — measured 9 ns per call of a 1M-call loop on
 * 3.12 (5,600 faults per 24 MB), as much as the rest of the record; with 2 MiB pages it takes
 * one every 87,000.  The zeroing of fresh memory is still paid, once per byte.  The mapping is
 * aligned to 2 MiB (older kernels do not align anonymous mappings themselves), the surplus
 * unmapped, so that every huge page can be used; without THP the advice is ignored. */
#define VC_HUGE_PAGE ((size_t)2 << 20)

static void *map_pool(size_t bytes)
{
    size_t len = bytes + VC_HUGE_PAGE;
    unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return MAP_FAILED;
    unsigned char *a = (unsigned char *)(((uintptr_t)p + VC_HUGE_PAGE - 1) & ~(uintptr_t)(VC_HUGE_PAGE - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    if (a + bytes < p + len)
        munmap(a + bytes, (size_t)(p + len - (a + bytes)));
#ifdef MADV_HUGEPAGE
    (void)madvise(a, bytes, MADV_HUGEPAGE); /* advice: EINVAL without THP, and that is fine */
#endif
    return a;
}

static size_t chunks_for(uint32_t buffer_mb)
{
    size_t n = ((size_t)(buffer_mb ? buffer_mb : 256) << 20) / VC_CHUNK_BYTES;
    return n < 2 ? 2 : n;
}

int vc_pool_init(vc_pool *pool, uint32_t buffer_mb)
{
    *pool = (vc_pool){0};
    pool->window_fd = -1;
    pool->nchunks = chunks_for(buffer_mb);
    /* NORESERVE + lazy touching: a 256 MB budget costs nothing until records arrive. */
    void *p = map_pool(pool->nchunks * VC_CHUNK_BYTES);
    if (p == MAP_FAILED)
        return -errno;
    pool->base = p;
    pool->map_len = pool->nchunks * VC_CHUNK_BYTES;
    vc_pool_prefault(pool);
    return 0;
}

/* A memfd (no file anywhere) that vcattach receives over the control socket: its pages are
 * shared memory, touched lazily like the private pool's (shmem has no transparent huge pages
 * by default: the prefault keeps the page faults off the hot path all the same). */
int vc_pool_init_shared(vc_pool *pool, uint32_t buffer_mb)
{
    *pool = (vc_pool){0};
    pool->window_fd = -1;
    pool->nchunks = chunks_for(buffer_mb);
    size_t len = VC_WINDOW_CHUNKS_OFF + pool->nchunks * VC_CHUNK_BYTES;
    /* The raw system call: glibc's memfd_create() wrapper is from 2.27, newer than the
     * agents' floor (2.17); kernels without memfd (< 3.17) answer ENOSYS and the agent
     * keeps its private pool. */
    int fd = (int)syscall(SYS_memfd_create, "vcattach-window", MFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    void *p = ftruncate(fd, (off_t)len) == 0
                  ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0)
                  : MAP_FAILED;
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return -e;
    }
    pool->window_fd = fd;
    pool->map = p;
    pool->map_len = len;
    pool->base = pool->map + VC_WINDOW_CHUNKS_OFF;
    pool->head = p;
    memcpy(pool->head->magic, VC_WINDOW_MAGIC, 8);
    pool->head->head_bytes = sizeof *pool->head;
    pool->head->chunk_bytes = VC_CHUNK_BYTES;
    pool->head->nchunks = pool->nchunks;
    pool->head->chunks_off = VC_WINDOW_CHUNKS_OFF;
    pool->head->arena_off = VC_WINDOW_ARENA_OFF;
    pool->head->arena_cap = VC_WINDOW_ARENA_BYTES;
    pool->arena = (vc_name_arena){pool->map + VC_WINDOW_ARENA_OFF, VC_WINDOW_ARENA_BYTES,
                                  &pool->head->arena_len};
    vc_pool_prefault(pool);
    return 0;
}

void vc_pool_destroy(vc_pool *pool)
{
    if (pool->map != NULL)
        munmap(pool->map, pool->map_len);
    else if (pool->base != NULL)
        munmap(pool->base, pool->map_len);
    if (pool->window_fd >= 0)
        close(pool->window_fd);
    *pool = (vc_pool){0};
    pool->window_fd = -1;
}

void vc_pool_forsake_in_child(vc_pool *pool)
{
    if (pool->map == NULL)
        return; /* a private pool: the child's own copy */
    pool->free_list = NULL;
    pool->full_head = pool->full_tail = NULL;
    pool->outbox = pool->returned = NULL;
    pool->carved = pool->nchunks; /* nothing more to carve: every record is dropped */
    pool->prefault_broken = 1;
    pool->head = NULL;
    pool->arena = (vc_name_arena){0};
}

void vc_pool_shrink(vc_pool *pool, uint32_t buffer_mb)
{
    size_t want = chunks_for(buffer_mb), carved = __atomic_load_n(&pool->carved, __ATOMIC_RELAXED);
    if (buffer_mb == 0 || want >= pool->nchunks)
        return;
    /* A hook may be carving right now: it may take one chunk past the new bound (within the
     * mapping all the same). */
    __atomic_store_n(&pool->nchunks, want > carved ? want : carved, __ATOMIC_RELAXED);
}

void vc_pool_set_clock(vc_pool *pool, uint64_t raw0, uint64_t ns0, double ns_per_raw)
{
    struct vc_wire_window *h = pool->head;
    if (h == NULL)
        return;
    /* A seqlock a dead process can leave odd: vcattach then takes no clock from the window. */
    __atomic_store_n(&h->clock_seq, h->clock_seq + 1, __ATOMIC_RELEASE);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    h->clock = (struct vc_wire_clock){raw0, ns0, ns_per_raw};
    __atomic_store_n(&h->clock_seq, h->clock_seq + 1, __ATOMIC_RELEASE);
}

/* Streaming: a full chunk to the outbox (CAS push: the agent thread may be exchanging). */
static void outbox_push(vc_pool *pool, vc_chunk *full)
{
    vc_chunk *head = __atomic_load_n(&pool->outbox, __ATOMIC_RELAXED);
    do
        full->next = head;
    while (!__atomic_compare_exchange_n(&pool->outbox, &head, full, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED));
}

void vc_pool_submit(vc_pool *pool, vc_chunk *c)
{
    outbox_push(pool, c);
}

vc_chunk *vc_pool_take_outbox(vc_pool *pool)
{
    vc_chunk *c = __atomic_exchange_n(&pool->outbox, NULL, __ATOMIC_ACQUIRE);
    vc_chunk *oldest = NULL; /* LIFO → oldest first */
    while (c != NULL) {
        vc_chunk *next = c->next;
        c->next = oldest;
        oldest = c;
        c = next;
    }
    return oldest;
}

void vc_pool_give_back(vc_pool *pool, vc_chunk *c)
{
    vc_chunk *head = __atomic_load_n(&pool->returned, __ATOMIC_RELAXED);
    do
        c->next = head;
    while (!__atomic_compare_exchange_n(&pool->returned, &head, c, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED));
}

void vc_pool_fifo_append(vc_pool *pool, vc_chunk *c)
{
    c->next = NULL;
    if (pool->full_tail != NULL)
        pool->full_tail->next = c;
    else
        pool->full_head = c;
    pool->full_tail = c;
}

void vc_pool_outbox_to_fifo(vc_pool *pool)
{
    for (vc_chunk *c = vc_pool_take_outbox(pool), *next; c != NULL; c = next) {
        next = c->next;
        vc_pool_fifo_append(pool, c);
    }
}

vc_chunk *vc_pool_next_chunk(vc_pool *pool, vc_chunk *full, uint32_t owner, int32_t tid)
{
    if (full != NULL && pool->streaming) {
        outbox_push(pool, full);
    } else if (full != NULL) {
        full->next = NULL;
        if (pool->full_tail != NULL)
            pool->full_tail->next = full;
        else
            pool->full_head = full;
        pool->full_tail = full;
    }
    vc_chunk *c;
    if (pool->free_list == NULL && pool->streaming)
        pool->free_list = __atomic_exchange_n(&pool->returned, NULL, __ATOMIC_ACQUIRE);
    if (pool->free_list != NULL) {
        c = pool->free_list;
        pool->free_list = c->next;
    } else if (pool->carved < pool->nchunks) {
        c = (vc_chunk *)(pool->base + pool->carved * VC_CHUNK_BYTES);
        __atomic_store_n(&pool->carved, pool->carved + 1, __ATOMIC_RELAXED); /* read by prefault */
    } else if (pool->full_head != NULL && !pool->streaming) {
        /* Pool exhausted: the oldest full chunk of any thread is recycled. */
        c = pool->full_head;
        pool->full_head = c->next;
        if (pool->full_head == NULL)
            pool->full_tail = NULL;
        pool->dropped += c->count;
    } else {
        return NULL;
    }
    /* Emptied before it is marked unsent: a process killed in between leaves a sent chunk
     * (skipped by vcattach) or an empty one, never old records taken for new. */
    c->next = NULL;
    __atomic_store_n(&c->count, 0, __ATOMIC_RELEASE);
    c->owner = owner;
    c->tid = tid;
    __atomic_store_n(&c->state, VC_CHUNK_UNSENT, __ATOMIC_RELEASE);
    return c;
}

uint64_t vc_pool_records(const vc_pool *pool, vc_chunk *const *current, size_t nthreads)
{
    uint64_t n = 0;
    for (const vc_chunk *c = pool->full_head; c != NULL; c = c->next)
        n += c->count;
    for (size_t i = 0; i < nthreads; i++)
        if (current[i] != NULL)
            n += current[i]->count;
    return n;
}

/* Chunks are populated ahead of the hooks by the agent thread, without the GIL, so that the
 * page faults of fresh memory are not taken on the hot path.  MADV_POPULATE_WRITE faults the
 * pages in without touching their contents, so racing with a hook that has just carved one of
 * them is harmless.  Ahead = twice what was consumed since the last call, at least 1 MiB.
 * (Older kernels without MADV_POPULATE_WRITE: no prefault, faults stay on the hot path.) */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
void vc_pool_prefault(vc_pool *pool)
{
    if (pool->base == NULL || pool->prefault_broken)
        return;
    size_t carved = __atomic_load_n(&pool->carved, __ATOMIC_RELAXED);
    size_t used = carved - pool->carved_at_last_prefault;
    pool->carved_at_last_prefault = carved;
    size_t ahead = 2 * used;
    size_t min_ahead = (1u << 20) / VC_CHUNK_BYTES;
    if (ahead < min_ahead)
        ahead = min_ahead;
    size_t target = carved + ahead;
    if (target > pool->nchunks)
        target = pool->nchunks;
    if (pool->prefaulted < carved)
        pool->prefaulted = carved;
    if (target <= pool->prefaulted)
        return;
    if (madvise(pool->base + pool->prefaulted * VC_CHUNK_BYTES,
                (target - pool->prefaulted) * VC_CHUNK_BYTES, MADV_POPULATE_WRITE) != 0) {
        pool->prefault_broken = 1;
        return;
    }
    pool->prefaulted = target;
}

/* buffer.c — the chunk pool (see buffer.h). */
#include "buffer.h"

#include <errno.h>
#include <sys/mman.h>

int vc_pool_init(vc_pool *pool, uint32_t buffer_mb)
{
    *pool = (vc_pool){0};
    size_t bytes = (size_t)(buffer_mb ? buffer_mb : 256) << 20;
    pool->nchunks = bytes / VC_CHUNK_BYTES;
    if (pool->nchunks < 2)
        pool->nchunks = 2;
    bytes = pool->nchunks * VC_CHUNK_BYTES;
    /* NORESERVE + lazy touching: a 256 MB budget costs nothing until records arrive. */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    pool->base = p;
    vc_pool_prefault(pool);
    return 0;
}

void vc_pool_destroy(vc_pool *pool)
{
    if (pool->base != NULL)
        munmap(pool->base, pool->nchunks * VC_CHUNK_BYTES);
    *pool = (vc_pool){0};
}

vc_chunk *vc_pool_next_chunk(vc_pool *pool, vc_chunk *full, uint32_t owner)
{
    if (full != NULL) {
        full->next = NULL;
        if (pool->full_tail != NULL)
            pool->full_tail->next = full;
        else
            pool->full_head = full;
        pool->full_tail = full;
    }
    vc_chunk *c;
    if (pool->free_list != NULL) {
        c = pool->free_list;
        pool->free_list = c->next;
    } else if (pool->carved < pool->nchunks) {
        c = (vc_chunk *)(pool->base + pool->carved * VC_CHUNK_BYTES);
        __atomic_store_n(&pool->carved, pool->carved + 1, __ATOMIC_RELAXED); /* read by prefault */
    } else if (pool->full_head != NULL) {
        /* Pool exhausted: the oldest full chunk of any thread is recycled. */
        c = pool->full_head;
        pool->full_head = c->next;
        if (pool->full_head == NULL)
            pool->full_tail = NULL;
        pool->dropped += c->count;
    } else {
        return NULL;
    }
    c->next = NULL;
    c->owner = owner;
    c->count = 0;
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

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
#ifdef MADV_HUGEPAGE
    /* Fewer page faults on the hot path when records start filling the pool (best effort). */
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
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
        pool->carved++;
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

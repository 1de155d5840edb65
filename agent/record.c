/* record.c — the out-of-line halves of the record path (record.h): taking a fresh chunk when
 * a thread's is full, repairing the shadow stack when an exit does not match its top, and
 * closing the calls still open when the session stops.
 *
 * Apart from record.h so that the hot path's rare cases have one owner that needs nothing
 * but the session's data (no life cycle, no backend).  The first two run inside the hooks,
 * under the GIL; they allocate nothing and call no Python.
 */
#include "record.h"
#include "threads.h"

int vc_record_take_drops(vc_thread *t, vc_record *marker)
{
    if (t->drop_n == 0)
        return 0;
    marker->start = t->drop_first;
    marker->dur = t->drop_last > t->drop_first ? t->drop_last - t->drop_first : 0;
    marker->id = VC_ID_DROPPED;
    marker->flags = t->drop_n > UINT32_MAX ? UINT32_MAX : (uint32_t)t->drop_n;
    t->drop_n = 0;
    return 1;
}

vc_chunk *vc_record_new_chunk(vc_session *s, vc_thread *t, uint64_t start, uint64_t end)
{
    vc_chunk *c = vc_pool_next_chunk(&s->pool, t->chunk, t->index, vc_thread_track_tid(t));
    t->chunk = c;
    if (c == NULL) {
        s->pool.dropped++;
        if (s->pool.streaming) { /* the window is full: this thread's range of lost calls */
            if (t->drop_n == 0 || start < t->drop_first)
                t->drop_first = start;
            if (end > t->drop_last || t->drop_n == 0)
                t->drop_last = end;
            t->drop_n++;
        }
        return NULL;
    }
    /* A chunk again after a loss: the range goes first, so it travels with the records. */
    if (t->drop_n != 0 && vc_record_take_drops(t, &c->rec[0]))
        vc_chunk_publish(c, 0);
    return c;
}

void vc_record_mismatch(vc_session *s, vc_thread *t, const void *match, int is_c, uint64_t now)
{
    if (is_c)
        return; /* a C call that began before we saw this thread */
    uint32_t top = t->depth;
    for (uint32_t k = top; k-- > 0;) {
        vc_frame *f = &t->stack[k];
        if (f->match == match && !f->is_c) {
            /* The frames above missed their exits: they end now, inside their parent. */
            for (uint32_t j = top - 1; j > k; j--)
                vc_record_store(s, t, t->stack[j].id, t->stack[j].start, now, t->stack[j].flags);
            vc_record_store(s, t, f->id, f->start, now, f->flags);
            t->depth = k;
            return;
        }
    }
    /* Not on the stack: a frame that began before the hook; ignored. */
}

void vc_record_close_thread(vc_session *s, vc_thread *t, uint64_t now)
{
    uint32_t n = t->depth < VC_STACK_DEPTH ? t->depth : VC_STACK_DEPTH;
    for (uint32_t d = n; d-- > 0;)
        vc_record_store(s, t, t->stack[d].id, t->stack[d].start, now,
                        VC_REC_OPEN | t->stack[d].flags);
    t->depth = 0;
    t->seeded = 0;
}

void vc_record_close_open(vc_session *s, uint64_t now)
{
    for (uint32_t i = 0; i < s->nthreads; i++)
        vc_record_close_thread(s, &s->threads[i], now);
}

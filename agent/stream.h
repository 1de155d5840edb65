/* stream.h — a streaming session's sender (stream.c): what the agent thread sends to vcattach
 * while it traces and at stop, so that the target holds only the in-flight window.
 *
 * The hooks fill chunks; a full one goes to the pool's outbox (buffer.h).  Every 5 ms the
 * sender thread sends the outbox as CHUNK frames and gives the chunks back.
 * At each GIL visit it names the keys that appeared since the last one and notes the threads
 * whose tid or name is new (vc_stream_collect, under the GIL: only what naming needs), and
 * sends them after releasing it.  At stop it sends what is left: the chunks still in the
 * threads' hands, each thread's pending drop range, the last names, the thread table, the
 * clock's final fit, the process name and the session's instants; END follows as always.
 * Frames and their payloads: common/protocol.h, docs/protocol.md.
 */
#ifndef VC_AGENT_STREAM_H
#define VC_AGENT_STREAM_H

#include "session.h"

static inline int vc_stream_on(const vc_session *s)
{
    return s->pool.streaming;
}

/* The sender thread (stream.c), which sends the outbox every 5 ms while the session traces:
 * start: 0, or -1 (no thread: the agent thread sends at each of its ticks); stop: joins it. */
int vc_stream_start(vc_session *s);
void vc_stream_stop(void);
/* No GIL: sends every full chunk (the sender thread, or the agent thread at stop).  0, or -1 once the controller is gone (the
 * chunks not sent then stay in the pool's FIFO, for the fallback file). */
int vc_stream_send_chunks(vc_session *s);
/* Agent thread, GIL held: names new keys and notes new threads into s->pending. */
void vc_stream_collect(vc_session *s);
/* Agent thread, no GIL: sends what vc_stream_collect gathered and the clock's latest fit. */
int vc_stream_send_pending(vc_session *s);
/* At stop, after the hooks are gone and the keys named (s->names), no GIL: everything left
 * (see above).  0, or -EPIPE with err (then what was not sent is in the pool's FIFO and the
 * threads' chunks, for the fallback file).  res gets the counts END reports. */
int vc_stream_finish(vc_session *s, struct vc_result *res, char *err, size_t errlen);
/* `vcattach start` (no controller): the session streams into its own spool, OUTPUT.spool,
 * written as the target's user next to the output (`start` checked that user can write
 * there), and builds OUTPUT from it at stop.  open: before tracing, 0 or -errno + err;
 * write_local: after vc_stream_finish, 0 or -errno + err (the spool is then kept). */
int vc_stream_open_local(vc_session *s, char *err, size_t errlen);
int vc_stream_write_local(vc_session *s, struct vc_result *res, char *err, size_t errlen);
/* Frees s->pending and closes a spool still open (its file is kept unless `owner` and it
 * holds nothing: a fork child passes 0, the parent's file is not the child's to remove). */
void vc_stream_release(vc_session *s, int owner);

#endif /* VC_AGENT_STREAM_H */

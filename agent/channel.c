/* channel.c — frames on the control socket from two threads (see channel.h).
 *
 * Streaming: the agent thread sends records on the control socket while the socket thread
 * answers on it and may close it (the controller's EOF): one frame at a time, and the fd is
 * closed only between frames, so a frame is never cut by another and never written to an fd
 * number that was closed and reused meanwhile. */
#include "channel.h"
#include "protocol.h"

#include <pthread.h>
#include <unistd.h>

static pthread_mutex_t g_channel_lock = PTHREAD_MUTEX_INITIALIZER;

int vc_channel_send(vc_session *s, uint32_t type, const void *payload, size_t len,
                    int timeout_ms)
{
    pthread_mutex_lock(&g_channel_lock);
    int rc = s->control_fd >= 0 ? vc_msg_send(s->control_fd, type, payload, len, timeout_ms) : -1;
    pthread_mutex_unlock(&g_channel_lock);
    return rc;
}

void vc_channel_reset_in_child(void)
{
    /* A fork while the agent thread was in a send (a controller slow to read holds it there
     * up to the send's bound) copies the lock held, by a thread the child does not have: the
     * child's own agent thread, streaming on its new connection, would wait for it for ever. */
    pthread_mutex_init(&g_channel_lock, NULL);
}

void vc_channel_close(vc_session *s)
{
    pthread_mutex_lock(&g_channel_lock);
    if (s->control_fd >= 0)
        close(s->control_fd);
    s->control_fd = -1;
    pthread_mutex_unlock(&g_channel_lock);
}

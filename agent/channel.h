/* channel.h — the control socket as a channel of frames shared by two threads (channel.c):
 * the agent thread streams records on it (stream.c) while the socket thread answers STATUS on
 * it and closes it at the controller's EOF (control.c).  A leaf under both: the stream needs
 * only to send, never the control protocol. */
#ifndef VC_AGENT_CHANNEL_H
#define VC_AGENT_CHANNEL_H

#include "session.h"

#include <stddef.h>
#include <stdint.h>

/* One frame on the control socket, serialized with every other send and with the close.
 * 0, or -1 with errno (no controller, or it stopped reading for timeout_ms). */
int vc_channel_send(vc_session *s, uint32_t type, const void *payload, size_t len,
                    int timeout_ms);
/* Closes the control socket between two frames (never under a send in progress). */
void vc_channel_close(vc_session *s);
/* In a fork child (pthread_atfork): the channel's lock usable again, held by nobody. */
void vc_channel_reset_in_child(void);

#endif /* VC_AGENT_CHANNEL_H */

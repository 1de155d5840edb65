/* starthook.h — threading's start hook (starthook.c): threads started while tracing get
 * their state and name through it (backend's on_new_thread).  Installed and removed by
 * agent.c under the GIL. */
#ifndef VC_AGENT_STARTHOOK_H
#define VC_AGENT_STARTHOOK_H

#include "session.h"

int vc_threading_patch(vc_session *s);
void vc_threading_restore(vc_session *s);
int vc_threading_foreign(void);

#endif /* VC_AGENT_STARTHOOK_H */

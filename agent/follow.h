/* follow.h — process-tree sessions' fork children (follow.c): their exit through os._exit
 * still sends their trace.  Called by agent.c's fork handler. */
#ifndef VC_AGENT_FOLLOW_H
#define VC_AGENT_FOLLOW_H


/* In a fork child of a session with follow_forks, under the child's GIL: wraps os._exit (once
 * per process image) so that a child leaving through it still sends its trace. */
void vc_follow_wrap_os_exit(void);

#endif /* VC_AGENT_FOLLOW_H */

/* session.c — the one tracing session of the process (g_vc, session.h).
 *
 * Defined apart from agent.c, which runs it, so that the files that only read or fill it
 * (hooks, threads, record path, control, emit) depend on its data, never on agent.c.
 */
#include "session.h"

/* Every fd -1 from the start: a session that fails before its pool exists (vcattach killed
 * before CONFIG) tears the pool down all the same, and a 0 there closed the target's stdin. */
vc_session g_vc = {.control_fd = -1, .status_fd = -1, .status_client_fd = -1, .tool_id = -1,
                   .pool = {.window_fd = -1}};

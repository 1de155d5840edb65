/* backend.c — the operations of a backend this interpreter does not have.
 *
 * hook_monitoring.c (3.12+) and hook_evalframe.c (3.9–3.13) are compiled for every minor; on
 * the others their install refuses with a message and the rest of the table is these no-ops,
 * shared so that each hook file states only why it refuses (backend.h).
 */
#include "backend.h"

int vc_backend_absent_foreign(vc_session *s, char *err, size_t errlen)
{
    (void)s, (void)err, (void)errlen;
    return 0;
}

void vc_backend_absent_remove(vc_session *s)
{
    (void)s;
}

/* Also the scan of the backends whose one hook serves every thread (sys.monitoring's tool id,
 * the interpreter's frame evaluator): nothing to install per thread. */
void vc_backend_scan_nothing(vc_session *s)
{
    (void)s;
}

vc_thread *vc_backend_absent_on_new_thread(vc_session *s, PyThreadState *ts)
{
    (void)s, (void)ts;
    return NULL;
}

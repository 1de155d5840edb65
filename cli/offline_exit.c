/* offline_exit.c — how an offline command (convert, summary, requests, recover) ends: what its
 * call into libvctrace returned, said in one line and turned into the exit-code contract of
 * commands.h.  Kept out of main.c so that everything but the dispatch table links into other
 * programs (the fuzz harnesses link every CLI object but main.o). */
#include "commands.h"
#include "say.h"

int vc_offline_exit(const char *cmd, enum vct_result r, const char *err)
{
    if (r == VCT_OK)
        return VC_EXIT_OK;
    say("vcattach %s: %s\n", cmd, err);
    return r == VCT_REFUSED ? VC_EXIT_USAGE : VC_EXIT_FAIL;
}

/* cmd_trace.c — `vcattach [trace]` and `vcattach start`: parse the command line, then one
 * process (trace_process.c) or, with --subprocesses, a tree (tree_trace.c for trace,
 * tree_sessions.c for start).  The steps both share are attach.c's.
 */
#include "attach_options.h"
#include "commands.h"
#include "trace_process.h"
#include "tree_sessions.h"
#include "tree_trace.h"

static int run_attach(enum cli_mode mode, int argc, char **argv)
{
    struct cli_options opt;
    int prc = cli_parse(mode, argc, argv, &opt);
    if (prc)
        return prc == 1 ? VC_EXIT_OK : VC_EXIT_USAGE;
    if (opt.subprocesses)
        return mode == CLI_TRACE ? tree_trace(&opt) : tree_start(&opt);
    return trace_process(&opt);
}

int cmd_trace(int argc, char **argv)
{
    return run_attach(CLI_TRACE, argc, argv);
}

int cmd_start(int argc, char **argv)
{
    return run_attach(CLI_START, argc, argv);
}

/* main.c — the `vcattach` command line: subcommand dispatch and the exit-code contract.
 *
 * Exit codes (documented in --help and README):
 *   0  success
 *   1  failure on the target side or while working (injection, agent, I/O after start)
 *   2  usage error or a failed preflight check (nothing was touched)
 * Each subcommand lives in its own cmd_*.c and returns one of these codes; the offline ones
 * turn libvctrace's results into them through vc_offline_exit (offline_exit.c).
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "say.h"

static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"trace", cmd_trace, "attach to PID, trace for a while, stop, write the trace (default)"},
    {"start", cmd_start, "attach and leave the agent tracing until its deadline"},
    {"top", cmd_top, "a live view of PID: functions by self time, calls/s, p99, requests, threads"},
    {"stop", cmd_stop, "stop a session started with `start` and wait for its trace"},
    {"status", cmd_status, "tell whether a session is running in PID"},
    {"convert", cmd_convert, ".cvf <-> Chrome trace JSON (and speedscope, collapsed stacks)"},
    {"summary", cmd_summary, "top functions by self/total time, per thread, in the terminal"},
    {"requests", cmd_requests, "every request (WSGI/ASGI/Celery, or --entry), slowest first"},
    {"recover", cmd_recover, "a .cvf from the spool a streaming trace left behind (OUT.spool)"},
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vcattach [trace] --pid PID [-t DURATION] [-o OUT] [options]\n"
            "       vcattach COMMAND [args]   (vcattach COMMAND --help for details)\n\n"
            "Attach to a live CPython process, record every Python and C call on every thread,\n"
            "detach, and write the trace as VizTracer's .cvf format.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nexit codes: 0 ok, 1 failure on the target side, 2 usage error or failed "
                 "preflight (nothing touched)\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return VC_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return VC_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("vcattach %s\n", VC_VERSION_STRING);
        return VC_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    if (argv[1][0] == '-') /* `vcattach --pid …` is `vcattach trace --pid …` */
        return cmd_trace(argc, argv);
    say("vcattach: unknown command '%s' (see vcattach --help)\n", argv[1]);
    return VC_EXIT_USAGE;
}

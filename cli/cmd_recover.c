/* cmd_recover.c — `vcattach recover SPOOL -o OUT [--force] [--quiet]`: a trace from the spool
 * a streaming `vcattach trace` left behind (killed, interrupted twice, a failure before the
 * end: trace_stream.h).  The spool holds everything that was flushed (at most a second before
 * the end) and is self-describing (trace/spool.h); OUT goes through the one atomic output path
 * (trace_sink.c).  The spool is left as it was: removing it is the operator's call.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "options.h"
#include "spool.h"
#include "trace_sink.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vcattach recover SPOOL -o OUT [--force] [--quiet]\n\n"
            "Builds a .cvf from the spool (OUT.spool) that a streaming `vcattach trace` keeps\n"
            "next to its output while it traces, and leaves behind when it does not finish\n"
            "(killed, Ctrl-C twice, a failure): the trace holds every call spooled up to then.\n\n"
            "  -o, --output OUT  the .cvf to write (required)\n"
            "  -f, --force       replace OUT if it exists\n"
            "  -q, --quiet       no summary line\n"
            "  -h, --help        this text\n\n"
            "exit codes: 0 written; 1 the spool could not be read or OUT written; 2 usage\n");
}

static int sink_adapter(void *ctx, const void *data, size_t len)
{
    char err[256];
    return sink_write(ctx, data, len, err, sizeof err) == 0 ? 0 : -1;
}

int cmd_recover(int argc, char **argv)
{
    static const struct option longs[] = {{"output", 1, 0, 'o'}, {"force", 0, 0, 'f'},
                                           {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'},
                                           {0, 0, 0, 0}};
    const char *out = NULL;
    int force = 0, quiet = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:fqh", longs, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'f': force = 1; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return VC_EXIT_OK;
        default:
            fprintf(stderr, "vcattach recover: unknown or incomplete option %s (see --help)\n",
                    argv[optind - 1]);
            return VC_EXIT_USAGE;
        }
    }
    if (optind != argc - 1 || out == NULL) {
        fprintf(stderr, "vcattach recover: needs one SPOOL and -o OUT (see --help)\n");
        return VC_EXIT_USAGE;
    }
    char err[1024];
    struct spool *sp;
    if (spool_open(&sp, argv[optind], err, sizeof err) != 0) {
        fprintf(stderr, "vcattach recover: %s\n", err);
        return VC_EXIT_FAIL;
    }
    struct trace_sink sink;
    memset(&sink, 0, sizeof sink);
    sink.fd = -1;
    if (sink_open_file(&sink, out, force, err, sizeof err) != 0) {
        fprintf(stderr, "vcattach recover: %s\n", err);
        spool_close(sp, 0);
        return VC_EXIT_USAGE;
    }
    sink_remove_on_signal(&sink);
    struct spool_stats st;
    int rc = spool_build(sp, sink_adapter, &sink, &st, err, sizeof err);
    if (rc == 0)
        rc = sink_commit(&sink, err, sizeof err);
    spool_close(sp, 0);
    if (rc != 0) {
        sink_abort(&sink);
        fprintf(stderr, "vcattach recover: %s\n", err);
        return VC_EXIT_FAIL;
    }
    if (!quiet) {
        char size[32];
        cli_format_bytes(st.cvf_bytes, size, sizeof size);
        printf("vcattach recover: %llu events, %llu threads, %llu dropped, %llu unnamed, %s -> %s\n",
               (unsigned long long)st.events, (unsigned long long)st.threads,
               (unsigned long long)st.dropped, (unsigned long long)st.unnamed, size, sink.path);
    }
    return VC_EXIT_OK;
}

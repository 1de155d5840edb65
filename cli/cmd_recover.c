/* cmd_recover.c — `vcattach recover SPOOL -o OUT [--force] [--quiet]`: a trace from the spool
 * a streaming `vcattach trace` left behind (killed, interrupted twice, a failure before the
 * end: trace_stream.h).  The spool holds everything that was flushed (at most a second before
 * the end) and is self-describing (common/spool.h); OUT goes through the one atomic output path
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
            "usage: vcattach recover SPOOL... -o OUT [--last DUR] [--force] [--quiet]\n\n"
            "Builds a .cvf from the spool (OUT.spool) that a streaming `vcattach trace` keeps\n"
            "next to its output while it traces, and leaves behind when it does not finish\n"
            "(killed, Ctrl-C twice, a failure): the trace holds every call spooled up to then.\n"
            "With --last there are two: give OUT.spool.prev then OUT.spool.\n"
            "A --subprocesses trace leaves one per process (OUT.PID.spool): recover each, then\n"
            "`vcattach convert A.cvf B.cvf... -o OUT` merges them.\n\n"
            "  -o, --output OUT  the .cvf to write (required)\n"
            "  --last DUR        keep only the calls that ended in the final DUR\n"
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
                                           {"last", 1, 0, 'l'},
                                           {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'},
                                           {0, 0, 0, 0}};
    const char *out = NULL;
    int force = 0, quiet = 0, c;
    uint64_t last_ms = 0;
    char perr[256];
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:fqh", longs, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'f': force = 1; break;
        case 'q': quiet = 1; break;
        case 'l':
            if (cli_parse_duration(optarg, &last_ms, perr, sizeof perr) != 0) {
                fprintf(stderr, "vcattach recover: --last: %s\n", perr);
                return VC_EXIT_USAGE;
            }
            break;
        case 'h': usage(stdout); return VC_EXIT_OK;
        default:
            fprintf(stderr, "vcattach recover: unknown or incomplete option %s (see --help)\n",
                    argv[optind - 1]);
            return VC_EXIT_USAGE;
        }
    }
    if (optind >= argc || out == NULL || argc - optind > 16) {
        fprintf(stderr, "vcattach recover: needs SPOOL... (at most 16) and -o OUT (see --help)\n");
        return VC_EXIT_USAGE;
    }
    char err[1024];
    struct spool *sps[16];
    size_t n = 0;
    int rc = 0;
    for (int i = optind; i < argc && rc == 0; i++, n++)
        if (spool_open(&sps[n], argv[i], err, sizeof err) != 0)
            rc = -1;
    if (rc != 0) {
        fprintf(stderr, "vcattach recover: %s\n", err);
        for (size_t k = 0; k + 1 < n; k++)
            spool_close(sps[k], 0);
        return VC_EXIT_FAIL;
    }
    struct trace_sink sink;
    memset(&sink, 0, sizeof sink);
    sink.fd = -1;
    if (sink_open_file(&sink, out, force, err, sizeof err) != 0) {
        fprintf(stderr, "vcattach recover: %s\n", err);
        for (size_t k = 0; k < n; k++)
            spool_close(sps[k], 0);
        return VC_EXIT_USAGE;
    }
    sink_remove_on_signal(&sink);
    struct spool_stats st;
    rc = spool_build_many(sps, n, last_ms * 1000000u, sink_adapter, &sink, &st, err, sizeof err);
    if (rc == 0)
        rc = sink_commit(&sink, err, sizeof err);
    for (size_t k = 0; k < n; k++)
        spool_close(sps[k], 0);
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

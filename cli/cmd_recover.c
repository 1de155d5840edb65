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
#include "human.h"
#include "say.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vcattach recover SPOOL... -o OUT [--last DUR] [--max-trace-mb N] [--force] [--quiet]\n\n"
            "Builds a .cvf from the spool (OUT.spool) that a streaming `vcattach trace` keeps\n"
            "next to its output while it traces, and leaves behind when it does not finish\n"
            "(killed, Ctrl-C twice, a failure): the trace holds every call spooled up to then.\n"
            "With --last there are two: give OUT.spool.prev then OUT.spool.\n"
            "A --subprocesses trace leaves one per process (OUT.PID.spool): recover each, then\n"
            "`vcattach convert A.cvf B.cvf... -o OUT` merges them.\n\n"
            "  -o, --output OUT  the .cvf to write (required)\n"
            "  --last DUR        keep only the calls that ended in the final DUR\n"
            "  --max-trace-mb N  OUT may take at most N MiB (default: 8 times the spools'\n"
            "                    size and 64 MiB; a spool that claims more is not vcattach's)\n"
            "  -f, --force       replace OUT if it exists\n"
            "  -q, --quiet       no summary line\n"
            "  -h, --help        this text\n\n"
            "exit codes: 0 written; 1 the spool could not be read or OUT written; 2 usage\n");
}

/* OUT is made of what the spools hold: a .cvf measured 0.67-0.93 of its spool, and a call
 * takes at least 2 bytes in a spool and at most ~16 in a .cvf.  So unless --max-trace-mb says
 * otherwise OUT may take RATIO times the spools' size and SLACK more; beyond, the spools lie. */
#define OUT_RATIO 8
#define MAX_SPOOLS 16 /* two generations of --last, or a tree's members recovered together */
#define OUT_SLACK ((uint64_t)64 << 20)

struct capped_sink {
    struct trace_sink *sink;
    uint64_t written, cap;
    int over; /* a write would have passed cap */
};

static int sink_adapter(void *ctx, const void *data, size_t len)
{
    struct capped_sink *c = ctx;
    char err[256];
    if (len > c->cap - c->written) {
        c->over = 1;
        return -1;
    }
    c->written += len;
    return sink_write(c->sink, data, len, err, sizeof err) == 0 ? 0 : -1;
}

struct recover_args {
    const char *out;
    int force, quiet;
    uint64_t last_ms;
    unsigned max_mb;
    char **spools;
    size_t nspools;
};

/* The command line.  -1 (help printed: exit 0), 0, or an exit code after printing why. */
static int parse(int argc, char **argv, struct recover_args *a)
{
    static const struct option longs[] = {{"output", 1, 0, 'o'}, {"force", 0, 0, 'f'},
                                           {"last", 1, 0, 'l'}, {"max-trace-mb", 1, 0, 'm'},
                                           {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'},
                                           {0, 0, 0, 0}};
    char perr[256];
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:fqh", longs, NULL)) != -1) {
        switch (c) {
        case 'o': a->out = optarg; break;
        case 'f': a->force = 1; break;
        case 'q': a->quiet = 1; break;
        case 'l':
            if (cli_parse_duration(optarg, &a->last_ms, perr, sizeof perr) != 0) {
                say("vcattach recover: --last: %s\n", perr);
                return VC_EXIT_USAGE;
            }
            break;
        case 'm':
            if (cli_parse_uint(optarg, "trace size cap (MiB)", 1, 1u << 20, &a->max_mb, perr,
                               sizeof perr) != 0) {
                say("vcattach recover: --max-trace-mb: %s\n", perr);
                return VC_EXIT_USAGE;
            }
            break;
        case 'h': usage(stdout); return -1;
        default:
            say("vcattach recover: unknown or incomplete option %s (see --help)\n",
                argv[optind - 1]);
            return VC_EXIT_USAGE;
        }
    }
    if (optind >= argc || a->out == NULL || argc - optind > MAX_SPOOLS) {
        say("vcattach recover: needs SPOOL... (at most %d) and -o OUT (see --help)\n",
            MAX_SPOOLS);
        return VC_EXIT_USAGE;
    }
    a->spools = argv + optind;
    a->nspools = (size_t)(argc - optind);
    return 0;
}

/* OUT from the opened spools, through the sink; their size gives OUT's default cap. */
static int build(const struct recover_args *a, struct spool **sps, struct trace_sink *sink,
                 struct spool_stats *st, char *err, size_t errlen)
{
    uint64_t spooled = 0;
    for (size_t k = 0; k < a->nspools; k++) {
        uint64_t records, dropped, disk;
        spool_progress(sps[k], &records, &dropped, &disk);
        spooled += disk;
    }
    struct capped_sink capped = {sink, 0, a->max_mb ? (uint64_t)a->max_mb << 20
                                                    : spooled * OUT_RATIO + OUT_SLACK, 0};
    int rc = spool_build_many(sps, a->nspools, a->last_ms * 1000000u, sink_adapter, &capped,
                              st, err, errlen);
    if (rc != 0 && capped.over)
        snprintf(err, errlen, "OUT would pass %llu MiB (%s): the spool claims more calls "
                 "than it holds; nothing was written", (unsigned long long)(capped.cap >> 20),
                 a->max_mb ? "--max-trace-mb" : "8 times its size and 64 MiB; --max-trace-mb "
                                                "raises it");
    return rc == 0 ? sink_commit(sink, err, errlen) : rc;
}

int cmd_recover(int argc, char **argv)
{
    struct recover_args a = {0};
    int rc = parse(argc, argv, &a);
    if (rc != 0)
        return rc < 0 ? VC_EXIT_OK : rc;
    char err[1024];
    struct spool *sps[MAX_SPOOLS];
    size_t n = 0;
    while (n < a.nspools && spool_open(&sps[n], a.spools[n], err, sizeof err) == 0)
        n++;
    struct trace_sink sink = {.fd = -1};
    int exit_code = n < a.nspools ? VC_EXIT_FAIL : 0;
    if (exit_code == 0 && sink_open_file(&sink, a.out, a.force, err, sizeof err) != 0)
        exit_code = VC_EXIT_USAGE;
    struct spool_stats st;
    if (exit_code == 0) {
        sink_remove_on_signal(&sink);
        if (build(&a, sps, &sink, &st, err, sizeof err) != 0) {
            sink_abort(&sink);
            exit_code = VC_EXIT_FAIL;
        }
    }
    for (size_t k = 0; k < n; k++)
        spool_close(sps[k], 0);
    if (exit_code != 0) {
        say("vcattach recover: %s\n", err);
        return exit_code;
    }
    char refused[512];
    if (spool_refusals(&st, refused, sizeof refused))
        say("vcattach recover: %s\n", refused);
    if (!a.quiet) {
        char size[32];
        say_out("vcattach recover: %llu events, %llu threads, %llu dropped, %llu unnamed, %s -> "
                "%s\n", (unsigned long long)st.events, (unsigned long long)st.threads,
                (unsigned long long)(st.dropped + st.unthreaded), (unsigned long long)st.unnamed,
                vc_human_bytes(st.cvf_bytes, size, sizeof size), sink.path);
    }
    return VC_EXIT_OK;
}

/* cli.c — option parsing and help texts for `vcattach trace|start|stop|status` (see cli.h).
 *
 * Every rejection is one line on stderr that names the bad argument and says what would be
 * accepted, and returns the usage exit code; nothing here touches the target.  Numbers are
 * parsed by hand (no strtod) so that "1e3s", " 5s", "5 s" or a locale's decimal comma never
 * slip through as something the operator did not mean.
 */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

static const char *mode_name(enum cli_mode mode)
{
    switch (mode) {
    case CLI_TRACE: return "trace";
    case CLI_START: return "start";
    case CLI_STOP: return "stop";
    case CLI_STATUS: return "status";
    }
    return "?";
}

static void print_help(enum cli_mode mode)
{
    switch (mode) {
    case CLI_TRACE:
        printf(
            "usage: vcattach [trace] --pid PID [-t DURATION] [-o OUT] [options]\n\n"
            "Attach to the live CPython process PID, record every Python and C call on every\n"
            "thread for DURATION (without -t: until Ctrl-C), detach, and write the trace.\n"
            "The process keeps running throughout; nothing is left behind in it.\n\n"
            "options:\n"
            "  -p, --pid PID         the process to trace (required)\n"
            "  -t, --duration DUR    how long: 10s, 500ms, 2m, 1.5s, 1h (a bare number is\n"
            "                        seconds); without it, trace until Ctrl-C\n"
            "  -o, --output OUT      the .cvf file to write (default vcattach-PID-DATE-TIME.cvf),\n"
            "                        or unix:/path/to/socket to stream it to a listening socket\n"
            "      --method M        ptrace (default) or gdb (fallback injection through gdb)\n"
            "      --buffer-mb N     record buffer for all threads, in MiB (default: the agent's,\n"
            "                        256); when full the oldest records are dropped and counted\n"
            "      --hook H          auto (default), profile (PyEval_SetProfile), or monitoring\n"
            "                        (sys.monitoring, Python 3.12+)\n"
            "  -f, --force           replace OUT if it exists\n"
            "  -q, --quiet           no status line and no summary\n"
            "  -v, --verbose         progress of the injection on stderr\n"
            "  -h, --help            this text\n\n"
            "Ctrl-C (or SIGTERM) stops early and still writes the trace; a second one abandons\n"
            "it: the agent then writes OUT.partial.cvf itself (OUT without its .cvf suffix), as\n"
            "it does if vcattach is killed.  OUT is written as OUT.tmp, then renamed.\n\n"
            "A target in another mount namespace (a container, a service with PrivateTmp) gets\n"
            "its control socket in its own /tmp, and a copy of the agent there when it cannot\n"
            "see this one.  `vcattach status|stop` find a session by the target's own pid.\n\n"
            "exit codes: 0 trace written; 1 failure on the target side (injection, agent, target\n"
            "exited, I/O); 2 usage error or a failed preflight check (nothing was touched)\n");
        break;
    case CLI_START:
        printf(
            "usage: vcattach start --pid PID [-t DURATION] [-o OUT] [options]\n\n"
            "Attach and return at once, leaving the agent tracing: the agent itself writes OUT\n"
            "when DURATION has passed (default 60s, at most 24h) or at `vcattach stop --pid PID`.\n"
            "OUT is written by the target process, as the target's user.\n\n"
            "options: -p/--pid, -t/--duration, -o/--output (a file path; default\n"
            "vcattach-PID-DATE-TIME.cvf), --method, --buffer-mb, --hook, -f/--force, -q, -v, -h\n"
            "(as for `vcattach trace --help`)\n\n"
            "exit codes: 0 tracing; 1 failure on the target side; 2 usage or preflight error\n");
        break;
    case CLI_STOP:
        printf(
            "usage: vcattach stop --pid PID [-q]\n\n"
            "Stop the session started in PID by `vcattach start`, wait for the agent to write its\n"
            "trace (at most 60s), and print the summary.\n\n"
            "exit codes: 0 stopped and written; 1 no session running, or the agent failed;\n"
            "2 usage error\n");
        break;
    case CLI_STATUS:
        printf(
            "usage: vcattach status --pid PID [-q]\n\n"
            "Tell whether a vcattach session is running in PID, with its elapsed and remaining\n"
            "time and its output.\n\n"
            "exit codes: 0 a session is running; 1 no session is running; 2 usage error\n");
        break;
    }
}

static int usage_error(enum cli_mode mode, const char *msg)
{
    fprintf(stderr, "vcattach %s: %s (see vcattach %s --help)\n", mode_name(mode), msg,
            mode_name(mode));
    return 2;
}

int cli_parse_pid(const char *text, pid_t *pid, char *err, size_t errlen)
{
    unsigned v;
    if (cli_parse_uint(text, "pid", 1, INT_MAX, &v, err, errlen) < 0)
        return -1;
    *pid = (pid_t)v;
    return 0;
}

int cli_parse_uint(const char *text, const char *what, unsigned min, unsigned max, unsigned *out,
                   char *err, size_t errlen)
{
    uint64_t v = 0;
    const char *p = text;
    if (!*p) {
        snprintf(err, errlen, "empty %s: give a number", what);
        return -1;
    }
    for (; *p; p++) {
        if (*p < '0' || *p > '9') {
            snprintf(err, errlen, "bad %s '%s': give a whole number from %u to %u", what, text,
                     min, max);
            return -1;
        }
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > max)
            break;
    }
    if (v < min || v > max) {
        snprintf(err, errlen, "%s '%s' is out of range: give a number from %u to %u", what, text,
                 min, max);
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}

int cli_parse_duration(const char *text, uint64_t *ms, char *err, size_t errlen)
{
    /* value = whole + frac / frac_scale, in units of `unit_ms` */
    uint64_t whole = 0, frac = 0, frac_scale = 1;
    const char *p = text;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        whole = whole * 10 + (uint64_t)(*p - '0');
        if (whole > CLI_DURATION_MAX_MS)
            goto too_long;
    }
    if (*p == '.') {
        p++;
        for (; *p >= '0' && *p <= '9'; p++, digits++) {
            if (frac_scale < 1000000) { /* microsecond precision is plenty */
                frac = frac * 10 + (uint64_t)(*p - '0');
                frac_scale *= 10;
            }
        }
    }
    uint64_t unit_ms;
    if (!strcmp(p, "ms"))
        unit_ms = 1;
    else if (!strcmp(p, "s") || !*p)
        unit_ms = 1000;
    else if (!strcmp(p, "m") || !strcmp(p, "min"))
        unit_ms = 60 * 1000;
    else if (!strcmp(p, "h"))
        unit_ms = 3600 * 1000;
    else
        digits = 0;
    if (digits == 0) {
        snprintf(err, errlen,
                 "bad duration '%s': give a number with a unit, like 10s, 500ms, 2m, 1.5s or 1h",
                 text);
        return -1;
    }
    if (whole > CLI_DURATION_MAX_MS / unit_ms)
        goto too_long;
    uint64_t total = whole * unit_ms + (frac * unit_ms) / frac_scale;
    if (total > CLI_DURATION_MAX_MS)
        goto too_long;
    if (total == 0) {
        snprintf(err, errlen, "duration '%s' is zero: give at least 1ms", text);
        return -1;
    }
    *ms = total;
    return 0;
too_long:
    snprintf(err, errlen, "duration '%s' is too long: at most 24h", text);
    return -1;
}

void cli_format_duration(uint64_t ms, char *buf, size_t cap)
{
    if (ms < 1000)
        snprintf(buf, cap, "%ums", (unsigned)ms);
    else if (ms < 60 * 1000)
        snprintf(buf, cap, "%.1fs", (double)ms / 1000.0);
    else if (ms < 3600 * 1000)
        snprintf(buf, cap, "%um%02us", (unsigned)(ms / 60000), (unsigned)(ms / 1000 % 60));
    else
        snprintf(buf, cap, "%uh%02um", (unsigned)(ms / 3600000), (unsigned)(ms / 60000 % 60));
}

void cli_format_bytes(uint64_t bytes, char *buf, size_t cap)
{
    if (bytes < 1024)
        snprintf(buf, cap, "%u B", (unsigned)bytes);
    else if (bytes < 1024 * 1024)
        snprintf(buf, cap, "%.1f KiB", (double)bytes / 1024.0);
    else if (bytes < 1024ull * 1024 * 1024)
        snprintf(buf, cap, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
    else
        snprintf(buf, cap, "%.2f GiB", (double)bytes / (1024.0 * 1024.0 * 1024.0));
}

int cli_parse(enum cli_mode mode, int argc, char **argv, struct cli_options *opt)
{
    enum { OPT_METHOD = 256, OPT_BUFFER, OPT_HOOK };
    static const struct option longopts[] = {
        {"pid", required_argument, NULL, 'p'},
        {"duration", required_argument, NULL, 't'},
        {"output", required_argument, NULL, 'o'},
        {"method", required_argument, NULL, OPT_METHOD},
        {"buffer-mb", required_argument, NULL, OPT_BUFFER},
        {"hook", required_argument, NULL, OPT_HOOK},
        {"force", no_argument, NULL, 'f'},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char err[256], msg[320];
    int has_pid = 0;
    memset(opt, 0, sizeof *opt);
    opt->mode = mode;
    opt->hook = "auto";
    opt->method = CLI_METHOD_PTRACE;
    /* Only trace and start take the tracing options; stop and status take --pid and -q. */
    int full = mode == CLI_TRACE || mode == CLI_START;

    optind = 0; /* glibc: full re-initialisation (the parser may run more than once in tests) */
    opterr = 0; /* our own messages, one line each */
    int c;
    while ((c = getopt_long(argc, argv, "+:p:t:o:fqvh", longopts, NULL)) != -1) {
        if (!full && c != 'p' && c != 'q' && c != 'h' && c != '?' && c != ':') {
            snprintf(msg, sizeof msg, "option '%s' does not apply to %s", argv[optind - 1],
                     mode_name(mode));
            return usage_error(mode, msg);
        }
        switch (c) {
        case 'p':
            if (cli_parse_pid(optarg, &opt->pid, err, sizeof err) < 0)
                return usage_error(mode, err);
            has_pid = 1;
            break;
        case 't':
            if (cli_parse_duration(optarg, &opt->duration_ms, err, sizeof err) < 0)
                return usage_error(mode, err);
            break;
        case 'o':
            if (!*optarg)
                return usage_error(mode, "empty output path: give a file name or unix:/path");
            opt->output = optarg;
            break;
        case OPT_METHOD:
            if (!strcmp(optarg, "ptrace"))
                opt->method = CLI_METHOD_PTRACE;
            else if (!strcmp(optarg, "gdb"))
                opt->method = CLI_METHOD_GDB;
            else {
                snprintf(msg, sizeof msg, "unknown method '%s': use ptrace or gdb", optarg);
                return usage_error(mode, msg);
            }
            break;
        case OPT_BUFFER:
            if (cli_parse_uint(optarg, "buffer size (MiB)", 1, 65536, &opt->buffer_mb, err,
                               sizeof err) < 0)
                return usage_error(mode, err);
            break;
        case OPT_HOOK:
            if (strcmp(optarg, "auto") && strcmp(optarg, "profile") &&
                strcmp(optarg, "monitoring")) {
                snprintf(msg, sizeof msg, "unknown hook '%s': use auto, profile or monitoring",
                         optarg);
                return usage_error(mode, msg);
            }
            opt->hook = optarg;
            break;
        case 'f': opt->force = 1; break;
        case 'q': opt->quiet = 1; break;
        case 'v': opt->verbose = 1; break;
        case 'h': print_help(mode); return 1;
        case ':':
            snprintf(msg, sizeof msg, "option '%s' needs a value", argv[optind - 1]);
            return usage_error(mode, msg);
        default:
            if (optopt && optopt < 256)
                snprintf(msg, sizeof msg, "unknown option '-%c'", optopt);
            else
                snprintf(msg, sizeof msg, "unknown option '%s'", argv[optind - 1]);
            return usage_error(mode, msg);
        }
    }
    if (optind < argc) {
        snprintf(msg, sizeof msg, "unexpected argument '%s'", argv[optind]);
        return usage_error(mode, msg);
    }
    if (!has_pid)
        return usage_error(mode, "which process? give --pid PID");
    if (mode == CLI_START) {
        if (opt->duration_ms == 0)
            opt->duration_ms = CLI_START_DEFAULT_MS;
        if (opt->output && !strncmp(opt->output, "unix:", 5))
            return usage_error(mode, "start writes a file (the agent writes it itself): "
                                     "use `vcattach trace` to stream to a socket");
    }
    return 0;
}

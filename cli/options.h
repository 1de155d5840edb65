/* cli.h — the command line of the attach workflow (trace, start, stop, status): option
 * parsing, duration and number parsing, and each subcommand's --help text.
 *
 * Kept apart from cmd_trace.c so that the workflow reads as a sequence of steps and every
 * parse rule lives in one place, with one error message per kind of bad input.
 */
#ifndef VC_CLI_H
#define VC_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum cli_mode { CLI_TRACE, CLI_START, CLI_STOP, CLI_STATUS };
enum cli_method { CLI_METHOD_PTRACE, CLI_METHOD_GDB };

/* The longest accepted duration: a session that runs for days is a mistake, not a trace. */
#define CLI_DURATION_MAX_MS (24ull * 3600 * 1000)
/* `vcattach start` without -t: a detached session must always end by itself. */
#define CLI_START_DEFAULT_MS (60ull * 1000)

struct cli_options {
    enum cli_mode mode;
    pid_t pid;
    uint64_t duration_ms;  /* 0: until Ctrl-C (trace only) */
    const char *output;    /* NULL: the default name; "unix:/path" streams to a socket */
    enum cli_method method;
    unsigned buffer_mb;    /* 0: the agent's default */
    const char *hook;      /* "auto" | "profile" | "monitoring" */
    int force;
    int quiet;
    int verbose;
};

/* Parses argv (argv[0] = the subcommand name) for `mode`.  Returns 0 and fills *opt;
 * 1 when --help was printed (exit 0); 2 on a usage error, after printing one line naming the
 * problem and the fix on stderr. */
int cli_parse(enum cli_mode mode, int argc, char **argv, struct cli_options *opt);

/* "10s", "500ms", "2m", "1.5s", "1h", or a bare number of seconds.  Returns 0 and *ms (> 0,
 * at most CLI_DURATION_MAX_MS), or -1 with a one-line reason in err. */
int cli_parse_duration(const char *text, uint64_t *ms, char *err, size_t errlen);

/* A positive decimal pid that fits pid_t.  Returns 0 or -1 with err. */
int cli_parse_pid(const char *text, pid_t *pid, char *err, size_t errlen);

/* A decimal integer in [min, max].  Returns 0 or -1 with err (names `what`). */
int cli_parse_uint(const char *text, const char *what, unsigned min, unsigned max, unsigned *out,
                   char *err, size_t errlen);

/* "1.5s", "250ms", "3m20s": a duration for people (status lines and summaries). */
void cli_format_duration(uint64_t ms, char *buf, size_t cap);

/* "812 B", "3.4 KiB", "12.0 MiB". */
void cli_format_bytes(uint64_t bytes, char *buf, size_t cap);

#endif /* VC_CLI_H */

/* options.h — the one option parser of every `vcattach` subcommand, and the value parsers
 * (durations, pids, bounded numbers) the subcommands share (the formatters of what they print
 * are common/human.h's, shared with trace/'s reports).
 *
 * Each subcommand describes its options in a table (struct opt_spec) and gets them back one
 * at a time through a callback, in argv order; parsing itself is getopt_long's (GNU style:
 * -x V, --name V, --name=V, options and operands in any order, `--` ends the options), so
 * every subcommand accepts the same spellings and rejects bad input with the same kind of
 * message: one line, "vcattach CMD: what is wrong (see vcattach CMD --help)", exit code 2.
 */
#ifndef VC_OPTIONS_H
#define VC_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* One option of a subcommand.  -h/--help is implicit: every subcommand has it. */
struct opt_spec {
    const char *name;  /* long name, without "--" */
    char short_name;   /* the one-letter form, or 0 */
    int has_value;     /* 1: takes a value */
    int id;            /* handed to the callback: the letter, or a constant >= 256 */
};

/* Called once per option given; value is NULL for a flag.  Returns 0, or -1 with the reason
 * (one line, without the "vcattach CMD: " prefix) in err. */
typedef int (*opt_fn)(void *ctx, const struct opt_spec *o, const char *value, char *err,
                      size_t errlen);

/* A subcommand's command line: its name, its options, its --help text. */
struct opt_command {
    const char *name;                /* "convert": used in every message */
    const struct opt_spec *specs;
    size_t nspecs;
    void (*help)(FILE *out);
};

/* Parses argv (argv[0] = the subcommand name).  Operands (arguments that are not options)
 * end up, in order, in argv[*first_operand .. argc).  Returns 0; 1 after printing --help on
 * stdout (exit 0); 2 after printing one usage error on stderr. */
int opt_parse(const struct opt_command *cmd, int argc, char **argv, opt_fn on_option, void *ctx,
              int *first_operand);

/* opt_parse for a command that needs at least one operand (the offline commands' files):
 * none is a usage error whose message is `missing`.  Returns as opt_parse; on 0 the operands
 * are operands[0 .. *n). */
int opt_parse_operands(const struct opt_command *cmd, int argc, char **argv, opt_fn on_option,
                       void *ctx, const char *missing, const char *const **operands, size_t *n);

/* Prints "vcattach CMD: MESSAGE (see vcattach CMD --help)" on stderr; returns 2, the usage
 * exit code, so that callers can `return opt_usage_error(...)`. */
int opt_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The longest accepted duration: a session that runs for days is a mistake, not a trace. */
#define CLI_DURATION_MAX_MS (24ull * 3600 * 1000)

/* "10s", "500ms", "2m", "1.5s", "1h", or a bare number of seconds.  Returns 0 and *ms (> 0,
 * at most CLI_DURATION_MAX_MS), or -1 with a one-line reason in err. */
int cli_parse_duration(const char *text, uint64_t *ms, char *err, size_t errlen);

/* A positive decimal pid that fits pid_t.  Returns 0 or -1 with err. */
int cli_parse_pid(const char *text, pid_t *pid, char *err, size_t errlen);

/* A decimal integer in [min, max].  Returns 0 or -1 with err (names `what`). */
int cli_parse_uint(const char *text, const char *what, unsigned min, unsigned max, unsigned *out,
                   char *err, size_t errlen);

#endif /* VC_OPTIONS_H */

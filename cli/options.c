/* options.c — the one option parser of the subcommands, and the shared value parsers (see
 * options.h).
 *
 * Every rejection is one line on stderr that names the bad argument and says what would be
 * accepted, and returns the usage exit code; nothing here touches a process or a file.
 * Numbers are parsed by hand (no strtod) so that "1e3s", " 5s", "5 s" or a locale's decimal
 * comma never slip through as something the operator did not mean.
 */
#include "options.h"
#include "say.h"

#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bounds the tables: no subcommand has more options than this. */
#define OPT_MAX 32

int opt_usage_error(const char *command, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    say("vcattach %s: %s (see vcattach %s --help)\n", command, msg, command);
    return 2;
}

int opt_parse(const struct opt_command *cmd, int argc, char **argv, opt_fn on_option, void *ctx,
              int *first_operand)
{
    enum { ID_HELP = 1000 }; /* not -1: getopt_long returns -1 at the end */
    struct option longopts[OPT_MAX + 2];
    /* ':' first: a missing value is reported as ':' (not '?'), so it gets its own message */
    char shorts[3 * OPT_MAX + 4] = ":h";
    size_t ns = 2, n = cmd->nspecs < OPT_MAX ? cmd->nspecs : OPT_MAX;
    for (size_t i = 0; i < n; i++) {
        const struct opt_spec *o = &cmd->specs[i];
        longopts[i] = (struct option){o->name, o->has_value ? required_argument : no_argument,
                                      NULL, (int)i};
        if (o->short_name) {
            shorts[ns++] = o->short_name;
            if (o->has_value)
                shorts[ns++] = ':';
        }
    }
    shorts[ns] = '\0';
    longopts[n] = (struct option){"help", no_argument, NULL, ID_HELP};
    longopts[n + 1] = (struct option){NULL, 0, NULL, 0};

    optind = 0; /* glibc: full re-initialisation (a parser may run more than once) */
    opterr = 0; /* our own messages, one line each */
    char err[400];
    int c, idx = -1;
    while ((c = getopt_long(argc, argv, shorts, longopts, &idx)) != -1) {
        const struct opt_spec *o = NULL;
        if (c >= 0 && (size_t)c < n && idx >= 0) /* a long option: c is its table index */
            o = &cmd->specs[c];
        else if (c == ID_HELP || c == 'h') {
            cmd->help(stdout);
            return 1;
        } else if (c == ':') {
            return opt_usage_error(cmd->name, "option '%s' needs a value", argv[optind - 1]);
        } else if (c == '?') {
            /* A short option: optopt is its letter.  A long one: optopt is the matched
             * option's val (a table index, ID_HELP) or 0, and argv[optind - 1] its text. */
            if (optopt > (int)n && optopt < 256)
                return opt_usage_error(cmd->name, "unknown option '-%c'", optopt);
            const char *text = argv[optind - 1];
            if (strchr(text, '='))
                return opt_usage_error(cmd->name, "bad option '%s': unknown, or a flag given "
                                                  "a value", text);
            return opt_usage_error(cmd->name, "unknown option '%s'", text);
        } else {
            for (size_t i = 0; i < n && !o; i++)
                if (cmd->specs[i].short_name && cmd->specs[i].short_name == c)
                    o = &cmd->specs[i];
        }
        idx = -1;
        if (!o) /* cannot happen: every letter in `shorts` is in the table */
            return opt_usage_error(cmd->name, "unknown option '-%c'", c);
        if (on_option(ctx, o, o->has_value ? optarg : NULL, err, sizeof err) < 0)
            return opt_usage_error(cmd->name, "%s", err);
    }
    *first_operand = optind;
    return 0;
}

int opt_parse_operands(const struct opt_command *cmd, int argc, char **argv, opt_fn on_option,
                       void *ctx, const char *missing, const char *const **operands, size_t *n)
{
    int first;
    int rc = opt_parse(cmd, argc, argv, on_option, ctx, &first);
    if (rc)
        return rc;
    if (first == argc)
        return opt_usage_error(cmd->name, "%s", missing);
    *operands = (const char *const *)(argv + first);
    *n = (size_t)(argc - first);
    return 0;
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

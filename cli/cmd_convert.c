/* cmd_convert.c — `vcattach convert IN... [-o OUT] [--format F] [--force] [--quiet]`.
 *
 * Owns the command line of conversion and what is the command line's around it: where the
 * output goes and the promise that a failed conversion leaves nothing behind (the output goes
 * through the one atomic-output path, trace_sink.c: OUT.tmp created O_EXCL|O_NOFOLLOW, fsync,
 * rename; removed on an error or a fatal signal), and the progress line.  The conversion
 * itself (the input, its direction, the options that fit it, the window, the tracks, the
 * formats) is libvctrace's (vct_convert_*, trace/include/vctrace.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "options.h"
#include "say.h"
#include "text.h"
#include "trace_sink.h"
#include "vctrace.h"

#define PROGRESS_MIN_BYTES (50u << 20)

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vcattach convert IN... [-o OUT] [--format FORMAT] [--from S] [--to S]\n"
            "                        [--min-dur DUR] [--requests [--entry GLOB]] [--tasks]\n"
            "                        [--force] [--quiet]\n\n"
            "Several inputs (.cvf or JSON: traces of processes taken separately) are merged into\n"
            "one trace, written to OUT (-o required).\n"
            "Converts between VizTracer's compressed .cvf format and Chrome trace JSON.\n"
            "The direction comes from IN's contents, not its name:\n"
            "  .cvf  (starts with the version word 1) -> FORMAT (default chrome)\n"
            "  JSON  ({\"traceEvents\": [...]} or a bare [...] list of events) -> .cvf,\n"
            "        grouped like VizTracer's compressor (`viztracer --compress`)\n\n"
            "options:\n"
            "  -o, --output OUT  output file; '-' writes to stdout.  Default: IN with its\n"
            "                 extension replaced (.cvf <-> .json)\n"
            "  --format F     output format for a .cvf input:\n");
    size_t nformats;
    const vct_format_info *formats = vct_convert_formats(&nformats);
    for (size_t i = 0; i < nformats; i++)
        fprintf(out, "                   %-10s %s\n", formats[i].name, formats[i].summary);
    fprintf(out,
            "  --from S       only the calls running at or after S seconds into the trace\n"
            "                 (counted from its first call; units: s, ms, us); calls that\n"
            "                 began earlier are clipped to S\n"
            "  --to S         only the calls running at or before S seconds into the trace\n"
            "  --min-dur DUR  leave out calls shorter than DUR (like 100us, 1ms, 0.5s)\n"
            "                 (--from/--to/--min-dur apply to a .cvf input)\n"
            "  --merged       svg: one flame graph for all threads (default: one per thread)\n"
            "  --working      svg, collapsed, speedscope: weigh each stack by its on-CPU time\n"
            "                 (exact from scheduler events, else sampled) instead of its wall\n"
            "                 time: what blocked shrinks to what it ran, the work stands out\n"
            "  --requests     chrome: one slice per request (what `vcattach requests` lists)\n"
            "                 on a track of its own, \"requests\", in each process\n"
            "  --entry GLOB   with --requests: the function that is one request (as in\n"
            "                 `vcattach requests --entry`; default: the known servers)\n"
            "  --tasks        chrome only (the JSON Perfetto and chrome://tracing open; not\n"
            "                 speedscope, collapsed or svg): each asyncio task's steps (a\n"
            "                 resume slice, or its first call, with all it calls) move from\n"
            "                 their thread's track to one per task, \"task NAME COROUTINE\"\n"
            "                 (same pid, tid 2000000000 + the task's id: no Linux tid is that\n"
            "                 high); the rest stays on its thread.  Needs a trace with task\n"
            "                 markers (agents that record them); without, nothing moves\n"
            "  -f, --force    replace OUT if it exists (otherwise an existing OUT is an error);\n"
            "                 also: convert a .cvf whose JSON would pass ~1 GiB (refused\n"
            "                 without it: --from/--to, --min-dur or --format svg instead)\n"
            "  -q, --quiet    no progress line (printed on stderr for inputs over 50 MB)\n"
            "  -h, --help     this text\n\n"
            "OUT is written to OUT.tmp in the same directory and renamed when complete; on any\n"
            "error nothing is left behind.  Exit codes: 0 ok, 1 conversion failed (bad input,\n"
            "I/O error), 2 usage error.\n");
}

/* ---- command line ------------------------------------------------------------------------ */

struct convert_args {
    vct_convert_options o;
    const char *out;
    bool quiet;
};

enum {
    OPT_FORMAT = 256, OPT_FROM, OPT_TO, OPT_MIN_DUR, OPT_MERGED, OPT_WORKING, OPT_REQUESTS, OPT_ENTRY,
    OPT_TASKS
};

static const struct opt_spec convert_specs[] = {
    {"output", 'o', 1, 'o'},
    {"format", 0, 1, OPT_FORMAT},
    {"from", 0, 1, OPT_FROM},
    {"to", 0, 1, OPT_TO},
    {"min-dur", 0, 1, OPT_MIN_DUR},
    {"merged", 0, 0, OPT_MERGED},
    {"working", 0, 0, OPT_WORKING},
    {"requests", 0, 0, OPT_REQUESTS},
    {"entry", 0, 1, OPT_ENTRY},
    {"tasks", 0, 0, OPT_TASKS},
    {"force", 'f', 0, 'f'},
    {"quiet", 'q', 0, 'q'},
};

static const struct opt_command convert_command = {
    "convert", convert_specs, sizeof convert_specs / sizeof convert_specs[0], usage};

/* "1.5", "1.5s", "250ms", "100us" / "100µs" (a bare number is seconds), zero allowed, into
 * ticks of 10 ns.  0, or -1 with err. */
static int parse_time(const char *opt, const char *text, int64_t *ticks, char *err,
                      size_t errlen)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    double scale = 0; /* ticks per unit */
    if (end != text && text[0] != '-' && text[0] != '+' && errno == 0) {
        if (!*end || !strcmp(end, "s"))
            scale = 1e8;
        else if (!strcmp(end, "ms"))
            scale = 1e5;
        else if (!strcmp(end, "us") || !strcmp(end, "µs"))
            scale = 1e2;
    }
    if (scale == 0 || !(v >= 0) || v * scale > 9.2e18) {
        snprintf(err, errlen, "--%s takes a time like 1.5 (seconds), 250ms or 100us, not '%s'",
                 opt, text);
        return -1;
    }
    *ticks = (int64_t)(v * scale + 0.5);
    return 0;
}

static int on_option(void *ctx, const struct opt_spec *o, const char *value, char *err,
                     size_t errlen)
{
    struct convert_args *a = ctx;
    switch (o->id) {
    case 'o': a->out = value; return 0;
    case OPT_MERGED: a->o.merged = 1; return 0;
    case OPT_WORKING: a->o.working = 1; return 0;
    case OPT_REQUESTS: a->o.requests = 1; return 0;
    case OPT_TASKS: a->o.tasks = 1; return 0;
    case OPT_ENTRY:
        if (!*value) {
            snprintf(err, errlen, "--entry needs a glob naming a function, like '*handle_request*'");
            return -1;
        }
        a->o.entry = value;
        return 0;
    case OPT_FROM:
    case OPT_TO:
    case OPT_MIN_DUR: {
        int64_t ticks;
        if (parse_time(o->name, value, &ticks, err, errlen) < 0)
            return -1;
        a->o.windowed = 1;
        if (o->id == OPT_FROM)
            a->o.from = ticks;
        else if (o->id == OPT_TO)
            a->o.to = ticks;
        else
            a->o.min_dur = (uint64_t)ticks;
        return 0;
    }
    case OPT_FORMAT: {
        size_t n;
        const vct_format_info *formats = vct_convert_formats(&n);
        a->o.format = value;
        for (size_t i = 0; i < n; i++)
            if (!strcmp(formats[i].name, value))
                return 0;
        vc_text t;
        vc_text_fixed(&t, err, errlen);
        vc_text_printf(&t, "unknown --format '%s': use", value);
        for (size_t i = 0; i < n; i++)
            vc_text_printf(&t, "%s %s", i ? "," : "", formats[i].name);
        return -1;
    }
    case 'f': a->o.force = 1; return 0;
    case 'q': a->quiet = true; return 0;
    }
    snprintf(err, errlen, "option '--%s' is not handled", o->name);
    return -1;
}

/* Whether --format names f (or, not given, f is the default). */
static bool format_is(const struct convert_args *a, const char *f)
{
    size_t n;
    return !strcmp(a->o.format ? a->o.format : vct_convert_formats(&n)[0].name, f);
}

/* 0 with *a filled; 1 (--help printed) or 2 (usage error printed): the exit code. */
static int parse_args(int argc, char **argv, struct convert_args *a)
{
    *a = (struct convert_args){.o = {.to = -1}};
    int rc = opt_parse_operands(&convert_command, argc, argv, on_option, a,
                                "no input file (usage: vcattach convert IN [-o OUT])",
                                &a->o.paths, &a->o.npaths);
    if (rc)
        return rc;
    if (a->o.npaths > 1 && !a->out)
        return opt_usage_error("convert", "several inputs ('%s', '%s', …) are merged into one "
                                          "trace: name it with -o OUT", a->o.paths[0],
                               a->o.paths[1]);
    if (a->o.merged && !format_is(a, "svg"))
        return opt_usage_error("convert", "--merged applies to --format svg");
    if (a->o.working && !format_is(a, "svg") && !format_is(a, "collapsed") &&
        !format_is(a, "speedscope"))
        return opt_usage_error("convert", "--working applies to --format svg, collapsed or "
                                          "speedscope (stacks weighed by on-CPU time)");
    if (a->o.entry && !a->o.requests)
        return opt_usage_error("convert", "--entry names the function of --requests: add "
                                          "--requests");
    if (a->o.requests && !format_is(a, "chrome"))
        return opt_usage_error("convert", "--requests applies to --format chrome");
    if (a->o.tasks && !format_is(a, "chrome"))
        return opt_usage_error("convert", "--tasks applies to --format chrome (a track per "
                                          "task); %s has no tracks: drop --tasks",
                               a->o.format);
    if (a->o.to >= 0 && a->o.to < a->o.from)
        return opt_usage_error("convert", "--to comes before --from: nothing to write");
    return 0;
}

/* ---- progress ----------------------------------------------------------------------------- */

typedef struct progress_state {
    int last_pct;
    bool tty;
    const char *in, *out; /* named in the first line */
} progress_state;

static void show_progress(void *ctx, size_t done, size_t total)
{
    progress_state *ps = ctx;
    if (total <= PROGRESS_MIN_BYTES) /* a small input is done before a line would help */
        return;
    if (ps->last_pct < 0)
        say("vcattach convert: %s (%zu MB) -> %s\n", ps->in, total >> 20, ps->out);
    int pct = total ? (int)((double)done * 100.0 / (double)total) : 100;
    if (pct > 100)
        pct = 100;
    int step = ps->tty ? 5 : 25; /* a log gets a few lines, a terminal one live line */
    if (pct / step == ps->last_pct / step && ps->last_pct >= 0)
        return;
    ps->last_pct = pct;
    fprintf(stderr, ps->tty ? "\rvcattach convert: %3d%%" : "vcattach convert: %d%%\n", pct);
}

static void note(void *ctx, const char *line)
{
    say("vcattach convert: %s\n", line);
}

/* ---- the output --------------------------------------------------------------------------- */

/* Converts into `out` ("-": stdout) through the sink.  Returns the exit code; on failure
 * nothing is left behind. */
static int convert_to(vct_conversion *cv, const struct convert_args *a, const char *out,
                      progress_state *ps)
{
    bool to_stdout = !strcmp(out, "-");
    struct trace_sink sink = {.fd = -1};
    char msg[768], err[2048];
    if (!to_stdout) {
        if (sink_open_file(&sink, out, a->o.force, msg, sizeof msg) < 0) {
            int e = errno;
            say("vcattach convert: %s\n", msg);
            return e == EEXIST ? VC_EXIT_USAGE : VC_EXIT_FAIL;
        }
        sink_remove_on_signal(&sink);
    }
    ps->out = to_stdout ? "stdout" : out;
    int rc = vct_convert_write(cv, to_stdout ? STDOUT_FILENO : sink.fd, err, sizeof err);
    size_t size = vct_convert_input_size(cv);
    if (rc == VCT_OK && a->o.progress)
        show_progress(ps, size, size);
    if (ps->tty && ps->last_pct >= 0)
        fputc('\n', stderr);
    if (rc == VCT_OK && !to_stdout && sink_commit(&sink, msg, sizeof msg) < 0) {
        snprintf(err, sizeof err, "%s", msg);
        rc = VCT_FAILED;
    }
    if (rc != VCT_OK && !to_stdout)
        sink_abort(&sink);
    return vc_offline_exit("convert", rc, err);
}

int cmd_convert(int argc, char **argv)
{
    struct convert_args a;
    int prc = parse_args(argc, argv, &a);
    if (prc)
        return prc == 1 ? VC_EXIT_OK : VC_EXIT_USAGE;
    progress_state ps = {-1, isatty(STDERR_FILENO) != 0, NULL, NULL};
    a.o.progress = a.quiet ? NULL : show_progress;
    a.o.progress_ctx = &ps;
    a.o.note = note;
    vct_conversion *cv;
    char err[2048];
    int rc = vct_convert_open(&a.o, &cv, err, sizeof err);
    if (rc != VCT_OK)
        return vc_offline_exit("convert", rc, err);
    ps.in = vct_convert_input_name(cv);
    char *out_owned = a.out ? NULL : vct_convert_default_output(cv);
    if (a.out || out_owned)
        rc = convert_to(cv, &a, a.out ? a.out : out_owned, &ps);
    else {
        say("vcattach convert: cannot derive an output name from '%s'; give one with -o OUT\n",
            ps.in);
        rc = VC_EXIT_USAGE;
    }
    free(out_owned);
    vct_convert_close(cv);
    return rc;
}

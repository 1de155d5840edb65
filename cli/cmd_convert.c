/* cmd_convert.c — `vcattach convert IN [-o OUT] [--format F] [--force] [--quiet]`.
 *
 * Owns the command line of conversion and the steps around it: which direction (chosen from
 * the input's first bytes, not its name), where the output goes, and the promise that a
 * failed conversion leaves nothing behind: the output goes through the one atomic-output path
 * (trace_sink.c: OUT.tmp created O_EXCL|O_NOFOLLOW, fsync, rename; removed on an error or a
 * fatal signal).  The conversions themselves live in trace/ (chrome.c, json_cvf.c, export.c);
 * adding an output format is one row in `formats[]`.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "convert.h"
#include "cvf_reader.h"
#include "export.h"
#include "merge.h"
#include "options.h"
#include "request_track.h"
#include "task_track.h"
#include "trace_sink.h"
#include "window.h"

/* Output formats of a .cvf input (--format). */
static const struct format {
    const char *name;
    convert_cvf_fn run;
    const char *ext; /* default output extension */
    const char *summary;
} formats[] = {
    {"chrome", convert_cvf_to_chrome, ".json",
     "Chrome trace event JSON (Perfetto, chrome://tracing, VizTracer's vizviewer)"},
    {"speedscope", convert_cvf_to_speedscope, ".speedscope.json",
     "speedscope's own format: one evented profile per thread"},
    {"collapsed", convert_cvf_to_collapsed, ".folded",
     "folded stacks (flamegraph.pl, speedscope): self time in µs per stack"},
    {"svg", convert_cvf_to_svg, ".svg",
     "a flame graph any browser opens offline (search, click to zoom)"},
};

#define PROGRESS_MIN_BYTES (50u << 20)

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vcattach convert IN... [-o OUT] [--format FORMAT] [--from S] [--to S]\n"
            "                        [--min-dur DUR] [--requests [--entry GLOB]] [--tasks]\n"
            "                        [--force] [--quiet]\n\n"
            "Several .cvf inputs (traces of processes taken separately) are merged into one\n"
            "trace, written to OUT (-o required).\n"
            "Converts between VizTracer's compressed .cvf format and Chrome trace JSON.\n"
            "The direction comes from IN's contents, not its name:\n"
            "  .cvf  (starts with the version word 1) -> FORMAT (default chrome)\n"
            "  JSON  ({\"traceEvents\": [...]} or a bare [...] list of events) -> .cvf,\n"
            "        grouped like VizTracer's compressor (`viztracer --compress`)\n\n"
            "options:\n"
            "  -o, --output OUT  output file; '-' writes to stdout.  Default: IN with its\n"
            "                 extension replaced (.cvf <-> .json)\n"
            "  --format F     output format for a .cvf input:\n");
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        fprintf(out, "                   %-10s %s\n", formats[i].name, formats[i].summary);
    fprintf(out,
            "  --from S       only the calls running at or after S seconds into the trace\n"
            "                 (counted from its first call; units: s, ms, us); calls that\n"
            "                 began earlier are clipped to S\n"
            "  --to S         only the calls running at or before S seconds into the trace\n"
            "  --min-dur DUR  leave out calls shorter than DUR (like 100us, 1ms, 0.5s)\n"
            "                 (--from/--to/--min-dur apply to a .cvf input)\n"
            "  --merged       svg: one flame graph for all threads (default: one per thread)\n"
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
    const char *in, *out, *format_name;
    char *const *ins;  /* several .cvf inputs: merged into one trace first (trace/merge.c) */
    size_t nins;
    const struct format *fmt;
    bool force, quiet;
    bool merged;               /* --merged (svg) */
    bool requests;             /* --requests (chrome) */
    bool tasks;                /* --tasks (chrome) */
    const char *entry;         /* --entry GLOB: what a request is (NULL: requests.def) */
    bool windowed;             /* --from, --to or --min-dur given */
    int64_t from, to;          /* ticks into the trace; to < 0: to its end */
    uint64_t min_dur;          /* ticks */
};

enum {
    OPT_FORMAT = 256, OPT_FROM, OPT_TO, OPT_MIN_DUR, OPT_MERGED, OPT_REQUESTS, OPT_ENTRY,
    OPT_TASKS
};

static const struct opt_spec convert_specs[] = {
    {"output", 'o', 1, 'o'},
    {"format", 0, 1, OPT_FORMAT},
    {"from", 0, 1, OPT_FROM},
    {"to", 0, 1, OPT_TO},
    {"min-dur", 0, 1, OPT_MIN_DUR},
    {"merged", 0, 0, OPT_MERGED},
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
    case OPT_MERGED: a->merged = true; return 0;
    case OPT_REQUESTS: a->requests = true; return 0;
    case OPT_TASKS: a->tasks = true; return 0;
    case OPT_ENTRY:
        if (!*value) {
            snprintf(err, errlen, "--entry needs a glob naming a function, like '*handle_request*'");
            return -1;
        }
        a->entry = value;
        return 0;
    case OPT_FROM:
    case OPT_TO:
    case OPT_MIN_DUR: {
        int64_t ticks;
        if (parse_time(o->name, value, &ticks, err, errlen) < 0)
            return -1;
        a->windowed = true;
        if (o->id == OPT_FROM)
            a->from = ticks;
        else if (o->id == OPT_TO)
            a->to = ticks;
        else
            a->min_dur = (uint64_t)ticks;
        return 0;
    }
    case OPT_FORMAT:
        a->format_name = value;
        for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
            if (!strcmp(formats[i].name, value)) {
                a->fmt = &formats[i];
                return 0;
            }
        {
            size_t n = (size_t)snprintf(err, errlen, "unknown --format '%s': use", value);
            for (size_t i = 0; i < sizeof formats / sizeof formats[0] && n < errlen; i++)
                n += (size_t)snprintf(err + n, errlen - n, "%s %s", i ? "," : "",
                                      formats[i].name);
        }
        return -1;
    case 'f': a->force = true; return 0;
    case 'q': a->quiet = true; return 0;
    }
    snprintf(err, errlen, "option '--%s' is not handled", o->name);
    return -1;
}

/* 0 with *a filled; 1 (--help printed) or 2 (usage error printed): the exit code. */
static int parse_args(int argc, char **argv, struct convert_args *a)
{
    *a = (struct convert_args){.fmt = &formats[0], .to = -1};
    int first;
    int rc = opt_parse(&convert_command, argc, argv, on_option, a, &first);
    if (rc)
        return rc;
    if (first == argc)
        return opt_usage_error("convert", "no input file (usage: vcattach convert IN [-o OUT])");
    if (argc - first > 1 && !a->out)
        return opt_usage_error("convert", "several inputs ('%s', '%s', …) are merged into one "
                                          "trace: name it with -o OUT", argv[first],
                               argv[first + 1]);
    if (a->merged && strcmp(a->fmt->name, "svg"))
        return opt_usage_error("convert", "--merged applies to --format svg");
    if (a->entry && !a->requests)
        return opt_usage_error("convert", "--entry names the function of --requests: add "
                                          "--requests");
    if (a->requests && strcmp(a->fmt->name, "chrome"))
        return opt_usage_error("convert", "--requests applies to --format chrome");
    if (a->tasks && strcmp(a->fmt->name, "chrome"))
        return opt_usage_error("convert", "--tasks applies to --format chrome (a track per "
                                          "task); %s has no tracks: drop --tasks",
                               a->fmt->name);
    if (a->to >= 0 && a->to < a->from)
        return opt_usage_error("convert", "--to comes before --from: nothing to write");
    a->in = argv[first];
    a->ins = argv + first;
    a->nins = (size_t)(argc - first);
    return 0;
}

/* ---- progress ----------------------------------------------------------------------------- */

typedef struct progress_state {
    int last_pct;
    bool tty;
} progress_state;

static void show_progress(void *ctx, size_t done, size_t total)
{
    progress_state *ps = ctx;
    int pct = total ? (int)((double)done * 100.0 / (double)total) : 100;
    if (pct > 100)
        pct = 100;
    int step = ps->tty ? 5 : 25; /* a log gets a few lines, a terminal one live line */
    if (pct / step == ps->last_pct / step && ps->last_pct >= 0)
        return;
    ps->last_pct = pct;
    fprintf(stderr, ps->tty ? "\rvcattach convert: %3d%%" : "vcattach convert: %d%%\n", pct);
}

/* ---- the steps ---------------------------------------------------------------------------- */

enum input_kind { INPUT_CVF, INPUT_JSON, INPUT_UNKNOWN };

static enum input_kind sniff(const unsigned char *d, size_t n)
{
    static const unsigned char version1[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    if (n >= 8 && !memcmp(d, version1, 8))
        return INPUT_CVF;
    size_t i = 0;
    if (n >= 3 && d[0] == 0xEF && d[1] == 0xBB && d[2] == 0xBF)
        i = 3;
    while (i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r'))
        i++;
    if (i < n && (d[i] == '{' || d[i] == '['))
        return INPUT_JSON;
    /* a small version word other than 1: a .cvf the reader will reject by its version */
    static const unsigned char zeros[7];
    if (n >= 8 && d[0] != 0 && !memcmp(d + 1, zeros, 7))
        return INPUT_CVF;
    return INPUT_UNKNOWN;
}

static char *default_output(const char *in, enum input_kind kind, const char *ext)
{
    const char *slash = strrchr(in, '/');
    const char *base = slash ? slash + 1 : in;
    const char *dot = strrchr(base, '.');
    size_t stem = dot && dot != base ? (size_t)(dot - in) : strlen(in);
    const char *new_ext = kind == INPUT_CVF ? ext : ".cvf";
    char *out = malloc(stem + strlen(new_ext) + 1);
    if (out) {
        memcpy(out, in, stem);
        strcpy(out + stem, new_ext);
    }
    return out;
}

/* The input, mapped, and which way it converts.  Returns VC_EXIT_OK, or the exit code after
 * printing why not (the mapping is released then). */
static int open_input(const struct convert_args *a, void **data, size_t *size,
                      enum input_kind *kind)
{
    cvf_error err;
    if (cvf_map_file(a->in, data, size, &err) != 0) {
        fprintf(stderr, "vcattach convert: %s: %s\n", a->in, err.msg);
        return VC_EXIT_FAIL;
    }
    *kind = sniff(*data, *size);
    int rc = VC_EXIT_OK;
    if (*kind == INPUT_UNKNOWN) {
        fprintf(stderr, "vcattach convert: %s: neither a .cvf file (starts with the version "
                        "word 1) nor JSON (starts with '{' or '['); check the file name\n",
                a->in);
        rc = VC_EXIT_FAIL;
    } else if (*kind == INPUT_JSON && a->format_name) {
        fprintf(stderr, "vcattach convert: --format applies to a .cvf input; %s is JSON and "
                        "converts to .cvf (drop --format)\n", a->in);
        rc = VC_EXIT_USAGE;
    } else if (*kind == INPUT_JSON && a->requests) {
        fprintf(stderr, "vcattach convert: --requests applies to a .cvf input; %s is JSON "
                        "(convert it to .cvf first, then convert that with --requests)\n", a->in);
        rc = VC_EXIT_USAGE;
    } else if (*kind == INPUT_JSON && a->tasks) {
        fprintf(stderr, "vcattach convert: --tasks applies to a .cvf input; %s is JSON "
                        "(convert it to .cvf first, then convert that with --tasks)\n", a->in);
        rc = VC_EXIT_USAGE;
    } else if (*kind == INPUT_JSON && a->windowed) {
        fprintf(stderr, "vcattach convert: --from/--to/--min-dur apply to a .cvf input; %s is "
                        "JSON (convert it to .cvf first, then convert that with them)\n", a->in);
        rc = VC_EXIT_USAGE;
    }
    if (rc != VC_EXIT_OK)
        cvf_unmap_file(*data, *size);
    return rc;
}

/* Runs the conversion into fd (the sink's OUT.tmp, or stdout).  0, or -1 with err. */
static int run_conversion(const struct convert_args *a, enum input_kind kind, const void *data,
                          size_t size, int fd, bool to_stdout, convert_ctx *cc, cvf_error *err)
{
    if (kind == INPUT_JSON)
        return convert_json_to_cvf(data, size, fd, cc, err);
    /* The .cvf converters write a stream: over a duplicate, so that the sink keeps its fd
     * for the fsync and rename. */
    int dupfd = to_stdout ? -1 : dup(fd);
    FILE *fp = to_stdout ? stdout : dupfd >= 0 ? fdopen(dupfd, "w") : NULL;
    if (!fp) {
        snprintf(err->msg, sizeof err->msg, "cannot write the output: %s", strerror(errno));
        if (dupfd >= 0)
            close(dupfd);
        return -1;
    }
    int crc = a->fmt->run(data, size, fp, cc, err);
    int wrc = to_stdout ? fflush(fp) : fclose(fp);
    if (crc == 0 && wrc != 0) {
        snprintf(err->msg, sizeof err->msg, "writing the output failed: %s", strerror(errno));
        crc = -1;
    }
    return crc;
}

static void report_conversion_error(const struct convert_args *a, enum input_kind kind,
                                    const cvf_error *err)
{
    if (kind == INPUT_CVF)
        fprintf(stderr, "vcattach convert: %s: %s (the .cvf is corrupt or truncated; "
                        "re-create it, or recover what precedes that offset from a copy)\n",
                a->in, err->msg);
    else
        fprintf(stderr, "vcattach convert: %s: %s (fix the input JSON; a Chrome trace "
                        "needs events with ph, pid, tid, ts, and name/dur for X)\n",
                a->in, err->msg);
}

/* --requests: the "requests" tracks' events (request_track.h) of the input, windowed like
 * the rest.  0, or -1 after printing why not. */
static int requests_track(const struct convert_args *a, const vct_window *w, jtext *out)
{
    char err[1024];
    vct_trace *t;
    if (vct_trace_load(a->in, &t, err, sizeof err) < 0) {
        fprintf(stderr, "vcattach convert: %s\n", err);
        return -1;
    }
    vct_requests reqs;
    unsigned char *entries = vct_requests_entries(t, a->entry);
    int rc = entries && vct_requests_find(t, entries, 0, &reqs) == 0 ? 0 : -1;
    if (!rc) {
        rc = vct_request_track_json(t, &reqs, w, out);
        vct_requests_free(&reqs);
    }
    if (rc)
        fprintf(stderr, "vcattach convert: out of memory while finding the requests\n");
    free(entries);
    vct_trace_free(t);
    return rc;
}

/* --tasks: the input's tasks (task_track.h), into tt, and their tracks' names into out.
 * 0, or -1 after printing why not.  No task: one line saying so, and nothing moves. */
static int tasks_track(const struct convert_args *a, vct_trace **t, vct_task_track *tt,
                       jtext *out)
{
    char err[1024];
    if (vct_trace_load(a->in, t, err, sizeof err) < 0) {
        fprintf(stderr, "vcattach convert: %s\n", err);
        return -1;
    }
    if (vct_task_track_init(tt, *t) < 0 || vct_task_track_json(tt, out) < 0) {
        fprintf(stderr, "vcattach convert: out of memory while finding the asyncio tasks\n");
        return -1;
    }
    if (!tt->tasks.n)
        fprintf(stderr, "vcattach convert: %s has no asyncio tasks (no task markers: no "
                        "asyncio, or an agent that does not record them): --tasks moves "
                        "nothing\n", a->in);
    return 0;
}

/* A streamed trace can hold 100 M calls; as Chrome JSON (about 50 bytes a call for each byte
 * of .cvf's 2: measured 48-55x on this project's traces) that is gigabytes no viewer opens.
 * Beyond ~1 GiB of JSON, a whole-trace conversion needs --force: a part (--from/--to,
 * --min-dur) or a flame graph (svg) is what the operator wants.  0, or -1 after saying so. */
#define JSON_PER_CVF_BYTE 50
#define JSON_OUTPUT_MAX ((uint64_t)1 << 30)
static int refuse_huge_json(const struct convert_args *a, enum input_kind kind, size_t size)
{
    bool json = !strcmp(a->fmt->name, "chrome") || !strcmp(a->fmt->name, "speedscope");
    uint64_t guess = (uint64_t)size * JSON_PER_CVF_BYTE;
    if (kind != INPUT_CVF || !json || a->windowed || a->force || guess <= JSON_OUTPUT_MAX)
        return 0;
    fprintf(stderr, "vcattach convert: %s as %s JSON would be about %.1f GiB (about %.0f M calls), "
                    "more than a viewer opens: keep a part (--from S --to S, --min-dur DUR), "
                    "write --format svg, or give --force\n",
            a->in, a->fmt->name, (double)guess / (double)(1u << 30),
            (double)size / 2.0 / 1e6);
    return -1;
}

/* Converts the mapped input into `out` ("-": stdout) through the sink.  Returns the exit
 * code; on failure nothing is left behind. */
static int convert_to(const struct convert_args *a, enum input_kind kind, const void *data,
                      size_t size, const char *out)
{
    bool to_stdout = !strcmp(out, "-");
    if (refuse_huge_json(a, kind, size) != 0)
        return VC_EXIT_USAGE;
    struct trace_sink sink = {.fd = -1};
    char msg[768];
    if (!to_stdout) {
        if (sink_open_file(&sink, out, a->force, msg, sizeof msg) < 0) {
            int e = errno;
            fprintf(stderr, "vcattach convert: %s\n", msg);
            return e == EEXIST ? VC_EXIT_USAGE : VC_EXIT_FAIL;
        }
        sink_remove_on_signal(&sink);
    }
    progress_state ps = {-1, isatty(STDERR_FILENO) != 0};
    convert_ctx cc = {.progress_ctx = &ps, .merged = a->merged,
                      .input_is_mapping = 1 /* open_input maps the file */};
    vct_window window;
    cvf_error err;
    if (a->windowed && kind == INPUT_CVF) {
        if (vct_window_resolve(data, size, a->from, a->to, a->min_dur, &window, &err) < 0) {
            report_conversion_error(a, kind, &err);
            if (!to_stdout)
                sink_abort(&sink);
            return VC_EXIT_FAIL;
        }
        cc.window = &window;
    }
    jtext track = {0};
    if (a->requests) {
        if (requests_track(a, cc.window, &track) < 0) {
            free(track.data);
            if (!to_stdout)
                sink_abort(&sink);
            return VC_EXIT_FAIL;
        }
    }
    vct_trace *task_trace = NULL;
    vct_task_track tt = {0};
    if (a->tasks) {
        if (tasks_track(a, &task_trace, &tt, &track) < 0) {
            vct_task_track_free(&tt);
            vct_trace_free(task_trace);
            free(track.data);
            if (!to_stdout)
                sink_abort(&sink);
            return VC_EXIT_FAIL;
        }
        if (tt.tasks.n) {
            cc.retid = vct_task_track_tid;
            cc.retid_ctx = &tt;
        }
    }
    cc.extra_events = track.data;
    cc.extra_len = track.len;
    if (!a->quiet && size > PROGRESS_MIN_BYTES) {
        cc.progress = show_progress;
        fprintf(stderr, "vcattach convert: %s (%zu MB) -> %s\n", a->in, size >> 20,
                to_stdout ? "stdout" : out);
    }
    int crc = run_conversion(a, kind, data, size, to_stdout ? STDOUT_FILENO : sink.fd,
                             to_stdout, &cc, &err);
    free(track.data);
    vct_task_track_free(&tt);
    vct_trace_free(task_trace);
    if (cc.progress && crc == 0)
        show_progress(&ps, size, size);
    if (cc.progress && ps.tty && ps.last_pct >= 0)
        fputc('\n', stderr);
    if (crc != 0) {
        report_conversion_error(a, kind, &err);
        if (!to_stdout)
            sink_abort(&sink);
        return VC_EXIT_FAIL;
    }
    if (!to_stdout && sink_commit(&sink, msg, sizeof msg) < 0) {
        fprintf(stderr, "vcattach convert: %s\n", msg);
        sink_abort(&sink);
        return VC_EXIT_FAIL;
    }
    return VC_EXIT_OK;
}

/* ---- the command --------------------------------------------------------------------------- */

int cmd_convert(int argc, char **argv)
{
    struct convert_args a;
    int prc = parse_args(argc, argv, &a);
    if (prc)
        return prc == 1 ? VC_EXIT_OK : VC_EXIT_USAGE;
    char merged_path[64];
    int merged_fd = -1;
    if (a.nins > 1) {
        char err[1024];
        merged_fd = vct_cvf_merge_to_memfd((const char *const *)a.ins, a.nins, err, sizeof err);
        if (merged_fd < 0) {
            fprintf(stderr, "vcattach convert: %s (several inputs must all be .cvf)\n", err);
            return VC_EXIT_FAIL;
        }
        snprintf(merged_path, sizeof merged_path, "/proc/self/fd/%d", merged_fd);
        a.in = merged_path; /* stays open until the process exits */
    }
    void *data = NULL;
    size_t size = 0;
    enum input_kind kind;
    int rc = open_input(&a, &data, &size, &kind);
    if (rc != VC_EXIT_OK)
        return rc;
    char *out_owned = NULL;
    const char *out = a.out;
    if (!out) {
        out = out_owned = default_output(a.in, kind, a.fmt->ext);
        if (!out || !strcmp(out, a.in)) {
            fprintf(stderr, "vcattach convert: cannot derive an output name from '%s'; give "
                            "one with -o OUT\n", a.in);
            rc = VC_EXIT_USAGE;
        }
    }
    if (rc == VC_EXIT_OK)
        rc = convert_to(&a, kind, data, size, out);
    free(out_owned);
    cvf_unmap_file(data, size);
    return rc;
}

/* convert_job.c — `vcattach convert`'s conversion (vctrace.h part 4): from the operator's
 * input files to the bytes of one output, the output file itself being the caller's.
 *
 * Owns the steps around the converters: the input (input.h: one file, or several .cvf
 * merged), which way it converts (its first bytes, not its name), which options apply to that
 * direction, the refusal of a JSON no viewer would open, the window (window.h), the tracks
 * added to a Chrome output (requests: request_track.h; asyncio tasks: task_track.h, both from
 * one load of the trace), and the errors worded with their fix.  The converters themselves
 * are chrome.c, json_cvf.c and export.c's adapters; adding an output format is one row in
 * `info[]` and `run_format[]`.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vctrace.h"
#include "chrome.h"
#include "export.h"
#include "input.h"
#include "json_cvf.h"
#include "load.h"
#include "request_track.h"
#include "task_track.h"
#include "window.h"

/* Output formats of a .cvf input (--format), the default first; run[i] writes info[i]. */
static const vct_format_info info[] = {
    {"chrome", ".json",
     "Chrome trace event JSON (Perfetto, chrome://tracing, VizTracer's vizviewer)"},
    {"speedscope", ".speedscope.json", "speedscope's own format: one evented profile per thread"},
    {"collapsed", ".folded", "folded stacks (flamegraph.pl, speedscope): self time in µs per stack"},
    {"svg", ".svg", "a flame graph any browser opens offline (search, click to zoom)"},
};
static const convert_cvf_fn run_format[] = {
    convert_cvf_to_chrome, convert_cvf_to_speedscope, convert_cvf_to_collapsed,
    convert_cvf_to_svg,
};
#define NFORMATS (sizeof info / sizeof info[0])
_Static_assert(sizeof run_format / sizeof run_format[0] == NFORMATS, "one writer per format");

struct vct_conversion {
    vct_convert_options o;
    size_t fmt; /* index into info[] */
    vct_input in;
};

const vct_format_info *vct_convert_formats(size_t *n)
{
    *n = NFORMATS;
    return info;
}

/* ---- opening: the input, and the options that fit it ------------------------------------ */

/* A streamed trace can hold 100 M calls; as Chrome JSON (about 50 bytes a call for each byte
 * of .cvf's 2: measured 48-55x on this project's traces) that is gigabytes no viewer opens.
 * Beyond ~1 GiB of JSON, a whole-trace conversion needs --force: a part (--from/--to,
 * --min-dur) or a flame graph (svg) is what the operator wants. */
#define JSON_PER_CVF_BYTE 50
#define JSON_OUTPUT_MAX ((uint64_t)1 << 30)

/* A JSON input given options of a .cvf one: VCT_REFUSED with the one to drop, else VCT_OK. */
static int check_json_options(const vct_convert_options *o, const char *name, char *err,
                              size_t errlen)
{
    const struct { int given; const char *what, *verb, *with; } cvf_only[] = {
        {o->requests, "--requests", "applies", "--requests"},
        {o->tasks, "--tasks", "applies", "--tasks"},
        {o->windowed, "--from/--to/--min-dur", "apply", "them"},
    };
    if (o->format) {
        snprintf(err, errlen, "--format applies to a .cvf input; %s is JSON and converts to "
                 ".cvf (drop --format)", name);
        return VCT_REFUSED;
    }
    for (size_t i = 0; i < sizeof cvf_only / sizeof cvf_only[0]; i++)
        if (cvf_only[i].given) {
            snprintf(err, errlen, "%s %s to a .cvf input; %s is JSON (convert it to .cvf "
                     "first, then convert that with %s)", cvf_only[i].what, cvf_only[i].verb,
                     name, cvf_only[i].with);
            return VCT_REFUSED;
        }
    return VCT_OK;
}

/* VCT_OK, or why the options do not fit the input (err). */
static int check_options(const vct_conversion *cv, char *err, size_t errlen)
{
    const vct_convert_options *o = &cv->o;
    const char *name = vct_input_name(&cv->in), *format = info[cv->fmt].name;
    if (cv->in.kind == VCT_INPUT_UNKNOWN || cv->in.kind == VCT_INPUT_EMPTY) {
        snprintf(err, errlen, "%s: neither a .cvf file (starts with the version word 1) nor "
                 "JSON (starts with '{' or '['); check the file name", name);
        return VCT_FAILED;
    }
    if (cv->in.kind == VCT_INPUT_JSON)
        return check_json_options(o, name, err, errlen);
    uint64_t guess = (uint64_t)cv->in.size * JSON_PER_CVF_BYTE;
    int json = !strcmp(format, "chrome") || !strcmp(format, "speedscope");
    if (json && !o->windowed && !o->force && guess > JSON_OUTPUT_MAX) {
        snprintf(err, errlen, "%s as %s JSON would be about %.1f GiB (about %.0f M calls), more "
                 "than a viewer opens: keep a part (--from S --to S, --min-dur DUR), write "
                 "--format svg, or give --force", name, format,
                 (double)guess / (double)(1u << 30), (double)cv->in.size / 2.0 / 1e6);
        return VCT_REFUSED;
    }
    return VCT_OK;
}

int vct_convert_open(const vct_convert_options *o, vct_conversion **out, char *err,
                     size_t errlen)
{
    *out = NULL;
    vct_conversion *cv = calloc(1, sizeof *cv);
    if (!cv) {
        snprintf(err, errlen, "out of memory");
        return VCT_FAILED;
    }
    cv->o = *o;
    for (size_t i = 0; o->format && i < NFORMATS; i++)
        if (!strcmp(info[i].name, o->format))
            cv->fmt = i;
    if (vct_input_open(&cv->in, o->paths, o->npaths, err, errlen) < 0) {
        free(cv);
        return VCT_FAILED;
    }
    int rc = check_options(cv, err, errlen);
    if (rc != VCT_OK) {
        vct_convert_close(cv);
        return rc;
    }
    *out = cv;
    return VCT_OK;
}

const char *vct_convert_input_name(const vct_conversion *cv)
{
    return vct_input_name(&cv->in);
}

size_t vct_convert_input_size(const vct_conversion *cv)
{
    return cv->in.size;
}

char *vct_convert_default_output(const vct_conversion *cv)
{
    const char *in = cv->in.path;
    if (!in)
        return NULL;
    const char *slash = strrchr(in, '/');
    const char *base = slash ? slash + 1 : in;
    const char *dot = strrchr(base, '.');
    size_t stem = dot && dot != base ? (size_t)(dot - in) : strlen(in);
    const char *new_ext = cv->in.kind == VCT_INPUT_CVF ? info[cv->fmt].ext : ".cvf";
    char *out = malloc(stem + strlen(new_ext) + 1);
    if (out) {
        memcpy(out, in, stem);
        strcpy(out + stem, new_ext);
        if (!strcmp(out, in)) {
            free(out);
            out = NULL;
        }
    }
    return out;
}

void vct_convert_close(vct_conversion *cv)
{
    if (!cv)
        return;
    vct_input_close(&cv->in);
    free(cv);
}

/* ---- writing ------------------------------------------------------------------------------ */

/* What a conversion holds besides its input: the window, the tracks' trace and events. */
typedef struct job {
    vct_conversion *cv;
    convert_ctx cc;
    vct_window window;
    vct_trace *trace;  /* loaded for --requests / --tasks (their tracks' source) */
    vct_task_track tt;
    jtext tracks;      /* the tracks' events, spliced into the Chrome output */
} job;

/* The conversion failed: its message, with the fix for the input's kind. */
static void conversion_error(const vct_conversion *cv, const cvf_error *e, char *err,
                             size_t errlen)
{
    if (cv->in.kind == VCT_INPUT_CVF)
        snprintf(err, errlen, "%s: %s (the .cvf is corrupt or truncated; re-create it, or "
                 "recover what precedes that offset from a copy)", vct_input_name(&cv->in),
                 e->msg);
    else
        snprintf(err, errlen, "%s: %s (fix the input JSON; a Chrome trace needs events with "
                 "ph, pid, tid, ts, and name/dur for X)", vct_input_name(&cv->in), e->msg);
}

/* --requests: the "requests" tracks' events (request_track.h), windowed like the rest. */
static int requests_track(job *j, char *err, size_t errlen)
{
    vct_requests reqs;
    unsigned char *entries = vct_requests_entries(j->trace, j->cv->o.entry);
    int rc = entries && vct_requests_find(j->trace, entries, 0, &reqs) == 0 ? 0 : -1;
    if (!rc) {
        rc = vct_request_track_json(j->trace, &reqs, j->cc.window, &j->tracks);
        vct_requests_free(&reqs);
    }
    if (rc)
        snprintf(err, errlen, "out of memory while finding the requests");
    free(entries);
    return rc;
}

/* --tasks: the tasks (task_track.h) that move events to their tracks, and the tracks' names.
 * No task: one note saying so, and nothing moves. */
static int tasks_track(job *j, char *err, size_t errlen)
{
    if (vct_task_track_init(&j->tt, j->trace) < 0 || vct_task_track_json(&j->tt, &j->tracks) < 0) {
        snprintf(err, errlen, "out of memory while finding the asyncio tasks");
        return -1;
    }
    if (j->tt.tasks.n) {
        j->cc.retid = vct_task_track_tid;
        j->cc.retid_ctx = &j->tt;
    } else if (j->cv->o.note) {
        char line[1024];
        snprintf(line, sizeof line, "%s has no asyncio tasks (no task markers: no asyncio, or "
                 "an agent that does not record them): --tasks moves nothing",
                 vct_input_name(&j->cv->in));
        j->cv->o.note(j->cv->o.note_ctx, line);
    }
    return 0;
}

/* The window and the tracks, before the conversion.  0, or -1 with err. */
static int prepare(job *j, char *err, size_t errlen)
{
    const vct_convert_options *o = &j->cv->o;
    const vct_input *in = &j->cv->in;
    cvf_error e;
    if (o->windowed && in->kind == VCT_INPUT_CVF) {
        if (vct_window_resolve(in->data, in->size, o->from, o->to, o->min_dur, &j->window,
                               &e) < 0) {
            conversion_error(j->cv, &e, err, errlen);
            return -1;
        }
        j->cc.window = &j->window;
    }
    if ((o->requests || o->tasks) && vct_trace_load(in, 0, &j->trace, err, errlen) < 0)
        return -1;
    if ((o->requests && requests_track(j, err, errlen) < 0) ||
        (o->tasks && tasks_track(j, err, errlen) < 0))
        return -1;
    j->cc.extra_events = j->tracks.data;
    j->cc.extra_len = j->tracks.len;
    return 0;
}

/* Runs the conversion into fd.  The .cvf converters write a stream: over a duplicate, so that
 * the caller keeps its fd.  0, or -1 with e. */
static int run(job *j, int fd, cvf_error *e)
{
    const vct_input *in = &j->cv->in;
    if (in->kind == VCT_INPUT_JSON)
        return convert_json_to_cvf(in->data, in->size, fd, &j->cc, e);
    int dupfd = dup(fd);
    FILE *fp = dupfd >= 0 ? fdopen(dupfd, "w") : NULL;
    if (!fp) {
        e->offset = 0;
        snprintf(e->msg, sizeof e->msg, "cannot write the output: %s", strerror(errno));
        if (dupfd >= 0)
            close(dupfd);
        return -1;
    }
    int crc = run_format[j->cv->fmt](in->data, in->size, fp, &j->cc, e);
    if (fclose(fp) != 0 && crc == 0) {
        snprintf(e->msg, sizeof e->msg, "writing the output failed: %s", strerror(errno));
        crc = -1;
    }
    return crc;
}

int vct_convert_write(vct_conversion *cv, int fd, char *err, size_t errlen)
{
    job j = {.cv = cv};
    j.cc.progress = cv->o.progress;
    j.cc.progress_ctx = cv->o.progress_ctx;
    j.cc.merged = cv->o.merged;
    j.cc.working = cv->o.working;
    j.cc.input_is_mapping = 1; /* input.c maps the file */
    int rc = prepare(&j, err, errlen) < 0 ? VCT_FAILED : VCT_OK;
    cvf_error e;
    if (rc == VCT_OK && run(&j, fd, &e) != 0) {
        conversion_error(cv, &e, err, errlen);
        rc = VCT_FAILED;
    }
    free(j.tracks.data);
    vct_task_track_free(&j.tt);
    if (j.trace)
        vct_trace_free(j.trace);
    return rc;
}

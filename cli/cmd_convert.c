/* cmd_convert.c — `vcattach convert IN [-o OUT] [--format F] [--force] [--quiet]`.
 *
 * Owns the command line of conversion and the file handling around it: which direction
 * (chosen from the input's first bytes, not its name), where the output goes, and the promise
 * that a failed conversion leaves nothing behind: the output is written to OUT.tmp in the same
 * directory, fsync'd, and renamed over OUT only on success (without --force, linked so that
 * an OUT that appeared meanwhile is not clobbered).  The conversions themselves live in
 * convert_*.c and json_cvf.c; adding an output format is one row in `formats[]`.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "convert.h"
#include "cvf_reader.h"
#include "export.h"

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
};

#define PROGRESS_MIN_BYTES (50u << 20)

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vcattach convert IN [-o OUT] [--format FORMAT] [--force] [--quiet]\n\n"
            "Converts between VizTracer's compressed .cvf format and Chrome trace JSON.\n"
            "The direction comes from IN's contents, not its name:\n"
            "  .cvf  (starts with the version word 1) -> FORMAT (default chrome)\n"
            "  JSON  ({\"traceEvents\": [...]} or a bare [...] list of events) -> .cvf,\n"
            "        grouped like VizTracer's compressor (`viztracer --compress`)\n\n"
            "options:\n"
            "  -o OUT         output file; '-' writes to stdout.  Default: IN with its\n"
            "                 extension replaced (.cvf <-> .json)\n"
            "  --format F     output format for a .cvf input:\n");
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        fprintf(out, "                   %-10s %s\n", formats[i].name, formats[i].summary);
    fprintf(out,
            "  --force        replace OUT if it exists (otherwise an existing OUT is an error)\n"
            "  -q, --quiet    no progress line (printed on stderr for inputs over 50 MB)\n"
            "  -h, --help     this text\n\n"
            "OUT is written to OUT.tmp in the same directory and renamed when complete; on any\n"
            "error nothing is left behind.  Exit codes: 0 ok, 1 conversion failed (bad input,\n"
            "I/O error), 2 usage error.\n");
}

/* ---- cleanup of OUT.tmp on a signal ------------------------------------------------------ */

static char tmp_path_for_signal[4096];
static volatile sig_atomic_t tmp_live;

static void on_fatal_signal(int sig)
{
    if (tmp_live)
        unlink(tmp_path_for_signal);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void guard_tmp(const char *path)
{
    snprintf(tmp_path_for_signal, sizeof tmp_path_for_signal, "%s", path);
    tmp_live = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGPIPE, &sa, NULL);
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

/* ---- the command --------------------------------------------------------------------------- */

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

int cmd_convert(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *format_name = NULL;
    bool force = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return VC_EXIT_OK;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--format")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "vcattach convert: %s needs a value (see vcattach convert "
                                "--help)\n", a);
                return VC_EXIT_USAGE;
            }
            if (!strcmp(a, "--format"))
                format_name = argv[++i];
            else
                out = argv[++i];
        } else if (!strncmp(a, "--format=", 9)) {
            format_name = a + 9;
        } else if (!strncmp(a, "--output=", 9)) {
            out = a + 9;
        } else if (!strcmp(a, "--force") || !strcmp(a, "-f")) {
            force = true;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "vcattach convert: unknown option '%s' (see vcattach convert "
                            "--help)\n", a);
            return VC_EXIT_USAGE;
        } else if (!in) {
            in = a;
        } else {
            fprintf(stderr, "vcattach convert: one input only ('%s' and '%s'); use -o for the "
                            "output\n", in, a);
            return VC_EXIT_USAGE;
        }
    }
    if (!in) {
        fprintf(stderr, "vcattach convert: no input file (usage: vcattach convert IN [-o OUT]; "
                        "see --help)\n");
        return VC_EXIT_USAGE;
    }
    const struct format *fmt = &formats[0];
    if (format_name) {
        fmt = NULL;
        for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
            if (!strcmp(formats[i].name, format_name))
                fmt = &formats[i];
        if (!fmt) {
            fprintf(stderr, "vcattach convert: unknown --format '%s' (see vcattach convert "
                            "--help for the list)\n", format_name);
            return VC_EXIT_USAGE;
        }
    }

    cvf_error err;
    void *data = NULL;
    size_t size = 0;
    if (cvf_map_file(in, &data, &size, &err) != 0) {
        fprintf(stderr, "vcattach convert: %s: %s\n", in, err.msg);
        return VC_EXIT_FAIL;
    }
    enum input_kind kind = sniff(data, size);
    if (kind == INPUT_UNKNOWN) {
        fprintf(stderr, "vcattach convert: %s: neither a .cvf file (starts with the version "
                        "word 1) nor JSON (starts with '{' or '['); check the file name\n", in);
        cvf_unmap_file(data, size);
        return VC_EXIT_FAIL;
    }
    if (kind == INPUT_JSON && format_name) {
        fprintf(stderr, "vcattach convert: --format applies to a .cvf input; %s is JSON and "
                        "converts to .cvf (drop --format)\n", in);
        cvf_unmap_file(data, size);
        return VC_EXIT_USAGE;
    }

    char *out_owned = NULL;
    if (!out) {
        out = out_owned = default_output(in, kind, fmt->ext);
        if (!out || !strcmp(out, in)) {
            fprintf(stderr, "vcattach convert: cannot derive an output name from '%s'; give "
                            "one with -o OUT\n", in);
            free(out_owned);
            cvf_unmap_file(data, size);
            return VC_EXIT_USAGE;
        }
    }
    bool to_stdout = !strcmp(out, "-");
    int rc = VC_EXIT_FAIL;
    char *tmp = NULL;
    int fd = -1;
    FILE *fp = NULL;
    if (!to_stdout) {
        struct stat st;
        if (!force && lstat(out, &st) == 0) {
            fprintf(stderr, "vcattach convert: %s already exists; pass --force to replace it\n",
                    out);
            rc = VC_EXIT_USAGE;
            goto done;
        }
        tmp = malloc(strlen(out) + 5);
        if (!tmp)
            goto oom;
        sprintf(tmp, "%s.tmp", out);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0) {
            fprintf(stderr, "vcattach convert: cannot create %s: %s (check the directory "
                            "exists and is writable)\n", tmp, strerror(errno));
            goto done;
        }
        guard_tmp(tmp);
    } else
        fd = STDOUT_FILENO;

    progress_state ps = {-1, isatty(STDERR_FILENO) != 0};
    convert_ctx cc = {NULL, &ps};
    if (!quiet && size > PROGRESS_MIN_BYTES) {
        cc.progress = show_progress;
        fprintf(stderr, "vcattach convert: %s (%zu MB) -> %s\n", in, size >> 20,
                to_stdout ? "stdout" : out);
    }

    int crc;
    if (kind == INPUT_CVF) {
        fp = to_stdout ? stdout : fdopen(fd, "w");
        if (!fp)
            goto oom;
        if (!to_stdout)
            fd = -1; /* owned by fp now */
        crc = fmt->run(data, size, fp, &cc, &err);
        if (crc == 0 && fflush(fp) != 0) {
            snprintf(err.msg, sizeof err.msg, "writing the output failed: %s", strerror(errno));
            crc = -1;
        }
    } else {
        crc = convert_json_to_cvf(data, size, fd, &cc, &err);
    }
    if (cc.progress && crc == 0)
        show_progress(&ps, size, size);
    if (cc.progress && ps.tty && ps.last_pct >= 0)
        fputc('\n', stderr);
    if (crc != 0) {
        if (kind == INPUT_CVF)
            fprintf(stderr, "vcattach convert: %s: %s (the .cvf is corrupt or truncated; "
                            "re-create it, or recover what precedes that offset from a copy)\n",
                    in, err.msg);
        else
            fprintf(stderr, "vcattach convert: %s: %s (fix the input JSON; a Chrome trace "
                            "needs events with ph, pid, tid, ts, and name/dur for X)\n",
                    in, err.msg);
        goto done;
    }
    if (!to_stdout) {
        int sync_fd = fp ? fileno(fp) : fd;
        if (fsync(sync_fd) != 0) {
            fprintf(stderr, "vcattach convert: writing %s failed: %s\n", tmp, strerror(errno));
            goto done;
        }
        if (fp ? fclose(fp) != 0 : close(fd) != 0) {
            fp = NULL;
            fd = -1;
            fprintf(stderr, "vcattach convert: writing %s failed: %s\n", tmp, strerror(errno));
            goto done;
        }
        fp = NULL;
        fd = -1;
        /* Without --force, link() fails if OUT appeared meanwhile; rename() would replace.
         * Filesystems without hard links get a last check and rename(). */
        bool linked = false;
        if (!force) {
            struct stat st;
            if (link(tmp, out) == 0)
                linked = true;
            else if (errno == EEXIST || lstat(out, &st) == 0) {
                errno = EEXIST;
                fprintf(stderr, "vcattach convert: cannot create %s: %s (pass --force to "
                                "replace it)\n", out, strerror(errno));
                goto done;
            }
        }
        if (!linked && rename(tmp, out) != 0) {
            fprintf(stderr, "vcattach convert: cannot create %s: %s%s\n", out, strerror(errno),
                    errno == EEXIST ? " (pass --force to replace it)" : "");
            goto done;
        }
        if (linked)
            unlink(tmp);
        tmp_live = 0;
    }
    rc = VC_EXIT_OK;
    goto done;
oom:
    fprintf(stderr, "vcattach convert: out of memory\n");
done:
    if (fp && fp != stdout)
        fclose(fp);
    if (fd >= 0 && fd != STDOUT_FILENO)
        close(fd);
    if (tmp && rc != VC_EXIT_OK) {
        unlink(tmp);
        tmp_live = 0;
    }
    free(tmp);
    free(out_owned);
    cvf_unmap_file(data, size);
    return rc;
}

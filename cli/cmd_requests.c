/* cmd_requests.c — `vcattach requests FILE...`: every request of a trace, slowest first.
 *
 * Owns the command line: the options, their checks, the help.  The report itself (what a
 * request is, its breakdown, the printing through the terminal sanitizer) is libvctrace's
 * (vct_requests_report, trace/include/vctrace.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "attach_options.h"
#include "commands.h"
#include "options.h"
#include "say.h"
#include "vctrace.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vcattach requests FILE... [--entry GLOB] [--top N] [--min-dur DUR]\n"
            "                         [--pid PID]\n"
            "Every request (unit of work) of a trace, slowest first, with where its time went.\n"
            "A request is the outermost call, on one thread, of a server's request function:\n"
            "  WSGI    gunicorn (sync, gthread) handle_request, werkzeug, wsgiref, waitress,\n"
            "          or the app itself (Flask.__call__/wsgi_app, Django's WSGIHandler, …)\n"
            "          for servers that call it from C (uWSGI, mod_wsgi)\n"
            "  ASGI    uvicorn's RequestResponseCycle.run_asgi, hypercorn, or the app\n"
            "          (Starlette, FastAPI, Django's ASGIHandler)\n"
            "  Celery  one task execution (trace_task, Task.__call__)\n"
            "(the list: trace/requests.def), or any function --entry names.  A match inside\n"
            "another is part of it.  A coroutine's slices (its resumes after each await) are one\n"
            "request.  When the trace has asyncio task markers (agents that record them), the\n"
            "task is the unit: a task whose coroutine is an entry is one request, from its\n"
            "first step to the end of its last, and the steps of the tasks it created\n"
            "(create_task, gather, TaskGroup; transitively) are its slices too, so requests\n"
            "overlapping on one event loop are told apart (its entry line names the task and\n"
            "counts the tasks it created).  Without markers, overlapping ASGI requests on\n"
            "one event loop cannot be told apart (their slices go to the latest).\n"
            "Per request: its start (seconds into the trace), duration, pid/tid; the heaviest\n"
            "path (from the entry, the callee with the largest inclusive time, down to a leaf\n"
            "or a blocking call); the top functions by self time; its waiting by kind\n"
            "(trace/waits.def, as in `vcattach summary`) and, when the trace holds the\n"
            "threads' CPU clock samples, its measured on-CPU and off-CPU time (the thread's\n"
            "clock advance over its calls, interpolated between samples).  Latency: exact p50/p90/p99/max\n"
            "(nearest rank) and a histogram of the complete requests.  Requests that were\n"
            "already running when the trace began, or still running when it stopped, are\n"
            "listed apart: their durations are not latencies.\n"
            "  --entry GLOB   the function that is one request: a glob on its name, with or\n"
            "                 without its \" (file:line)\" (e.g. 'handle', '*views.py:*')\n"
            "  -n, --top N    requests listed, slowest first (default 10)\n"
            "  --min-dur DUR  list only requests of at least DUR (50us, 20ms, 1s)\n"
            "  -p, --pid PID  only the requests of process PID\n"
            "  -h, --help     this text\n"
            "exit codes: 0 printed (also with no request found); 1 the trace cannot be read;\n"
            "2 usage error\n");
}

enum { OPT_ENTRY = 256, OPT_MIN_DUR, OPT_PID };

static const struct opt_spec requests_specs[] = {
    {"entry", 0, 1, OPT_ENTRY},
    {"top", 'n', 1, 'n'},
    {"min-dur", 0, 1, OPT_MIN_DUR},
    {"pid", 'p', 1, OPT_PID},
};

static const struct opt_command requests_command = {
    "requests", requests_specs, sizeof requests_specs / sizeof requests_specs[0], usage};

static int on_option(void *ctx, const struct opt_spec *o, const char *value, char *err,
                     size_t errlen)
{
    vct_requests_options *a = ctx;
    switch (o->id) {
    case OPT_ENTRY:
        if (!*value) {
            snprintf(err, errlen, "--entry needs a glob naming a function, like 'handle*'");
            return -1;
        }
        a->entry = value;
        return 0;
    case 'n': {
        unsigned n;
        if (cli_parse_uint(value, "--top", 1, 1000000, &n, err, errlen) < 0)
            return -1;
        a->top = n;
        return 0;
    }
    case OPT_MIN_DUR: {
        uint64_t ns;
        if (cli_parse_min_dur(value, &ns, err, errlen) < 0)
            return -1;
        a->min_dur = (int64_t)(ns / 10); /* ticks */
        return 0;
    }
    case OPT_PID: {
        pid_t pid;
        if (cli_parse_pid(value, &pid, err, errlen) < 0)
            return -1;
        a->pid = (uint64_t)pid;
        return 0;
    }
    }
    snprintf(err, errlen, "option '--%s' is not handled", o->name);
    return -1;
}

int cmd_requests(int argc, char **argv)
{
    vct_requests_options a = {.top = 10};
    char err[8192];
    int prc = opt_parse_operands(&requests_command, argc, argv, on_option, &a,
                                 "which trace? usage: vcattach requests FILE.cvf [--entry GLOB] "
                                 "[--top N] [--min-dur DUR]", &a.paths, &a.npaths);
    if (prc)
        return prc == 1 ? VC_EXIT_OK : VC_EXIT_USAGE;
    return vc_offline_exit("requests", vct_requests_report(&a, stdout, err, sizeof err), err);
}

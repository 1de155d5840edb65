/* cmd_top.c — `vcattach top`: a trace watched live.  The trace is `vcattach trace`'s (one
 * process: trace_process.c; --subprocesses: tree_trace.c), with a watcher (trace_watch.h) that
 * feeds every frame to libvctrace's live aggregation (vct_live, trace/live.h), reads the keys
 * and draws a screen every interval (top_screen.c).  q, Ctrl-C, --once and -t end the trace
 * the way a Ctrl-C ends `vcattach trace`: STOP, the agent removes every hook and sends the
 * rest, the target runs on; -o OUT also builds the .cvf.
 *
 * Every text of the target's (function, thread and process names) is sanitized (common/
 * term.h) before it is put on the screen; the layout's own escapes are top_screen.c's.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attach.h"
#include "attach_options.h"
#include "commands.h"
#include "human.h"
#include "monotonic.h"
#include "say.h"
#include "term.h"
#include "top_screen.h"
#include "trace_process.h"
#include "trace_watch.h"
#include "tree_trace.h"

#define TOP_MEMORY (64ull << 20) /* the live aggregation's budget (SECURITY.md) */
#define TOP_WINDOW_S 5
#define TOP_MAX_ROWS 200

enum top_view { VIEW_FUNCTIONS, VIEW_REQUESTS, VIEW_THREADS, VIEW_N };

struct top {
    const struct cli_options *opt;
    vct_live *lv;
    struct top_screen scr;
    int64_t next_draw;
    enum top_view view;
    enum vct_live_sort sort;
    int shown, quit, opened;
    char err[256];              /* the terminal could not be taken: said after the trace */
    char text[1 << 16];
    size_t used;
};

static void put(struct top *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct top *t, const char *fmt, ...)
{
    if (t->used >= sizeof t->text - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->text + t->used, sizeof t->text - t->used, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->used += (size_t)n < sizeof t->text - t->used ? (size_t)n : sizeof t->text - t->used - 1;
}

/* A target's name, sanitized and cut to the columns left. */
static void put_name(struct top *t, const char *name, int width)
{
    char safe[600];
    if (width < 8)
        width = 8;
    size_t cap = (size_t)width + 1 < sizeof safe ? (size_t)width + 1 : sizeof safe;
    vc_term_safe(safe, cap, name, 0);
    put(t, "%s\n", safe);
}

/* A duration in ms, as "812 ns", "3.4 us", "12.0 ms", "1.20 s". */
static const char *dur(double ms, char *buf, size_t cap)
{
    if (ms <= 0)
        snprintf(buf, cap, "-");
    else if (ms < 0.001)
        snprintf(buf, cap, "%.0f ns", ms * 1e6);
    else if (ms < 1)
        snprintf(buf, cap, "%.1f us", ms * 1e3);
    else if (ms < 1000)
        snprintf(buf, cap, "%.1f ms", ms);
    else
        snprintf(buf, cap, "%.2f s", ms / 1000);
    return buf;
}

static const char *rate(double per_s, char *buf, size_t cap)
{
    if (per_s >= 1e6)
        snprintf(buf, cap, "%.2f M", per_s / 1e6);
    else if (per_s >= 1e4)
        snprintf(buf, cap, "%.1f k", per_s / 1e3);
    else
        snprintf(buf, cap, "%.1f", per_s);
    return buf;
}

static void header(struct top *t)
{
    static const char *const views[] = {"functions", "requests", "threads"};
    static const char *const sorts[] = {"self", "total", "calls"};
    vct_live_status st;
    vct_live_status_of(t->lv, &st);
    char ev[32], mem[32], budget[32];
    vc_human_bytes(st.mem_bytes, mem, sizeof mem);
    vc_human_bytes(st.budget, budget, sizeof budget);
    put(t, "vcattach top: pid %d%s, last %.1f s, %s by %s   (f r h: views, s t c: sort, q: quit)\n",
        (int)t->opt->pid, t->opt->subprocesses ? " and its subprocesses" : "", st.window_s,
        views[t->view], sorts[t->sort]);
    put(t, "events %s/s   dropped %llu   not counted %llu   processes %zu   threads %zu   "
        "memory %s of %s\n", rate(st.events_per_s, ev, sizeof ev), (unsigned long long)st.dropped,
        (unsigned long long)(st.unfitted + st.malformed), st.processes, st.threads, mem, budget);
    vct_live_wait w[16];
    size_t nw = vct_live_waits(t->lv, w, 16);
    put(t, "waiting:");
    if (!nw)
        put(t, " -");
    for (size_t i = 0; i < nw; i++) {
        char c[32];
        put(t, "  %s %.1f ms/s (%s calls/s)", w[i].kind, w[i].ms, rate(w[i].calls, c, sizeof c));
    }
    put(t, "\n\n");
}

static void functions(struct top *t, size_t max, int width)
{
    static vct_live_row rows[TOP_MAX_ROWS];
    size_t n = vct_live_functions(t->lv, VCT_LIVE_WORK, t->sort, rows, max);
    put(t, "%10s %11s %10s %9s  %s\n", "SELF ms/s", "TOTAL ms/s", "CALLS/s", "P99", "FUNCTION");
    for (size_t i = 0; i < n; i++) {
        char c[32], p[32];
        put(t, "%10.1f %11.1f %10s %9s  ", rows[i].self_ms, rows[i].total_ms,
            rate(rows[i].calls, c, sizeof c), dur(rows[i].p99_ms, p, sizeof p));
        put_name(t, rows[i].name, width - 45);
    }
    if (!n)
        put(t, "(no calls in the window yet)\n");
}

static void requests(struct top *t, size_t max, int width)
{
    static vct_live_row rows[TOP_MAX_ROWS];
    size_t n = vct_live_functions(t->lv, VCT_LIVE_REQUESTS, t->sort, rows, max);
    put(t, "%9s %9s %9s %9s  %s\n", "REQ/s", "P50", "P99", "MAX", "ENTRY POINT");
    for (size_t i = 0; i < n; i++) {
        char c[32], a[32], b[32], m[32];
        put(t, "%9s %9s %9s %9s  ", rate(rows[i].calls, c, sizeof c),
            dur(rows[i].p50_ms, a, sizeof a), dur(rows[i].p99_ms, b, sizeof b),
            dur(rows[i].max_ms, m, sizeof m));
        put_name(t, rows[i].name, width - 42);
    }
    if (!n)
        put(t, "(no request entry point of requests.def seen in the window)\n");
}

static void threads(struct top *t, size_t max, int width)
{
    static vct_live_thread rows[TOP_MAX_ROWS];
    size_t n = vct_live_threads(t->lv, rows, max);
    put(t, "%8s %8s %10s %10s %10s  %s\n", "PID", "TID", "WORK ms/s", "WAIT ms/s", "CALLS/s",
        "THREAD");
    for (size_t i = 0; i < n; i++) {
        char c[32];
        put(t, "%8llu %8d %10.1f %10.1f %10s  ", (unsigned long long)rows[i].pid,
            (int)rows[i].tid, rows[i].work_ms, rows[i].wait_ms, rate(rows[i].calls, c, sizeof c));
        put_name(t, rows[i].name[0] ? rows[i].name : "?", width - 54);
    }
    if (!n)
        put(t, "(no calls in the window yet)\n");
}

static void draw(struct top *t)
{
    t->used = 0;
    t->text[0] = '\0';
    vct_live_now(t->lv, vc_monotonic_ms());
    header(t);
    size_t max = t->scr.tty ? (size_t)(t->scr.rows > 7 ? t->scr.rows - 6 : 1) : 20;
    if (max > TOP_MAX_ROWS)
        max = TOP_MAX_ROWS;
    if (t->view == VIEW_FUNCTIONS)
        functions(t, max, t->scr.cols);
    else if (t->view == VIEW_REQUESTS)
        requests(t, max, t->scr.cols);
    else
        threads(t, max, t->scr.cols);
    top_screen_draw(&t->scr, t->text);
    t->shown++;
}

static void keys(struct top *t)
{
    int k;
    while ((k = top_screen_key(&t->scr)) >= 0) {
        switch (k) {
        case 'q': case 'Q': case 3: t->quit = 1; break;
        case 's': t->sort = VCT_LIVE_BY_SELF; break;
        case 't': t->sort = VCT_LIVE_BY_TOTAL; break;
        case 'c': t->sort = VCT_LIVE_BY_CALLS; break;
        case 'f': t->view = VIEW_FUNCTIONS; break;
        case 'r': t->view = VIEW_REQUESTS; break;
        case 'h': t->view = VIEW_THREADS; break;
        case '\t': t->view = (enum top_view)((t->view + 1) % VIEW_N); break;
        default: continue;
        }
        if (!t->quit)
            t->next_draw = 0; /* a key shows its effect at once */
    }
}

static void on_frame(void *ctx, unsigned proc, uint64_t pid, uint32_t type, const void *buf,
                     size_t len)
{
    struct top *t = ctx;
    vct_live_frame(t->lv, proc, pid, type, buf, len, vc_monotonic_ms());
}

static int on_tick(void *ctx)
{
    struct top *t = ctx;
    if (!t->opened) { /* taken once the agent traces: what fails before is said on a normal terminal */
        t->opened = 1;
        if (top_screen_open(&t->scr, t->err, sizeof t->err) < 0)
            return 1;
    }
    keys(t);
    if (t->quit)
        return 1;
    int64_t now = vc_monotonic_ms();
    if (t->next_draw == 0 && t->shown == 0) /* the first screen once an interval has passed */
        t->next_draw = now + (int64_t)t->opt->interval_ms;
    if (now < t->next_draw)
        return 0;
    draw(t);
    t->next_draw = now + (int64_t)t->opt->interval_ms;
    return t->opt->once;
}

static void on_leave(void *ctx)
{
    struct top *t = ctx;
    top_screen_close(&t->scr);
}

int cmd_top(int argc, char **argv)
{
    static struct cli_options opt;
    int prc = cli_parse(CLI_TOP, argc, argv, &opt);
    if (prc)
        return prc == 1 ? VC_EXIT_OK : VC_EXIT_USAGE;
    static struct top t;
    memset(&t, 0, sizeof t);
    t.opt = &opt;
    t.lv = vct_live_new(TOP_MEMORY, TOP_WINDOW_S, vc_monotonic_ms());
    if (!t.lv) {
        say("vcattach top: out of memory\n");
        return VC_EXIT_FAIL;
    }
    struct trace_watch w = {&t, on_frame, on_tick, on_leave};
    trace_watch_set(&w);
    int rc = opt.subprocesses ? tree_trace(&opt) : trace_process(&opt);
    trace_watch_set(NULL);
    top_screen_close(&t.scr);
    vct_live_free(t.lv);
    if (t.err[0]) {
        say("vcattach top: %s\n", t.err);
        return VC_EXIT_FAIL;
    }
    return rc;
}

/* report.c — the lines the attach commands print from an agent's END and STATUS texts
 * (report.h).  Pure formatting over key=value texts, plus one look at the target's children
 * for the --subprocesses hint.
 */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"
#include "vcinject.h"
#include "human.h"
#include "say.h"

unsigned long long report_u64(const char *text, const char *key)
{
    char v[32];
    return vc_kv_get(text, key, v, sizeof v) >= 0 ? strtoull(v, NULL, 10) : 0;
}

/* The agent's status in END: 0, or a negative errno. */
long report_end_status(const char *end_text)
{
    char v[32];
    return vc_kv_get(end_text, "status", v, sizeof v) > 0 ? strtol(v, NULL, 10) : 0;
}

/* Without --subprocesses: "; pid N has 4 Python child processes; --subprocesses traces them
 * all" when it has any (a gunicorn master, a multiprocessing parent), else "". */
static void python_children_hint(pid_t pid, char *buf, size_t cap)
{
    buf[0] = '\0';
    pid_t *pids = NULL;
    long n = target_descendants(pid, &pids);
    long python = 0;
    for (long i = 0; i < n; i++) {
        struct target_python py;
        char e[256];
        python += target_python_detect(pids[i], &py, e, sizeof e) == 1;
    }
    free(pids);
    if (python > 0)
        snprintf(buf, cap, "; pid %d has %ld Python child process%s; --subprocesses traces "
                           "them all", (int)pid, python, python == 1 ? "" : "es");
}

/* Why calls were dropped: a streamed trace drops only when vcattach did not keep up. */
static const char *report_drop_hint(const char *end_text)
{
    char v[8];
    if (vc_kv_get(end_text, "streamed", v, sizeof v) > 0)
        return " (vcattach did not keep up: see the \"vcattach dropped\" instants)";
    return " (buffer full: raise --buffer-mb)";
}

/* One line from an END text: "12345 events, 5 threads, 0 dropped, 1.2 MiB -> OUT". */
void report_summary(pid_t pid, const char *end_text, const char *where, uint64_t bytes,
                          uint64_t traced_ms)
{
    char hint[160];
    python_children_hint(pid, hint, sizeof hint);
    char size[32], dur[32] = "";
    vc_human_bytes(bytes ? bytes : report_u64(end_text, "bytes"), size, sizeof size);
    if (traced_ms)
        snprintf(dur, sizeof dur, " in %.1fs", (double)traced_ms / 1000.0);
    unsigned long long drops = report_u64(end_text, "drops");
    /* A filtered trace says so (the agent reports its filters in END). */
    char filters[1024] = "";
    char fl[900];
    if (vc_kv_get(end_text, "filters", fl, sizeof fl) > 0)
        snprintf(filters, sizeof filters, " [filtered: %s]", fl);
    /* 3.12+ sub-interpreters that end before they run Python hooked, or every one with
     * --hook profile (agent/interps.c): said, never silently missing. */
    char interps[160] = "", shared[64] = "";
    unsigned long long untraced = report_u64(end_text, "interps_untraced");
    unsigned long long nshared = report_u64(end_text, "interps_untraced_shared");
    if (nshared > untraced)
        nshared = untraced;
    if (nshared)
        snprintf(shared, sizeof shared, "%s%llu under the main GIL",
                 nshared < untraced ? ", " : "", nshared);
    if (untraced && nshared < untraced)
        snprintf(interps, sizeof interps,
                 "; %llu sub-interpreter%s not traced (CPython 3.12+, ended before hooked or "
                 "--hook profile: %llu with their own GIL%s)",
                 untraced, untraced == 1 ? "" : "s", untraced - nshared, shared);
    else if (untraced)
        snprintf(interps, sizeof interps, "; %llu sub-interpreter%s not traced (CPython 3.12+, "
                 "ended before hooked or --hook profile: %s)", untraced, untraced == 1 ? "" : "s",
                 shared);
    /* The note goes before ", SIZE -> OUT": what follows the arrow is where the trace is. */
    say_out("vcattach: pid %d%s: %llu events, %llu threads, %llu dropped%s%s, %s -> %s%s%s\n",
           (int)pid, dur, report_u64(end_text, "events"), report_u64(end_text, "threads"), drops,
           drops ? report_drop_hint(end_text) : "", interps, size, where, filters, hint);
    fflush(stdout);
}

void report_status_line(int show, pid_t pid, int64_t elapsed, uint64_t duration_ms,
                        const char *extra)
{
    if (!show)
        return;
    char e[32], l[32];
    vc_human_ms((uint64_t)elapsed, e, sizeof e);
    if (duration_ms) {
        int64_t left = (int64_t)duration_ms - elapsed;
        vc_human_ms(left > 0 ? (uint64_t)left : 0, l, sizeof l);
        fprintf(stderr, "\rvcattach: tracing pid %d: %s elapsed, %s left (Ctrl-C to stop)%s\033[K",
                (int)pid, e, l, extra);
    } else {
        fprintf(stderr, "\rvcattach: tracing pid %d: %s elapsed (Ctrl-C to stop)%s\033[K",
                (int)pid, e, extra);
    }
}

void report_status_line_clear(int show)
{
    if (show)
        fprintf(stderr, "\r\033[K");
}

/* From an agent's STATUS text: will its buffer fill within horizon_ms of the session's start,
 * at the rate so far?  1: yes, and it says so on stderr ("before WHEN"), with the --buffer-mb
 * that would hold the whole horizon; 0: no; -1: cannot tell yet (nothing recorded); -2: an
 * agent that does not report its buffer. */
int report_buffer_forecast(const char *reply, double horizon_ms, const char *when)
{
    char probe[32];
    if (vc_kv_get(reply, "buffer_chunks", probe, sizeof probe) < 0)
        return -2;
    unsigned long long used = report_u64(reply, "buffer_chunks_used"),
                       total = report_u64(reply, "buffer_chunks"), mb = report_u64(reply, "buffer_mb"),
                       elapsed = report_u64(reply, "elapsed_ms");
    if (!used || !total || !mb || !elapsed)
        return -1; /* nothing recorded yet: no rate to judge by */
    double fill_ms = (double)elapsed * (double)total / (double)used;
    if (fill_ms >= horizon_ms)
        return 0;
    double need_mb = (double)mb * horizon_ms / fill_ms * 1.25; /* a margin: rates vary */
    char f[32];
    vc_human_ms((uint64_t)fill_ms, f, sizeof f);
    if (need_mb <= 65536)
        say("vcattach: warning: at this call rate the %llu MiB buffer fills after ~%s, "
                        "before %s; then the oldest calls are dropped (--buffer-mb %.0f would "
                        "hold them)\n", mb, f, when, ceil(need_mb / 64) * 64);
    else
        say("vcattach: warning: at this call rate the %llu MiB buffer fills after ~%s, "
                        "before %s; then the oldest calls are dropped (trace for less time, "
                        "or raise --buffer-mb up to 65536)\n", mb, f, when);
    return 1;
}


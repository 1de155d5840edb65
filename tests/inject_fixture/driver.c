/* driver.c — build/inject-test: injects through libvcinject.a's public API (vcinject.h:
 * target_facts_read once, then inject() with method ptrace or gdb, which re-checks the target
 * before each injection), for the tests (tests/test_inject*.py) and for measuring injection
 * time without the rest of the CLI.
 *
 *   inject-test ptrace|gdb PID AGENT CONTROL [--timeout-ms N] [--repeat N] [--pause-ms N] [-v]
 *
 * --pause-ms: the target's facts are read, then N ms pass before the first injection (a test
 * changes the target meanwhile).
 *
 * Prints one line per injection: "status=S elapsed_us=U err=TEXT"; exit code = the last
 * status (0 INJECT_OK, 1 INJECT_UNTOUCHED, 2 INJECT_FAILED), 3 on usage errors.
 *
 *   inject-test old-gdb-layout
 *
 * Prints the XSAVE component a gdb before 14 would look for in the wrong place on this CPU
 * (xsave_layout.c: the gdb method refuses such a gdb) and exits 1, or prints nothing and exits
 * 0: for tests/support/gdb_probe.py.
 *
 *   inject-test judge-stacks < STACKS
 *
 * Judges recorded stacks with the ptrace method's rules (safepoint_walk_frame, the same call
 * safepoint.c makes for every unwound frame), for tests/unit/test_safepoint_rules.py, which judges
 * the same input with the gdb method's script.  STACKS: one frame a line, innermost first,
 * "function<TAB>module path" (either may be empty); a blank line ends a stack; a "#idle" line
 * says the stack's thread is blocked in an idle syscall; other '#' lines are comments.  Prints per stack "safe" or "unsafe INDEX WHY" (INDEX: the first unsafe frame).
 * (safepoint.h and xsave_layout.h are internal: only for judge-stacks and old-gdb-layout.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "safepoint.h"
#include "vcinject.h"
#include "xsave_layout.h"

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Ends the current stack: prints its verdict. */
static void end_stack(int *frames, int *unsafe_at, const char **why)
{
    if (*frames == 0)
        return;
    if (*unsafe_at >= 0)
        printf("unsafe %d %s\n", *unsafe_at, *why);
    else
        printf("safe\n");
    *frames = 0;
    *unsafe_at = -1;
    *why = NULL;
}

static int judge_stacks(void)
{
    char line[4096];
    int frames = 0, unsafe_at = -1;
    const char *why = NULL;
    struct safepoint_walk walk;
    memset(&walk, 0, sizeof walk);
    while (fgets(line, sizeof line, stdin)) {
        size_t n = strlen(line);
        if (n && line[n - 1] != '\n' && !feof(stdin)) {
            fprintf(stderr, "inject-test: judge-stacks: a line longer than %zu bytes: frames "
                    "are 'function<TAB>module path'\n", sizeof line - 2);
            return 3;
        }
        line[strcspn(line, "\n")] = 0;
        if (strcmp(line, "#idle") == 0) /* the next frames: a thread blocked in an idle syscall */
            walk.idle = 1;
        if (line[0] == '#')
            continue;
        if (!line[0]) {
            end_stack(&frames, &unsafe_at, &why);
            memset(&walk, 0, sizeof walk);
            continue;
        }
        char *tab = strchr(line, '\t');
        if (!tab) {
            fprintf(stderr, "inject-test: judge-stacks: no tab in '%s': frames are "
                    "'function<TAB>module path'\n", line);
            return 3;
        }
        *tab = 0;
        const char *w = safepoint_walk_frame(&walk, line, tab + 1);
        if (w && unsafe_at < 0) {
            unsafe_at = frames;
            why = w;
        }
        frames++;
    }
    end_stack(&frames, &unsafe_at, &why);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "judge-stacks") == 0)
        return judge_stacks();
    if (argc == 2 && strcmp(argv[1], "old-gdb-layout") == 0) {
        char why[160];
        if (!xsave_foreign_to_old_gdb(why, sizeof why))
            return 0;
        printf("%s\n", why);
        return 1;
    }
    if (argc < 5 || (strcmp(argv[1], "ptrace") != 0 && strcmp(argv[1], "gdb") != 0)) {
        fprintf(stderr, "usage: %s ptrace|gdb PID AGENT CONTROL [--timeout-ms N] [--repeat N] "
                "[--pause-ms N] [-v]\n       %s old-gdb-layout\n       %s judge-stacks < STACKS\n",
                argv[0], argv[0], argv[0]);
        return 3;
    }
    struct inject_request req = {0};
    char *end;
    pid_t pid = (pid_t)strtol(argv[2], &end, 10);
    if (*end) {
        fprintf(stderr, "inject-test: bad pid '%s'\n", argv[2]);
        return 3;
    }
    req.method = strcmp(argv[1], "ptrace") == 0 ? INJECT_PTRACE : INJECT_GDB;
    req.agent_path = argv[3];
    req.control_path = argv[4];
    req.timeout_ms = 5000;
    int repeat = 1, pause_ms = 0;
    for (int i = 5; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0)
            req.verbose++;
        else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc)
            req.timeout_ms = atoi(argv[++i]);
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (strcmp(argv[i], "--pause-ms") == 0 && i + 1 < argc)
            pause_ms = atoi(argv[++i]);
        else {
            fprintf(stderr, "inject-test: unknown argument '%s'\n", argv[i]);
            return 3;
        }
    }
    /* One snapshot for every repetition: inject() re-checks it before each one. */
    struct target_facts f;
    char ferr[512] = "";
    long long t0 = now_us();
    if (target_facts_read(pid, &f, ferr, sizeof ferr) < 0) {
        printf("status=%d elapsed_us=%lld err=no process to inject into: %s\n", INJECT_UNTOUCHED,
               now_us() - t0, ferr);
        target_facts_release(&f);
        return INJECT_UNTOUCHED;
    }
    req.target = &f;
    if (pause_ms > 0) { /* the target may change between its facts and the injection */
        struct timespec ts = {pause_ms / 1000, (long)(pause_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    int status = 0;
    for (int i = 0; i < repeat; i++) {
        char err[512] = "";
        struct inject_result res;
        t0 = now_us();
        status = inject(&req, &res, err, sizeof err);
        /* The methods' own words, as the tests know them: without the note inject() adds to
         * every untouched line for the CLI's operator. */
        const char *note = " (the target was not changed)";
        size_t len = strlen(err), nlen = strlen(note);
        if (status == INJECT_UNTOUCHED && len >= nlen && !strcmp(err + len - nlen, note))
            err[len - nlen] = '\0';
        printf("status=%d elapsed_us=%lld err=%s\n", status, now_us() - t0, err);
        fflush(stdout);
    }
    target_facts_release(&f);
    return status;
}

/* attach_options.h — the command lines of the attach workflow (trace, start, stop, status):
 * what each accepts, each subcommand's --help text, and the checks between options.
 *
 * Kept apart from cmd_trace.c so that the workflow reads as a sequence of steps; the parsing
 * itself (and the shape of every error message) is options.c's, shared with convert and
 * summary.
 */
#ifndef VC_ATTACH_OPTIONS_H
#define VC_ATTACH_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "options.h"

/* CLI_TOP: `vcattach top`, a trace whose frames a live view watches (cmd_top.c); without -o
 * nothing is written. */
enum cli_mode { CLI_TRACE, CLI_START, CLI_STOP, CLI_STATUS, CLI_TOP };
#define CLI_TOP_INTERVAL_MS 1000
#define CLI_TOP_MIN_INTERVAL_MS 100
#define CLI_TOP_MAX_INTERVAL_MS 60000
/* auto: remote-exec on CPython 3.14+ when the target allows it, else (and when no thread takes
 * the request in time) ptrace. */
enum cli_method { CLI_METHOD_AUTO, CLI_METHOD_PTRACE, CLI_METHOD_GDB, CLI_METHOD_REMOTE_EXEC };

/* `vcattach start` without -t: a detached session must always end by itself. */
#define CLI_START_DEFAULT_MS (60ull * 1000)
#define CLI_MAX_GLOBS 64 /* --include/--exclude patterns each (the agent's VC_FILTER_MAX_GLOBS) */
/* --subprocesses without --max-processes: a service's master and its workers, with room for
 * the workers that replace them, but not a runaway fork loop. */
#define CLI_TREE_MAX_DEFAULT 32

/* The agent's data is not trusted (SECURITY.md): what it may send after STOP is bounded. */
#define CLI_MAX_TRACE_MB 16384u
/* `trace` streams: the agent's in-flight window, the target's RSS growth bound (MiB) */
#define CLI_WINDOW_MB 32u
/* `start`: its agent spools itself (8 MiB of that in memory): the window is the rest */
#define CLI_START_WINDOW_MB 24u
#define CLI_COLLECT_TIMEOUT_MS (10ull * 60 * 1000)

struct cli_options {
    enum cli_mode mode;
    pid_t pid;
    uint64_t duration_ms;  /* 0: until Ctrl-C (trace only) */
    const char *output;    /* NULL: the default name; "unix:/path" streams to a socket */
    enum cli_method method;
    unsigned buffer_mb;    /* 0: the agent's default */
    unsigned max_trace_mb; /* cap on what the agent may send (trace): CLI_MAX_TRACE_MB */
    uint64_t collect_timeout_ms; /* bound of the transfer after STOP: CLI_COLLECT_TIMEOUT_MS */
    uint64_t last_ms;      /* --last: keep only the trace's final DUR (0: all of it) */
    const char *hook;      /* "auto" | "profile" | "monitoring" | "eval" */
    /* filters (sent in CONFIG; agent/filter.h): globs on a Python function's file */
    const char *include[CLI_MAX_GLOBS];
    const char *exclude[CLI_MAX_GLOBS];
    unsigned n_include, n_exclude;
    int no_c_calls;
    int null_hook;            /* --null-hook: hooks in place, nothing recorded (bench/service) */
    int no_tasks;             /* --no-tasks: asyncio task steps not marked */
    int no_sched;             /* --no-sched: no scheduler events (sched_events.h) */
    unsigned max_depth;    /* 0: unlimited */
    uint64_t min_dur_ns;   /* 0: every call kept */
    int force;
    int quiet;
    int verbose;
    int subprocesses;      /* --subprocesses: PID and its Python descendants (tree_trace.c, tree_sessions.c) */
    unsigned max_processes; /* --max-processes: bound of the tree (CLI_TREE_MAX_DEFAULT) */
    uint64_t interval_ms;  /* top: the screen's refresh (CLI_TOP_INTERVAL_MS) */
    int once;              /* top --once: one screen after the first interval, then detach */
    int nice, nice_set;    /* --nice: vcattach's own niceness while receiving (receive_priority.h) */
};

/* Parses argv (argv[0] = the subcommand name) for `mode`.  Returns 0 and fills *opt;
 * 1 when --help was printed (exit 0); 2 on a usage error, after printing one line naming the
 * problem and the fix on stderr. */
int cli_parse(enum cli_mode mode, int argc, char **argv, struct cli_options *opt);

/* Parses a --min-dur value: a number with a unit ns, us, ms or s ("50us", "1.5ms").
 * 0, or -1 with a message. */
int cli_parse_min_dur(const char *text, uint64_t *ns, char *err, size_t errlen);

#endif /* VC_ATTACH_OPTIONS_H */

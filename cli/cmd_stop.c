/* cmd_stop.c — `vcattach stop` and `vcattach status`: talk to a running session through its
 * abstract status socket (control_client.c's ctl_query); with --subprocesses, to every
 * session of a tree (tree_sessions.c).  Nothing is injected: a session that is not there is
 * an answer ("no session", exit 1), not an error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attach.h"
#include "attach_options.h"
#include "commands.h"
#include "control_client.h"
#include "session_query.h"
#include "report.h"
#include "tree_sessions.h"
#include "vcinject.h"
#include "human.h"
#include "say.h"

#define STOP_WAIT_MS 60000 /* `vcattach stop`: the agent writes the file first */

/* Parses the command line and asks the session in PID (a tree's sessions: tree_stop).
 * Returns 1 with the reply, or 0 (no session is running: said) or -1 (an error: said) with
 * the exit code in *rc. */
static int ask(enum cli_mode mode, int argc, char **argv, struct cli_options *opt, char *reply,
               size_t cap, int *rc)
{
    const char *cmd = mode == CLI_STOP ? "vcattach stop" : "vcattach status";
    uint32_t request = mode == CLI_STOP ? VC_MSG_STOP : VC_MSG_STATUS;
    int prc = cli_parse(mode, argc, argv, opt);
    *rc = prc == 1 ? VC_EXIT_OK : VC_EXIT_USAGE;
    if (prc)
        return -1;
    if (opt->subprocesses) {
        *rc = tree_stop(opt, request);
        return -1;
    }
    *rc = VC_EXIT_FAIL;
    if (!target_alive(opt->pid)) {
        say("%s: no such process: pid %d\n", cmd, (int)opt->pid);
        return -1;
    }
    char err[512];
    int r = ctl_query(opt->pid, request, reply, cap, mode == CLI_STOP ? STOP_WAIT_MS : 2000,
                      err, sizeof err);
    if (r < 0)
        say("%s: %s\n", cmd, err);
    if (r == 0 && mode == CLI_STOP)
        say("vcattach stop: no vcattach session is running in pid %d\n",
                (int)opt->pid);
    if (r == 0 && mode == CLI_STATUS && !opt->quiet)
        say_out("vcattach: no session is running in pid %d\n", (int)opt->pid);
    return r;
}

int cmd_stop(int argc, char **argv)
{
    struct cli_options opt;
    char reply[8192];
    int rc;
    if (ask(CLI_STOP, argc, argv, &opt, reply, sizeof reply, &rc) <= 0)
        return rc;
    char output[PATH_MAX] = "?";
    vc_kv_get(reply, "output", output, sizeof output);
    long agent_status = report_end_status(reply);
    char agent_err[1024]; /* the agent's own words: e.g. OUT appeared, the trace is in OUT.tmp */
    if (agent_status && vc_kv_get(reply, "error", agent_err, sizeof agent_err) > 0) {
        say("vcattach stop: the agent in pid %d: %s\n", (int)opt.pid, agent_err);
        return VC_EXIT_FAIL;
    }
    if (agent_status) {
        say("vcattach stop: the agent in pid %d could not write %s (%s); look for "
                        "its fallback file next to it (.partial.cvf)\n",
                (int)opt.pid, output, strerror((int)-agent_status));
        return VC_EXIT_FAIL;
    }
    if (!opt.quiet)
        report_summary(opt.pid, reply, output, 0, 0);
    return VC_EXIT_OK;
}

int cmd_status(int argc, char **argv)
{
    struct cli_options opt;
    char reply[8192];
    int rc;
    if (ask(CLI_STATUS, argc, argv, &opt, reply, sizeof reply, &rc) <= 0)
        return rc;
    char state[32] = "running", output[PATH_MAX] = "?", e[32], l[32], left[48];
    vc_kv_get(reply, "state", state, sizeof state);
    vc_kv_get(reply, "output", output, sizeof output);
    vc_human_ms(report_u64(reply, "elapsed_ms"), e, sizeof e);
    unsigned long long remaining = report_u64(reply, "remaining_ms");
    int streamed = !strcmp(output, "control"); /* a `vcattach trace` receives it */
    /* A `vcattach trace -t` session's agent holds the deadline plus ATTACH_DEADLINE_GRACE_MS
     * (its backstop in case that vcattach dies); the vcattach stops it at -t itself, so what
     * is left is the agent's figure minus the grace. */
    int backstop = streamed && remaining > 0;
    if (backstop)
        remaining = remaining > ATTACH_DEADLINE_GRACE_MS ? remaining - ATTACH_DEADLINE_GRACE_MS
                                                         : 0;
    vc_human_ms(remaining, l, sizeof l);
    snprintf(left, sizeof left, remaining || backstop ? "%s left" : "no deadline", l);
    if (streamed)
        snprintf(output, sizeof output, "streamed to the vcattach that started it");
    if (!opt.quiet) {
        say_out("vcattach: session %s in pid %d: %s elapsed, %s, %llu threads, output %s\n",
               state, (int)opt.pid, e, left, report_u64(reply, "threads"), output);
        fflush(stdout);
        /* A session with a deadline: will the buffer hold until then? */
        if (remaining && !strcmp(state, "running")) {
            char when[64];
            snprintf(when, sizeof when, "the session ends (in %s)", l);
            report_buffer_forecast(reply, (double)(report_u64(reply, "elapsed_ms") + remaining), when);
        }
    }
    return VC_EXIT_OK;
}

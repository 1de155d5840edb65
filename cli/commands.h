/* commands.h — the subcommands of `vcattach` and the exit-code contract (see main.c).
 * Each cmd_* takes argv with argv[0] = the subcommand name and returns an exit code. */
#ifndef VC_COMMANDS_H
#define VC_COMMANDS_H

#include "vctrace.h"
#include "version.h"

enum { VC_EXIT_OK = 0, VC_EXIT_FAIL = 1, VC_EXIT_USAGE = 2 };

/* An offline command's end (offline_exit.c): what its call into libvctrace returned, said (one line
 * "vcattach CMD: err" unless VCT_OK) and turned into its exit code. */
int vc_offline_exit(const char *cmd, enum vct_result r, const char *err);

int cmd_trace(int argc, char **argv);   /* cmd_trace.c */
int cmd_start(int argc, char **argv);   /* cmd_trace.c */
int cmd_stop(int argc, char **argv);    /* cmd_stop.c */
int cmd_status(int argc, char **argv);  /* cmd_stop.c */
int cmd_convert(int argc, char **argv); /* cmd_convert.c */
int cmd_summary(int argc, char **argv); /* cmd_summary.c */
int cmd_requests(int argc, char **argv); /* cmd_requests.c */
int cmd_recover(int argc, char **argv); /* cmd_recover.c */
int cmd_top(int argc, char **argv);     /* cmd_top.c */

#endif

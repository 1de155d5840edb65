/* cmd_trace.c — placeholder until this command is built; replaced by its owner. */
#include <stdio.h>
#include "commands.h"
int cmd_trace(int argc, char **argv) { (void)argc; (void)argv; fputs("vcattach: 'trace' is not built yet\n", stderr); return VC_EXIT_FAIL; }
int cmd_start(int argc, char **argv) { (void)argc; (void)argv; fputs("vcattach: 'start' is not built yet\n", stderr); return VC_EXIT_FAIL; }
int cmd_stop(int argc, char **argv) { (void)argc; (void)argv; fputs("vcattach: 'stop' is not built yet\n", stderr); return VC_EXIT_FAIL; }
int cmd_status(int argc, char **argv) { (void)argc; (void)argv; fputs("vcattach: 'status' is not built yet\n", stderr); return VC_EXIT_FAIL; }

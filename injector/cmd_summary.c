/* cmd_summary.c — placeholder until this command is built; replaced by its owner. */
#include <stdio.h>
#include "commands.h"
int cmd_summary(int argc, char **argv) { (void)argc; (void)argv; fputs("vcattach: 'summary' is not built yet\n", stderr); return VC_EXIT_FAIL; }

/* driver.c — build/inject-test: calls inject_ptrace()/inject_gdb() directly, for the tests
 * (tests/test_inject*.py) and for measuring injection time without the rest of the CLI.
 *
 *   inject-test ptrace|gdb PID AGENT CONTROL [--timeout-ms N] [--repeat N] [-v]
 *
 * Prints one line per injection: "status=S elapsed_us=U err=TEXT"; exit code = the last
 * status (0 INJECT_OK, 1 INJECT_UNTOUCHED, 2 INJECT_FAILED), 3 on usage errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inject.h"

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int main(int argc, char **argv)
{
    if (argc < 5 || (strcmp(argv[1], "ptrace") != 0 && strcmp(argv[1], "gdb") != 0)) {
        fprintf(stderr, "usage: %s ptrace|gdb PID AGENT CONTROL [--timeout-ms N] [--repeat N] "
                "[-v]\n", argv[0]);
        return 3;
    }
    struct inject_request req = {0};
    char *end;
    req.pid = (pid_t)strtol(argv[2], &end, 10);
    if (*end) {
        fprintf(stderr, "inject-test: bad pid '%s'\n", argv[2]);
        return 3;
    }
    req.agent_path = argv[3];
    req.control_path = argv[4];
    req.timeout_ms = 5000;
    int repeat = 1;
    for (int i = 5; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0)
            req.verbose++;
        else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc)
            req.timeout_ms = atoi(argv[++i]);
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else {
            fprintf(stderr, "inject-test: unknown argument '%s'\n", argv[i]);
            return 3;
        }
    }
    int status = 0;
    for (int i = 0; i < repeat; i++) {
        char err[512] = "";
        long long t0 = now_us();
        status = strcmp(argv[1], "ptrace") == 0 ? inject_ptrace(&req, err, sizeof err)
                                                 : inject_gdb(&req, err, sizeof err);
        printf("status=%d elapsed_us=%lld err=%s\n", status, now_us() - t0, err);
        fflush(stdout);
    }
    return status;
}

/* fuzz_cvf_reader.c — libFuzzer harness: any bytes as a .cvf, through the bounded reader
 * (common/cvf_reader.c: every callback reads every value it is given, with and without the
 * JSON parts), the Chrome converter (trace/chrome.c) and, when it reads whole, the merge of a
 * tree's parts (trace/merge.c: `stop --subprocesses` checks each member's part, then merges
 * them, cli/tree_merge.c).  A trace file comes from the agent, the target's user's code
 * (SECURITY.md §7); the tools that load it into the trace model are fuzz_offline.c's.
 * Checked besides crashes: skipping the JSON can only accept more, the Chrome converter
 * accepts exactly what the reader accepts, and a part the merge's check accepts merges (one
 * that does not would sink every member's trace) into a .cvf that decodes.
 * Built by tests/fuzz/fuzz.mk; seeds in tests/fuzz/corpus/cvf_reader. */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "chrome.h"
#include "cvf_reader.h"
#include "fuzz_util.h"
#include "merge.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    char msg[512];
    cvf_error err;
    if (!devnull)
        devnull = fopen("/dev/null", "w");
    int a = fuzz_cvf_read_all(data, size, 0, msg, sizeof msg);
    int b = fuzz_cvf_read_all(data, size, CVF_READ_SKIP_JSON, msg, sizeof msg);
    if (a == 0 && b != 0) /* skipping the JSON can only accept more */
        __builtin_trap();
    int c = convert_cvf_to_chrome(data, size, devnull, NULL, &err);
    if ((a == 0) != (c == 0))
        __builtin_trap();
    if (a != 0)
        return 0;
    char path[256];
    fuzz_write_file("in", data, size, path, sizeof path);
    if (vct_cvf_check(path, msg, sizeof msg) != 0)
        return 0; /* left out of the merge (it may be stricter than the reader) */
    const char *parts[2] = {path, path};
    int out = fuzz_memfd();
    if (vct_cvf_merge(parts, 2, cvf_sink_fd, (void *)(intptr_t)out, msg, sizeof msg) != 0) {
        fprintf(stderr, "fuzz: the merge of two readable parts failed: %s\n", msg);
        __builtin_trap();
    }
    fuzz_require_cvf(out, "vct_cvf_merge (stop --subprocesses)");
    close(out);
    return 0;
}

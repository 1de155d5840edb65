/* fuzz_offline.c — libFuzzer harness: any bytes as a trace file (.cvf, or Chrome JSON by its
 * first byte) given to the offline tools as an operator runs them: `summary`, `convert` to
 * every format, `requests` (fuzz_util.c), which load it into the trace model (trace/load.c,
 * model.c, tasks.c, cpu.c) and compute the summary, requests, task tracks and exports.  A
 * trace file comes from the agent, the target's user's code (SECURITY.md §7).
 * Slower than the reader's harness (each tool loads the file: ~30 runs a second under ASan),
 * deeper: every consumer of a decoded trace.
 * Built by tests/fuzz/fuzz.mk; seeds in tests/fuzz/corpus/offline. */
#include <stdint.h>

#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_quiet_stdout();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    fuzz_write_file("in", data, size, path, sizeof path);
    fuzz_offline_tools(path, size ? data[size - 1] : 0);
    return 0;
}

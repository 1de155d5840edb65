/* fuzz_spool_replay.c — libFuzzer harness: a spool file replayed and built into a .cvf, as
 * `vcattach recover` does (common/spool.c spool_open, spool_build.c).  A spool may be
 * written by the target's user (a `start` session's OUT.spool is), so any bytes must end in
 * an error or a trace.
 *
 * Input: one byte of shape, then the file after its 16-byte header (the harness writes
 * "VCSPOOL1" and 8 zero bytes first: the replay's records follow, u32 type | u32 length |
 * payload, common/spool_impl.h).
 *   bit 0   `recover --last 1ms` (spool_build_many keeps the calls that end within it)
 *   bit 1   the file given twice, as OUT.spool.prev and OUT.spool (two generations)
 *   bit 2   built as a tree's processes (spool_build_processes, cli/tree_trace.c), the
 *           file as two members when bit 1 is set
 * The .cvf built must decode (fuzz_require_cvf).
 * Built by tests/fuzz/fuzz.mk; seeds in tests/fuzz/corpus/spool_replay. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "spool.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t shape = data[0];
    unsigned char *file = malloc(size - 1 + 16);
    if (file == NULL)
        return 0;
    memcpy(file, "VCSPOOL1\0\0\0\0\0\0\0\0", 16);
    memcpy(file + 16, data + 1, size - 1);
    char path[256];
    fuzz_write_file("spool", file, size - 1 + 16, path, sizeof path);
    free(file);

    struct spool *sps[2] = {NULL, NULL};
    size_t n = shape & 2 ? 2 : 1;
    char err[1024];
    for (size_t i = 0; i < n; i++)
        if (spool_open(&sps[i], path, err, sizeof err) != 0) {
            spool_close(sps[0], 0);
            return 0;
        }
    int out = fuzz_memfd();
    void *ctx = (void *)(intptr_t)out;
    struct spool_stats st;
    int rc = shape & 4 ? spool_build_processes(sps, n, cvf_sink_fd, ctx, &st, err, sizeof err)
                       : spool_build_many(sps, n, shape & 1 ? 1000000 : 0, cvf_sink_fd, ctx, &st,
                                          err, sizeof err);
    if (rc == 0)
        fuzz_require_cvf(out, shape & 4 ? "spool_build_processes"
                                        : "spool_build_many (vcattach recover)");
    close(out);
    for (size_t i = 0; i < n; i++)
        spool_close(sps[i], 0);
    return 0;
}

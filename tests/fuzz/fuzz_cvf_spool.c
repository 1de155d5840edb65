/* fuzz_cvf_spool.c — libFuzzer target: arbitrary bytes as what an agent streams (frames into
 * spool_add) or as a spool file left on disk (spool_open's replay), then the .cvf built from
 * either (common/spool.h).  The first byte chooses.  An agent and a spool file are untrusted
 * (SECURITY.md §4): any input must end in an error or a trace, never a crash.
 * Built by tests/tests.mk with clang -fsanitize=fuzzer,address,undefined; run briefly by
 * tests/test_codec_fuzz.py. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spool.h"

static volatile uint64_t sink_bytes;

static int null_sink(void *ctx, const void *data, size_t len)
{
    (void)ctx;
    (void)data;
    sink_bytes += len;
    return 0;
}

static void build(struct spool *sp)
{
    struct spool_stats st;
    char err[512];
    spool_build(sp, null_sink, NULL, &st, err, sizeof err);
}

/* Frames: u8 type (taken mod 6, from CHUNK), u16 length, that many bytes. */
static void as_frames(const uint8_t *data, size_t size, const char *path)
{
    struct spool *sp;
    char err[512];
    if (spool_create(&sp, path, 1234, err, sizeof err) != 0)
        return;
    for (size_t off = 0; off + 3 <= size;) {
        uint32_t type = 9 + data[off] % 6;
        size_t len = (size_t)data[off + 1] | (size_t)data[off + 2] << 8;
        off += 3;
        if (len > size - off)
            len = size - off;
        if (spool_add(sp, type, data + off, len, err, sizeof err) != 0)
            break;
        off += len;
    }
    spool_flush(sp, err, sizeof err);
    build(sp);
    spool_close(sp, 1);
}

static void as_file(const uint8_t *data, size_t size, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return;
    fwrite("VCSPOOL1\0\0\0\0\0\0\0\0", 1, 16, f);
    fwrite(data, 1, size, f);
    fclose(f);
    struct spool *sp;
    char err[512];
    if (spool_open(&sp, path, err, sizeof err) == 0) {
        build(sp);
        spool_close(sp, 0);
    }
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz-spool-%d", (int)getpid());
    unlink(path);
    if (size < 1)
        return 0;
    if (data[0] & 1)
        as_file(data + 1, size - 1, path);
    else
        as_frames(data + 1, size - 1, path);
    return 0;
}

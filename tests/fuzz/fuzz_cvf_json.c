/* fuzz_cvf_json.c — libFuzzer target: arbitrary bytes as Chrome trace JSON through
 * convert_json_to_cvf; when it succeeds, the .cvf it wrote must decode with our reader.
 * Built by tests/tests.mk (clang, ASan+UBSan+libFuzzer); run briefly by test_codec_fuzz.py. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "convert.h"
#include "cvf_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    if (fd < 0) {
        char path[] = "/tmp/fuzz_cvf_json_XXXXXX";
        fd = mkstemp(path);
        if (fd < 0)
            abort();
        unlink(path);
    }
    if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0)
        abort();
    cvf_error err;
    if (convert_json_to_cvf((const char *)data, size, fd, NULL, &err) != 0)
        return 0;
    off_t n = lseek(fd, 0, SEEK_CUR);
    uint8_t *buf = malloc((size_t)n);
    if (!buf || pread(fd, buf, (size_t)n, 0) != n)
        abort();
    if (cvf_read(buf, (size_t)n, NULL, NULL, 0, &err) != 0) {
        fprintf(stderr, "our own .cvf does not decode: %s\n", err.msg);
        __builtin_trap();
    }
    free(buf);
    return 0;
}

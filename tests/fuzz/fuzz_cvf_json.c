/* fuzz_cvf_json.c — libFuzzer harness: any bytes as Chrome trace JSON, through
 * convert_json_to_cvf (trace/json_cvf.c, common/json_scan.c); when it succeeds, the .cvf it
 * wrote must decode with our reader.  The tools that load a JSON trace are fuzz_offline.c's.
 * Built by tests/fuzz/fuzz.mk; seeds in tests/fuzz/corpus/cvf_json. */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "json_cvf.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = fuzz_memfd();
    cvf_error err;
    if (convert_json_to_cvf((const char *)data, size, fd, NULL, &err) == 0)
        fuzz_require_cvf(fd, "convert_json_to_cvf");
    close(fd);
    return 0;
}

/* cvf_corrupt.c — in-process corruption driver for the codec's readers (run by
 * tests/unit/test_codec_corrupt.py, normally and under ASan+UBSan).
 *
 *   cvf_corrupt cvf FILE FLIPS SEED    every truncation of a valid .cvf, then FLIPS seeded
 *                                      random byte flips, through cvf_read and the Chrome
 *                                      converter
 *   cvf_corrupt json FILE FLIPS SEED   every truncation (up to 4000, then sampled) and FLIPS
 *                                      flips of a JSON trace through convert_json_to_cvf
 *
 * Truncations must all be reported as errors whose message names the offset (the one
 * undetectable cut, right before an optional file_info record, is allowed); flips may decode
 * or fail, but never crash, leak or trip a sanitizer.  Exit status 0 when every expectation
 * held; the counts are printed for the test log. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chrome.h"
#include "json_cvf.h"
#include "cvf_reader.h"

static uint64_t rng_state;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static uint64_t file_info_at = UINT64_MAX;
static int on_file_info(void *ctx, const cvf_json_record *r)
{
    (void)ctx;
    file_info_at = r->offset - 1; /* the header byte */
    return 0;
}

static FILE *devnull;

static int decode(const uint8_t *d, size_t n, cvf_error *err)
{
    static const cvf_visitor v = {.file_info = on_file_info};
    int a = cvf_read(d, n, &v, NULL, 0, err);
    cvf_error e2;
    int b = convert_cvf_to_chrome(d, n, devnull, NULL, &e2);
    if ((a == 0) != (b == 0)) {
        fprintf(stderr, "reader and converter disagree on %zu bytes: %s / %s\n", n, err->msg,
                e2.msg);
        return 2;
    }
    return a == 0 ? 0 : 1;
}

static int run_cvf(const uint8_t *data, size_t size, long flips)
{
    cvf_error err;
    int bad = 0;
    if (decode(data, size, &err) != 0) {
        fprintf(stderr, "the input itself does not decode: %s\n", err.msg);
        return 1;
    }
    size_t errors = 0;
    for (size_t n = 0; n < size; n++) {
        int r = decode(data, n, &err);
        if (r == 0 && n != file_info_at) {
            fprintf(stderr, "truncation to %zu bytes decoded without an error\n", n);
            bad++;
        } else if (r == 2)
            bad++;
        else if (r == 1) {
            errors++;
            if (strncmp(err.msg, "offset ", 7) != 0 || strchr(err.msg, '\n')) {
                fprintf(stderr, "truncation to %zu: message not 'offset N: ...': %s\n", n,
                        err.msg);
                bad++;
            }
        }
    }
    uint8_t *copy = malloc(size);
    size_t ok = 0, failed = 0;
    for (long i = 0; i < flips; i++) {
        memcpy(copy, data, size);
        int nflip = 1 + (int)(rng() % 3);
        for (int k = 0; k < nflip; k++)
            copy[rng() % size] ^= (uint8_t)(1 + rng() % 255);
        int r = decode(copy, size, &err);
        if (r == 2)
            bad++;
        else if (r == 0)
            ok++;
        else
            failed++;
    }
    free(copy);
    printf("cvf: %zu bytes, %zu truncations rejected, %ld flips (%zu decoded, %zu rejected), "
           "%d problems\n", size, errors, flips, ok, failed, bad);
    return bad != 0;
}

static int json_once(const uint8_t *d, size_t n, int fd)
{
    cvf_error err;
    if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0)
        return -1;
    int r = convert_json_to_cvf((const char *)d, n, fd, NULL, &err);
    if (r != 0 && (err.msg[0] == 0 || strchr(err.msg, '\n'))) {
        fprintf(stderr, "JSON error without a one-line message on %zu bytes (input saved to "
                        "/tmp/cvf_corrupt_failure.json)\n", n);
        FILE *f = fopen("/tmp/cvf_corrupt_failure.json", "w");
        if (f) {
            fwrite(d, 1, n, f);
            fclose(f);
        }
        return 2;
    }
    return r == 0 ? 0 : 1;
}

static int run_json(const uint8_t *data, size_t size, long flips)
{
    char path[] = "/tmp/cvf_corrupt_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 1;
    unlink(path);
    int bad = 0;
    if (json_once(data, size, fd) != 0) {
        fprintf(stderr, "the JSON input itself does not convert\n");
        close(fd);
        return 1;
    }
    size_t end = size;
    while (end > 0 && strchr(" \t\r\n", data[end - 1]))
        end--;
    size_t step = size > 4000 ? size / 4000 : 1, errors = 0;
    for (size_t n = 0; n < end; n += step) {
        int r = json_once(data, n, fd);
        if (r == 0) {
            fprintf(stderr, "JSON truncated to %zu bytes converted without an error\n", n);
            bad++;
        } else if (r == 2)
            bad++;
        else
            errors++;
    }
    uint8_t *copy = malloc(size);
    size_t ok = 0, failed = 0;
    for (long i = 0; i < flips; i++) {
        memcpy(copy, data, size);
        int nflip = 1 + (int)(rng() % 3);
        for (int k = 0; k < nflip; k++)
            copy[rng() % size] ^= (uint8_t)(1 + rng() % 255);
        int r = json_once(copy, size, fd);
        if (r == 2)
            bad++;
        else if (r == 0)
            ok++;
        else
            failed++;
    }
    free(copy);
    close(fd);
    printf("json: %zu bytes, %zu truncations rejected, %ld flips (%zu converted, %zu "
           "rejected), %d problems\n", size, errors, flips, ok, failed, bad);
    return bad != 0;
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[1], "cvf") && strcmp(argv[1], "json"))) {
        fprintf(stderr, "usage: cvf_corrupt cvf|json FILE FLIPS SEED\n");
        return 2;
    }
    void *data;
    size_t size;
    cvf_error err;
    if (cvf_map_file(argv[2], &data, &size, &err) != 0 || size == 0) {
        fprintf(stderr, "%s: %s\n", argv[2], size ? err.msg : "empty");
        return 2;
    }
    rng_state = strtoull(argv[4], NULL, 10) * 2654435761u + 1;
    devnull = fopen("/dev/null", "w");
    long flips = strtol(argv[3], NULL, 10);
    int rc = !strcmp(argv[1], "cvf") ? run_cvf(data, size, flips) : run_json(data, size, flips);
    fclose(devnull);
    cvf_unmap_file(data, size);
    return rc;
}

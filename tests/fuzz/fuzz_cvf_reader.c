/* fuzz_cvf_reader.c — libFuzzer target: arbitrary bytes through the bounded .cvf reader
 * (every callback reads every value it is given) and through the Chrome JSON converter.
 * Built by tests/tests.mk with clang -fsanitize=fuzzer,address,undefined; run briefly by
 * tests/test_codec_fuzz.py, seeded with generated .cvf files. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "convert.h"
#include "cvf_reader.h"

static volatile uint64_t sink;

static int on_name(void *ctx, uint64_t pid, uint64_t tid, const char *name)
{
    sink += pid + tid + strlen(name);
    return 0;
}

static int on_fee(void *ctx, const cvf_fee_group *g)
{
    for (size_t i = 0; i < g->count; i++)
        sink += (uint64_t)g->ts[i] + g->dur[i];
    if (g->args)
        for (size_t i = 0; i < g->count; i++)
            sink += (unsigned char)g->args_json[g->args[i].off + g->args[i].len - 1];
    return 0;
}

static int on_counter(void *ctx, const cvf_counter_group *g)
{
    for (size_t k = 0; k < g->nkeys; k++)
        sink += strlen(g->keys[k]);
    for (size_t i = 0; i < g->nts * g->nkeys; i++)
        if (g->values[i].tag == CVF_COUNTER_LONG_STRING)
            sink += strlen(g->values[i].v.s);
    return 0;
}

static int on_json(void *ctx, const cvf_json_record *r)
{
    for (size_t i = 0; i < r->nitems; i++)
        sink += (unsigned char)r->json[r->items[i].off];
    sink += r->len;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const cvf_visitor v = {on_name, on_name, on_fee, on_counter, on_json, on_json};
    static FILE *devnull;
    cvf_error err;
    if (!devnull)
        devnull = fopen("/dev/null", "w");
    int a = cvf_read(data, size, &v, NULL, 0, &err);
    int b = cvf_read(data, size, &v, NULL, CVF_READ_SKIP_JSON, &err);
    if (a == 0 && b != 0) /* skipping the JSON can only accept more */
        __builtin_trap();
    int c = convert_cvf_to_chrome(data, size, devnull, NULL, &err);
    if ((a == 0) != (c == 0))
        __builtin_trap();
    return 0;
}

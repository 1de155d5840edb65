/* cvf_test.h — the tiny assertion kit of the codec's C unit programs (tests/unit/).
 * No framework: CHECK records a failure with file:line and goes on; main() returns the
 * failure count's truth value, so pytest (test_codec_unit.py) sees a nonzero exit. */
#ifndef VC_CVF_TEST_H
#define VC_CVF_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failures;
static int test_checks;

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        test_checks++;                                                                         \
        if (!(cond)) {                                                                         \
            test_failures++;                                                                   \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);           \
        }                                                                                      \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                                     \
    do {                                                                                       \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);          \
        test_checks++;                                                                         \
        if (a_ != b_) {                                                                        \
            test_failures++;                                                                   \
            fprintf(stderr, "%s:%d: %s == %llu, expected %s == %llu\n", __FILE__, __LINE__,   \
                    #a, a_, #b, b_);                                                           \
        }                                                                                      \
    } while (0)

/* A growable in-memory sink for cvf_writer. */
typedef struct membuf {
    uint8_t *data;
    size_t len, cap;
    size_t fail_after; /* if nonzero: fail once this many bytes are written */
} membuf;

static int membuf_sink(void *ctx, const void *data, size_t len)
{
    membuf *m = ctx;
    if (m->fail_after && m->len + len > m->fail_after)
        return -1;
    if (m->len + len > m->cap) {
        size_t cap = m->cap ? m->cap : 4096;
        while (cap < m->len + len)
            cap *= 2;
        uint8_t *p = realloc(m->data, cap);
        if (!p)
            return -1;
        m->data = p;
        m->cap = cap;
    }
    memcpy(m->data + m->len, data, len);
    m->len += len;
    return 0;
}

static int test_summary(const char *prog)
{
    if (test_failures)
        fprintf(stderr, "%s: %d of %d checks FAILED\n", prog, test_failures, test_checks);
    else
        printf("%s: all %d checks passed\n", prog, test_checks);
    return test_failures ? 1 : 0;
}

#endif

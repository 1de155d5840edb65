/* test_text.c — the bounded text builder (common/text.h) and the terminal sanitizer
 * (common/term.h): appends never pass the cap, a refused record rolls back whole, JSON and
 * terminal escapes for every kind of hostile byte, cuts that never split an escape. */
#include "cvf_test.h"
#include "term.h"
#include "text.h"

static void test_cap_and_rollback(void)
{
    vc_text t;
    vc_text_init(&t, 10);
    CHECK(vc_text_puts(&t, "12345") == 0);
    size_t m = vc_text_mark(&t);
    CHECK(vc_text_puts(&t, "678") == 0);
    CHECK(vc_text_puts(&t, "9ab") == -1); /* would be 11 bytes */
    CHECK(t.failed && t.len == 8);
    CHECK(vc_text_putc(&t, 'x') == -1); /* failed: nothing more, though one byte would fit */
    vc_text_rollback(&t, m);
    CHECK(!t.failed && t.len == 5 && strcmp(vc_text_str(&t), "12345") == 0);
    CHECK(vc_text_printf(&t, "%05d", 42) == 0 && strcmp(vc_text_str(&t), "1234500042") == 0);
    CHECK(vc_text_printf(&t, "%d", 1) == -1);
    vc_text_free(&t);

    /* a long printf grows past the small first buffer, within the cap */
    vc_text_init(&t, 100000);
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK(vc_text_printf(&t, "<%s>", big) == 0 && t.len == sizeof big + 1);
    CHECK(t.buf[0] == '<' && t.buf[t.len - 1] == '>' && t.buf[t.len] == '\0');
    vc_text_free(&t);

    /* a fixed buffer never grows */
    char fixed[4];
    vc_text_fixed(&t, fixed, sizeof fixed);
    CHECK(vc_text_puts(&t, "abc") == 0 && vc_text_putc(&t, 'd') == -1);
    CHECK(strcmp(fixed, "abc") == 0);
}

static void test_json(void)
{
    vc_text t;
    vc_text_init(&t, 1000);
    static const char in[] = "a\"b\\c\x01\x1f" "\xff" "\xc3\xa9" "\xe0\x80\x80" "\xed\xa0\x80";
    CHECK(vc_text_json(&t, in, sizeof in - 1) == 0);
    CHECK(strcmp(vc_text_str(&t), "a\\\"b\\\\c\\u0001\\u001f?\xc3\xa9???\?\?\?") == 0);
    vc_text_free(&t);

    /* 48 control characters of a task name: six bytes each, and the cap holds */
    char ctl[49];
    memset(ctl, 1, 48);
    ctl[48] = '\0';
    vc_text_init(&t, 287);
    CHECK(vc_text_json(&t, ctl, 48) == -1 && t.len <= 287);
    vc_text_free(&t);
    vc_text_init(&t, 288);
    CHECK(vc_text_json(&t, ctl, 48) == 0 && t.len == 288);
    vc_text_free(&t);
}

static const char *term(const char *in, unsigned flags)
{
    static char out[512];
    return vc_term_safe(out, sizeof out, in, flags);
}

static void test_terminal(void)
{
    CHECK(strcmp(term("plain é ✓", 0), "plain é ✓") == 0);
    CHECK(strcmp(term("\x1b]0;owned\x07", 0), "\\x1b]0;owned\\x07") == 0);
    CHECK(strcmp(term("a\rb\tc\nd", 0), "a\\rb\\tc\\nd") == 0);
    CHECK(strcmp(term("a\nb", VC_TERM_KEEP_NEWLINES), "a\nb") == 0);
    CHECK(strcmp(term("\x7f", 0), "\\x7f") == 0);
    CHECK(strcmp(term("\xc2\x9b" "31m", 0), "\\u009b31m") == 0);       /* C1 CSI */
    CHECK(strcmp(term("\xc2\x85", 0), "\\u0085") == 0);                 /* C1 NEL */
    CHECK(strcmp(term("\xc2\xa0", 0), "\xc2\xa0") == 0);                /* U+00A0 stays */
    CHECK(strcmp(term("x\xe2\x80\xaey", 0), "x\\u202ey") == 0);         /* RLO */
    CHECK(strcmp(term("\xe2\x81\xa6\xe2\x81\xa9", 0), "\\u2066\\u2069") == 0); /* isolates */
    CHECK(strcmp(term("\xe2\x80\xa9", 0), "\xe2\x80\xa9") == 0);        /* U+2029 is not bidi */
    CHECK(strcmp(term("\x9b\xff\xc0\xaf", 0), "\\x9b\\xff\\xc0\\xaf") == 0); /* stray bytes */
    CHECK(strcmp(term("\xe2\x80", 0), "\\xe2\\x80") == 0);              /* truncated */

    /* a cut never splits an escape */
    char small[8];
    vc_term_safe(small, sizeof small, "ab\x1b\x1b", 0);
    CHECK(strcmp(small, "ab\\x1b") == 0);

    /* in place, growing within cap */
    char buf[16] = "a\x1b" "b";
    size_t n = vc_term_sanitize(buf, 3, sizeof buf, 0);
    CHECK(n == 6 && strcmp(buf, "a\\x1bb") == 0);
    char tight[6] = "\x1b\x1b\x1b";
    n = vc_term_sanitize(tight, 3, sizeof tight, 0);
    CHECK(n == 4 && strcmp(tight, "\\x1b") == 0);

    /* every byte value alone: the output is printable ASCII or well-formed UTF-8 that is
     * neither C1 nor bidi */
    for (int c = 1; c < 256; c++) {
        char in[2] = {(char)c, 0};
        const char *o = term(in, 0);
        for (const unsigned char *p = (const unsigned char *)o; *p; p++)
            CHECK(*p >= 0x20 && *p < 0x7f);
    }
}

int main(void)
{
    test_cap_and_rollback();
    test_json();
    test_terminal();
    (void)membuf_sink;
    return test_summary("test_text");
}

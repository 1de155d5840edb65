/* term.c — the terminal sanitizer (term.h): one decision per character, shared by every
 * command that prints what a target's user controls, so that they cannot disagree; and the
 * one formatted print through it (vc_term_printf), which cli's say() and trace/'s reports use. */
#include "term.h"
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

/* The escape for a character that must not reach a terminal, or NULL when it may. */
static const char *escape_of(unsigned cp, unsigned flags, char *esc, size_t cap)
{
    if (cp == '\n' && (flags & VC_TERM_KEEP_NEWLINES))
        return NULL;
    if (cp == '\n' || cp == '\r' || cp == '\t') {
        snprintf(esc, cap, "\\%c", cp == '\n' ? 'n' : cp == '\r' ? 'r' : 't');
        return esc;
    }
    if (cp < 0x20 || cp == 0x7f) {
        snprintf(esc, cap, "\\x%02x", cp);
        return esc;
    }
    if ((cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
        (cp >= 0x2066 && cp <= 0x2069)) {
        snprintf(esc, cap, "\\u%04x", cp);
        return esc;
    }
    return NULL;
}

int vc_text_term(vc_text *t, const char *str, size_t n, unsigned flags)
{
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < n && s[i] != '\0';) {
        unsigned cp;
        size_t k = vc_utf8_next(s + i, n - i, &cp);
        char esc[16];
        const char *e;
        if (k == 0) {
            snprintf(esc, sizeof esc, "\\x%02x", s[i]);
            e = esc;
            k = 1;
        } else {
            e = escape_of(cp, flags, esc, sizeof esc);
        }
        if ((e != NULL ? vc_text_puts(t, e) : vc_text_put(t, s + i, k)) != 0)
            return -1;
        i += k;
    }
    return 0;
}

const char *vc_term_safe(char *buf, size_t cap, const char *s, unsigned flags)
{
    vc_text t;
    vc_text_fixed(&t, buf, cap);
    vc_text_term(&t, s, strlen(s), flags);
    return buf;
}

size_t vc_term_sanitize(char *t, size_t len, size_t cap, unsigned flags)
{
    if (cap == 0)
        return 0;
    vc_text out;
    vc_text_init(&out, cap - 1);
    vc_text_term(&out, t, len, flags);
    memcpy(t, vc_text_str(&out), out.len + 1); /* a failed text still ends on a whole escape */
    size_t n = out.len;
    vc_text_free(&out);
    return n;
}

void vc_term_fputs(FILE *f, const char *s, unsigned flags)
{
    char buf[4 * 256 + 1]; /* a piece of 256 bytes escapes to at most 4 bytes each */
    size_t n = strlen(s);
    /* piece by piece, each cut at a character boundary so none is split across pieces */
    for (size_t i = 0; i < n;) {
        size_t take = n - i < 256 ? n - i : 256;
        while (take < n - i && take > 0 && ((unsigned char)s[i + take] & 0xC0) == 0x80)
            take--;
        if (take == 0)
            take = 1;
        vc_text t;
        vc_text_fixed(&t, buf, sizeof buf);
        vc_text_term(&t, s + i, take, flags);
        fputs(buf, f);
        i += take;
    }
}

/* The longest text formatted at once; a longer one is cut (whole escapes only). */
#define PRINTF_MAX (64u << 10)

void vc_term_vprintf(FILE *f, const char *fmt, va_list ap)
{
    char small[512];
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(small, sizeof small, fmt, copy);
    va_end(copy);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        vc_term_fputs(f, small, VC_TERM_KEEP_NEWLINES);
        return;
    }
    size_t cap = (size_t)n < PRINTF_MAX ? (size_t)n + 1 : PRINTF_MAX + 1;
    char *big = malloc(cap);
    if (big == NULL) {
        vc_term_fputs(f, small, VC_TERM_KEEP_NEWLINES); /* what fit: better than nothing */
        return;
    }
    vsnprintf(big, cap, fmt, ap);
    vc_term_fputs(f, big, VC_TERM_KEEP_NEWLINES);
    free(big);
}

void vc_term_printf(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vc_term_vprintf(f, fmt, ap);
    va_end(ap);
}

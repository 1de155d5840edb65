/* text.c — the bounded text builder (text.h): checked appends into a buffer that grows to a
 * stated cap, a failure that sticks until the owner rolls the record back. */
#include "text.h"
#include "utf8.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vc_text_init(vc_text *t, size_t max)
{
    *t = (vc_text){.max = max};
}

void vc_text_fixed(vc_text *t, char *buf, size_t cap)
{
    *t = (vc_text){.buf = buf, .cap = cap, .max = cap - 1, .fixed = 1};
    buf[0] = '\0';
}

void vc_text_free(vc_text *t)
{
    if (!t->fixed)
        free(t->buf);
    t->buf = NULL;
    t->len = t->cap = 0;
}

/* Room for n more bytes and the NUL, within the cap.  0 or -1 (the text failed). */
static int reserve(vc_text *t, size_t n)
{
    if (t->failed || n > t->max - t->len) {
        t->failed = 1;
        return -1;
    }
    size_t need = t->len + n + 1;
    if (need <= t->cap)
        return 0;
    if (t->fixed) {
        t->failed = 1;
        return -1;
    }
    size_t cap = t->cap ? t->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (cap > t->max + 1)
        cap = t->max + 1;
    char *b = realloc(t->buf, cap);
    if (b == NULL) {
        t->failed = 1;
        return -1;
    }
    t->buf = b;
    t->cap = cap;
    return 0;
}

int vc_text_put(vc_text *t, const void *p, size_t n)
{
    if (reserve(t, n) != 0)
        return -1;
    memcpy(t->buf + t->len, p, n);
    t->len += n;
    t->buf[t->len] = '\0';
    return 0;
}

int vc_text_puts(vc_text *t, const char *s)
{
    return vc_text_put(t, s, strlen(s));
}

int vc_text_putc(vc_text *t, char c)
{
    return vc_text_put(t, &c, 1);
}

int vc_text_printf(vc_text *t, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        t->failed = 1;
        return -1;
    }
    if ((size_t)n < sizeof small)
        return vc_text_put(t, small, (size_t)n);
    if (reserve(t, (size_t)n) != 0)
        return -1;
    va_start(ap, fmt);
    vsnprintf(t->buf + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
    return 0;
}

int vc_text_json(vc_text *t, const char *str, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    size_t run = 0; /* bytes from `run` on need no escape and are not copied yet */
    for (size_t i = 0; i < n && s[i] != '\0';) {
        unsigned cp;
        size_t k = vc_utf8_next(s + i, n - i, &cp);
        if (k > 0 && cp >= 0x20 && cp != '"' && cp != '\\') {
            i += k;
            continue;
        }
        vc_text_put(t, s + run, i - run);
        if (k == 0)
            vc_text_putc(t, '?'), k = 1;
        else if (cp == '"' || cp == '\\')
            vc_text_put(t, (const char[]){'\\', (char)cp}, 2);
        else
            vc_text_put(t, (const char[]){'\\', 'u', '0', '0', hex[cp >> 4], hex[cp & 15]}, 6);
        i += k;
        run = i;
    }
    size_t end = run;
    while (end < n && s[end] != '\0')
        end++;
    vc_text_put(t, s + run, end - run);
    return t->failed ? -1 : 0;
}

size_t vc_text_mark(const vc_text *t)
{
    return t->len;
}

void vc_text_rollback(vc_text *t, size_t mark)
{
    if (mark <= t->len) {
        t->len = mark;
        if (t->buf != NULL)
            t->buf[t->len] = '\0';
    }
    t->failed = 0;
}

const char *vc_text_str(const vc_text *t)
{
    return t->buf != NULL ? t->buf : "";
}

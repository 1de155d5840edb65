/* utf8.c — UTF-8 validation and decoding (no overlongs, no surrogates, nothing above
 * U+10FFFF): names and JSON strings of a .cvf file are checked with it before anything is built
 * from them (the reader, the JSON scanner, convert's JSON walk), and the escapers decode with it
 * so that they all agree on what a character is. */
#include "utf8.h"

size_t vc_utf8_next(const unsigned char *s, size_t avail, unsigned *cp)
{
    if (avail == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t n;
    unsigned min;
    if (c >= 0xC2 && c <= 0xDF)
        n = 1, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 2, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 3, min = 0x10000;
    else
        return 0;
    if (avail <= n)
        return 0;
    unsigned v = c & (0x3F >> n);
    for (size_t i = 1; i <= n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return n + 1;
}

int cvf_utf8_valid(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < len;) {
        unsigned cp;
        size_t n = vc_utf8_next(s + i, len - i, &cp);
        if (n == 0)
            return 0;
        i += n;
    }
    return 1;
}

size_t vc_utf8_cut(const char *s, size_t len, size_t max)
{
    if (len <= max)
        return len;
    size_t n = max;
    /* s[n] is the first byte dropped; if it continues a sequence, drop that sequence's start */
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

void vc_utf8_repair(char *str, size_t len)
{
    unsigned char *s = (unsigned char *)str;
    for (size_t i = 0; i < len;) {
        unsigned cp;
        size_t n = vc_utf8_next(s + i, len - i, &cp);
        if (n == 0) {
            s[i++] = '?';
            continue;
        }
        i += n;
    }
}

/* utf8.c — UTF-8 validation (no overlongs, no surrogates, nothing above U+10FFFF): names and
 * JSON strings of a .cvf file are checked with it before anything is built from them (the
 * reader, the JSON scanner, convert's JSON walk). */
#include "utf8.h"

int cvf_utf8_valid(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str, *end = s + len;
    while (s < end) {
        unsigned c = *s;
        if (c < 0x80) {
            s++;
            continue;
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
        if ((size_t)(end - s) <= n)
            return 0;
        unsigned cp = c & (0x3F >> n);
        for (size_t i = 1; i <= n; i++) {
            if ((s[i] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        s += n + 1;
    }
    return 1;
}

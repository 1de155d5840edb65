/* utf8.h — UTF-8 validation of untrusted text (utf8.c): the .cvf reader's names, the JSON
 * scanner's strings, convert's JSON walk. */
#ifndef VC_UTF8_H
#define VC_UTF8_H

#include <stddef.h>

/* 1 if s[0 .. len) is valid UTF-8 (no overlongs, no surrogates), else 0. */
int cvf_utf8_valid(const char *s, size_t len);

#endif /* VC_UTF8_H */

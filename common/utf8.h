/* utf8.h — UTF-8 of untrusted text (utf8.c): the .cvf reader's names, the JSON scanner's
 * strings, convert's JSON walk, and every escaper that must tell a well-formed character from
 * a stray byte (text.c's JSON strings, term.c's terminal text, the spool's names). */
#ifndef VC_UTF8_H
#define VC_UTF8_H

#include <stddef.h>

/* 1 if s[0 .. len) is valid UTF-8 (no overlongs, no surrogates), else 0. */
int cvf_utf8_valid(const char *s, size_t len);

/* The length (1-4) of the well-formed character at s[0 .. avail), its code point in *cp; 0 when
 * s[0] begins none (a stray or truncated byte, an overlong, a surrogate, > U+10FFFF). */
size_t vc_utf8_next(const unsigned char *s, size_t avail, unsigned *cp);

/* The length of s[0 .. len) cut to at most max bytes without splitting a UTF-8 sequence. */
size_t vc_utf8_cut(const char *s, size_t len, size_t max);

/* s[0 .. len) made well-formed in place: every byte that begins no character becomes '?'. */
void vc_utf8_repair(char *s, size_t len);

#endif /* VC_UTF8_H */

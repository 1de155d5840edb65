/* term.h — the one terminal sanitizer (term.c): every text another user controls (what an
 * agent says, a tree member's command line, a process, thread or function name in a trace)
 * passes here before it reaches the operator's terminal, which root's vcattach must not let
 * them drive.
 *
 * Made visible as escapes, so that the operator still sees that something was there:
 *   C0 controls (ESC, BEL, CR, TAB, ... newline too unless kept)  \x1b \x07 \r \t \n
 *   DEL                                                            \x7f
 *   C1 controls U+0080-U+009F (U+009B is a CSI on many terminals)  \u009b
 *   bidi overrides and isolates U+202A-U+202E, U+2066-U+2069       \u202e
 *   a byte that begins no well-formed UTF-8 character              \xff
 * Everything else (printable ASCII, well-formed UTF-8) passes unchanged.
 */
#ifndef VC_TERM_H
#define VC_TERM_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "text.h"

#define VC_TERM_KEEP_NEWLINES 1u /* a multi-line message: '\n' passes */

/* Appends s[0 .. n) (a NUL ends it early) sanitized.  0, or -1 when the text's cap was reached
 * (what fit is kept, every escape whole). */
int vc_text_term(vc_text *t, const char *s, size_t n, unsigned flags);

/* s sanitized into buf[0 .. cap) (cut where it no longer fits); returns buf. */
const char *vc_term_safe(char *buf, size_t cap, const char *s, unsigned flags);

/* t[0 .. len) (a NUL ends it early) sanitized in place within cap bytes (the escapes make it
 * longer: what no longer fits is cut, never an escape in half); NUL-terminated.  Returns the
 * new length.  For text that is kept and printed later (what an agent said). */
size_t vc_term_sanitize(char *t, size_t len, size_t cap, unsigned flags);

/* Writes s sanitized to f (any length). */
void vc_term_fputs(FILE *f, const char *s, unsigned flags);

/* Formats, then writes the whole text sanitized to f with its newlines kept: a line of a
 * message or of a text report, whatever its arguments hold (cli/say.c's say and say_out, the
 * reports of trace/).  A text longer than 64 KiB is cut (whole escapes only). */
void vc_term_printf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void vc_term_vprintf(FILE *f, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

#endif /* VC_TERM_H */

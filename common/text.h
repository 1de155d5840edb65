/* text.h — the one bounded text builder (text.c) for every string root formats from data
 * another user controls: the instants and args of a trace built from a spool (what an agent
 * sent, or a spool its user wrote), the lines a terminal shows (term.h), a container member's
 * rewritten META.
 *
 * Nothing is reserved "per record" by a guess: every append is checked, the buffer grows as it
 * must up to the cap its owner states, and an append that would pass the cap (or finds no
 * memory) fails the text: every later append fails too, until the owner rolls back to a mark
 * taken before the record, which refuses that record whole and lets the next one try.  A text
 * is always NUL-terminated within its buffer.
 *
 *     vc_text t;
 *     vc_text_init(&t, 1 << 20);               // grows to at most 1 MiB
 *     size_t m = vc_text_mark(&t);
 *     vc_text_printf(&t, "{\"pid\":%llu,\"name\":\"", pid);
 *     vc_text_json(&t, name, strlen(name));
 *     if (vc_text_put(&t, "\"}", 2) != 0)
 *         vc_text_rollback(&t, m);              // the record is refused whole, counted
 *     ... vc_text_free(&t);
 *
 * A text may also live in a fixed buffer of the caller's (vc_text_fixed: never grows, never
 * freed), for one line on the stack.
 */
#ifndef VC_TEXT_H
#define VC_TEXT_H

#include <stddef.h>

typedef struct vc_text {
    char *buf;      /* NUL-terminated at len (NULL until the first append of a growing text) */
    size_t len;     /* bytes of text */
    size_t cap;     /* bytes of buf */
    size_t max;     /* the most text it may hold (excluding the NUL) */
    int fixed;      /* buf is the caller's: never grown nor freed */
    int failed;     /* an append did not fit: the text takes nothing until a rollback */
} vc_text;

/* A growing text of at most max bytes (plus its NUL). */
void vc_text_init(vc_text *t, size_t max);
/* A text in buf[0 .. cap): at most cap - 1 bytes.  cap must be >= 1. */
void vc_text_fixed(vc_text *t, char *buf, size_t cap);
void vc_text_free(vc_text *t);

/* Appends; 0, or -1 when it would pass the cap or memory ran out (the text is then failed). */
int vc_text_put(vc_text *t, const void *p, size_t n);
int vc_text_puts(vc_text *t, const char *s);
int vc_text_putc(vc_text *t, char c);
int vc_text_printf(vc_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s[0 .. n) as the inside of a JSON string: quotes, backslashes and control characters
 * escaped, every byte that begins no well-formed UTF-8 character (an agent may send anything)
 * as '?'.  A NUL ends s early. */
int vc_text_json(vc_text *t, const char *s, size_t n);

/* Where the text is now, and a return to it that also clears a failure: a record refused. */
size_t vc_text_mark(const vc_text *t);
void vc_text_rollback(vc_text *t, size_t mark);

/* The text ("" when nothing was appended); stays owned by t. */
const char *vc_text_str(const vc_text *t);

#endif /* VC_TEXT_H */

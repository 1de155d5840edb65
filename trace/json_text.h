/* json_text.h — a growable text buffer and a compact JSON serialiser for jansson values.
 * jansson's own json_dumps prints reals with %.17g ("0.1" → "0.10000000000000001"), which
 * bloats and uglifies traces; this one prints the shortest text that reads back to the same
 * double, like Python's json.dumps, and keeps non-ASCII as raw UTF-8. */
#ifndef VC_JSON_TEXT_H
#define VC_JSON_TEXT_H

#include <stddef.h>

#include <jansson.h>

typedef struct jtext {
    char *data;
    size_t len, cap;
} jtext;

/* Appends bytes; 0 or -1 (out of memory). */
int jtext_put(jtext *t, const void *p, size_t n);
/* Appends the compact JSON text of v; 0 or -1 (out of memory). */
int jtext_value(jtext *t, const json_t *v);
/* Appends one event (a JSON object) to a list being written, after ",\n" unless it is the
 * first; takes the reference (NULL: a failed json_pack, -1).  0, or -1. */
int jtext_put_event(jtext *t, json_t *ev);

#endif

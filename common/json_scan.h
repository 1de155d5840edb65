/* json_scan.h — the validating JSON scanner (json_scan.c) of the .cvf reader and `convert`:
 * checks a JSON text and finds a list's elements as byte spans, without building a tree. */
#ifndef VC_JSON_SCAN_H
#define VC_JSON_SCAN_H

#include <stddef.h>

/* Byte range [off, off + len) inside a JSON text. */
typedef struct cvf_span {
    size_t off;
    size_t len;
} cvf_span;

/* Checks that text[0 .. len) is exactly one JSON value (surrounding whitespace allowed).
 * If `items` is not NULL the value must be a list: *items gets a malloc'd array of the spans
 * of its elements (caller frees; NULL when empty) and *nitems their number.  Depth is limited
 * to 512.  Returns 0, or -1 with *err_pos (offset in text) and *err_what (static string). */
int cvf_json_scan(const char *text, size_t len, cvf_span **items, size_t *nitems,
                  size_t *err_pos, const char **err_what);

/* Finds the end of the one strict-JSON value (RFC 8259: no NaN/Infinity) that starts at
 * t[pos] (whitespace before it allowed): *end is the index just after it.  0 or -1. */
int cvf_json_skip(const char *t, size_t len, size_t pos, size_t *end);

#endif /* VC_JSON_SCAN_H */

/* json_scan.c — a validating JSON scanner: the .cvf format embeds JSON text in zlib blobs
 * (the names list, args, other events), and the reader and `convert` check it and find the
 * list elements without building a tree or linking a JSON library.  Strings are checked as
 * UTF-8 (utf8.c).
 *
 * The scanner accepts RFC 8259 JSON plus the NaN / Infinity / -Infinity tokens Python's json
 * module writes by default, since VizTracer's files may contain them.  It is iterative (an
 * explicit stack with a depth limit), so hostile nesting cannot overflow the C stack.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_scan.h"
#include "utf8.h"

#define JSON_MAX_DEPTH 512

static inline size_t skip_ws(const char *t, size_t i, size_t len)
{
    while (i < len && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r'))
        i++;
    return i;
}

static inline bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Scans a string starting at t[i] == '"'; returns the index after the closing quote. */
static int scan_string(const char *t, size_t len, size_t *pi, const char **what)
{
    size_t i = *pi + 1, run = i;
    for (;;) {
        if (i >= len) {
            *what = "unterminated string";
            return -1;
        }
        unsigned char c = (unsigned char)t[i];
        if (c == '"')
            break;
        if (c < 0x20) {
            *what = "control character in string";
            *pi = i;
            return -1;
        }
        if (c == '\\') {
            if (i + 1 >= len) {
                *what = "unterminated string";
                return -1;
            }
            char e = t[i + 1];
            if (e == 'u') {
                if (i + 5 >= len || !is_hex(t[i + 2]) || !is_hex(t[i + 3]) ||
                    !is_hex(t[i + 4]) || !is_hex(t[i + 5])) {
                    *what = "bad \\u escape in string";
                    *pi = i;
                    return -1;
                }
                i += 6;
            } else if (strchr("\"\\/bfnrt", e) && e) {
                i += 2;
            } else {
                *what = "bad escape in string";
                *pi = i;
                return -1;
            }
            continue;
        }
        i++;
    }
    if (!cvf_utf8_valid(t + run, i - run)) {
        *what = "invalid UTF-8 in string";
        *pi = run;
        return -1;
    }
    *pi = i + 1;
    return 0;
}

static int scan_number(const char *t, size_t len, size_t *pi, bool strict, const char **what)
{
    size_t i = *pi;
    if (i < len && t[i] == '-')
        i++;
    if (!strict && len - i >= 8 && !memcmp(t + i, "Infinity", 8)) {
        *pi = i + 8;
        return 0;
    }
    if (i >= len || t[i] < '0' || t[i] > '9')
        goto bad;
    if (t[i] == '0')
        i++;
    else
        while (i < len && t[i] >= '0' && t[i] <= '9')
            i++;
    if (i < len && t[i] == '.') {
        i++;
        if (i >= len || t[i] < '0' || t[i] > '9')
            goto bad;
        while (i < len && t[i] >= '0' && t[i] <= '9')
            i++;
    }
    if (i < len && (t[i] == 'e' || t[i] == 'E')) {
        i++;
        if (i < len && (t[i] == '+' || t[i] == '-'))
            i++;
        if (i >= len || t[i] < '0' || t[i] > '9')
            goto bad;
        while (i < len && t[i] >= '0' && t[i] <= '9')
            i++;
    }
    *pi = i;
    return 0;
bad:
    *what = "bad number";
    return -1;
}

static int scan_literal(const char *t, size_t len, size_t *pi, bool strict, const char **what)
{
    static const char *const words[] = {"true", "false", "null", "NaN"};
    for (size_t k = 0; k < sizeof words / sizeof words[0] - (strict ? 1 : 0); k++) {
        size_t n = strlen(words[k]);
        if (len - *pi >= n && !memcmp(t + *pi, words[k], n)) {
            *pi += n;
            return 0;
        }
    }
    *what = "unexpected character";
    return -1;
}

/* Appends a span to a growable array. */
static int push_span(cvf_span **arr, size_t *n, size_t *cap, size_t off, size_t len)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        cvf_span *p = realloc(*arr, ncap * sizeof *p);
        if (!p)
            return -1;
        *arr = p;
        *cap = ncap;
    }
    (*arr)[(*n)++] = (cvf_span){off, len};
    return 0;
}

/* Scans one JSON value starting at t[*pi] (after optional whitespace).  whole: the value must
 * end the text (trailing whitespace allowed); otherwise *pi is left just after the value.
 * strict: RFC 8259 only (no NaN/Infinity). */
static int scan_core(const char *t, size_t len, size_t *pi, bool strict, bool whole,
                     cvf_span **items, size_t *nitems, size_t *err_pos, const char **err_what)
{
    char stack[JSON_MAX_DEPTH]; /* '[' or '{' per open container */
    int depth = 0;
    size_t i = skip_ws(t, *pi, len);
    const char *what = NULL;
    cvf_span *spans = NULL;
    size_t nspans = 0, cap = 0, item_start = 0;
    if (items) {
        *items = NULL;
        *nitems = 0;
        if (i >= len || t[i] != '[') {
            what = "expected a JSON list";
            goto fail;
        }
    }
    /* State machine: expecting a value; after a value, expecting ',' or a closer. */
    for (;;) {
        /* ---- parse one value (or open a container) ---- */
        i = skip_ws(t, i, len);
        if (i >= len) {
            what = "unexpected end of JSON";
            goto fail;
        }
        if (items && depth == 1)
            item_start = i;
        char c = t[i];
        if (c == '[' || c == '{') {
            if (depth == JSON_MAX_DEPTH) {
                what = "JSON nested too deeply";
                goto fail;
            }
            stack[depth++] = c;
            i = skip_ws(t, i + 1, len);
            if (i < len && t[i] == (c == '[' ? ']' : '}')) {
                depth--;
                i++;
                goto after_value;
            }
            if (c == '{') {
                if (i >= len || t[i] != '"') {
                    what = "expected an object key";
                    goto fail;
                }
                goto object_key;
            }
            continue; /* first element of a list */
        } else if (c == '"') {
            if (scan_string(t, len, &i, &what) != 0)
                goto fail;
        } else if (c == '-' || (c >= '0' && c <= '9') || c == 'I') {
            if (scan_number(t, len, &i, strict, &what) != 0)
                goto fail;
        } else if (scan_literal(t, len, &i, strict, &what) != 0) {
            goto fail;
        }
    after_value:
        if (items && depth == 1 &&
            push_span(&spans, &nspans, &cap, item_start, i - item_start) != 0) {
            what = "out of memory";
            goto fail;
        }
        /* a container closed at depth 1 completes an item too */
        for (;;) {
            if (depth == 0) {
                if (!whole) {
                    *pi = i;
                    return 0;
                }
                i = skip_ws(t, i, len);
                if (i != len) {
                    what = "trailing data after JSON value";
                    goto fail;
                }
                if (items) {
                    *items = spans;
                    *nitems = nspans;
                }
                return 0;
            }
            i = skip_ws(t, i, len);
            if (i >= len) {
                what = "unexpected end of JSON";
                goto fail;
            }
            char closer = stack[depth - 1] == '[' ? ']' : '}';
            if (t[i] == closer) {
                depth--;
                i++;
                if (items && depth == 1 &&
                    push_span(&spans, &nspans, &cap, item_start, i - item_start) != 0) {
                    what = "out of memory";
                    goto fail;
                }
                continue;
            }
            if (t[i] != ',') {
                what = stack[depth - 1] == '[' ? "expected ',' or ']'" : "expected ',' or '}'";
                goto fail;
            }
            i = skip_ws(t, i + 1, len);
            if (stack[depth - 1] == '{') {
                if (i >= len || t[i] != '"') {
                    what = "expected an object key";
                    goto fail;
                }
                goto object_key;
            }
            break; /* next list element */
        }
        continue;
    object_key:
        if (scan_string(t, len, &i, &what) != 0)
            goto fail;
        i = skip_ws(t, i, len);
        if (i >= len || t[i] != ':') {
            what = "expected ':' after object key";
            goto fail;
        }
        i++;
    }
fail:
    free(spans);
    if (items) {
        *items = NULL;
        *nitems = 0;
    }
    *err_pos = i < len ? i : len;
    *err_what = what ? what : "invalid JSON";
    return -1;
}

int cvf_json_scan(const char *t, size_t len, cvf_span **items, size_t *nitems, size_t *err_pos,
                  const char **err_what)
{
    size_t i = 0;
    return scan_core(t, len, &i, false, true, items, nitems, err_pos, err_what);
}

int cvf_json_skip(const char *t, size_t len, size_t pos, size_t *end)
{
    size_t err_pos;
    const char *what;
    size_t i = pos;
    if (scan_core(t, len, &i, true, false, NULL, NULL, &err_pos, &what) != 0)
        return -1;
    *end = i;
    return 0;
}

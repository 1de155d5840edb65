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
/* One scan: the text, where it is, the containers open, and (when items are wanted) the
 * spans of the top-level list's items. */
struct scan {
    const char *t;
    size_t len, i;
    bool strict, whole, want_items;
    char stack[JSON_MAX_DEPTH]; /* '[' or '{' per open container */
    int depth;
    cvf_span *spans;
    size_t nspans, cap, item_start;
    const char *what; /* why it failed */
};

/* What comes next: a value, an object's key, what follows a value; or the end, or a failure. */
enum scan_next { NEXT_VALUE, NEXT_KEY, NEXT_AFTER, NEXT_DONE, NEXT_FAIL };

static enum scan_next fail(struct scan *s, const char *what)
{
    s->what = what;
    return NEXT_FAIL;
}

/* A value at the depth of the list's items completes one. */
static enum scan_next item_done(struct scan *s, enum scan_next next)
{
    if (s->want_items && s->depth == 1 &&
        push_span(&s->spans, &s->nspans, &s->cap, s->item_start, s->i - s->item_start) != 0)
        return fail(s, "out of memory");
    return next;
}

/* A key, expected after '{' or ','. */
static enum scan_next expect_key(struct scan *s)
{
    return s->i < s->len && s->t[s->i] == '"' ? NEXT_KEY : fail(s, "expected an object key");
}

/* One value, or the opening of a container. */
static enum scan_next scan_value(struct scan *s)
{
    s->i = skip_ws(s->t, s->i, s->len);
    if (s->i >= s->len)
        return fail(s, "unexpected end of JSON");
    if (s->want_items && s->depth == 1)
        s->item_start = s->i;
    char c = s->t[s->i];
    if (c == '[' || c == '{') {
        if (s->depth == JSON_MAX_DEPTH)
            return fail(s, "JSON nested too deeply");
        s->stack[s->depth++] = c;
        s->i = skip_ws(s->t, s->i + 1, s->len);
        if (s->i < s->len && s->t[s->i] == (c == '[' ? ']' : '}')) { /* empty */
            s->depth--;
            s->i++;
            return item_done(s, NEXT_AFTER);
        }
        return c == '{' ? expect_key(s) : NEXT_VALUE; /* its first element */
    }
    int rc;
    if (c == '"')
        rc = scan_string(s->t, s->len, &s->i, &s->what);
    else if (c == '-' || (c >= '0' && c <= '9') || c == 'I')
        rc = scan_number(s->t, s->len, &s->i, s->strict, &s->what);
    else
        rc = scan_literal(s->t, s->len, &s->i, s->strict, &s->what);
    return rc != 0 ? NEXT_FAIL : item_done(s, NEXT_AFTER);
}

/* After a value: containers closing (each completing an item at depth 1), then ',' and what
 * the container expects next, or the end of the text. */
static enum scan_next scan_after(struct scan *s)
{
    for (;;) {
        if (s->depth == 0) {
            if (!s->whole)
                return NEXT_DONE;
            s->i = skip_ws(s->t, s->i, s->len);
            return s->i == s->len ? NEXT_DONE : fail(s, "trailing data after JSON value");
        }
        s->i = skip_ws(s->t, s->i, s->len);
        if (s->i >= s->len)
            return fail(s, "unexpected end of JSON");
        char open = s->stack[s->depth - 1];
        if (s->t[s->i] == (open == '[' ? ']' : '}')) {
            s->depth--;
            s->i++;
            if (item_done(s, NEXT_AFTER) == NEXT_FAIL)
                return NEXT_FAIL;
            continue;
        }
        if (s->t[s->i] != ',')
            return fail(s, open == '[' ? "expected ',' or ']'" : "expected ',' or '}'");
        s->i = skip_ws(s->t, s->i + 1, s->len);
        return open == '{' ? expect_key(s) : NEXT_VALUE; /* the next element */
    }
}

/* An object's key and its ':'. */
static enum scan_next scan_key(struct scan *s)
{
    if (scan_string(s->t, s->len, &s->i, &s->what) != 0)
        return NEXT_FAIL;
    s->i = skip_ws(s->t, s->i, s->len);
    if (s->i >= s->len || s->t[s->i] != ':')
        return fail(s, "expected ':' after object key");
    s->i++;
    return NEXT_VALUE;
}

static int scan_core(const char *t, size_t len, size_t *pi, bool strict, bool whole,
                     cvf_span **items, size_t *nitems, size_t *err_pos, const char **err_what)
{
    struct scan s = {.t = t, .len = len, .strict = strict, .whole = whole,
                     .want_items = items != NULL};
    s.i = skip_ws(t, *pi, len);
    enum scan_next next = NEXT_VALUE;
    if (items) {
        *items = NULL;
        *nitems = 0;
        if (s.i >= len || t[s.i] != '[')
            next = fail(&s, "expected a JSON list");
    }
    while (next != NEXT_DONE && next != NEXT_FAIL)
        next = next == NEXT_VALUE ? scan_value(&s) : next == NEXT_KEY ? scan_key(&s)
                                                                      : scan_after(&s);
    if (next == NEXT_DONE) {
        *pi = s.i;
        if (items) {
            *items = s.spans;
            *nitems = s.nspans;
        }
        return 0;
    }
    free(s.spans);
    *err_pos = s.i < len ? s.i : len;
    *err_what = s.what ? s.what : "invalid JSON";
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

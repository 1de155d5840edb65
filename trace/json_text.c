/* json_text.c — compact JSON text of jansson values (see json_text.h for why not json_dumps).
 * Strings are escaped minimally (quote, backslash, control characters); object keys keep
 * jansson's insertion order, so the output follows the input's order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_text.h"

int jtext_put(jtext *t, const void *p, size_t n)
{
    if (t->cap - t->len < n + 1) {
        size_t nc = t->cap ? t->cap : 256;
        while (nc - t->len < n + 1)
            nc *= 2;
        char *d = realloc(t->data, nc);
        if (!d)
            return -1;
        t->data = d;
        t->cap = nc;
    }
    memcpy(t->data + t->len, p, n);
    t->len += n;
    t->data[t->len] = 0;
    return 0;
}

static int put_string(jtext *t, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    if (jtext_put(t, "\"", 1))
        return -1;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\')
            continue;
        if (jtext_put(t, s + run, i - run))
            return -1;
        char e[6] = {'\\', (char)ch, 0, 0, 0, 0};
        size_t elen = 2;
        if (ch == '\n')
            e[1] = 'n';
        else if (ch == '\t')
            e[1] = 't';
        else if (ch == '\r')
            e[1] = 'r';
        else if (ch < 0x20) {
            memcpy(e, "\\u00", 4);
            e[4] = hex[ch >> 4];
            e[5] = hex[ch & 15];
            elen = 6;
        }
        if (jtext_put(t, e, elen))
            return -1;
        run = i + 1;
    }
    if (jtext_put(t, s + run, n - run))
        return -1;
    return jtext_put(t, "\"", 1);
}

static int put_real(jtext *t, double d)
{
    char buf[40];
    int n = 0;
    if (!isfinite(d)) /* jansson never parses these; keep the output strict JSON anyway */
        return jtext_put(t, "null", 4);
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, sizeof buf - 2, "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    if (!strpbrk(buf, ".eE")) { /* keep it a float for Python readers: 1.0, not 1 */
        buf[n++] = '.';
        buf[n++] = '0';
    }
    return jtext_put(t, buf, (size_t)n);
}

int jtext_value(jtext *t, const json_t *v)
{
    char buf[32];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *val;
        int first = 1;
        if (jtext_put(t, "{", 1))
            return -1;
        json_object_foreach((json_t *)v, key, val)
        {
            if ((!first && jtext_put(t, ",", 1)) || put_string(t, key, strlen(key)) ||
                jtext_put(t, ":", 1) || jtext_value(t, val))
                return -1;
            first = 0;
        }
        return jtext_put(t, "}", 1);
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        if (jtext_put(t, "[", 1))
            return -1;
        for (size_t i = 0; i < n; i++)
            if ((i && jtext_put(t, ",", 1)) || jtext_value(t, json_array_get(v, i)))
                return -1;
        return jtext_put(t, "]", 1);
    }
    case JSON_STRING:
        return put_string(t, json_string_value(v), json_string_length(v));
    case JSON_INTEGER: {
        int n = snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return jtext_put(t, buf, (size_t)n);
    }
    case JSON_REAL:
        return put_real(t, json_real_value(v));
    case JSON_TRUE:
        return jtext_put(t, "true", 4);
    case JSON_FALSE:
        return jtext_put(t, "false", 5);
    case JSON_NULL:
    default:
        return jtext_put(t, "null", 4);
    }
}

int jtext_put_event(jtext *t, json_t *ev)
{
    int rc = ev ? 0 : -1;
    if (!rc && t->len)
        rc = jtext_put(t, ",\n", 2);
    if (!rc)
        rc = jtext_value(t, ev);
    json_decref(ev);
    return rc;
}

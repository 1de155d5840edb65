/* filter.c — the filters in force for a session and the per-code verdict (see filter.h).
 *
 * Everything here runs off the hot path: parsing on the agent thread before the hooks go in,
 * vc_filter_code_included once per code object (from names.h's first sight of a key, under
 * the GIL), the JSON description at emit time.  fnmatch(3) without flags is Python's
 * fnmatch on POSIX paths: `*` and `?` also match `/`, `[...]` classes, no case folding.
 */
#include "filter.h"
#include "compat.h"
#include "clock.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vc_filter_reset(vc_filter *f)
{
    f->n_include = f->n_exclude = 0;
    f->has_globs = 0;
    f->no_c_calls = 0;
    f->max_depth = 0;
    f->min_dur_ns = 0;
    f->min_dur_raw = 0;
    f->depth_limit = UINT32_MAX;
    f->pool_used = 0;
}

void vc_filter_prepare(vc_filter *f)
{
    f->depth_limit = f->max_depth ? f->max_depth : UINT32_MAX;
    f->min_dur_raw = f->min_dur_ns ? vc_clock_ns_to_raw(f->min_dur_ns) : 0;
    if (f->min_dur_ns && f->min_dur_raw == 0)
        f->min_dur_raw = 1;
}

int vc_filter_add_glob(vc_filter *f, int include, const char *glob, char *err, size_t errlen)
{
    size_t n = strlen(glob);
    uint32_t *count = include ? &f->n_include : &f->n_exclude;
    if (n == 0) {
        snprintf(err, errlen, "empty --%s pattern: give a glob on the file path, e.g. '*/site-packages/*'",
                 include ? "include" : "exclude");
        return -1;
    }
    if (*count >= VC_FILTER_MAX_GLOBS || f->pool_used + n + 1 > sizeof f->pool) {
        snprintf(err, errlen, "too many --include/--exclude patterns (at most %d, %d bytes in all): "
                 "merge them into fewer globs", VC_FILTER_MAX_GLOBS, VC_FILTER_POOL);
        return -1;
    }
    char *dst = f->pool + f->pool_used;
    memcpy(dst, glob, n + 1);
    f->pool_used += n + 1;
    (include ? f->include : f->exclude)[(*count)++] = dst;
    f->has_globs = 1;
    return 0;
}

int vc_filter_add_list(vc_filter *f, int include, const char *list, char *err, size_t errlen)
{
    if (list == NULL)
        return 0;
    char one[VC_FILTER_POOL];
    const char *p = list;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n >= sizeof one) {
            snprintf(err, errlen, "a filter pattern is longer than %zu bytes", sizeof one - 1);
            return -1;
        }
        memcpy(one, p, n);
        one[n] = '\0';
        if (n > 0 && vc_filter_add_glob(f, include, one, err, errlen) != 0)
            return -1;
        p += n + (nl ? 1 : 0);
    }
    return 0;
}

static int parse_u64(const char *key, const char *v, uint64_t *out, char *err, size_t errlen)
{
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*v < '0' || *v > '9' || *end != '\0') {
        snprintf(err, errlen, "CONFIG %s=%s is not a number", key, v);
        return -1;
    }
    *out = x;
    return 0;
}

int vc_filter_from_kv(vc_filter *f, const char *text, char *err, size_t errlen)
{
    char line[VC_FILTER_POOL];
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n < sizeof line) {
            memcpy(line, p, n);
            line[n] = '\0';
            char *eq = strchr(line, '=');
            if (eq != NULL) {
                *eq = '\0';
                const char *k = line, *v = eq + 1;
                uint64_t x;
                if (!strcmp(k, "include") || !strcmp(k, "exclude")) {
                    if (vc_filter_add_glob(f, k[0] == 'i', v, err, errlen) != 0)
                        return -1;
                } else if (!strcmp(k, "no_c_calls")) {
                    f->no_c_calls = strcmp(v, "1") == 0;
                } else if (!strcmp(k, "max_depth")) {
                    if (parse_u64(k, v, &x, err, errlen) != 0)
                        return -1;
                    f->max_depth = x > UINT32_MAX ? UINT32_MAX : (uint32_t)x;
                } else if (!strcmp(k, "min_dur_ns")) {
                    if (parse_u64(k, v, &x, err, errlen) != 0)
                        return -1;
                    f->min_dur_ns = x;
                }
            }
        }
        p += n + (nl ? 1 : 0);
    }
    return 0;
}

int vc_filter_file_included(const vc_filter *f, const char *filename)
{
    if (f->n_include > 0) {
        int hit = 0;
        for (uint32_t i = 0; i < f->n_include && !hit; i++)
            hit = fnmatch(f->include[i], filename, 0) == 0;
        if (!hit)
            return 0;
    }
    for (uint32_t i = 0; i < f->n_exclude; i++)
        if (fnmatch(f->exclude[i], filename, 0) == 0)
            return 0;
    return 1;
}

int vc_filter_active(const vc_filter *f)
{
    return f->has_globs || f->no_c_calls || f->max_depth || f->min_dur_ns;
}

/* Appends s as a JSON string (quotes, backslashes and control characters escaped). */
static int json_str(char *buf, size_t cap, size_t *used, const char *s)
{
    if (*used + 2 >= cap)
        return -1;
    buf[(*used)++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        int k;
        if (*p == '"' || *p == '\\')
            k = snprintf(esc, sizeof esc, "\\%c", *p);
        else if (*p < 0x20)
            k = snprintf(esc, sizeof esc, "\\u%04x", *p);
        else
            esc[0] = (char)*p, esc[1] = '\0', k = 1;
        if (*used + (size_t)k + 2 >= cap)
            return -1;
        memcpy(buf + *used, esc, (size_t)k);
        *used += (size_t)k;
    }
    buf[(*used)++] = '"';
    buf[*used] = '\0';
    return 0;
}

static int json_raw(char *buf, size_t cap, size_t *used, const char *s)
{
    size_t n = strlen(s);
    if (*used + n + 1 >= cap)
        return -1;
    memcpy(buf + *used, s, n + 1);
    *used += n;
    return 0;
}

static int json_list(char *buf, size_t cap, size_t *used, const char *const *items, uint32_t n)
{
    if (json_raw(buf, cap, used, "[") != 0)
        return -1;
    for (uint32_t i = 0; i < n; i++)
        if ((i && json_raw(buf, cap, used, ",") != 0) || json_str(buf, cap, used, items[i]) != 0)
            return -1;
    return json_raw(buf, cap, used, "]");
}

int vc_filter_json(const vc_filter *f, char *buf, size_t cap)
{
    size_t used = 0;
    char tail[160];
    if (cap == 0)
        return -1;
    buf[0] = '\0';
    snprintf(tail, sizeof tail, ",\"no_c_calls\":%s,\"max_depth\":%u,\"min_dur_ns\":%llu}",
             f->no_c_calls ? "true" : "false", f->max_depth, (unsigned long long)f->min_dur_ns);
    if (json_raw(buf, cap, &used, "{\"include\":") != 0 ||
        json_list(buf, cap, &used, f->include, f->n_include) != 0 ||
        json_raw(buf, cap, &used, ",\"exclude\":") != 0 ||
        json_list(buf, cap, &used, f->exclude, f->n_exclude) != 0 ||
        json_raw(buf, cap, &used, tail) != 0)
        return -1;
    return (int)used;
}

int vc_filter_code_included(const vc_filter *f, PyObject *code)
{
    PyObject *file = ((PyCodeObject *)code)->co_filename;
    if (file == NULL || !PyUnicode_Check(file))
        return vc_filter_file_included(f, "");
    /* Compact ASCII file names (nearly all) are read in place: no allocation. */
    const char *u = PyUnicode_AsUTF8(file);
    if (u == NULL) {
        PyErr_Clear();
        return vc_filter_file_included(f, "");
    }
    return vc_filter_file_included(f, u);
}

int vc_filter_describe(const vc_filter *f, char *buf, size_t cap)
{
    size_t used = 0;
    int cut = 0;
    buf[0] = '\0';
#define VC_ADD(...)                                                                   \
    do {                                                                              \
        int k_ = snprintf(buf + used, cap - used, __VA_ARGS__);                       \
        if (k_ < 0 || (size_t)k_ >= cap - used)                                       \
            cut = 1;                                                                  \
        else                                                                          \
            used += (size_t)k_;                                                       \
    } while (0)
    for (uint32_t i = 0; i < f->n_include && !cut; i++)
        VC_ADD("%s--include '%s'", used ? " " : "", f->include[i]);
    for (uint32_t i = 0; i < f->n_exclude && !cut; i++)
        VC_ADD("%s--exclude '%s'", used ? " " : "", f->exclude[i]);
    if (f->no_c_calls && !cut)
        VC_ADD("%s--no-c-calls", used ? " " : "");
    if (f->max_depth && !cut)
        VC_ADD("%s--max-depth %u", used ? " " : "", f->max_depth);
    if (f->min_dur_ns && !cut)
        VC_ADD("%s--min-dur %lluns", used ? " " : "", (unsigned long long)f->min_dur_ns);
#undef VC_ADD
    if (cut && cap > 4) {
        used = used < cap - 4 ? used : cap - 4;
        memcpy(buf + used, "...", 4);
        used += 3;
    }
    return (int)used;
}

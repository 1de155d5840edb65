/* pyname.c — Python function names split into qualname, path and line (pyname.h).
 *
 * Called once per distinct function name of a trace (a few thousand at most) by the tables'
 * matchers, so plain string scans; names come from a file that may be hostile, so every part
 * is a bounded slice of the name itself, never a copy sized by a guess.
 */
#include "pyname.h"

#include <stdlib.h>
#include <string.h>

int vct_pyname_split(const char *name, vct_pyname *p)
{
    const char *paren = strstr(name, " (");
    const char *colon = paren ? strrchr(paren, ':') : NULL;
    if (!colon)
        return 0;
    p->qual = name;
    p->qual_len = (size_t)(paren - name);
    p->path = paren + 2;
    p->path_len = (size_t)(colon - p->path);
    size_t len = strlen(colon);
    p->line = -1;
    if (len > 2 && colon[len - 1] == ')' && strspn(colon + 1, "0123456789") == len - 2)
        p->line = strtol(colon + 1, NULL, 10);
    return 1;
}

int vct_ends_at(const char *s, size_t len, const char *suffix, char sep)
{
    size_t n = strlen(suffix);
    if (n > len || memcmp(s + len - n, suffix, n))
        return 0;
    return n == len || s[len - n - 1] == sep;
}

int vct_pyname_matches(const vct_pyname *p, const char *qualname, const char *file)
{
    const char *want = qualname, *dot = strrchr(want, '.');
    if (dot && !memchr(p->qual, '.', p->qual_len))
        want = dot + 1; /* before 3.11: no class part */
    return strlen(want) == p->qual_len && !memcmp(p->qual, want, p->qual_len) &&
           vct_ends_at(p->path, p->path_len, file, '/');
}

int vct_pyname_is(const char *name, const char *qualname, const char *file)
{
    vct_pyname p;
    return vct_pyname_split(name, &p) && vct_pyname_matches(&p, qualname, file);
}

const char *vct_pyname_short(const char *name, char *buf, size_t len)
{
    const char *paren = strstr(name, " (");
    size_t n = paren ? (size_t)(paren - name) : strlen(name);
    if (n >= len)
        n = len - 1;
    memcpy(buf, name, n);
    buf[n] = '\0';
    return buf;
}

/* waits.c — matching function names against the table of blocking calls (waits.def).
 *
 * Called once per distinct function name of a trace (a few thousand at most), so a linear
 * scan of the table is fine and keeps the table a plain list anyone can extend.
 */
#include "waits.h"

#include <string.h>

typedef struct wait_entry {
    enum vct_wait_kind kind;
    const char *name; /* C name, or Python qualname */
    const char *file; /* NULL for C; the Python file's path suffix */
} wait_entry;

static const wait_entry table[] = {
#define WAIT_C(kind, name) {VCT_WAIT_##kind, name, NULL},
#define WAIT_PY(kind, qualname, file) {VCT_WAIT_##kind, qualname, file},
#include "waits.def"
#undef WAIT_C
#undef WAIT_PY
};

/* s ends with suffix, and the character before it (if any) is `sep`. */
static int ends_with_at(const char *s, size_t len, const char *suffix, char sep)
{
    size_t n = strlen(suffix);
    if (n > len || memcmp(s + len - n, suffix, n))
        return 0;
    return n == len || s[len - n - 1] == sep;
}

enum vct_wait_kind vct_wait_kind_of(const char *name)
{
    /* Python names are "qualname (path:line)"; C names have no " (". */
    const char *paren = strstr(name, " (");
    size_t len = strlen(name);
    if (!paren) {
        for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
            if (!table[i].file && ends_with_at(name, len, table[i].name, '.'))
                return table[i].kind;
        return VCT_WAIT_NONE;
    }
    size_t qlen = (size_t)(paren - name);
    const char *path = paren + 2, *colon = strrchr(path, ':');
    if (!colon)
        return VCT_WAIT_NONE;
    size_t plen = (size_t)(colon - path);
    /* Before 3.11 code objects have no qualname: "wait (…/threading.py:288)" stands for
     * Condition.wait, so a dotless name matches the table's last component. */
    int bare = !memchr(name, '.', qlen);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (!table[i].file)
            continue;
        const char *want = table[i].name, *dot = strrchr(want, '.');
        if (bare && dot)
            want = dot + 1;
        if (strlen(want) == qlen && !memcmp(name, want, qlen) &&
            ends_with_at(path, plen, table[i].file, '/'))
            return table[i].kind;
    }
    return VCT_WAIT_NONE;
}

const char *vct_wait_kind_name(enum vct_wait_kind kind)
{
    static const char *const names[VCT_WAIT_NKINDS] = {
        [VCT_WAIT_NONE] = "work",       [VCT_WAIT_LOCK] = "lock",
        [VCT_WAIT_SLEEP] = "sleep",     [VCT_WAIT_SELECT] = "select",
        [VCT_WAIT_SOCKET] = "socket",   [VCT_WAIT_QUEUE] = "queue",
        [VCT_WAIT_PROCESS] = "process", [VCT_WAIT_PIPE] = "pipe",
        [VCT_WAIT_AT_ATTACH] = "at attach", [VCT_WAIT_OFFCPU] = "off-CPU",
    };
    return (unsigned)kind < VCT_WAIT_NKINDS ? names[kind] : "?";
}

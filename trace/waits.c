/* waits.c — matching function names against the table of blocking calls (waits.def).
 *
 * Called once per distinct function name of a trace (a few thousand at most), so a linear
 * scan of the table is fine and keeps the table a plain list anyone can extend.  Names are
 * read by pyname.c, as the requests' table reads them.
 */
#include "waits.h"

#include <string.h>

#include "pyname.h"

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

enum vct_wait_kind vct_wait_kind_of(const char *name)
{
    vct_pyname py;
    if (!vct_pyname_split(name, &py)) { /* a C name */
        size_t len = strlen(name);
        for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
            if (!table[i].file && vct_ends_at(name, len, table[i].name, '.'))
                return table[i].kind;
        return VCT_WAIT_NONE;
    }
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].file && vct_pyname_matches(&py, table[i].name, table[i].file))
            return table[i].kind;
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

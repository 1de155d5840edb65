/* pyname.h — the one reading of a function's name as the agent writes it (pyname.c).
 *
 * A Python function is "qualname (path:line)" ("Flask.__call__ (/srv/app/flask/app.py:1498)";
 * before 3.11 code objects carry no qualname, so the first part is the bare name, "wait
 * (/usr/lib/python3.9/threading.py:288)"); a C function is "module.func" or "Type.method" and
 * has no " (".  The tables that name functions of the standard library and of servers
 * (waits.def, requests.def) match through here, the request and task tracks print the short
 * name, and speedscope's frames get their file and line from here.
 */
#ifndef VCT_PYNAME_H
#define VCT_PYNAME_H

#include <stddef.h>

/* The parts of a Python name; pointers into the name. */
typedef struct vct_pyname {
    const char *qual;   /* the qualname (or bare name before 3.11) */
    size_t qual_len;
    const char *path;   /* the file's path, between " (" and the last ':' */
    size_t path_len;
    long line;          /* the line, or -1 when what follows the ':' is not digits and ')' */
} vct_pyname;

/* 1 with *p filled when name is a Python name (a " (" and a ':' after it), else 0 (a C name). */
int vct_pyname_split(const char *name, vct_pyname *p);

/* Whether a split name is Python function `qualname` in a file whose path is `file` or ends
 * with "/" + file; a dotless name (before 3.11) matches qualname's last component. */
int vct_pyname_matches(const vct_pyname *p, const char *qualname, const char *file);

/* vct_pyname_split + vct_pyname_matches: 0 for a C name. */
int vct_pyname_is(const char *name, const char *qualname, const char *file);

/* s[0 .. len) is `suffix`, or ends with it right after the character `sep`. */
int vct_ends_at(const char *s, size_t len, const char *suffix, char sep);

/* A function's name without its " (path:line)": what a request's path and a task's track
 * print.  Writes at most len bytes (NUL included) into buf; returns buf. */
const char *vct_pyname_short(const char *name, char *buf, size_t len);

#endif /* VCT_PYNAME_H */

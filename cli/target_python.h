/* target_python.h — is a process CPython, and which version?  (used by preflight.c)
 *
 * Answers from what the process has mapped, without stopping it: the ELF that carries the
 * C-API (a libpythonX.Y.so mapping, or an executable that exports it in .dynsym, like Debian's
 * static /usr/bin/python3.11), and the version from the `Py_Version` data symbol (3.11+) read
 * from the live process, else from the libpythonX.Y soname or the pythonX.Y executable name.
 */
#ifndef VC_TARGET_PYTHON_H
#define VC_TARGET_PYTHON_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

struct target_python {
    int major, minor, micro;      /* micro = -1 when only the X.Y is known */
    int free_threaded;            /* a "t" build (python3.13t): no GIL, another ABI */
    char capi_file[PATH_MAX];     /* the ELF exporting the C-API, as mapped (target's view) */
    char how[64];                 /* where the version came from: "Py_Version", "soname", … */
};

/* Returns 1 and fills *py when pid is a CPython process, 0 when it is not (err says what was
 * looked at), -1 when it could not be examined (err names the failure). */
int target_python_detect(pid_t pid, struct target_python *py, char *err, size_t errlen);

#endif /* VC_TARGET_PYTHON_H */

"""Interpreter builds beside the matrix's release builds, found from its rows (by version,
never by a typed path): Debian's debug builds (`python3.X-dbg`: the executable python3.Xd next
to python3.X, Py_DEBUG), on the host (python3.11-dbg) and in the sid test root (python3.14-dbg,
when the root has it)."""
import os

from .paths import ALL_PYTHONS


def debug_pythons():
    """A row per debug interpreter found, like the release row it sits beside (kind "debug",
    id pyX.Y-dbg[-chroot]); run it with row["argv"]."""
    rows, seen = [], set()
    for p in ALL_PYTHONS:
        if p["kind"] != "static" or p["minor"] in seen:
            continue  # Debian's own interpreters (the static ones) have the -dbg packages
        path = p["path"] + "d"
        host_path = os.path.join(p["root"], path.lstrip("/")) if p["root"] else path
        if not os.access(host_path, os.X_OK):
            continue
        seen.add(p["minor"])
        argv = list(p["argv"][:-1]) + [path]
        rows.append(dict(p, path=path, host_path=host_path, argv=argv, kind="debug",
                         id="py%d.%d-dbg%s" % (p["minor"] // 100, p["minor"] % 100,
                                               "-chroot" if p["root"] else "")))
    return rows

"""Loading libvcagent-pyXY.so into this process and calling its C API (agent/vcagent.h).

stdlib only (ctypes), Python 3.8–3.15.  Which file is loaded: find_agent (the override
variables are described in the package docstring).  ctypes.CDLL releases the GIL around every
call, which vc_agent_wait_started and vc_agent_stop need: the agent thread takes the GIL to
install and remove its hooks while we wait.
"""
import ctypes
import errno
import os
import sys
import warnings

VC_CONFIG_ABI = 1
HOOKS = {"auto": 0, "profile": 1, "monitoring": 2, "eval": 3}


class VcConfig(ctypes.Structure):
    _fields_ = [
        ("abi", ctypes.c_uint32),
        ("struct_size", ctypes.c_uint32),
        ("output", ctypes.c_char_p),
        ("fallback", ctypes.c_char_p),
        ("duration_ms", ctypes.c_uint64),
        ("buffer_mb", ctypes.c_uint32),
        ("hook", ctypes.c_uint32),
        ("null_hook", ctypes.c_uint32),
        # filters (agent/filter.h)
        ("include", ctypes.c_char_p),
        ("exclude", ctypes.c_char_p),
        ("no_c_calls", ctypes.c_uint32),
        ("max_depth", ctypes.c_uint32),
        ("min_dur_ns", ctypes.c_uint64),
    ]


class VcResult(ctypes.Structure):
    _fields_ = [
        ("events", ctypes.c_uint64),
        ("threads", ctypes.c_uint64),
        ("dropped", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("gil_hold_us", ctypes.c_uint64),
        ("records_bytes", ctypes.c_uint64),
        ("status", ctypes.c_int32),
        ("pad", ctypes.c_int32),
    ]


class AgentLoadError(RuntimeError):
    """The agent could not be found or loaded (the message says which file, and the fix)."""


class AgentNotFound(AgentLoadError):
    pass


def _on_musl():
    """Does this process run on a C library other than glibc (musl: Alpine)?  glibc names
    itself through confstr(_CS_GNU_LIBC_VERSION); musl does not (EINVAL), and needs /proc for
    nothing (a chroot without /proc still answers).  Anything that is not glibc gets the musl
    agent or none: the glibc agent is never loaded into it."""
    try:
        if (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
            return False
    except (ValueError, OSError):
        pass
    return True


def agent_filename():
    """libvcagent-pyXY.so, or libvcagent-pyXY-musl.so on musl: a glibc agent is never loaded
    into a musl process (two C libraries in one process)."""
    return "libvcagent-py%d%02d%s.so" % (sys.version_info[0], sys.version_info[1],
                                         "-musl" if _on_musl() else "")


AGENT_DIR_VAR = "VCATTACH_AGENT_DIR"
AGENT_FILE_VAR = "VCATTACH_AGENT"  # deprecated alias: a file, not a directory

_warned_file_var = False


def _file_override():
    """$VCATTACH_AGENT (deprecated: the path of one agent file), warned about once."""
    global _warned_file_var
    path = os.environ.get(AGENT_FILE_VAR)
    if path and not _warned_file_var:
        _warned_file_var = True
        warnings.warn("%s is deprecated: set %s to the directory holding %s instead"
                      % (AGENT_FILE_VAR, AGENT_DIR_VAR, agent_filename()),
                      DeprecationWarning, stacklevel=4)
    return path


def find_agent():
    """Path of the agent build for this interpreter, or None.  Looked for, in order:
    $VCATTACH_AGENT_DIR/libvcagent-pyXY.so (when the variable is set, the only place looked
    at, as for the vcattach command), $VCATTACH_AGENT (deprecated: an agent file), ROOT/build
    (in the source tree), PREFIX/lib/vcattach (installed)."""
    override_dir = os.environ.get(AGENT_DIR_VAR)
    name = agent_filename()
    if override_dir:
        path = os.path.join(override_dir, name)
        return path if os.path.isfile(path) else None
    path = _file_override()
    if path:
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [
        os.path.join(here, "..", "..", "build", name),          # ROOT/python/vcattach → ROOT/build
        os.path.join(sys.prefix, "lib", "vcattach", name),
        os.path.join(here, "..", "..", "..", "lib", "vcattach", name),
        os.path.join("/usr/local/lib/vcattach", name),
    ]
    for c in candidates:
        if os.path.isfile(c):
            return os.path.normpath(c)
    return None


def _not_found_message():
    version = "Python %d.%d" % (sys.version_info[0], sys.version_info[1])
    override_dir = os.environ.get(AGENT_DIR_VAR)
    if override_dir:
        return ("vcattach: no agent for %s in $%s (%s has no %s): build it with `make` in the "
                "vcattach tree, or point %s at the directory of the agent builds"
                % (version, AGENT_DIR_VAR, override_dir, agent_filename(), AGENT_DIR_VAR))
    return ("vcattach: no agent built for %s (%s): run `make` in the vcattach tree (or set %s "
            "to the directory of the agent builds)" % (version, agent_filename(), AGENT_DIR_VAR))


_lib = None


def load():
    global _lib
    if _lib is not None:
        return _lib
    path = find_agent()
    if path is None:
        raise AgentNotFound(_not_found_message())
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise AgentLoadError("vcattach: cannot load the agent %s: %s" % (path, e)) from e
    lib.vc_agent_start.argtypes = [ctypes.POINTER(VcConfig)]
    lib.vc_agent_start.restype = ctypes.c_int
    lib.vc_agent_wait_started.argtypes = [ctypes.c_int]
    lib.vc_agent_wait_started.restype = ctypes.c_int
    lib.vc_agent_stop.argtypes = [ctypes.c_int, ctypes.POINTER(VcResult)]
    lib.vc_agent_stop.restype = ctypes.c_int
    lib.vc_agent_active.argtypes = []
    lib.vc_agent_active.restype = ctypes.c_int
    lib.vc_agent_last_result.argtypes = [ctypes.POINTER(VcResult)]
    lib.vc_agent_last_result.restype = ctypes.c_int
    lib.vc_agent_last_error.argtypes = []
    lib.vc_agent_last_error.restype = ctypes.c_char_p
    _lib = lib
    return lib


def last_error(lib):
    msg = lib.vc_agent_last_error()
    return msg.decode("utf-8", "replace") if msg else ""


def strerror(rc):
    return os.strerror(-rc) if rc < 0 else "error %d" % rc


ETIMEDOUT = errno.ETIMEDOUT
EBUSY = errno.EBUSY
ESRCH = errno.ESRCH

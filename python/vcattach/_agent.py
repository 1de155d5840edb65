"""Loading libvcagent-pyXY.so into this process and calling its C API (agent/vcagent.h).

stdlib only (ctypes), Python 3.8–3.15.  ctypes.CDLL releases the GIL around every call, which
vc_agent_wait_started and vc_agent_stop need: the agent thread takes the GIL to install and
remove its hooks while we wait.
"""
import ctypes
import errno
import os
import sys

VC_CONFIG_ABI = 1
HOOKS = {"auto": 0, "profile": 1, "monitoring": 2}


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


def agent_filename():
    return "libvcagent-py%d%02d.so" % (sys.version_info[0], sys.version_info[1])


def find_agent():
    """Path of the agent build for this interpreter: $VCATTACH_AGENT, ROOT/build (in the
    source tree), or PREFIX/lib/vcattach (installed)."""
    env = os.environ.get("VCATTACH_AGENT")
    if env:
        return env
    name = agent_filename()
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


_lib = None


def load():
    global _lib
    if _lib is not None:
        return _lib
    path = find_agent()
    if path is None:
        raise RuntimeError(
            "vcattach: no agent built for Python %d.%d (%s): run `make` in the vcattach tree "
            "(or set VCATTACH_AGENT)" % (sys.version_info[0], sys.version_info[1], agent_filename()))
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise RuntimeError("vcattach: cannot load the agent %s: %s" % (path, e))
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

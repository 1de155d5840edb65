"""vcattach — trace this Python process with the vcattach agent, VizTracer-compatible output.

    import vcattach
    with vcattach.trace("out.cvf"):
        work()

    vcattach.start("out.cvf", duration=None, buffer_mb=256, hook="auto")
    ...
    result = vcattach.stop()      # Result(events, threads, dropped, bytes, gil_hold_us, …)

The tracing itself happens in the C agent (build/libvcagent-pyXY.so), loaded into this
process with ctypes: every thread is hooked, calls are recorded into bounded buffers, and the
.cvf is written by the agent's own thread at stop.  `vcattach convert X.cvf -o X.json` turns a
.cvf into Chrome-trace JSON; vcattach.cvf reads it in Python.

Errors (agent not built for this Python, a session already running, output not writable,
another profiler active, …) raise VcattachError with a one-line message.
"""
import ctypes
import os
from collections import namedtuple

from . import _agent

__all__ = ["trace", "start", "stop", "active", "Result", "VcattachError"]

Result = namedtuple("Result", "events threads dropped bytes gil_hold_us records_bytes status error")


class VcattachError(RuntimeError):
    pass


_START_WAIT_MS = 30000
_STOP_WAIT_MS = 120000


def _output_string(output):
    if isinstance(output, int):
        return "fd:%d" % output
    output = os.fspath(output)
    if output.startswith(("fd:", "unix:")):
        return output
    path = os.path.abspath(output)
    d = os.path.dirname(path) or "."
    if not os.path.isdir(d) or not os.access(d, os.W_OK | os.X_OK):
        raise VcattachError("vcattach: output %s is not writable (directory %s): choose another "
                            "path" % (output, d))
    return path


def start(output, duration=None, buffer_mb=256, hook="auto", null_hook=False, fallback=None):
    """Starts tracing every thread of this process.  `output`: a .cvf path, "fd:N", an int fd,
    or "unix:/path".  `duration` (seconds) stops on its own; otherwise call stop()."""
    if hook not in _agent.HOOKS:
        raise ValueError("hook must be one of %s" % ", ".join(sorted(_agent.HOOKS)))
    try:
        lib = _agent.load()
    except RuntimeError as e:
        raise VcattachError(str(e))
    out = _output_string(output).encode()
    fb = _output_string(fallback).encode() if fallback else None
    cfg = _agent.VcConfig()
    cfg.abi = _agent.VC_CONFIG_ABI
    cfg.struct_size = ctypes.sizeof(_agent.VcConfig)
    cfg.output = out
    cfg.fallback = fb
    cfg.duration_ms = int(duration * 1000) if duration else 0
    cfg.buffer_mb = int(buffer_mb)
    cfg.hook = _agent.HOOKS[hook]
    cfg.null_hook = 1 if null_hook else 0
    rc = lib.vc_agent_start(ctypes.byref(cfg))
    if rc == -_agent.EBUSY:
        raise VcattachError("vcattach: a trace session is already running in this process "
                            "(vcattach.stop() ends it)")
    if rc != 0:
        raise VcattachError("vcattach: cannot start: %s" % _agent.strerror(rc))
    rc = lib.vc_agent_wait_started(_START_WAIT_MS)
    if rc != 0:
        msg = _agent.last_error(lib) or _agent.strerror(rc)
        if rc == -_agent.ETIMEDOUT:
            # Cancel: the agent stops as soon as it gets the GIL, instead of tracing unasked.
            lib.vc_agent_stop(0, None)
            msg = "the agent did not install its hooks within %d s" % (_START_WAIT_MS // 1000)
        raise VcattachError("vcattach: %s" % msg)


def _result(r, lib):
    return Result(r.events, r.threads, r.dropped, r.bytes, r.gil_hold_us, r.records_bytes,
                  r.status, _agent.last_error(lib) if r.status else "")


def stop(wait=_STOP_WAIT_MS / 1000.0):
    """Stops the session (hooks removed from every thread), waits for the trace to be written
    and returns its Result.  Raises VcattachError if no session ran or the write failed."""
    lib = _agent.load()
    r = _agent.VcResult()
    rc = lib.vc_agent_stop(int(wait * 1000), ctypes.byref(r))
    if rc == -_agent.ESRCH:
        raise VcattachError("vcattach: no trace session was started")
    if rc == -_agent.ETIMEDOUT:
        raise VcattachError("vcattach: the trace was not written within %.0f s" % wait)
    if rc != 0:
        raise VcattachError("vcattach: stop failed: %s" % _agent.strerror(rc))
    res = _result(r, lib)
    if res.status != 0:
        raise VcattachError("vcattach: %s" % (res.error or _agent.strerror(res.status)))
    return res


def active():
    """True while a session runs in this process."""
    if _agent.find_agent() is None:
        return False
    return bool(_agent.load().vc_agent_active())


class trace(object):
    """Context manager: traces the body; the Result is in .result afterwards."""

    def __init__(self, output, duration=None, buffer_mb=256, hook="auto", null_hook=False,
                 fallback=None):
        self.kwargs = dict(duration=duration, buffer_mb=buffer_mb, hook=hook,
                           null_hook=null_hook, fallback=fallback)
        self.output = output
        self.result = None

    def __enter__(self):
        start(self.output, **self.kwargs)
        return self

    def __exit__(self, *exc):
        self.result = stop()
        return False

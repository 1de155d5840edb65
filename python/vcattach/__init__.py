"""vcattach — trace this Python process with the vcattach agent, VizTracer-compatible output.

    import vcattach
    with vcattach.trace("out.cvf"):
        work()

    vcattach.start("out.cvf", duration=None, buffer_mb=256, hook="auto",
                   include=None, exclude=None, no_c_calls=False, max_depth=None, min_dur=None)
    ...
    result = vcattach.stop()      # Result(events, threads, dropped, bytes, gil_hold_us, …)

The tracing itself happens in the C agent (libvcagent-pyXY.so, one build per CPython minor),
loaded into this process with ctypes: every thread is hooked, calls are recorded into bounded
buffers, and the .cvf is written by the agent's own thread at stop.  `vcattach convert X.cvf
-o X.json` turns a .cvf into Chrome-trace JSON; vcattach.cvf reads it in Python (and needs no
agent).

Which agent is loaded (the package is pure Python; `pip install ./python` installs no agent):
  VCATTACH_AGENT_DIR=DIR   DIR/libvcagent-pyXY.so and nothing else, as for the vcattach
                           command, which reads the same variable;
  otherwise                ROOT/build (when imported from the source tree), then
                           PREFIX/lib/vcattach (`make install`), /usr/local/lib/vcattach.
  VCATTACH_AGENT=FILE      deprecated alias naming one agent file, read only when
                           VCATTACH_AGENT_DIR is unset (a DeprecationWarning says so).

Errors (agent not built for this Python, a session already running, output not writable,
another profiler active, …) raise VcattachError with a one-line message.  When the body of
`with trace(...)` raises, that exception is the one that propagates: a failure to stop the
session then is logged (logger "vcattach"), kept in the trace object's .stop_error and, on
Python 3.11+, added as a note to the body's exception.
"""
import ctypes
import logging
import os
from typing import NamedTuple, Optional

from . import _agent

__all__ = ["trace", "start", "stop", "active", "Result", "VcattachError", "__version__"]

__version__ = "0.1.0"  # common/version.h's VC_VERSION_STRING (a test checks they agree)

_log = logging.getLogger("vcattach")


class Result(NamedTuple):
    """A finished session, as the agent reports it (struct vc_result of agent/vcagent.h)."""
    events: int          # X (call) events written
    threads: int         # threads with a track in the trace
    dropped: int         # calls lost to full buffers (a larger buffer_mb keeps them)
    bytes: int           # .cvf bytes emitted
    gil_hold_us: int     # longest GIL hold by the agent during stop
    records_bytes: int   # buffer bytes used by the records
    status: int          # 0, or a negative errno-like code of the failure
    error: str           # the agent's one-line message when status != 0, else ""


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


_DUR_UNITS = (("ns", 1), ("us", 1000), ("ms", 1000000), ("s", 1000000000))


def _min_dur_ns(min_dur):
    """min_dur: seconds (int/float) or a string with a unit: "50us", "2ms", "0.5s", "100ns"."""
    if min_dur is None:
        return 0
    if isinstance(min_dur, str):
        text = min_dur.strip()
        for unit, scale in _DUR_UNITS:
            if text.endswith(unit) and not (unit == "s" and text[-2:-1] in "num"):
                try:
                    value = float(text[:-len(unit)])
                except ValueError:
                    break
                if value < 0:
                    break
                return int(round(value * scale))
        raise ValueError("min_dur %r: give seconds or a string with a unit, e.g. '50us', '2ms'"
                         % min_dur)
    if min_dur < 0:
        raise ValueError("min_dur must not be negative")
    return int(round(float(min_dur) * 1e9))


def _globs(value, name):
    """None, a glob, or an iterable of globs → '\n'-joined bytes for the agent (or None)."""
    if value is None:
        return None
    items = [value] if isinstance(value, (str, bytes, os.PathLike)) else list(value)
    out = []
    for g in items:
        g = os.fsdecode(g)
        if not g or "\n" in g:
            raise ValueError("%s: empty pattern or one with a newline: %r" % (name, g))
        out.append(g)
    return "\n".join(out).encode() if out else None


def start(output, duration=None, buffer_mb=256, hook="auto", null_hook=False, fallback=None,
          include=None, exclude=None, no_c_calls=False, max_depth=None, min_dur=None):
    """Starts tracing every thread of this process.  `output`: a .cvf path, "fd:N", an int fd,
    or "unix:/path".  `duration` (seconds) stops on its own; otherwise call stop().

    Filters (recorded in the trace's metadata): `include` / `exclude`, a glob or a list of
    globs (fnmatch) on a Python function's file (co_filename), a C call being judged by its
    caller's file; `no_c_calls`; `max_depth` (calls deeper than N are not recorded);
    `min_dur` (calls shorter are not kept: seconds, or "50us", "2ms")."""
    if hook not in _agent.HOOKS:
        raise ValueError("hook must be one of %s" % ", ".join(sorted(_agent.HOOKS)))
    inc = _globs(include, "include")
    exc = _globs(exclude, "exclude")
    if max_depth is not None and (int(max_depth) < 1 or int(max_depth) >= 2 ** 32):
        raise ValueError("max_depth must be at least 1")
    min_dur_ns = _min_dur_ns(min_dur)
    try:
        lib = _agent.load()
    except _agent.AgentLoadError as e:
        raise VcattachError(str(e)) from e
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
    cfg.include = inc
    cfg.exclude = exc
    cfg.no_c_calls = 1 if no_c_calls else 0
    cfg.max_depth = int(max_depth) if max_depth else 0
    cfg.min_dur_ns = min_dur_ns
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


def _result(r, lib) -> Result:
    return Result(r.events, r.threads, r.dropped, r.bytes, r.gil_hold_us, r.records_bytes,
                  r.status, _agent.last_error(lib) if r.status else "")


def stop(wait: float = _STOP_WAIT_MS / 1000.0) -> Result:
    """Stops the session (hooks removed from every thread), waits for the trace to be written
    and returns its Result.  Raises VcattachError if no session ran or the write failed."""
    try:
        lib = _agent.load()
    except _agent.AgentLoadError as e:
        raise VcattachError(str(e)) from e
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


def active() -> bool:
    """True while a session runs in this process."""
    if _agent.find_agent() is None:
        return False
    return bool(_agent.load().vc_agent_active())


class trace(object):
    """Context manager: traces the body; the Result is in .result afterwards.  If the body
    raises, its exception propagates even when stopping fails too (that failure is then in
    .stop_error, logged, and noted on the body's exception); if only stopping fails, its
    VcattachError propagates."""

    def __init__(self, output, duration=None, buffer_mb=256, hook="auto", null_hook=False,
                 fallback=None, include=None, exclude=None, no_c_calls=False, max_depth=None,
                 min_dur=None):
        self.kwargs = dict(duration=duration, buffer_mb=buffer_mb, hook=hook,
                           null_hook=null_hook, fallback=fallback, include=include,
                           exclude=exclude, no_c_calls=no_c_calls, max_depth=max_depth,
                           min_dur=min_dur)
        self.output = output
        self.result: Optional[Result] = None
        self.stop_error: Optional[VcattachError] = None

    def __enter__(self):
        start(self.output, **self.kwargs)
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None:
            self.result = stop()
            return False
        try:
            self.result = stop()
        except VcattachError as e:
            # The body's exception says what went wrong first; it must not be replaced by
            # the consequence (stop failing).  Keep the stop failure where it can be seen.
            self.stop_error = e
            _log.error("%s (while the traced block raised %s)", e, exc_type.__name__)
            if hasattr(exc, "add_note"):
                exc.add_note("vcattach: stopping the trace failed too: %s" % e)
        return False

"""Hosts that embed CPython in a C server, traced as a whole with `--subprocesses` under load:
Apache httpd + mod_wsgi and uWSGI, from Debian's packages (tests/support/embedded.py).

What each test asserts: the handler function in the trace of every process that serves, every
process of the tree accounted for (traced, or not traced with its reason: none "lost"), no
failed request under wrk (no non-2xx response, no socket error), and the server still serving,
with no thread stopped or traced, after the detach.

Apache's master has libpython loaded but never initializes it (mod_wsgi initializes Python
lazily, in the children): it must be "not traced" with that reason, at once; with
WSGILazyInitialization Off it initializes Python and runs none: traced (no events).

mod_wsgi's default application group runs the application in a sub-interpreter: the
`*-subinterp` parameters see the handler through the agent's sub-interpreter support
(agent/interps.c); the `*-global` ones (WSGIApplicationGroup %{GLOBAL}) in the main
interpreter.

Also a C host of our own that initializes Python late (tests/targets/late_init.c, built by
`make test-prereqs`): the young root is injected again until its interpreter is up.
"""
import os
import signal
import subprocess
import time

import pytest

from support import embedded
from support.embedded import HANDLER, Apache, UWSGI, Wrk, members
from support.paths import BUILD, PYTHONS, VCATTACH
from support.proc import assert_running_untraced

MISSING = embedded.missing()
# real servers under wrk for seconds each: the slow group (`make test-slow`, run by CI)
pytestmark = pytest.mark.slow
needs_hosts = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")

LOAD_S = 6    # wrk's run: it covers the attach, the trace and the detach
TRACE_S = 3


def trace_under_load(server, out):
    """vcattach --subprocesses on the server's master while wrk loads it.  (vcattach's
    CompletedProcess, wrk's (requests, failures, text))."""
    load = Wrk(server.port, LOAD_S)
    try:
        r = subprocess.run([VCATTACH, "--pid", str(server.master), "--subprocesses", "-v",
                            "-t", "%ds" % TRACE_S, "-o", str(out)],
                           capture_output=True, text=True, timeout=120)
    finally:
        result = load.result()
    return r, result


def has_handler_named(out, pid, name):
    """Whether process pid's part of the trace has calls of function name (the summary, in C:
    a few million events decode too slowly in Python)."""
    r = subprocess.run([VCATTACH, "summary", str(out), "--pid", str(pid), "--merged", "--all",
                        "--sort", "calls", "--top", "100000"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return any(name + " (" in line for line in r.stdout.splitlines())


def has_handler(out, pid):
    return has_handler_named(out, pid, HANDLER)


def check_after(server, r, load, serving, out, master_skipped):
    assert r.returncode == 0, r.stdout + r.stderr
    requests, failures, text = load
    assert requests > 0 and failures == 0, text
    got = members(r.stdout)
    # every process there was is accounted for, and none is lost
    for pid in [server.master] + serving:
        assert pid in got, (pid, r.stdout)
    assert not [p for p, (state, _) in got.items() if state in ("lost", "unfinished")], r.stdout
    if master_skipped:
        state, why = got[server.master]
        assert state == "not traced" and "not initialized" in why, r.stdout
        assert "lost" not in r.stdout.splitlines()[0], r.stdout
    else:
        assert got[server.master][0] == "traced", r.stdout
    # the handler in the trace of every process that serves
    for pid in serving:
        assert got[pid][0] == "traced", (pid, r.stdout)
        assert has_handler(out, pid), (pid, r.stdout)
    # every serving process survived (a crashed one is replaced at once: its pid is gone)
    for pid in serving:
        assert os.path.exists("/proc/%d" % pid), \
            "pid %d died during the trace:\n%s" % (pid, server.log_tail())
    # still serving after the detach, nothing left stopped or traced
    status, body = embedded.get(server.port)
    assert status == 200 and body.startswith("hello "), body
    for pid in server.pids():
        assert_running_untraced(pid)


APACHE_CASES = [
    pytest.param("embedded", "global", False, id="embedded-global"),
    pytest.param("daemon", "global", False, id="daemon-global"),
    # WSGILazyInitialization Off: the master initializes Python (and runs none): traced
    pytest.param("daemon", "global", True, id="daemon-global-eager-init"),
    # mod_wsgi's default application group: a sub-interpreter (agent/interps.c)
    pytest.param("embedded", "default", False, id="embedded-default-subinterp"),
    pytest.param("daemon", "default", False, id="daemon-default-subinterp"),
]


@needs_hosts
@pytest.mark.parametrize("mode,group,eager", APACHE_CASES)
def test_apache_mod_wsgi(mode, group, eager, tmp_path):
    with Apache(mode, group, eager=eager) as server:
        serving = server.serving()
        assert len(serving) == 2, (serving, [embedded.cmdline(p) for p in server.pids()])
        r, load = trace_under_load(server, tmp_path / "apache.cvf")
        check_after(server, r, load, serving, tmp_path / "apache.cvf", master_skipped=not eager)


@needs_hosts
@pytest.mark.parametrize("lazy", [False, True], ids=["preloaded", "lazy-apps"])
def test_uwsgi(lazy, tmp_path):
    with UWSGI(processes=3, threads=2, lazy=lazy) as server:
        serving = server.serving()
        assert len(serving) == 3, serving
        r, load = trace_under_load(server, tmp_path / "uwsgi.cvf")
        # uWSGI's master initializes Python (its plugin does, --lazy-apps or not): traced
        check_after(server, r, load, serving, tmp_path / "uwsgi.cvf", master_skipped=False)


@needs_hosts
def test_apache_master_alone_refused_in_one_line(tmp_path):
    """Apache's master traced on its own: its agent has nothing to trace (Python loaded, not
    initialized): one line saying so and what to do, exit 1, Apache unharmed."""
    with Apache("daemon", "global") as server:
        out = tmp_path / "master.cvf"
        r = subprocess.run([VCATTACH, "--pid", str(server.master), "-t", "2s", "-o", str(out)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert "the Python interpreter is not initialized" in lines[0], r.stderr
        assert "--subprocesses" in lines[0], r.stderr
        assert not out.exists()
        status, body = embedded.get(server.port)
        assert status == 200 and body.startswith("hello "), body
        for pid in server.pids():
            assert_running_untraced(pid)


def restarted(server, sig, old):
    """Sends sig to Apache's master (SIGUSR1 graceful, SIGHUP restart); waits (bounded) until
    two new serving processes answer.  Their pids."""
    os.kill(server.master, sig)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        now = server.serving()
        if len(now) == 2 and not set(now) & set(old):
            try:
                if embedded.get(server.port, timeout=2)[0] == 200:
                    return now
            except Exception:
                pass  # its new children are starting
        time.sleep(0.1)
    raise AssertionError("Apache did not come back after signal %d:\n%s"
                         % (sig, server.log_tail()))


@needs_hosts
@pytest.mark.parametrize("eager", [False, True], ids=["lazy-init", "eager-init"])
def test_apache_restarts_after_trace(eager, tmp_path):
    """The agent stays loaded (idle) in Apache's master after a trace, and libpython with it:
    a graceful restart and a full restart (what logrotate and `apache2ctl restart` send) then
    work, mod_wsgi's Python included, and the new tree is traced again like the first."""
    with Apache("daemon", "global", eager=eager) as server:
        serving = server.serving()
        r, load = trace_under_load(server, tmp_path / "first.cvf")
        check_after(server, r, load, serving, tmp_path / "first.cvf", master_skipped=not eager)
        serving = restarted(server, signal.SIGUSR1, serving)
        serving = restarted(server, signal.SIGHUP, serving)
        r, load = trace_under_load(server, tmp_path / "again.cvf")
        check_after(server, r, load, serving, tmp_path / "again.cvf", master_skipped=not eager)


LATE_INIT = os.path.join(BUILD, "tests", "late-init")
SHARED = [p for p in PYTHONS if p["kind"] == "shared"]
LATE_SCRIPT = """
import time
def handle_late():
    return sum(range(100))
t = time.monotonic()
while time.monotonic() - t < 6:
    handle_late()
print("done", flush=True)
"""


@pytest.mark.skipif(not os.path.exists(LATE_INIT) or not SHARED,
                    reason="build/tests/late-init (make test-prereqs) or a shared libpython "
                           "is missing")
def test_root_that_initializes_python_late_is_traced(tmp_path):
    """A C host (tests/targets/late_init.c) that maps libpython at once and initializes it
    1.5 s later, traced with --subprocesses from its start: its agent first finds Python not
    initialized; the young root is injected again until it is, then traced (it used to wait
    in a retry nobody made and end as "lost")."""
    py = SHARED[-1]
    lib = os.path.join(os.path.dirname(os.path.dirname(py["path"])), "lib",
                       "libpython3.%d.so.1.0" % (py["minor"] % 100))
    assert os.path.exists(lib), lib
    host = subprocess.Popen([LATE_INIT, lib, "1500", LATE_SCRIPT], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert host.stdout.readline().strip() == "loaded", host.stderr.read()
        out = tmp_path / "late.cvf"
        r = subprocess.run([VCATTACH, "--pid", str(host.pid), "--subprocesses", "-v", "-t",
                            "3s", "-o", str(out)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert members(r.stdout)[host.pid][0] == "traced", r.stdout
        assert has_handler_named(out, host.pid, "handle_late"), r.stdout
        stdout, stderr = host.communicate(timeout=30)
        assert host.returncode == 0 and stdout.strip() == "done", (host.returncode, stderr)
    finally:
        if host.poll() is None:
            host.kill()
            host.communicate(timeout=10)

"""End to end: `vcattach` against a live multi-threaded service (targets/busy_service.py) on
every interpreter of the matrix, with the real agent and the real injection.

What "unharmed" means here, checked after every attach: the service's computation equals a
never-traced run of the same rounds; no thread raised; no time.sleep returned early; the
blocked accept() and Lock.acquire() completed normally at the end; the process is not left
stopped or traced; attaching again after a detach works."""
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from support.paths import (ASAN_VCATTACH, BUILD, PYTHONS, VCATTACH, agent_name, agent_path,
                           world_readable)
from support.proc import PRIVATE_TMP, assert_untouched, run_vcattach
from support.service import (SUMMARY, THREADS, assert_unharmed, check_service_threads,
                             check_summary, thread_names, trace_with_late_thread, x_events)
from support.targets import Idle, Service

from vcattach import cvf



@pytest.fixture(autouse=True)
def agents_present():
    missing = [p["minor"] for p in PYTHONS if not os.path.exists(agent_path(p["minor"]))]
    assert not missing, "agent builds missing for %s: run make" % missing


@pytest.fixture
def service(tmp_path, start_target):
    def start(python, name="svc"):
        return start_target(Service, python, tmp_path / name)
    return start


def wait_session(pid, running=True, timeout=15, proc=None):
    """Polls `vcattach status` until a session is (or is no longer) running in pid; gives up
    early (returns) if the vcattach process `proc` has already exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return
        r = run_vcattach("status", "--pid", pid, "-q")
        if (r.returncode == 0) == running:
            return
        time.sleep(0.05)
    raise AssertionError("session in %d did not become %s" % (
        pid, "running" if running else "idle"))


def read_until(stream, pattern, timeout):
    """Reads the pipe `stream` until `pattern` (bytes regex) matches what was read, the pipe
    ends or `timeout` seconds pass; returns all that was read."""
    deadline = time.monotonic() + timeout
    got = b""
    fd = stream.fileno()
    while not pattern.search(got):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        got += chunk
    return got


def method_params():
    """Both methods on every interpreter of the matrix."""
    return [pytest.param(p, m, id="%s-%s" % (p["id"], m))
            for m in ("ptrace", "gdb") for p in PYTHONS]


@pytest.mark.parametrize("python,method", method_params())
def test_trace_service(python, method, service, tmp_path):
    svc = service(python)
    out = tmp_path / "trace.cvf"
    r = trace_with_late_thread(svc, out, "--method", method)
    events, threads, drops = check_summary(r, out)
    assert not os.path.exists(str(out) + ".tmp")
    assert oct(os.stat(out).st_mode & 0o777) == oct(0o644)
    assert_untouched(svc.pid)

    check_service_threads(cvf.load(str(out)), events)

    # A second attach after the detach: the agent is reused, the trace is complete again.
    out2 = tmp_path / "again.cvf"
    r2 = run_vcattach("--pid", svc.pid, "-t", "300ms", "-o", out2, "--method", method)
    check_summary(r2, out2)
    assert THREADS - {"late-starter"} <= set(thread_names(cvf.load(str(out2))).values())
    assert_untouched(svc.pid)

    report = svc.finish()
    assert report["late_ran"]
    assert_unharmed(svc, report)


def cycle_params():
    """5 cycles on every interpreter; 50 more on one (Debian's static 3.11 when present), a
    soak of a minute, in the slow group."""
    static = [p for p in PYTHONS if p["kind"] == "static"]
    long_one = static[0] if static else PYTHONS[0]
    params = [pytest.param(p, 5, id="%s-x5" % p["id"]) for p in PYTHONS]
    params.append(pytest.param(long_one, 50, id="%s-x50" % long_one["id"],
                               marks=pytest.mark.slow))
    return params


@pytest.mark.parametrize("python,cycles", cycle_params())
def test_attach_detach_cycles(python, cycles, service, tmp_path):
    svc = service(python)
    for i in range(cycles):
        out = tmp_path / ("c%02d.cvf" % i)
        r = run_vcattach("--pid", svc.pid, "-t", "100ms", "-o", out, timeout=60)
        assert r.returncode == 0, "cycle %d: %s" % (i, r.stderr)
        assert r.stdout.startswith("vcattach: pid %d" % svc.pid)
        trace = cvf.load(str(out))
        assert "MainThread" in thread_names(trace).values(), "cycle %d" % i
        assert_untouched(svc.pid)
        os.unlink(out)
    assert_unharmed(svc, svc.finish())


FAULT_PYTHONS = [p for p in PYTHONS if p["kind"] == "static"][:1] + \
    [p for p in PYTHONS if p["minor"] >= 312][:1]


@pytest.mark.parametrize("python", [pytest.param(p, id=p["id"]) for p in FAULT_PYTHONS])
def test_sigint_stops_early_and_writes(python, service, tmp_path):
    svc = service(python)
    out = tmp_path / "int.cvf"
    # No -t: trace until Ctrl-C, the interactive way.
    proc = subprocess.Popen([VCATTACH, "--pid", str(svc.pid), "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_session(svc.pid)
    st = run_vcattach("status", "--pid", svc.pid)
    assert st.returncode == 0 and "streamed to the vcattach that started it" in st.stdout
    second = run_vcattach("--pid", svc.pid, "-t", "1s", "-o", tmp_path / "second.cvf")
    assert second.returncode == 2 and "traced by another vcattach" in second.stderr
    assert not (tmp_path / "second.cvf.tmp").exists()
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    check_summary(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), out)
    assert "MainThread" in thread_names(cvf.load(str(out))).values()
    wait_session(svc.pid, running=False)
    assert_unharmed(svc, svc.finish())


def _left_seconds(status_stdout):
    m = re.search(r", (\d+(?:\.\d+)?)(ms|s) left,", status_stdout)
    assert m, status_stdout
    return float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)


@pytest.mark.parametrize("python", [pytest.param(p, id=p["id"]) for p in FAULT_PYTHONS])
def test_status_left_is_within_the_requested_duration(python, service, tmp_path):
    """`status` during `vcattach trace -t 3s` counts down from 3 s, not from the agent's
    backstop deadline (-t plus a grace the operator never asked for)."""
    svc = service(python)
    proc = subprocess.Popen([VCATTACH, "--pid", str(svc.pid), "-t", "3s", "-o",
                             str(tmp_path / "t.cvf")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_session(svc.pid)
        st = run_vcattach("status", "--pid", svc.pid)
        assert st.returncode == 0, st
        assert _left_seconds(st.stdout) <= 3.0, st.stdout
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wait_session(svc.pid, running=False)
    assert_unharmed(svc, svc.finish())


@pytest.mark.parametrize("python", [pytest.param(p, id=p["id"]) for p in FAULT_PYTHONS])
def test_second_sigint_abandons_to_fallback(python, service, tmp_path):
    svc = service(python)
    out = tmp_path / "abandon.cvf"
    proc = subprocess.Popen([VCATTACH, "--pid", str(svc.pid), "-t", "60s", "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_session(svc.pid)
    # Two interrupts for certain: vcattach is held stopped while a SIGINT and a SIGTERM (two
    # different signals, so they cannot merge) are queued, then both arrive together.
    proc.send_signal(signal.SIGSTOP)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGCONT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 1, stderr
    assert "trace abandoned" in stderr and "abandon.partial.cvf" in stderr
    assert not out.exists() and not os.path.exists(str(out) + ".tmp")
    partial = tmp_path / "abandon.partial.cvf"
    deadline = time.monotonic() + 20
    while not partial.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    wait_session(svc.pid, running=False)
    assert "MainThread" in thread_names(cvf.load(str(partial))).values()
    assert_unharmed(svc, svc.finish())


@pytest.mark.parametrize("python", [pytest.param(p, id=p["id"]) for p in FAULT_PYTHONS])
def test_kill9_of_vcattach_leaves_partial_trace(python, service, tmp_path):
    svc = service(python)
    out = tmp_path / "killed.cvf"
    private_tmp = tmp_path / "tmpdir"
    private_tmp.mkdir()
    # -t 30s: the kill at ~2 s must come before the session's own end however late
    # wait_session sees it start (the agent stops when its controller's connection closes)
    proc = subprocess.Popen([VCATTACH, "--pid", str(svc.pid), "-t", "30s", "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, TMPDIR=str(private_tmp)))
    wait_session(svc.pid)
    # the spool is flushed every 250 ms, and names come at the agent's GIL visits (every
    # 100 ms, later on a loaded machine): a kill at 0.8 s once found records but no name yet
    time.sleep(2.0)
    proc.kill()
    proc.wait()
    assert os.listdir(private_tmp) == [], "control socket directory left behind"
    partial = tmp_path / "killed.partial.cvf"
    deadline = time.monotonic() + 20
    while not partial.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert partial.exists(), "the agent wrote no fallback trace"
    wait_session(svc.pid, running=False)  # hooks removed, session over
    # The agent's fallback holds its window (what it had not streamed yet); what it had
    # streamed is in the spool vcattach kept next to OUT, which `recover` turns into a trace.
    cvf.load(str(partial))
    assert not out.exists()
    spool = tmp_path / "killed.cvf.spool"
    assert spool.exists(), os.listdir(tmp_path)
    recovered = tmp_path / "recovered.cvf"
    r = run_vcattach("recover", spool, "-o", recovered)
    assert r.returncode == 0, r.stderr
    assert re.match(r"vcattach recover: [1-9]\d* events", r.stdout), r.stdout
    assert "MainThread" in thread_names(cvf.load(str(recovered))).values()
    assert_untouched(svc.pid)
    # The stale OUT.tmp of the killed run is reported, and --force clears it.
    r = run_vcattach("--pid", svc.pid, "-t", "200ms", "-o", out)
    assert r.returncode == 2 and "killed.cvf.tmp exists" in r.stderr
    r = run_vcattach("--pid", svc.pid, "-t", "200ms", "-o", out, "--force")
    check_summary(r, out)
    assert_unharmed(svc, svc.finish())


@pytest.mark.parametrize("python", [pytest.param(p, id=p["id"]) for p in FAULT_PYTHONS])
def test_target_exits_during_trace(python, tmp_path):
    """Exit code 1 and a message; if the agent flushed at interpreter exit, that trace (up to
    the exit) is kept and must be valid; never a half-written file."""
    idle = subprocess.Popen([python["path"], "-c",
                             "import time\nprint('ready', flush=True)\ntime.sleep(3)"],
                            stdout=subprocess.PIPE, text=True)
    assert idle.stdout.readline().strip() == "ready"
    out = tmp_path / "gone.cvf"
    r = run_vcattach("--pid", idle.pid, "-t", "20s", "-o", out, timeout=60)
    idle.wait(10)
    idle.stdout.close()
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "target process %d exited" % idle.pid in r.stderr, r.stderr
    assert not os.path.exists(str(out) + ".tmp")
    if out.exists():
        assert "the trace up to its exit is in %s" % out in r.stderr
        # (threading is never imported by this target: the agent names the thread by tid)
        assert thread_names(cvf.load(str(out)))


@pytest.mark.parametrize("python", [pytest.param(p, id=p["id"]) for p in FAULT_PYTHONS])
def test_stream_to_unix_socket(python, service, tmp_path):
    svc = service(python)
    path = str(tmp_path / "sink.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    received = []

    def drain():
        conn, _ = listener.accept()
        chunks = []
        while True:
            b = conn.recv(1 << 16)
            if not b:
                break
            chunks.append(b)
        conn.close()
        received.append(b"".join(chunks))
    t = threading.Thread(target=drain)
    t.start()
    r = run_vcattach("--pid", svc.pid, "-t", "300ms", "-o", "unix:" + path)
    t.join(30)
    listener.close()
    assert r.returncode == 0, r.stderr
    assert "-> unix:%s" % path in r.stdout
    assert received and "MainThread" in thread_names(cvf.loads(received[0])).values()
    assert_unharmed(svc, svc.finish())


@pytest.mark.parametrize("python", [pytest.param(p, id=p["id"]) for p in FAULT_PYTHONS])
def test_status_warns_when_a_started_sessions_buffer_will_fill(python, service, tmp_path):
    """`start` returns at once, before any call rate is known: `status` is where the operator
    of a detached session learns that its 1 MiB buffer fills before the deadline (and which
    --buffer-mb would hold it).  A session whose buffer holds gets no warning."""
    svc = service(python)
    out = tmp_path / "small.cvf"
    r = run_vcattach("start", "--pid", svc.pid, "-t", "60s", "-o", out, "--buffer-mb", "1")
    assert r.returncode == 0, r.stderr
    warning = re.compile(r"warning: at this call rate the 1 MiB buffer fills after ~\S+, before "
                         r"the session ends \(in [\d.]+s\); then the oldest calls are dropped "
                         r"\(--buffer-mb (\d+) would hold them\)")
    deadline = time.monotonic() + 20
    while True:  # the first calls must be recorded before there is a rate
        st = run_vcattach("status", "--pid", svc.pid)
        assert st.returncode == 0 and "session running in pid %d" % svc.pid in st.stdout, st
        m = warning.search(st.stderr)
        if m or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert m, st.stderr
    assert int(m.group(1)) > 1
    assert run_vcattach("stop", "--pid", svc.pid).returncode == 0
    r = run_vcattach("start", "--pid", svc.pid, "-t", "2s", "-o", tmp_path / "roomy.cvf",
                     "--buffer-mb", "2048")
    assert r.returncode == 0, r.stderr
    time.sleep(0.5)
    st = run_vcattach("status", "--pid", svc.pid)
    assert st.returncode == 0 and "warning" not in st.stderr, st.stderr
    wait_session(svc.pid, running=False)
    assert_unharmed(svc, svc.finish())


# Holds the GIL for 4 s at a time: a call through ctypes.PyDLL keeps it (PyDLL is for functions
# that use the C API), and usleep never gives it up.  The agent thread waits for it at every
# tick of the trace.
GIL_HOG = """
import ctypes, time
hold = ctypes.PyDLL(None).usleep
print("ready", flush=True)
while True:
    hold(4000000)
    time.sleep(0.05)
"""


@pytest.mark.parametrize("python", [pytest.param(p, id=p["id"]) for p in FAULT_PYTHONS])
def test_status_and_stop_answered_while_the_gil_is_held(python, tmp_path):
    """A target that holds the GIL for 4 s at a time: its agent thread waits for the GIL at
    every tick, yet every `status` is answered (by the agent's socket thread, which never takes
    the GIL: before it, a status query found no answer within its 2 s and reported no session),
    and `stop` writes the trace once the GIL comes back."""
    p = subprocess.Popen(python["argv"] + ["-c", GIL_HOG], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        out = tmp_path / "hog.cvf"
        r = run_vcattach("start", "--pid", p.pid, "-t", "60s", "-o", out)
        assert r.returncode == 0, r.stderr
        end = time.monotonic() + 8.5  # two holds at least
        n = 0
        while time.monotonic() < end:
            st = run_vcattach("status", "--pid", p.pid)
            assert st.returncode == 0 and "session running in pid %d" % p.pid in st.stdout, st
            n += 1
            time.sleep(0.25)
        assert n >= 10
        stop = run_vcattach("stop", "--pid", p.pid)
        assert stop.returncode == 0, stop.stderr
        assert any("sleep" in e["name"] for e in x_events(cvf.load(str(out))))
        assert p.poll() is None
        assert_untouched(p.pid)
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("python", [pytest.param(p, id=p["id"]) for p in FAULT_PYTHONS])
def test_start_status_stop(python, service, tmp_path):
    svc = service(python)
    out = tmp_path / "detached.cvf"
    r = run_vcattach("start", "--pid", svc.pid, "-t", "30s", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "the agent writes %s" % out in r.stdout
    st = run_vcattach("status", "--pid", svc.pid)
    assert st.returncode == 0 and "session running in pid %d" % svc.pid in st.stdout, st
    assert str(out) in st.stdout
    again = run_vcattach("--pid", svc.pid, "-t", "1s", "-o", tmp_path / "other.cvf")
    assert again.returncode == 2 and "already running" in again.stderr
    assert "vcattach stop --pid %d" % svc.pid in again.stderr
    st = run_vcattach("status", "--pid", svc.pid)
    assert _left_seconds(st.stdout) <= 30.0, st.stdout
    stop = run_vcattach("stop", "--pid", svc.pid)
    assert stop.returncode == 0, stop.stderr
    assert "events" in stop.stdout and str(out) in stop.stdout
    # written by the agent, readable like the file of a plain `vcattach trace` (0644)
    assert oct(os.stat(out).st_mode & 0o777) == oct(0o644)
    assert THREADS - {"late-starter"} <= set(thread_names(cvf.load(str(out))).values())
    st = run_vcattach("status", "--pid", svc.pid)
    assert st.returncode == 1 and "no session" in st.stdout

    # A detached session also ends by itself at its deadline and writes its file.
    out2 = tmp_path / "deadline.cvf"
    r = run_vcattach("start", "--pid", svc.pid, "-t", "500ms", "-o", out2)
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 20
    while not out2.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    wait_session(svc.pid, running=False)
    assert "MainThread" in thread_names(cvf.load(str(out2))).values()
    assert_untouched(svc.pid)
    assert_unharmed(svc, svc.finish())


@pytest.mark.skipif(not [p for p in PYTHONS if p["kind"] == "static"],
                    reason="Debian's /usr/bin/python3.11 is not installed (the only interpreter "
                           "of the matrix that an unprivileged user can run here)")
def test_root_operator_traces_service_user(tmp_path):
    """The usual production case: root attaches to a service running as another user.  The
    control socket is handed to that user; the trace belongs to the operator."""
    python = [p for p in PYTHONS if p["kind"] == "static"][0]
    work = tempfile.mkdtemp(prefix="vc-svc-", dir="/tmp")
    svc = Service(python, work, user=(65534, 65534))
    try:
        with open("/proc/%d/status" % svc.pid) as f:
            assert "Uid:\t65534" in f.read()
        out = tmp_path / "user.cvf"
        # the agent where the service's user can read it (not in a clone under a 0700 home)
        agent = world_readable(agent_path(python["minor"]))
        r = run_vcattach("--pid", svc.pid, "-t", "500ms", "-o", out,
                         env={"VCATTACH_AGENT_DIR": os.path.dirname(agent)})
        check_summary(r, out)
        assert os.stat(out).st_uid == os.geteuid()
        assert THREADS - {"late-starter"} <= set(thread_names(cvf.load(str(out))).values())
        assert_untouched(svc.pid)
        assert_unharmed(svc, svc.finish())
    finally:
        svc.close()
        shutil.rmtree(work, ignore_errors=True)


def test_status_line_on_a_terminal(service, tmp_path):
    """On a tty (and without -q) stderr shows elapsed/remaining; never on a pipe."""
    svc = service(PYTHONS[-1])
    master, slave = os.openpty()
    out = tmp_path / "tty.cvf"
    proc = subprocess.Popen([VCATTACH, "--pid", str(svc.pid), "-t", "800ms", "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    stdout, _ = proc.communicate(timeout=60)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.returncode == 0, seen
    text = seen.decode()
    assert "elapsed" in text and "left (Ctrl-C to stop)" in text, text
    assert SUMMARY.match(stdout.strip()), stdout

    quiet = run_vcattach("--pid", svc.pid, "-t", "300ms", "-o", tmp_path / "q.cvf", "-q")
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""
    assert_unharmed(svc, svc.finish())


def test_default_output_name_and_installed_layout(service, tmp_path):
    """Without -o the trace is vcattach-PID-YYYYmmdd-HHMMSS.cvf in the current directory; an
    installed vcattach (PREFIX/bin) finds its agents in PREFIX/lib/vcattach."""
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "lib" / "vcattach").mkdir(parents=True)
    shutil.copy2(VCATTACH, prefix / "bin" / "vcattach")
    for p in PYTHONS:
        name = agent_name(p["minor"])
        shutil.copy2(os.path.join(BUILD, name), prefix / "lib" / "vcattach" / name)
    svc = service(PYTHONS[0])
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    r = subprocess.run([str(prefix / "bin" / "vcattach"), "--pid", str(svc.pid), "-t", "300ms",
                        "-v"], cwd=str(cwd), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "agent %s/lib/vcattach/libvcagent-py%d.so" % (prefix, PYTHONS[0]["minor"]) in r.stderr
    files = os.listdir(cwd)
    assert len(files) == 1 and re.match(r"^vcattach-%d-\d{8}-\d{6}\.cvf$" % svc.pid, files[0])
    check_summary(r, cwd / files[0])
    assert "MainThread" in thread_names(cvf.load(str(cwd / files[0]))).values()
    assert_unharmed(svc, svc.finish())


@pytest.mark.parametrize("method", ["ptrace", "gdb"])
def test_reattach_after_agent_upgrade(method, service, tmp_path):
    """The agent file is replaced (vcattach upgraded or rebuilt) while a target still maps the
    old one: dlopen hands back the loaded copy, which /proc shows as "(deleted)", and a second
    attach must still find and start it."""
    python = [p for p in PYTHONS if p["kind"] == "static"][:1] or PYTHONS[:1]
    python = python[0]
    agents = tmp_path / "agents"
    agents.mkdir()
    name = agent_name(python["minor"])
    shutil.copy2(os.path.join(BUILD, name), agents / name)
    env = {"VCATTACH_AGENT_DIR": str(agents)}
    svc = service(python)
    for i in range(2):
        out = tmp_path / ("t%d.cvf" % i)
        r = run_vcattach("--pid", svc.pid, "-t", "300ms", "-o", out, "--method", method,
                         env=env)
        check_summary(r, out)
        assert "MainThread" in thread_names(cvf.load(str(out))).values()
        if i == 0:  # replace the file the way an upgrade does: a new inode renamed over it
            shutil.copy2(os.path.join(BUILD, name), agents / (name + ".new"))
            os.rename(agents / (name + ".new"), agents / name)
            with open("/proc/%d/maps" % svc.pid) as f:
                assert "%s (deleted)" % (agents / name) in f.read()
    assert_untouched(svc.pid)
    assert_unharmed(svc, svc.finish())


def test_target_with_private_tmp(tmp_path):
    """A target in its own mount namespace with a private /tmp (systemd PrivateTmp, or a
    container sharing the vcattach install): the control socket is made in *its* /tmp through
    /proc/PID/root and removed after the agent connects."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    python = PYTHONS[-1]
    idle = Idle(python, wrap=PRIVATE_TMP)
    try:
        assert os.readlink("/proc/%d/ns/mnt" % idle.pid) != os.readlink("/proc/self/ns/mnt")
        out = tmp_path / "ns.cvf"
        # the agent where the target sees it even when the clone is under /tmp (else vcattach
        # copies it into the target's /tmp, as test_agent_copied_… checks)
        agent = world_readable(agent_path(python["minor"]))
        r = run_vcattach("--pid", idle.pid, "-t", "300ms", "-o", out,
                         env={"VCATTACH_AGENT_DIR": os.path.dirname(agent)})
        check_summary(r, out)
        assert thread_names(cvf.load(str(out)))
        assert os.listdir("/proc/%d/root/tmp" % idle.pid) == []
        assert_untouched(idle.pid)
    finally:
        idle.close()


def hook_params():
    newest = PYTHONS[-1]
    hooks = ["profile", "monitoring"] if newest["minor"] >= 312 else ["profile"]
    return [pytest.param(newest, h, id="%s-%s" % (newest["id"], h)) for h in hooks]


@pytest.mark.parametrize("python,hook", hook_params())
def test_hook_choice_and_small_buffer(python, hook, service, tmp_path):
    """--hook reaches the agent (it reports the backend it installed); --buffer-mb 1 bounds
    the records: drops are counted, and the summary, the hint and the trace agree."""
    svc = service(python)
    out = tmp_path / "hook.cvf"
    r = run_vcattach("--pid", svc.pid, "-t", "700ms", "-o", out, "--hook", hook,
                     "--buffer-mb", "1", "-v")
    events, threads, drops = check_summary(r, out)
    assert "agent started (%s)" % hook in r.stderr, r.stderr
    trace = cvf.load(str(out))
    detach = [e for e in trace["traceEvents"] if e.get("name") == "vcattach detach"]
    assert detach and detach[0]["args"]["dropped"] == drops
    assert ("raise --buffer-mb" in r.stdout) == (drops > 0)
    assert_unharmed(svc, svc.finish())


@pytest.mark.parametrize("python", [pytest.param(p, id=p["id"]) for p in FAULT_PYTHONS])
def test_small_window_streams_the_whole_trace(python, service, tmp_path):
    """`trace` streams: a 1 MiB window (about 43,000 calls) on a busy service holds far less
    than the trace, and the trace still has every call; the spool is gone once OUT is written,
    and any call lost at the source is counted in the summary line and in the trace."""
    svc = service(python)
    out = tmp_path / "small.cvf"
    r = run_vcattach("--pid", svc.pid, "-t", "4s", "-o", out, "--buffer-mb", "1")
    events, threads, drops = check_summary(r, out)
    window = (1 << 20) // 24  # 4 s: a wide margin on a slower or loaded machine
    assert events > 3 * window, r.stdout
    assert not (tmp_path / "small.cvf.spool").exists()
    trace = cvf.load(str(out))
    lost = sum(e["args"]["calls"] for e in trace["traceEvents"]
               if e.get("name") == "vcattach dropped")
    detach = [e for e in trace["traceEvents"] if e.get("name") == "vcattach detach"]
    assert detach and detach[0]["args"]["dropped"] >= lost
    assert drops >= lost
    assert ("did not keep up" in r.stdout) == (drops > 0), r.stdout
    wait_session(svc.pid, running=False)
    assert_unharmed(svc, svc.finish())


def _nice_while_tracing(proc, timeout=20):
    """vcattach's niceness (field 19 of /proc/PID/stat; its main thread receives), every value
    seen until it ends."""
    seen = set()
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with open("/proc/%d/stat" % proc.pid) as f:
                nice = int(f.read().rsplit(")", 1)[1].split()[16])
        except (OSError, IndexError, ValueError):
            break
        seen.add(nice)
        time.sleep(0.05)
    return seen


@pytest.mark.parametrize("args,want", [([], -10), (["--nice", "4"], 4)])
def test_vcattach_receives_at_a_raised_priority(args, want, service, tmp_path):
    """While the trace streams in, vcattach runs at nice -10 (or --nice N): a busy target
    outruns a vcattach that waits for a core.  The target's own priority is untouched, and
    vcattach says in -v when it goes back to its own niceness to build the trace."""
    svc = service(PYTHONS[0])
    before = os.getpriority(os.PRIO_PROCESS, svc.pid)
    out = tmp_path / "nice.cvf"
    p = subprocess.Popen([VCATTACH, "--pid", str(svc.pid), "-t", "2s", "-o", str(out), "-v"]
                         + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = _nice_while_tracing(p)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 0, stderr
    assert want in seen, (seen, stderr)
    assert "receiving at nice %d (was %d)" % (want, os.getpriority(os.PRIO_PROCESS, 0)) \
        in stderr, stderr
    assert os.getpriority(os.PRIO_PROCESS, svc.pid) == before
    assert out.exists()
    assert_unharmed(svc, svc.finish())


def test_target_in_pid_namespace(tmp_path):
    """A service that is pid 1 of its own pid namespace (with its own /proc mount): attach,
    and find its detached session again by the pid it has for itself (NSpid)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    python = PYTHONS[-1]
    svc = Service(python, tmp_path / "svc",
                  wrap=("unshare", "--pid", "--fork", "--mount-proc"))
    try:
        with open("/proc/%d/status" % svc.pid) as f:
            assert re.search(r"NSpid:\t%d\t1\n" % svc.pid, f.read())
        out = tmp_path / "pidns.cvf"
        r = run_vcattach("start", "--pid", svc.pid, "-t", "30s", "-o", out)
        assert r.returncode == 0, r.stderr
        st = run_vcattach("status", "--pid", svc.pid)
        assert st.returncode == 0 and str(out) in st.stdout, st
        stop = run_vcattach("stop", "--pid", svc.pid)
        assert stop.returncode == 0, stop.stderr
        assert "MainThread" in thread_names(cvf.load(str(out))).values()
        out2 = tmp_path / "pidns2.cvf"
        check_summary(run_vcattach("--pid", svc.pid, "-t", "300ms", "-o", out2), out2)
        assert_untouched(svc.pid)
        assert_unharmed(svc, svc.finish())
    finally:
        svc.close()


def test_agent_copied_into_container_like_namespace(tmp_path):
    """A target whose /tmp is private cannot see an agent kept under our /tmp: vcattach has it
    copied into a fresh /tmp/.vcattach-agent-XXXXXX/ (after every preflight check, by a helper
    running as the target's user), removed once loaded; a second attach finds that copy still
    loaded and reuses it by its name, so the agent already loaded is reused too."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    python = PYTHONS[-1]
    agents = tempfile.mkdtemp(prefix="vc-agents-", dir="/tmp")
    os.chmod(agents, 0o755)
    name = agent_name(python["minor"])
    shutil.copy2(os.path.join(BUILD, name), os.path.join(agents, name))
    idle = Idle(python, wrap=PRIVATE_TMP)
    try:
        assert not os.path.exists("/proc/%d/root%s" % (idle.pid, agents))
        env = {"VCATTACH_AGENT_DIR": agents}
        for i in range(2):
            out = tmp_path / ("copy%d.cvf" % i)
            r = run_vcattach("--pid", idle.pid, "-t", "300ms", "-o", out, "-v", env=env)
            check_summary(r, out)
            if i == 0:
                assert "agent copied into the target's mount namespace as /tmp/.vcattach-" in (
                    r.stderr)
            else:  # the copy the first attach loaded, reused
                assert "agent already loaded in the target as /tmp/.vcattach-" in r.stderr
            assert thread_names(cvf.load(str(out)))
        copies = [d for d in os.listdir("/proc/%d/root/tmp" % idle.pid)
                  if d.startswith(".vcattach-")]
        assert copies == [], copies  # removed once loaded
        with open("/proc/%d/maps" % idle.pid) as f:
            mapped = {line.split(None, 5)[-1].strip() for line in f if name in line}
        assert len(mapped) == 1, mapped  # one agent loaded, by both attaches
        assert re.match(r"^/tmp/\.vcattach-agent-\w{6}/%s \(deleted\)$" % re.escape(name),
                        mapped.pop())
        assert_untouched(idle.pid)
    finally:
        idle.close()
        shutil.rmtree(agents, ignore_errors=True)


def fnv1a64(data):
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


@pytest.mark.parametrize("plant", ["symlink", "foreign-owner"])
def test_agent_copy_refuses_planted_directory(plant, tmp_path):
    """Someone in the target's namespace pre-creates the directory the copy used to go to (a
    name derived from the agent's content: a symlink out of it, or a directory of their own).
    The copy now goes to a fresh unpredictable directory, written as the target's user: the
    planted name is never used, nothing is written through it, and the attach works."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    python = PYTHONS[-1]
    agents = tempfile.mkdtemp(prefix="vc-agents-", dir="/tmp")
    os.chmod(agents, 0o755)
    name = agent_name(python["minor"])
    shutil.copy2(os.path.join(BUILD, name), os.path.join(agents, name))
    with open(os.path.join(agents, name), "rb") as f:
        dirname = ".vcattach-%016x" % fnv1a64(f.read())
    escape = tmp_path / "escape"
    escape.mkdir()
    idle = Idle(python, wrap=PRIVATE_TMP)
    try:
        planted = "/proc/%d/root/tmp/%s" % (idle.pid, dirname)
        if plant == "symlink":
            os.symlink(str(escape), planted)
        else:
            os.mkdir(planted)
            os.chown(planted, 65534, 65534)
        r = run_vcattach("--pid", idle.pid, "-t", "300ms", "-o", tmp_path / "x.cvf",
                         env={"VCATTACH_AGENT_DIR": agents})
        assert r.returncode == 0, r.stderr
        assert os.listdir(escape) == []
        assert os.listdir(planted) == []
        with open("/proc/%d/maps" % idle.pid) as f:
            assert "/tmp/%s/" % dirname not in f.read()
        assert (tmp_path / "x.cvf").exists()
        assert_untouched(idle.pid)
    finally:
        idle.close()
        shutil.rmtree(agents, ignore_errors=True)


@pytest.mark.skipif(not os.path.exists(ASAN_VCATTACH),
                    reason="build/asan/vcattach not built (make test builds it)")
def test_workflow_under_asan(service, tmp_path):
    """trace, stream, start/status/stop and a refused preflight with the CLI built with
    AddressSanitizer + UBSan (any report aborts it with a non-zero exit)."""
    svc = service(PYTHONS[-1])
    env = dict(os.environ, VCATTACH_AGENT_DIR=BUILD,
               ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=99")

    def asan(*args, **kw):
        return subprocess.run([ASAN_VCATTACH] + [str(a) for a in args], capture_output=True,
                              text=True, timeout=60, env=env, **kw)
    out = tmp_path / "asan.cvf"
    check_summary(asan("--pid", svc.pid, "-t", "300ms", "-o", out), out)
    r = asan("--pid", svc.pid, "-t", "300ms", "-o", out)
    assert r.returncode == 2 and "already exists" in r.stderr
    detached = tmp_path / "asan-detached.cvf"
    assert asan("start", "--pid", svc.pid, "-t", "20s", "-o", detached).returncode == 0
    assert asan("status", "--pid", svc.pid).returncode == 0
    r = asan("stop", "--pid", svc.pid)
    assert r.returncode == 0, r.stderr
    assert asan("status", "--pid", svc.pid).returncode == 1
    assert "MainThread" in thread_names(cvf.load(str(detached))).values()
    assert_unharmed(svc, svc.finish())

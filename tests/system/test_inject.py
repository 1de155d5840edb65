"""Injection methods (injector/inject_ptrace.c, injector/inject_gdb.c) against real targets.

Every interpreter of the matrix (support/paths.py) runs tests/inject_fixture/target.py: a busy
(or idle) main thread, a thread in time.sleep, a ticker, one blocked in socket.accept, one
waiting on a threading.Lock.  build/inject-test injects build/inject_fixture/libvcfixture.so,
whose vc_agent_connect(path) reports back over a Unix socket (or appends to a file) from a new
thread.  After each injection every task of the target must be running and untraced; at the
end the target reports what its threads saw (exceptions, early sleeps, its computation).
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from support.build import build_test_agent
from support.gdb_probe import gdb_register_problem as gdb_problem
from support.paths import (BUILD, SEAMS_VCATTACH, one_python, python_params, seams_env,
                           world_readable)
from support.proc import NOBODY, assert_running_untraced, proc_state, task_states
from support.targets import FixtureTarget, reference_result

INJECT_TEST = os.path.join(BUILD, "inject-test")
FIXTURE = os.path.join(BUILD, "inject_fixture", "libvcfixture.so")


@pytest.fixture(autouse=True)
def built():
    for f in (INJECT_TEST, FIXTURE):
        if not os.path.exists(f):
            pytest.skip("%s is not built: run `make`" % f)


@pytest.fixture
def target_factory(start_target):
    def make(py, *args):
        return start_target(FixtureTarget, py, *args)
    return make


class Listener:
    """The control socket stand-in: the fixture agent connects and sends one line."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(4)
        self.sock.settimeout(10)

    def receive(self):
        conn, _ = self.sock.accept()
        with conn:
            conn.settimeout(10)
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(256)
                if not chunk:
                    break
                data += chunk
        return data.decode()

    def close(self):
        self.sock.close()
        os.unlink(self.path)


def inject(method, pid, control, agent=FIXTURE, timeout_ms=5000, env=None, extra=()):
    """Runs build/inject-test once; returns (exit code, [(status, elapsed_us, err), ...])."""
    cmd = [INJECT_TEST, method, str(pid), agent, control, "--timeout-ms", str(timeout_ms)]
    p = subprocess.run(cmd + list(extra), capture_output=True, text=True, timeout=120, env=env)
    rows = []
    for line in p.stdout.splitlines():
        st, el, err = line.split(" ", 2)
        rows.append((int(st.split("=")[1]), int(el.split("=")[1]), err[len("err="):]))
    return p.returncode, rows


def assert_target_unharmed(report, ref, sleep_s, busy=True):
    assert report["errors"] == [], report
    assert report["alive_threads"] == [], report
    assert report["sleep_measured"] >= sleep_s, "time.sleep(%s) returned early: %s" % (
        sleep_s, report["sleep_measured"])
    rc, err, took = report["csleep"]
    assert rc == 0 and took >= sleep_s, "nanosleep(%s) interrupted: rc %d errno %d after %.3f s" \
        % (sleep_s, rc, err, took)
    assert report["accept_ok"] and report["lock_ok"], report
    if busy:
        assert report["rounds"] > 0 and report["results"] == [ref], (report["results"], ref)


def fixture_line_ok(line, pid, call):
    return ("vc-fixture pid=%d " % pid) in line and (" call=%d " % call) in line \
        and " loads=1 " in line


@pytest.mark.parametrize("py", python_params())
def test_inject_busy_target_ptrace_twice_then_gdb(py, target_factory, tmp_path):
    """Both methods, a re-injection into the same process, and the target's view of it."""
    ref = reference_result(py)
    t = target_factory(py, "--sleep", "5")
    for call, method in enumerate(("ptrace", "ptrace", "gdb"), start=1):
        lst = Listener(str(tmp_path / ("c%d.sock" % call)))
        try:
            rc, rows = inject(method, t.pid, lst.path, timeout_ms=20000)
            assert rc == 0 and rows[0][0] == 0, (method, rows)
            assert fixture_line_ok(lst.receive(), t.pid, call)
        finally:
            lst.close()
        assert_running_untraced(t.pid)
    rep = t.report()
    assert_target_unharmed(rep, ref, 5.0)
    print("%s: ticker's longest gap %.1f ms over the run" % (py["id"], rep["max_gap_ms"]))


@pytest.mark.parametrize("py", python_params())
def test_inject_idle_target(py, target_factory, tmp_path):
    """Every thread blocked (main in read(), others in sleep/accept/lock/futex)."""
    t = target_factory(py, "--idle", "--sleep", "2")
    for call, method in enumerate(("ptrace", "gdb"), start=1):
        lst = Listener(str(tmp_path / ("i%d.sock" % call)))
        try:
            rc, rows = inject(method, t.pid, lst.path, timeout_ms=20000)
            assert rc == 0, (method, rows)
            assert fixture_line_ok(lst.receive(), t.pid, call)
        finally:
            lst.close()
        assert_running_untraced(t.pid)
    assert_target_unharmed(t.report(), None, 2.0, busy=False)


@pytest.mark.parametrize("py", python_params()[:1])
def test_gdb_refuses_when_it_cannot_write_registers(py, target_factory, tmp_path):
    """A gdb that cannot write a thread's registers back (gdb < 14 on an AMX CPU,
    support/gdb_probe.py) would leave the thread it calls on broken: a sleep returned
    ERESTART_RESTARTBLOCK (516) to the program.  The gdb method refuses before any call, with
    the cause and the other method in one line, and the target's sleeps, accept and lock wait
    complete as if nothing happened.  Only on such a host (elsewhere gdb calls, and the other
    gdb tests run)."""
    if not shutil.which("gdb"):
        pytest.skip("gdb is not installed")
    why = gdb_problem()
    if why is None:
        pytest.skip("gdb writes registers on this host: nothing to refuse")
    t = target_factory(py, "--idle", "--sleep", "2")
    lst = Listener(str(tmp_path / "r.sock"))
    try:
        rc, rows = inject("gdb", t.pid, lst.path, timeout_ms=20000)
    finally:
        lst.close()
    assert rc != 0 and len(rows) == 1, rows
    status, _, err = rows[0]
    assert status == 1, rows  # INJECT_UNTOUCHED: nothing ran in the target
    assert err.startswith("gdb cannot write the registers of pid %d (" % t.pid), err
    assert why.split(":")[0] in err and "AMX" in err and "use --method ptrace" in err, err
    assert_running_untraced(t.pid)
    assert_target_unharmed(t.report(), None, 2.0, busy=False)


@pytest.mark.parametrize("py", python_params())
def test_ptrace_twenty_in_a_row(py, target_factory, tmp_path):
    ref = reference_result(py)
    t = target_factory(py, "--sleep", "1")
    marker = tmp_path / "marker"
    rc, rows = inject("ptrace", t.pid, "file:%s" % marker, extra=("--repeat", "20"))
    assert len(rows) == 20 and [r for r in rows if r[0] != 0] == [] and rc == 0, rows
    assert_running_untraced(t.pid)
    deadline = time.time() + 10
    while time.time() < deadline:  # the fixture's threads write asynchronously
        lines = marker.read_text().splitlines() if marker.exists() else []
        if len(lines) == 20:
            break
        time.sleep(0.05)
    assert sorted(int(l.split(" call=")[1].split()[0]) for l in lines) == list(range(1, 21))
    assert_target_unharmed(t.report(), ref, 1.0)
    us = sorted(r[1] for r in rows)
    print("%s: 20 ptrace injections, median %.1f ms, max %.1f ms" % (
        py["id"], us[10] / 1000, us[-1] / 1000))


@pytest.mark.parametrize("method", ["ptrace", "gdb"])
def test_untouched_errors(method, tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    rc, rows = inject(method, gone.pid, "file:%s" % (tmp_path / "m"))
    assert rc == 1 and "no process" in rows[0][2], rows
    rc, rows = inject(method, 2, "file:%s" % (tmp_path / "m"))  # kthreadd: nothing to trace
    assert rc == 1 and "kernel thread" in rows[0][2], rows


@pytest.mark.parametrize("method", ["ptrace", "gdb"])
def test_missing_agent_and_failures_leave_target_unharmed(method, target_factory, tmp_path):
    py = one_python()
    ref = reference_result(py)
    t = target_factory(py, "--sleep", "3")
    rc, rows = inject(method, t.pid, "file:%s" % (tmp_path / "m"),
                      agent=str(tmp_path / "no-such-agent.so"))
    assert rc == 1 and "not found" in rows[0][2], rows
    rc, rows = inject(method, t.pid, "file:x", agent="/etc/passwd")  # not an ELF: dlerror text
    assert rc == 2 and "invalid ELF header" in rows[0][2], rows
    rc, rows = inject(method, t.pid, "fail:x")
    assert rc == 2 and "-22" in rows[0][2], rows
    rc, rows = inject(method, t.pid, "crash:x", timeout_ms=20000)
    assert rc == 2 and ("SIGSEGV" in rows[0][2] or "Segmentation" in rows[0][2]), rows
    assert_running_untraced(t.pid)
    marker = tmp_path / "after"
    rc, rows = inject(method, t.pid, "file:%s" % marker, timeout_ms=20000)  # still injectable
    assert rc == 0, rows
    assert_target_unharmed(t.report(), ref, 3.0)
    assert "vc-fixture pid=%d " % t.pid in marker.read_text()


def test_ptrace_never_calls_into_an_agent_that_did_not_finish_loading(target_factory, tmp_path):
    """An agent mapped in the target whose loaded marker (vc_agent_loaded, set by its
    constructor: the loader's last step) is not set, as after a dlopen abandoned half way (a
    crash in the target's loader: its relocations maybe not done), is never called into: the
    injection fails in one line, the fixture's vc_agent_connect never runs (no line in the
    marker file), the target is unharmed.  The complete fixture still injects afterwards."""
    unloaded = os.path.join(BUILD, "inject_fixture", "libvcfixture-unloaded.so")
    if not os.path.exists(unloaded):
        pytest.skip("%s is not built: run `make test`" % unloaded)
    py = one_python()
    ref = reference_result(py)
    t = target_factory(py, "--sleep", "3")
    marker = tmp_path / "m"
    rc, rows = inject("ptrace", t.pid, "file:%s" % marker, agent=unloaded)
    assert rc == 2 and "never finished loading" in rows[0][2], rows
    assert "libvcfixture-unloaded.so" in rows[0][2] and "\n" not in rows[0][2], rows
    time.sleep(0.3)  # (a call would have had its thread write by now)
    assert not marker.exists(), marker.read_text()
    assert_running_untraced(t.pid)
    rc, rows = inject("ptrace", t.pid, "file:%s" % marker, timeout_ms=20000)
    assert rc == 0, rows
    assert_target_unharmed(t.report(), ref, 3.0)
    assert "vc-fixture pid=%d " % t.pid in marker.read_text()


def test_ptrace_call_timeout_takes_thread_back(target_factory, tmp_path):
    """The call hangs (60 s sleep in the fixture) and is abandoned at the timeout.  The borrowed
    thread is the one in a raw nanosleep(2 s): its syscall must resume as ITS OWN sleep (the
    kernel's restart block now describes the fixture's 60 s sleep), and not return early."""
    py = one_python()
    ref = reference_result(py)
    t = target_factory(py, "--sleep", "2", "--csleep-first")
    rc, rows = inject("ptrace", t.pid, "hang:x", timeout_ms=1000)
    assert rc == 2 and "did not return" in rows[0][2], rows
    assert_running_untraced(t.pid)
    assert_target_unharmed(t.report(), ref, 2.0)


def test_ptrace_permission_denied(target_factory, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to another uid")
    py = one_python()
    t = target_factory(py, "--sleep", "1")
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        world_readable(INJECT_TEST), "ptrace", str(t.pid),
                        world_readable(FIXTURE), "file:/nonexistent/m"],
                       capture_output=True, text=True, timeout=60)
    if p.returncode == 3 or "status=" not in p.stdout:
        pytest.skip("cannot run inject-test as uid 65534: %s" % p.stderr.strip())
    assert p.returncode == 1, p.stdout
    assert "permission denied" in p.stdout.lower() or "not permitted" in p.stdout, p.stdout
    assert_running_untraced(t.pid)


def test_gdb_absent(target_factory, tmp_path):
    t = target_factory(one_python(), "--sleep", "1")
    rc, rows = inject("gdb", t.pid, "file:x", env={"PATH": str(tmp_path)})
    assert rc == 1 and rows[0][2] == "gdb not found: install gdb or use --method ptrace", rows


@pytest.mark.parametrize("method", ["ptrace", "gdb"])
def test_sigterm_mid_injection(method, target_factory, tmp_path):
    """SIGTERM to the injecting process at various moments: the target never stays stopped or
    traced, and still works."""
    py = one_python()
    ref = reference_result(py)
    t = target_factory(py, "--sleep", "3")
    delays = (0.0, 0.002, 0.005, 0.01, 0.03) if method == "ptrace" else (0.05, 0.2, 0.35)
    for delay in delays:
        p = subprocess.Popen([INJECT_TEST, method, str(t.pid), FIXTURE,
                              "file:%s" % (tmp_path / "m"), "--timeout-ms", "20000"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(delay)
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
        assert p.returncode in (0, 1, -signal.SIGTERM), p.returncode
        assert_running_untraced(t.pid)
    assert_target_unharmed(t.report(), ref, 3.0)


def test_ptrace_with_threads_coming_and_going(target_factory, tmp_path):
    """Threads that start and exit during the seize loop must neither break nor hang it."""
    py = one_python()
    ref = reference_result(py)
    t = target_factory(py, "--sleep", "2", "--churn")
    marker = tmp_path / "marker"
    rc, rows = inject("ptrace", t.pid, "file:%s" % marker, extra=("--repeat", "10"))
    assert rc == 0 and all(r[0] == 0 for r in rows), rows
    assert_running_untraced(t.pid)
    rep = t.report()
    assert_target_unharmed(rep, ref, 2.0)
    assert rep["churned"] > 0, rep


def test_ptrace_signal_during_call_is_redelivered(target_factory, tmp_path):
    """A signal that hits the borrowed thread during the call is held back, then delivered
    once the thread is back in its own context (idle target: the main thread, first in tid
    order among equally idle threads, is the one borrowed and the one SIGUSR1 is sent to)."""
    py = one_python()
    t = target_factory(py, "--idle", "--sleep", "3")
    p = subprocess.Popen([INJECT_TEST, "ptrace", str(t.pid), FIXTURE, "hang:x",
                          "--timeout-ms", "2000"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    os.kill(t.pid, signal.SIGUSR1)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 2 and "did not return" in out, out
    assert_running_untraced(t.pid)
    rep = t.report()
    assert rep["usr1"] == 1, rep
    assert rep["errors"] == [] and rep["sleep_measured"] >= 3.0, rep


@pytest.mark.parametrize("method", ["ptrace", "gdb"])
def test_refuses_stopped_or_traced_target(method, target_factory, tmp_path):
    t = target_factory(one_python(), "--sleep", "1")
    os.kill(t.pid, signal.SIGSTOP)
    try:
        deadline = time.time() + 5
        while time.time() < deadline:
            with open("/proc/%d/stat" % t.pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "T":
                    break
            time.sleep(0.01)
        rc, rows = inject(method, t.pid, "file:%s" % (tmp_path / "m"))
        assert rc == 1 and "kill -CONT" in rows[0][2], rows
    finally:
        os.kill(t.pid, signal.SIGCONT)
    strace = subprocess.Popen(["strace", "-qq", "-p", str(t.pid), "-o", "/dev/null"])
    try:
        deadline = time.time() + 10
        while time.time() < deadline:  # wait until strace has attached
            with open("/proc/%d/status" % t.pid) as f:
                if "TracerPid:\t0\n" not in f.read():
                    break
            time.sleep(0.02)
        rc, rows = inject(method, t.pid, "file:%s" % (tmp_path / "m"))
        assert rc == 1 and "already traced" in rows[0][2], rows
    finally:
        strace.terminate()
        strace.wait(10)
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("method", ["ptrace", "gdb"])
def test_non_root_same_uid(method, tmp_path):
    """The usual production case: an unprivileged user injecting into its own process."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run both sides as uid 65534")
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    shared = tempfile.mkdtemp(prefix="vc-inject-nobody-")
    os.chmod(shared, 0o777)
    try:
        with FixtureTarget(one_python(), "--sleep", "1", user=NOBODY) as t:
            pid = t.pid
            marker = os.path.join(shared, "m")
            r = subprocess.run(drop + [world_readable(INJECT_TEST), method, str(pid),
                                       world_readable(FIXTURE), "file:" + marker,
                                       "--timeout-ms", "20000"],
                               capture_output=True, text=True, timeout=60)
            if r.returncode == 3 or "status=" not in r.stdout:
                pytest.skip("cannot run inject-test as uid 65534: %s" % r.stderr.strip())
            assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
            assert_running_untraced(pid)
            deadline = time.time() + 10
            while not os.path.exists(marker) and time.time() < deadline:
                time.sleep(0.05)
            with open(marker) as f:
                assert "vc-fixture pid=%d " % pid in f.read()
            rep = t.report()
            assert rep["errors"] == [] and rep["accept_ok"] and rep["lock_ok"], rep
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_ptrace_concurrent_injectors(target_factory, tmp_path):
    """Two injectors at once into one process: each either succeeds or refuses cleanly (a
    process has one tracer per thread, and the agent refuses a second session)."""
    py = one_python()
    ref = reference_result(py)
    t = target_factory(py, "--sleep", "2")
    marker = tmp_path / "marker"
    procs = [subprocess.Popen([INJECT_TEST, "ptrace", str(t.pid), FIXTURE, "file:%s" % marker,
                               "--repeat", "15"], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    statuses = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        for line in out.splitlines():
            st, _, err = line.split(" ", 2)
            statuses.append(int(st.split("=")[1]))
            assert st == "status=0" or ("already traced" in err or "not permitted" in err), line
    assert len(statuses) == 30 and statuses.count(0) >= 1, statuses
    assert_running_untraced(t.pid)
    assert_target_unharmed(t.report(), ref, 2.0)
    time.sleep(0.2)
    assert len(marker.read_text().splitlines()) == statuses.count(0)


@pytest.mark.parametrize("method", ["ptrace", "gdb"])
def test_no_safe_point_means_nothing_runs(method, tmp_path):
    """Every thread of unsafe-target is where a dlopen must not run (inside dl_iterate_phdr
    with the loader lock held; waiting on a mutex): the injector retries for half its budget,
    then refuses with INJECT_UNTOUCHED, and the target carries on as if nothing happened."""
    exe = os.path.join(BUILD, "inject_fixture", "unsafe-target")
    if not os.path.exists(exe):
        pytest.skip("%s is not built: run `make`" % exe)
    p = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(p.stdout.readline().split()[1])
        rc, rows = inject(method, pid, "file:%s" % (tmp_path / "m"),
                          timeout_ms=1000 if method == "ptrace" else 3000)
        assert rc == 1 and "no thread reached a safe point" in rows[0][2], rows
        assert not (tmp_path / "m").exists()
        assert_running_untraced(pid)
        out, _ = p.communicate("x", timeout=30)
        assert p.returncode == 0 and out.strip() == "DONE", (p.returncode, out)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def test_ptrace_sigstop_during_call_is_kept(target_factory, tmp_path):
    """Job control during an injection: someone stops the process mid-call.  The stop is
    not swallowed (every thread ends in T, untraced); SIGCONT resumes it all."""
    py = one_python()
    ref = reference_result(py)
    t = target_factory(py, "--sleep", "3")
    p = subprocess.Popen([INJECT_TEST, "ptrace", str(t.pid), FIXTURE, "hang:x",
                          "--timeout-ms", "1500", "-v"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    # stopped once the call runs (not after a fixed sleep: a slow seize would stop it before
    # the injection, which is refused instead)
    for line in p.stderr:
        if "calling on thread" in line:
            break
    time.sleep(0.1)
    os.kill(t.pid, signal.SIGSTOP)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 2, out
    try:
        deadline = time.time() + 5
        while time.time() < deadline and set(task_states(t.pid)) != {"T"}:
            time.sleep(0.02)
        assert set(task_states(t.pid)) == {"T"}, task_states(t.pid)
        with open("/proc/%d/status" % t.pid) as f:
            assert "TracerPid:\t0\n" in f.read()
    finally:
        os.kill(t.pid, signal.SIGCONT)
    assert_running_untraced(t.pid)
    assert_target_unharmed(t.report(), ref, 3.0)


def test_ptrace_single_threaded_malloc_heavy(tmp_path):
    """One thread, mostly inside malloc/calloc/free: the injector must reject those moments
    (retrying), never call dlopen inside the allocator, and leave the process alive."""
    py = one_python()
    code = ("import os, sys\nprint(os.getpid(), flush=True)\nn = 0\n"
            "while not os.path.exists(sys.argv[1]):\n"
            "    b = [bytearray(60000) for _ in range(20)]\n    n += 1\nprint(n, flush=True)\n")
    stop = tmp_path / "stop"
    p = subprocess.Popen([py["path"], "-c", code, str(stop)], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(p.stdout.readline())
        marker = tmp_path / "marker"
        rc, rows = inject("ptrace", pid, "file:%s" % marker, extra=("--repeat", "10"))
        ok = [r for r in rows if r[0] == 0]
        assert all(r[0] == 0 or (r[0] == 1 and "no thread reached a safe point" in r[2])
                   for r in rows), rows
        assert ok, rows
        assert_running_untraced(pid)
        stop.write_text("")
        out, _ = p.communicate(timeout=30)
        assert p.returncode == 0 and int(out) > 0, (p.returncode, out)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def test_ptrace_job_control_stop_of_injector_waits_for_detach(target_factory, tmp_path):
    """Ctrl-Z (SIGTSTP) reaching the injector mid-call must not stop it while it holds the
    target's threads: it is held back until every thread is detached, and only then stops
    the injector (the target runs on meanwhile)."""
    py = one_python()
    ref = reference_result(py)
    t = target_factory(py, "--sleep", "2")
    p = subprocess.Popen([INJECT_TEST, "ptrace", str(t.pid), FIXTURE, "hang:x",
                          "--timeout-ms", "1500"], stdout=subprocess.PIPE, text=True,
                         preexec_fn=os.setpgrp)  # own group, same session: not orphaned
    try:
        time.sleep(0.5)
        p.send_signal(signal.SIGTSTP)
        deadline = time.time() + 20
        while time.time() < deadline and proc_state(p.pid) != "T":
            time.sleep(0.02)
        assert proc_state(p.pid) == "T", "the injector never acted on its SIGTSTP"
        assert_running_untraced(t.pid)  # stopped injector, free target
    finally:
        p.send_signal(signal.SIGCONT)
        out, _ = p.communicate(timeout=60)
    assert p.returncode == 2 and "did not return" in out, out
    assert_running_untraced(t.pid)
    assert_target_unharmed(t.report(), ref, 2.0)


VFORK_AGENT = r'''
#include <time.h>
#include <unistd.h>
/* The call blocks in vfork() until the child exits: a wait PTRACE_INTERRUPT cannot break. */
__attribute__((visibility("default"))) int vc_agent_connect(const char *path)
{
    (void)path;
    if (vfork() == 0) {
        struct timespec ts = {2, 500000000};
        nanosleep(&ts, NULL);
        _exit(0);
    }
    return 0;
}
'''


def test_ptrace_call_stuck_uninterruptibly_is_restored(target_factory, tmp_path):
    """The call sits in an uninterruptible wait (vfork) past the timeout and past the 1 s the
    interrupt is given: the thread must still be taken back and restored before it is
    detached (detached as it is, it would finish the call on the scratch stack and only then
    return to its own code through the prepared signal frame, with the call's effects)."""
    so = build_test_agent(tmp_path, "vfork", VFORK_AGENT)
    py = one_python()
    ref = reference_result(py)
    t = target_factory(py, "--sleep", "4")
    rc, rows = inject("ptrace", t.pid, "x", agent=so, timeout_ms=1000)
    assert rc == 2 and "did not return" in rows[0][2], rows
    assert_running_untraced(t.pid)
    time.sleep(2.0)  # the vfork child has exited: a thread left hijacked would be dead now
    assert_target_unharmed(t.report(), ref, 4.0)


SLOW_AGENT = r'''
#include <time.h>
/* The call takes longer than the injector's timeout, then returns normally. */
__attribute__((visibility("default"))) int vc_agent_connect(const char *path)
{
    (void)path;
    struct timespec ts = {12, 0};
    nanosleep(&ts, NULL);
    return 0;
}
'''


def test_gdb_call_timeout_unwinds_instead_of_leaving_the_call_running(target_factory,
                                                                       tmp_path):
    """gdb times out while its call runs in the target.  Killing gdb then would leave the
    call running untraced, returning later into gdb's dummy-frame breakpoint (the target
    dies).  The call must be stopped and unwound on its own thread instead, and the target
    must be alive and well after the call's sleep would have ended."""
    so = build_test_agent(tmp_path, "slow", SLOW_AGENT)
    py = one_python()
    ref = reference_result(py)
    t = target_factory(py, "--sleep", "1")
    t0 = time.time()
    rc, rows = inject("gdb", t.pid, "x", agent=so, timeout_ms=6000)
    if rc == 1:
        pytest.skip("gdb did not reach the call within 6 s here: %s" % rows)
    assert rc == 2 and "gdb unwound it" in rows[0][2], rows
    assert_running_untraced(t.pid)
    time.sleep(max(0.0, 13.0 - (time.time() - t0)))  # past the end of the abandoned sleep
    assert t.proc.poll() is None, "target died: rc=%s" % t.proc.returncode
    assert_running_untraced(t.pid)
    assert_target_unharmed(t.report(), ref, 1.0)


VFORK_TARGET = r'''
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
/* The main thread spends its life as a vfork parent (an uninterruptible wait: no ptrace stop
 * until the child exits); another thread idles in nanosleep. */
static void *idle(void *arg)
{
    for (;;) {
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
    return arg;
}
int main(int argc, char **argv)
{
    pthread_t th;
    pthread_create(&th, NULL, idle, NULL);
    printf("READY %d\n", (int)getpid());
    fflush(stdout);
    while (access(argv[1], F_OK) != 0) {
        pid_t c = vfork();
        if (c == 0) {
            struct timespec ts = {12, 0};
            nanosleep(&ts, NULL);
            _exit(0);
        }
        waitpid(c, NULL, 0);
    }
    return 0;
}
'''


def test_ptrace_thread_that_cannot_stop_bounds_the_pause(tmp_path):
    """A thread in an uninterruptible wait (vfork parent) cannot be stopped: the injector must
    give up quickly (every other thread is stopped meanwhile), not after its whole timeout."""
    src = tmp_path / "vfork_target.c"
    exe = tmp_path / "vfork-target"
    src.write_text(VFORK_TARGET)
    cc = subprocess.run(["cc", "-o", str(exe), str(src), "-lpthread"], capture_output=True,
                        text=True, timeout=60)
    assert cc.returncode == 0, cc.stderr
    stop = tmp_path / "stop"
    p = subprocess.Popen([str(exe), str(stop)], stdout=subprocess.PIPE, text=True,
                         start_new_session=True)  # its vfork child goes with it at the end
    try:
        pid = int(p.stdout.readline().split()[1])
        time.sleep(0.2)
        rc, rows = inject("ptrace", pid, "file:%s" % (tmp_path / "m"), timeout_ms=10000)
        st, elapsed_us, err = rows[0]
        assert st == 1 and "did not stop within" in err, rows
        assert elapsed_us < 7000000, "threads held stopped for %.1f s" % (elapsed_us / 1e6)
        assert p.poll() is None, "target died"
        assert_running_untraced(pid)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)
        p.stdout.close()


@pytest.mark.parametrize("method", ["ptrace", "gdb"])
def test_refuses_a_target_whose_ids_changed_since_its_facts(method, tmp_path):
    """The facts are read while the target runs as root; it then drops to nobody before the
    injection: the injector refuses (untouched), it does not inject a process whose
    credentials are not the ones examined."""
    ready = tmp_path / "ready"
    code = ("import os, sys, time\n"
            "open(sys.argv[1], 'w').close()\n"
            "while not os.path.exists(sys.argv[1] + '.go'): time.sleep(0.01)\n"
            "os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)\n"
            "time.sleep(30)\n")
    t = subprocess.Popen(list(one_python()["argv"]) + ["-c", code, str(ready)])
    try:
        deadline = time.time() + 10
        while not ready.exists() and time.time() < deadline:
            time.sleep(0.01)
        cmd = [INJECT_TEST, method, str(t.pid), FIXTURE, "file:%s" % (tmp_path / "m"),
               "--pause-ms", "3000"]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)  # the facts are read (as root) within the first moments
        (tmp_path / "ready.go").touch()
        changed, deadline = False, time.time() + 2
        while not changed and time.time() < deadline:
            with open("/proc/%d/status" % t.pid) as f:
                changed = "\nUid:\t65534\t" in f.read()
            time.sleep(0.01)
        out, _ = p.communicate(timeout=60)
        assert changed, "the target did not change its ids before the injection"
        assert p.returncode == 1, out
        assert "changed its user or group ids" in out, out
        assert not (tmp_path / "m").exists()
        assert t.poll() is None, "the target died"
    finally:
        t.kill()
        t.wait(10)


def test_unwind_reads_pages_or_words_alike(tmp_path):
    """The safe point's unwind reads the target a page at a time (process_vm_readv, one call
    where word-by-word PTRACE_PEEKDATA took ~2,500 on a 20-frame stack); where that call is
    refused (the seam: as under a seccomp profile allowing ptrace alone) it reads words as
    before.  Both judge the same thread from the same frames: a main thread asleep under 30
    levels of Python calls through C (map: the C stack grows with them on every version), the
    innermost frame libc's clock_nanosleep."""
    py = one_python()
    code = ("import os, sys, time\n"
            "def down(n):\n    return list(map(down, [n - 1])) if n else time.sleep(60)\n"
            "print(os.getpid(), flush=True)\ndown(30)\n")
    p = subprocess.Popen([py["path"], "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(p.stdout.readline())
        chosen = []
        for seams in ({}, {"VCATTACH_TEST_NO_VM_READV": "1"}):
            r = subprocess.run([SEAMS_VCATTACH, "--pid", str(pid), "-t", "100ms", "-v", "-o",
                                str(tmp_path / "t.cvf"), "-f"], capture_output=True, text=True,
                               timeout=60, env=seams_env(**seams))
            assert r.returncode == 0, r.stderr
            line = [l for l in r.stderr.splitlines() if "] safe point: " in l]
            assert line, r.stderr
            chosen.append(line[0].split("] safe point: ")[1])
        assert chosen[0] == chosen[1], chosen
        assert "clock_nanosleep in libc" in chosen[0] and "thread %d" % pid in chosen[0], chosen
        frames = int(chosen[0].split(", ")[-1].split()[0])
        assert frames > 60, chosen  # through every level (several C frames each), not stopped
        assert_running_untraced(pid)
    finally:
        p.kill()
        p.wait(10)

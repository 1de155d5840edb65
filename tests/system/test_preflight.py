"""Preflight: every check that runs before the target is touched, on real processes.

Each failure must be one line naming the cause and the fix, exit code 2, and leave the target
running, unstopped and untraced.  Checks that come after the agent lookup are reached with a
directory of placeholder agent files (support/agents.py DummyAgents), which these tests never
get past: each of them fails in preflight by construction."""
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from support.agents import DummyAgents
from support.paths import TESTS, PYTHONS, VCATTACH, python_params
from support.proc import NOBODY, assert_untouched, proc_state, run_vcattach
from support.targets import Idle

STATIC = [p for p in PYTHONS if p["kind"] == "static"]
ANY = PYTHONS[-1]


@pytest.fixture
def agents():
    d = DummyAgents()
    yield d
    d.close()


@pytest.fixture
def idle(start_target):
    def start(python=ANY, **kw):
        return start_target(Idle, python, **kw)
    return start


def one_line(r):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1, "expected one line: %r" % r.stderr
    return r.stderr


@pytest.mark.parametrize("python", python_params())
def test_version_detected(python, idle, agents):
    """Version from Py_Version in the live process (3.11+: full X.Y.Z) or the libpython
    soname / executable name (3.8-3.10); then the output check fails on purpose."""
    t = idle(python)
    r = run_vcattach("--pid", t.pid, "-v", "-o", "/nonexistent-dir/x.cvf", env=agents.env)
    assert r.returncode == 2, r.stderr
    if python["minor"] >= 311:
        assert "is Python %s (from Py_Version)" % python["version"] in r.stderr, r.stderr
    else:
        major_minor = ".".join(python["version"].split(".")[:2])
        assert "is Python %s (from " % major_minor in r.stderr, r.stderr
    assert "directory /nonexistent-dir does not exist; create it or choose another -o" in r.stderr
    assert_untouched(t.pid)


@pytest.mark.parametrize("python", python_params())
def test_missing_agent_build(python, idle, tmp_path):
    t = idle(python)
    empty = tmp_path / "no-agents"
    empty.mkdir()
    r = run_vcattach("--pid", t.pid, "-t", "1s", env={"VCATTACH_AGENT_DIR": str(empty)})
    major_minor = ".".join(python["version"].split(".")[:2])
    err = one_line(r)
    assert "no agent for Python %s" % major_minor in err
    assert "build it with `make`" in err and "python%s" % major_minor in err
    assert_untouched(t.pid)


def test_stopped_process(idle, agents):
    t = idle()
    os.kill(t.pid, signal.SIGSTOP)
    try:
        for _ in range(100):
            if proc_state(t.pid) == "T":
                break
            time.sleep(0.01)
        err = one_line(run_vcattach("--pid", t.pid, "-t", "1s", env=agents.env))
        assert "is stopped" in err and "kill -CONT %d" % t.pid in err
        assert proc_state(t.pid) == "T"  # left exactly as it was
    finally:
        os.kill(t.pid, signal.SIGCONT)
    assert_untouched(t.pid)


def test_already_traced(idle, agents):
    t = idle()
    strace = subprocess.Popen(["strace", "-qq", "-o", "/dev/null", "-p", str(t.pid)])
    try:
        for _ in range(200):
            with open("/proc/%d/status" % t.pid) as f:
                if "TracerPid:\t%d" % strace.pid in f.read():
                    break
            time.sleep(0.01)
        err = one_line(run_vcattach("--pid", t.pid, "-t", "1s", env=agents.env))
        assert "already being traced by pid %d (strace)" % strace.pid in err
        assert "detach that debugger" in err
    finally:
        strace.terminate()
        strace.wait(10)
    assert_untouched(t.pid)


def test_other_user_without_cap(idle, agents):
    """vcattach as nobody against a root process: uid mismatch, no CAP_SYS_PTRACE."""
    t = idle()
    err = one_line(run_vcattach("--pid", t.pid, "-t", "1s", env=agents.env, user=NOBODY))
    assert "not permitted" in err and "runs as uid 0 and you are uid 65534" in err
    assert "with sudo" in err
    assert_untouched(t.pid)


@pytest.mark.skipif(not STATIC, reason="Debian's /usr/bin/python3.11 is not installed")
def test_output_directory_not_writable(idle, agents):
    """Operator and target are nobody; OUT in a root-owned directory: permission denied."""
    t = idle(STATIC[0], user=NOBODY)
    locked = tempfile.mkdtemp(prefix="vc-locked-", dir="/tmp")
    os.chmod(locked, 0o755)
    try:
        err = one_line(run_vcattach("--pid", t.pid, "-t", "1s", "-o", locked + "/t.cvf",
                                    env=agents.env, user=NOBODY, timeout=30))
        assert "cannot write in the directory of %s/t.cvf" % locked in err
        assert "choose a directory you can write to" in err
        assert os.listdir(locked) == []
    finally:
        shutil.rmtree(locked)
    assert_untouched(t.pid)


def test_output_exists_without_force(idle, agents, tmp_path):
    t = idle()
    out = tmp_path / "t.cvf"
    out.write_text("keep me")
    err = one_line(run_vcattach("--pid", t.pid, "-t", "1s", "-o", out, env=agents.env))
    assert "already exists" in err and "--force" in err
    assert out.read_text() == "keep me"
    assert sorted(os.listdir(tmp_path)) == ["t.cvf"]
    assert_untouched(t.pid)


def test_output_is_directory(idle, agents, tmp_path):
    t = idle()
    (tmp_path / "d.cvf").mkdir()
    err = one_line(run_vcattach("--pid", t.pid, "-o", tmp_path / "d.cvf", "--force",
                                env=agents.env))
    assert "is a directory" in err
    assert_untouched(t.pid)


def test_stale_tmp_file(idle, agents, tmp_path):
    t = idle()
    (tmp_path / "t.cvf.tmp").write_text("half")
    err = one_line(run_vcattach("--pid", t.pid, "-o", tmp_path / "t.cvf", env=agents.env))
    assert "t.cvf.tmp exists" in err and "remove it" in err
    assert_untouched(t.pid)


def test_socket_output_without_listener(idle, agents, tmp_path):
    t = idle()
    err = one_line(run_vcattach("--pid", t.pid, "-o", "unix:%s/none.sock" % tmp_path,
                                env=agents.env))
    assert "cannot connect to unix:%s/none.sock" % tmp_path in err
    assert "start the listener first" in err
    assert_untouched(t.pid)


@pytest.mark.parametrize("file_mode,dir_mode,what", [
    (0o666, 0o755, "refusing agent"), (0o664, 0o755, "refusing agent"),
    (0o644, 0o777, "refusing agent directory")])
def test_agent_replaceable_by_others(idle, file_mode, dir_mode, what):
    t = idle()
    d = DummyAgents(file_mode=file_mode, dir_mode=dir_mode)
    try:
        err = one_line(run_vcattach("--pid", t.pid, "-t", "1s", env=d.env))
        assert what in err and "writable by group or others" in err and "chmod go-w" in err
    finally:
        d.close()
    assert_untouched(t.pid)


def test_agent_owned_by_someone_else(idle):
    t = idle()
    d = DummyAgents()
    try:
        for name in os.listdir(d.dir):
            os.chown(os.path.join(d.dir, name), NOBODY[0], NOBODY[1])
        err = one_line(run_vcattach("--pid", t.pid, "-t", "1s", env=d.env))
        assert "owned by uid 65534, not by root or you" in err
    finally:
        d.close()
    assert_untouched(t.pid)


@pytest.mark.skipif(not STATIC, reason="Debian's /usr/bin/python3.11 is not installed")
def test_agent_unreadable_by_target_user(idle):
    """A root operator, a target running as nobody, an agent under a 0700 directory."""
    t = idle(STATIC[0], user=NOBODY)
    d = DummyAgents(dir_mode=0o700)
    try:
        err = one_line(run_vcattach("--pid", t.pid, "-t", "1s", env=d.env))
        assert "not reachable by the target's user (uid 65534)" in err
        assert "directory %s is not searchable" % d.dir in err
    finally:
        d.close()
    assert_untouched(t.pid)


def test_monitoring_hook_needs_312(idle, agents):
    old = [p for p in PYTHONS if p["minor"] < 312]
    if not old:
        pytest.skip("no interpreter older than 3.12 in the matrix")
    t = idle(old[-1])
    err = one_line(run_vcattach("--pid", t.pid, "-t", "1s", "--hook", "monitoring",
                                env=agents.env))
    assert "--hook monitoring needs Python 3.12+" in err and "--hook profile" in err
    assert_untouched(t.pid)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the seccomp helper is x86-64 only")
def test_ptrace_blocked_by_seccomp(idle, agents):
    """vcattach inside a seccomp filter that denies ptrace (Docker's old default profile)."""
    t = idle()
    helper = os.path.join(TESTS, "targets",
                          "seccomp_exec.py")
    r = subprocess.run([sys.executable, helper, VCATTACH, "--pid", str(t.pid), "-t", "1s"],
                       capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, **agents.env))
    err = one_line(r)
    assert "ptrace is blocked for vcattach itself (seccomp filter" in err
    assert "--cap-add=SYS_PTRACE" in err and "kubectl debug --profile=general" in err
    assert_untouched(t.pid)


@pytest.mark.skipif(not STATIC, reason="Debian's /usr/bin/python3.11 is not installed")
def test_free_threaded_build_refused(idle, agents, tmp_path):
    """A free-threaded CPython is told by its name (python3.13t / libpython3.13t.so): another
    ABI, refused before anything is touched.  A copy of the static interpreter named like one
    stands in for it."""
    fake = tmp_path / "python3.11t"
    shutil.copy2(STATIC[0]["path"], fake)
    t = idle(dict(STATIC[0], path=str(fake)))
    err = one_line(run_vcattach("--pid", t.pid, "-t", "1s", env=agents.env))
    assert "free-threaded CPython (3.11t)" in err and "not support" in err
    assert_untouched(t.pid)


@pytest.mark.skipif(not STATIC, reason="Debian's /usr/bin/python3.11 is not installed")
def test_start_output_must_be_writable_by_target_user(idle, agents, tmp_path):
    """With `start` the target writes OUT itself, as its own user: a root operator asking a
    nobody service to write into a root-only directory is refused up front."""
    t = idle(STATIC[0], user=NOBODY)
    locked = tempfile.mkdtemp(prefix="vc-locked-", dir="/tmp")
    os.chmod(locked, 0o755)
    try:
        err = one_line(run_vcattach("start", "--pid", t.pid, "-t", "5s", "-o",
                                    locked + "/t.cvf", env=agents.env))
        assert "the target's user (uid 65534) cannot write in %s" % locked in err
    finally:
        shutil.rmtree(locked)
    assert_untouched(t.pid)

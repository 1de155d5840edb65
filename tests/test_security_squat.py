"""Issue 9 #5: squatting on the session's status socket name.

`vcattach-agent-<pid>` is a well-known abstract name: any local user can bind it before the
agent does.  That used to block attach, status and stop for that pid ("held by pid N, not by
the target: refusing").  Now the CLI warns and goes on, the agent listens on the name with a
random suffix, and status/stop find that one in /proc/net/unix (each candidate's peer pid is
checked: a squatter is never talked to).
"""
import os
import subprocess
import sys

import pytest

from support.paths import PYTHONS, VCATTACH

TARGET = """
import time
print("ready", flush=True)
while True:
    sum(range(1000)); time.sleep(0.005)
"""

SQUAT = """
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\\0vcattach-agent-%d" % int(sys.argv[1]))
s.listen(8)
print("bound", flush=True)
while True:                      # accepts and says nothing, like a stalling impostor
    c, _ = s.accept()
"""


def vc(*args, timeout=90):
    return subprocess.run([VCATTACH] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def target_and_squatter():
    py = PYTHONS[-1]
    t = subprocess.Popen(py["argv"] + ["-c", TARGET], stdout=subprocess.PIPE, text=True)
    assert t.stdout.readline().strip() == "ready"

    def as_nobody():
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    sq = subprocess.Popen([sys.executable, "-c", SQUAT, str(t.pid)], stdout=subprocess.PIPE,
                          text=True, preexec_fn=as_nobody)
    assert sq.stdout.readline().strip() == "bound"
    yield t, sq
    for p in (sq, t):
        p.kill()
        p.wait()


@pytest.mark.parametrize("method", ["ptrace", "gdb"])
def test_trace_despite_a_squatter(target_and_squatter, tmp_path, method):
    t, sq = target_and_squatter
    out = tmp_path / "t.cvf"
    r = vc("--pid", t.pid, "-t", "500ms", "-o", out, "--method", method)
    assert r.returncode == 0, r.stderr
    assert "held by pid %d, not by the target %d: ignored" % (sq.pid, t.pid) in r.stderr
    assert out.stat().st_size > 0
    assert t.poll() is None and sq.poll() is None


def test_start_status_stop_despite_a_squatter(target_and_squatter, tmp_path):
    t, sq = target_and_squatter
    out = tmp_path / "s.cvf"
    r = vc("start", "--pid", t.pid, "-t", "60s", "-o", out)
    assert r.returncode == 0, r.stderr
    st = vc("status", "--pid", t.pid)
    assert st.returncode == 0, st.stderr
    assert "session running in pid %d" % t.pid in st.stdout, st.stdout
    assert "held by pid %d" % sq.pid in st.stderr
    again = vc("start", "--pid", t.pid, "-t", "60s", "-o", tmp_path / "again.cvf")
    assert again.returncode == 2 and "already running" in again.stderr, again.stderr
    stop = vc("stop", "--pid", t.pid)
    assert stop.returncode == 0, stop.stderr
    assert out.stat().st_size > 0
    gone = vc("status", "--pid", t.pid)
    assert gone.returncode == 1 and "no session" in gone.stdout
    assert t.poll() is None

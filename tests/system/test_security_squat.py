"""Issue 9 #5: squatting on the session's socket names.

`vcattach-agent-<pid>` is a well-known abstract name: any local user can bind it before the
agent does.  That used to block attach, status and stop for that pid ("held by pid N, not by
the target: refusing").  Now the CLI warns and goes on, the agent listens on the name with a
random suffix, and status/stop find that one in /proc/net/unix (each candidate's peer pid is
checked: a squatter is never talked to).

The control socket's random name is free again once its vcattach is gone, and it was listed in
/proc/net/unix: an agent that connects late (a remote-exec request taken after vcattach was
killed, say) may find someone else there.  It starts only for a CONFIG carrying the session's
token, which was never visible to anyone but root and the target.
"""
import json
import os
import secrets
import subprocess
import sys

import pytest

from support.paths import BUILD, PYTHONS, VCATTACH, agent_path

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


# Binds N more names of the session's fallback shape, vcattach-agent-PID-<random>, next to the
# well-known one (which the fixture's squatter holds), and keeps them until stdin closes.
MANY_NAMES = """
import resource, secrets, socket, sys
pid, n = int(sys.argv[1]), int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, n + 64)), hard))
socks = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\\0vcattach-agent-%d-%s" % (pid, secrets.token_hex(8)))
    s.listen(1)
    socks.append(s)
print("bound", flush=True)
sys.stdin.read()
"""


def test_status_stop_despite_a_thousand_squatted_fallback_names(target_and_squatter, tmp_path):
    """The session's fallback name hides among 1000 names of the same shape that `nobody`
    binds: status/stop used to try only the first 16 names listed in /proc/net/unix (so found
    the session about 1.6% of the time); now they try only the names whose socket the target
    holds, and say in one line how many others they ignored."""
    t, sq = target_and_squatter
    out = tmp_path / "s.cvf"
    r = vc("start", "--pid", t.pid, "-t", "60s", "-o", out)
    assert r.returncode == 0, r.stderr
    many = subprocess.Popen([sys.executable, "-c", MANY_NAMES, str(t.pid), "1000"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            preexec_fn=as_nobody)
    try:
        assert many.stdout.readline().strip() == "bound"
        st = vc("status", "--pid", t.pid)
        assert st.returncode == 0, (st.stdout, st.stderr)
        assert "session running in pid %d" % t.pid in st.stdout, st.stdout
        assert "1000 session socket names vcattach-agent-%d-* are held by other processes" \
            % t.pid in st.stderr, st.stderr
        stop = vc("stop", "--pid", t.pid)
        assert stop.returncode == 0, (stop.stdout, stop.stderr)
        assert out.stat().st_size > 0
        assert t.poll() is None
    finally:
        many.stdin.close()
        many.wait(timeout=30)


IMPOSTOR = """
import json, os, socket, struct, sys
name, config = sys.argv[1], sys.argv[2].encode()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\\0" + name)
s.listen(1)
s.settimeout(30)
print("bound", flush=True)
c, _ = s.accept()
c.settimeout(10)
def recv():
    head = b""
    while len(head) < 8:
        more = c.recv(8 - len(head))
        if not more:
            return None, b""
        head += more
    t, n = struct.unpack("<II", head)
    body = b""
    while len(body) < n:
        body += c.recv(n - len(body))
    return t, body
hello = recv()
c.sendall(struct.pack("<II", 2, len(config)) + config)   # CONFIG
t, body = recv()
if t == 3:                                                 # STARTED: end the session
    c.sendall(struct.pack("<II", 4, 0))                    # STOP
    while recv()[0] not in (None, 7):                      # ... until END
        pass
print(json.dumps({"hello": hello[0], "answer": t, "text": body.decode(errors="replace")}))
"""


def as_nobody():
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)


@pytest.mark.parametrize("knows_token", [False, True], ids=["impostor", "control"])
def test_late_agent_starts_nothing_for_whoever_took_the_name(tmp_path, knows_token):
    """`nobody` binds a control socket name and the real agent, injected into a root target
    with that name and a token, connects to it: without the token its CONFIG (an output file
    the target's user may write) is refused, nothing is written, and a real attach works
    after; the control run, with the token, shows that the token is all that differs."""
    py = PYTHONS[-1]
    inject_test = os.path.join(BUILD, "inject-test")
    if not os.path.exists(inject_test) or not os.path.exists(agent_path(py["minor"])):
        pytest.skip("build/inject-test or the agent is not built: run `make`")
    t = subprocess.Popen(py["argv"] + ["-c", TARGET], stdout=subprocess.PIPE, text=True)
    imp = None
    try:
        assert t.stdout.readline().strip() == "ready"
        name, token = "vcattach-ctl-" + secrets.token_hex(16), secrets.token_hex(16)
        os.chmod(tmp_path, 0o777)
        stolen = tmp_path / "stolen.cvf"
        config = "output=%s\nduration_ms=200\n" % stolen
        if knows_token:
            config += "token=%s\n" % token
        imp = subprocess.Popen([sys.executable, "-c", IMPOSTOR, name, config],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=as_nobody)
        assert imp.stdout.readline().strip() == "bound", imp.stderr.read()
        inj = subprocess.run([inject_test, "ptrace", str(t.pid), agent_path(py["minor"]),
                              "@%s#%s" % (name, token)], capture_output=True, text=True,
                             timeout=60)
        assert inj.returncode == 0, inj.stdout + inj.stderr
        out, err = imp.communicate(timeout=60)
        seen = json.loads(out.strip().splitlines()[-1])
        assert seen["hello"] == 1, seen  # the agent did connect to the impostor
        if knows_token:
            assert seen["answer"] == 3, seen  # STARTED
            assert stolen.exists()
        else:
            assert seen["answer"] == 8 and "token" in seen["text"], seen  # ERROR
            assert not stolen.exists() and not os.path.exists(str(stolen) + ".tmp")
        assert t.poll() is None
        r = vc("--pid", t.pid, "-t", "300ms", "-o", tmp_path / "real.cvf")
        assert r.returncode == 0, r.stderr
    finally:
        for p in (imp, t):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()

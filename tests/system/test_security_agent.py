"""Issue 9 #6: the data the agent sends is not trusted (SECURITY.md).

The agent runs inside the target, as the target's user, who controls the target's memory:
whatever comes back on the control socket may be hostile.  A fake agent
(tests/security/fake_agent.c, injected for real in place of libvcagent-pyXY.so through
VCATTACH_AGENT_DIR) speaks the protocol badly on purpose:
  - STATUS frames forever instead of STARTED: each one used to restart the wait (endless);
  - Ctrl-C while waiting for STARTED: it was not looked at there;
  - a flood of DATA after STOP: no cap (the operator's disk filled up);
  - one byte of DATA every 100 ms: no overall deadline;
  - terminal escape sequences in its ERROR text: printed raw on root's terminal.
Each case ends with vcattach exiting non-zero with a one-line reason, no output file left, and
the target alive, not stopped, not traced.
"""
import os
import signal
import subprocess
import time

import pytest

from support.paths import TESTS, PYTHONS, VCATTACH
from vcattach import cvf

HERE = TESTS


@pytest.fixture(scope="module")
def fake_agent_dir(tmp_path_factory):
    """The fake agent, built once and named as the agent of the first interpreter."""
    d = tmp_path_factory.mktemp("fake-agent")
    os.chmod(d, 0o755)
    py = PYTHONS[0]
    so = d / ("libvcagent-py%d.so" % py["minor"])
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-pthread", "-Wall", "-Werror", "-o", str(so),
                    os.path.join(HERE, "security", "fake_agent.c")], check=True)
    return str(d), py


def proc_status(pid):
    with open("/proc/%d/status" % pid) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def assert_target_unharmed(proc):
    assert proc.poll() is None, "the target died"
    st = proc_status(proc.pid)
    assert st["State"][0] in "RS", st["State"]
    assert st["TracerPid"].strip() == "0"


TARGET = """
import sys, time
print("ready", flush=True)
n = 0
while True:
    n += sum(range(1000))
    time.sleep(0.01)
"""


@pytest.fixture
def target(fake_agent_dir):
    started = []

    def start(mode):
        d, py = fake_agent_dir
        env = dict(os.environ, FAKE_AGENT_MODE=mode)
        p = subprocess.Popen(py["argv"] + ["-c", TARGET], stdout=subprocess.PIPE, env=env,
                             text=True)
        assert p.stdout.readline().strip() == "ready"
        started.append(p)
        return p
    yield start
    for p in started:
        p.kill()
        p.wait()


def vcattach(d, *args, **kw):
    env = dict(os.environ, VCATTACH_AGENT_DIR=d)
    return subprocess.Popen([VCATTACH] + [str(a) for a in args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


# A hostile stream that each bound of vcattach ends: (fake agent mode, options, the reason
# vcattach gives).  Without the bound each of these ran forever or filled the disk.
BOUNDED = [
    # STATUS every 20 ms, never STARTED: the 15 s bound of that phase holds (before: each frame
    # restarted it), with both methods.
    pytest.param("stall", ["-t", "1s", "--method", "ptrace"],
                 b"did not answer while starting (timed out)", id="status-flood-ptrace"),
    pytest.param("stall", ["-t", "1s", "--method", "gdb"],
                 b"did not answer while starting (timed out)", id="status-flood-gdb"),
    # CHUNK frames without end, ignoring STOP: --max-trace-mb ends the spool, then the transfer.
    pytest.param("flood", ["-t", "20s", "--max-trace-mb", "8"],
                 b"more than 8 MiB (--max-trace-mb)", id="data-flood"),
    # A tiny frame every 100 ms after STOP: every frame is on time, the whole transfer is not.
    pytest.param("trickle", ["-t", "300ms", "--collect-timeout", "2s"],
                 b"still sending after 2 s (--collect-timeout)", id="data-trickle"),
    # A CHUNK whose count its length does not hold: the session ends, nothing is written.
    pytest.param("bad-chunk", ["-t", "5s"],
                 b"malformed stream from the agent: CHUNK length does not match its count",
                 id="bad-chunk"),
]


@pytest.mark.parametrize("mode,options,reason", BOUNDED)
def test_hostile_stream_is_bounded(fake_agent_dir, target, tmp_path, mode, options, reason):
    """vcattach gives up with its one-line reason and the target runs on; a bound keeps what
    came before it as a valid trace, a malformed frame keeps nothing."""
    d, _ = fake_agent_dir
    t = target(mode)
    out = tmp_path / "o.cvf"
    p = vcattach(d, "--pid", t.pid, "-o", out, *options)
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail("vcattach was not bounded against the %s agent" % mode)
    assert p.returncode == 1, err
    assert reason in err, err
    assert not os.path.exists(str(out) + ".tmp")
    if mode == "bad-chunk":  # a protocol breach: nothing the agent sent is kept
        assert not out.exists() and not os.path.exists(str(out) + ".spool")
    elif out.exists():  # a bound: what came before it is a valid trace (of the fake's records)
        cvf.load(str(out))
    assert_target_unharmed(t)


def test_ctrl_c_while_waiting_for_started(fake_agent_dir, target, tmp_path):
    d, _ = fake_agent_dir
    t = target("stall")
    out = tmp_path / "o.cvf"
    p = vcattach(d, "--pid", t.pid, "-t", "1s", "-o", out, "-v")
    # wait until the agent is connected and CONFIG sent (the verbose line of the injection)
    deadline = time.monotonic() + 30
    seen = b""
    while b"threads detached" not in seen and time.monotonic() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        seen += line
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail("Ctrl-C was not honoured while waiting for STARTED")
    err = seen + err
    assert p.returncode == 1, err
    assert b"interrupted while starting" in err, err
    assert_target_unharmed(t)


@pytest.mark.parametrize("method", ["ptrace", "gdb"])
def test_agent_text_is_sanitized(fake_agent_dir, target, tmp_path, method):
    """Escape sequences, BEL, CR and C1 controls in the agent's ERROR text reach the terminal
    as '?'."""
    d, _ = fake_agent_dir
    t = target("escape")
    p = vcattach(d, "--pid", t.pid, "-t", "1s", "-o", tmp_path / "o.cvf", "--method", method)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1, err
    assert b"the agent refused to start: no" in err, err
    line = err.decode("utf-8", "replace").splitlines()[-1]
    assert not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in line), repr(line)
    assert b"\x1b" not in err and b"\x07" not in err and b"\x9b" not in err and b"\r" not in err
    assert_target_unharmed(t)

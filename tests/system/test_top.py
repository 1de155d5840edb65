"""`vcattach top` (issue 36, item 2): a live view of a real target, from the stream `vcattach
trace` receives.  Under tmux (a real terminal): the hot function shows among the first rows
within 5 s, q and Ctrl-C detach with exit 0, the target keeps answering and can be traced
again.  With stdout a pipe: --once prints one plain screen and detaches.  Bad input: one line,
exit 2.  -o OUT keeps a trace that `vcattach summary` reads."""
import os
import shlex
import shutil
import signal
import subprocess
import time

import pytest

from support.paths import TESTS, PYTHONS, VCATTACH
from support.proc import run_vcattach

TARGET = os.path.join(TESTS, "targets", "top_target.py")
HOT = "hot_spin_for_top"


def newest():
    rows = [p for p in PYTHONS if p["kind"] != "static"]
    return rows[-1] if rows else PYTHONS[-1]


class Target:
    def __init__(self, python):
        self.p = subprocess.Popen([python["path"], TARGET], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline().strip() == "ready"
        self.pid = self.p.pid
        self.n = 0

    def answers(self):
        self.n += 1
        self.p.stdin.write("ping%d\n" % self.n)
        self.p.stdin.flush()
        return self.p.stdout.readline().strip() == "pong ping%d" % self.n

    def close(self):
        self.p.kill()
        self.p.wait(10)


@pytest.fixture
def target():
    t = Target(newest())
    yield t
    t.close()


def assert_intact_and_traceable(t, tmp_path):
    assert t.p.poll() is None, "the target died"
    assert t.answers(), "the target stopped answering"
    out = tmp_path / "again.cvf"
    r = run_vcattach("--pid", str(t.pid), "-t", "1s", "-o", str(out), "-q", timeout=60)
    assert r.returncode == 0, r.stderr
    s = run_vcattach("summary", str(out))
    assert s.returncode == 0, s.stderr
    assert HOT in s.stdout
    assert t.answers()


class Tmux:
    def __init__(self, tmp_path, cmd):
        self.sock = str(tmp_path / "tmux.sock")
        self.rc_file = tmp_path / "rc"
        shell = "%s; echo $? > %s; sleep 600" % (cmd, shlex.quote(str(self.rc_file)))
        subprocess.run(["tmux", "-S", self.sock, "new-session", "-d", "-x", "160", "-y", "40",
                        shell], check=True)

    def screen(self):
        r = subprocess.run(["tmux", "-S", self.sock, "capture-pane", "-p"], capture_output=True,
                           text=True)
        return r.stdout

    def keys(self, *k):
        subprocess.run(["tmux", "-S", self.sock, "send-keys"] + list(k), check=True)

    def wait_rc(self, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            if self.rc_file.exists() and self.rc_file.read_text().strip():
                return int(self.rc_file.read_text())
            time.sleep(0.1)
        raise AssertionError("vcattach top did not exit: " + self.screen())

    def kill(self):
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)


def hot_within(tm, seconds=5, rows=8):
    end = time.time() + seconds
    screen = ""
    while time.time() < end:
        screen = tm.screen()
        lines = screen.splitlines()
        for i, line in enumerate(lines):
            if line.lstrip().startswith("SELF"):
                if any(HOT in r for r in lines[i + 1:i + 1 + rows]):
                    return screen
        time.sleep(0.2)
    raise AssertionError("the hot function is not among the first rows:\n" + screen)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
@pytest.mark.parametrize("how", ["q", "C-c"])
def test_top_in_a_terminal_shows_the_hot_function_and_detaches(target, tmp_path, how):
    tm = Tmux(tmp_path, "%s top --pid %d" % (shlex.quote(VCATTACH), target.pid))
    try:
        screen = hot_within(tm)
        assert "events" in screen and "threads" in screen
        tm.keys("h")  # the threads view
        time.sleep(1.5)
        assert "TID" in tm.screen()
        tm.keys("f")
        tm.keys(how)
        assert tm.wait_rc() == 0, tm.screen()
    finally:
        tm.kill()
    assert_intact_and_traceable(target, tmp_path)


def test_once_to_a_pipe_prints_plain_text(target, tmp_path):
    r = run_vcattach("top", "--pid", str(target.pid), "--once", "--interval", "2s", timeout=60)
    assert r.returncode == 0, r.stderr
    assert HOT in r.stdout
    assert "\x1b" not in r.stdout  # plain text: no escape of the terminal's
    assert "events" in r.stdout and "waiting:" in r.stdout
    assert "sleep" in r.stdout  # the napper's time.sleep is a wait, by kind
    assert_intact_and_traceable(target, tmp_path)


def test_output_keeps_a_readable_trace(target, tmp_path):
    out = tmp_path / "top.cvf"
    r = run_vcattach("top", "--pid", str(target.pid), "--once", "-o", str(out), timeout=60)
    assert r.returncode == 0, r.stderr
    assert HOT in r.stdout
    s = run_vcattach("summary", str(out))
    assert s.returncode == 0, s.stderr
    assert HOT in s.stdout
    assert target.answers()


@pytest.mark.parametrize("args", [
    [],
    ["--pid", "notapid"],
    ["--pid", "4194303"],  # no such process (above every pid_max but the largest)
    ["--pid", "1", "--interval", "0"],
    ["--pid", "1", "--interval", "fast"],
    ["--pid", "1", "--interval", "2h"],
])
def test_bad_input_is_one_line_and_exit_2(args):
    r = run_vcattach("top", *args)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stdout == ""


def test_subprocesses_once_shows_the_children(tmp_path):
    tree = os.path.join(TESTS, "targets", "tree_target.py")
    p = subprocess.Popen([newest()["path"], tree, "fork"], stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        out = tmp_path / "tree.cvf"
        r = run_vcattach("top", "--pid", str(p.pid), "--subprocesses", "-o", str(out), "--once",
                         "--interval", "2s", timeout=120)
        assert r.returncode == 0, r.stderr
        assert "child_work" in r.stdout  # the fork children's work (tree_target.py)
        status = [l for l in r.stdout.splitlines() if l.startswith("events")][0]
        assert int(status.split("processes")[1].split()[0]) >= 2, status
        s = run_vcattach("summary", str(out))
        assert s.returncode == 0, s.stderr
        assert p.poll() is None
    finally:
        os.killpg(p.pid, signal.SIGKILL)  # the parent and its fork children
        p.wait(10)


def test_subprocesses_needs_an_output():
    r = run_vcattach("top", "--pid", "1", "--subprocesses")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1

"""The one Target helper: a program started with one interpreter of the matrix, ready when
its own readiness signal says so, checked from outside (alive, unstopped, untraced), and
always cleaned up (resumed if stopped, killed, reaped, its pipes closed), even when it never
became ready.  Drivers of the target programs build on it:
  Idle           tests/targets/idle.py          (preflight, namespaces)
  Service        tests/targets/busy_service.py  (end to end)
  FixtureTarget  tests/inject_fixture/target.py (the injection methods)
"""
import json
import os
import select
import signal
import subprocess
import time

from .paths import TESTS, world_readable
from .proc import as_user, assert_running_untraced, assert_untouched, python_pid

IDLE = os.path.join(TESTS, "targets", "idle.py")
BUSY = os.path.join(TESTS, "targets", "busy_service.py")
INJECT_TARGET = os.path.join(TESTS, "inject_fixture", "target.py")


class Target:
    """`python` (a row of PYTHONS) running `args`.  `wrap` is a command prefix (unshare …):
    .pid is then the Python process inside it.  `user`=(uid, gid) drops privileges first.
    Subclasses define wait_ready(deadline), which raises AssertionError if the program does
    not become ready by the time.monotonic() deadline."""

    READY_TIMEOUT = 30

    def __init__(self, python, args, user=None, wrap=(), cwd=None, env=None,
                 stdin=None, stdout=subprocess.PIPE, stderr=None):
        self.python = python
        self.pid = None
        if (user is not None or wrap) and args and os.path.isfile(str(args[0])):
            # another user, or a private /tmp, may not reach the clone: a readable copy
            args = [world_readable(str(args[0]))] + list(args[1:])
        self.proc = subprocess.Popen(list(wrap) + [python["path"]] + [str(a) for a in args],
                                     stdin=stdin, stdout=stdout, stderr=stderr, text=True,
                                     cwd=cwd, env=env, preexec_fn=as_user(user))
        try:
            self.wait_ready(time.monotonic() + self.READY_TIMEOUT)
            if self.pid is None:
                self.pid = python_pid(self.proc.pid) if wrap else self.proc.pid
        except BaseException:
            self.close()
            raise

    def wait_ready(self, deadline):
        raise NotImplementedError

    def readline(self, timeout):
        """One line of the target's stdout, or "" if none comes within timeout seconds."""
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return self.proc.stdout.readline() if r else ""

    def stderr_if_dead(self):
        if self.proc.poll() is not None and self.proc.stderr is not None:
            return self.proc.stderr.read()
        return ""

    def alive(self):
        return self.proc.poll() is None

    def assert_untouched(self):
        """The process runs, unstopped and untraced."""
        assert_untouched(self.pid)

    def assert_running_untraced(self):
        """No thread of the process is stopped or traced."""
        assert_running_untraced(self.pid)

    def close(self):
        if self.proc.poll() is None:
            for pid in {self.pid, self.proc.pid} - {None}:
                try:
                    os.kill(pid, signal.SIGCONT)  # a test may have left it stopped
                    if pid != self.proc.pid:
                        os.kill(pid, signal.SIGKILL)  # the Python inside a wrapper
                except ProcessLookupError:
                    pass
            self.proc.kill()
        self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class Idle(Target):
    """An idle interpreter (targets/idle.py), ready once its first line is printed."""

    def __init__(self, python, user=None, wrap=()):
        super().__init__(python, [IDLE], user=user, wrap=wrap, cwd="/")

    def wait_ready(self, deadline):
        line = self.readline(max(0.0, deadline - time.monotonic()))
        assert line.strip() == "ready", "idle target did not start: %r" % line


class Service(Target):
    """targets/busy_service.py under one interpreter, in its own directory; ready once it has
    created the file `ready` there."""

    def __init__(self, python, workdir, user=None, wrap=()):
        self.dir = str(workdir)
        os.makedirs(self.dir, exist_ok=True)
        if user is not None:
            os.chmod(self.dir, 0o777)
        self.log = open(os.path.join(self.dir, "service.log"), "w")
        try:
            super().__init__(python, [BUSY, self.dir], user=user, wrap=wrap, cwd=self.dir,
                             stdout=self.log, stderr=subprocess.STDOUT)
        except BaseException:
            self.log.close()
            raise

    def wait_ready(self, deadline):
        while not os.path.exists(os.path.join(self.dir, "ready")):
            assert self.proc.poll() is None, "service died: %s" % self.output()
            assert time.monotonic() < deadline, "service not ready"
            time.sleep(0.02)

    def output(self):
        self.log.flush()
        with open(os.path.join(self.dir, "service.log")) as f:
            return f.read()

    def start_late_thread(self):
        open(os.path.join(self.dir, "start_late"), "w").close()

    def finish(self, timeout=60):
        """Asks the service to end; returns its report (dict)."""
        open(os.path.join(self.dir, "finish"), "w").close()
        self.proc.wait(timeout)
        self.log.close()
        with open(os.path.join(self.dir, "report.json")) as f:
            return json.load(f)

    def expected_checksum(self, rounds):
        """The same computation in a fresh, never-traced interpreter."""
        out = subprocess.run([self.python["path"], BUSY, "--check", str(rounds)],
                             capture_output=True, text=True, timeout=120, check=True)
        return int(out.stdout)

    def close(self):
        super().close()
        if not self.log.closed:
            self.log.close()


class FixtureTarget(Target):
    """inject_fixture/target.py: ready once it prints "READY pid port"; on "report" it prints
    what its threads saw as one JSON line and exits."""

    def __init__(self, python, *args, user=None):
        super().__init__(python, [INJECT_TARGET] + list(args), user=user,
                         stdin=subprocess.PIPE, stderr=subprocess.PIPE)

    def wait_ready(self, deadline):
        line = self.readline(max(0.0, deadline - time.monotonic()))
        assert line.startswith("READY "), "target did not start: %r %s" % (
            line, self.stderr_if_dead())
        _, pid, port = line.split()
        self.pid, self.port = int(pid), int(port)

    def report(self):
        assert self.proc.poll() is None, "target died: rc=%s stderr=%s" % (
            self.proc.returncode, self.proc.stderr.read())
        self.proc.stdin.write("report\n")
        self.proc.stdin.flush()
        line = self.readline(60)
        assert line, "target gave no report; stderr: %s" % self.proc.stderr.read()
        self.proc.wait(30)
        return json.loads(line)


def reference_result(python):
    """inject_fixture/target.py's computation in a fresh, never-injected interpreter."""
    out = subprocess.run([python["path"], INJECT_TARGET, "--reference"], capture_output=True,
                         text=True, timeout=60, check=True)
    return out.stdout.strip()

"""Process helpers shared by the attach tests: start a target with a given interpreter, wait
until it is ready, run vcattach against it, read /proc state, and drive busy_service.py."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, TESTS)

from conftest import BUILD, PYTHONS, VCATTACH, world_readable  # noqa: E402

IDLE = os.path.join(HERE, "idle.py")
# Wraps a command in its own mount namespace with a private /tmp (like systemd's PrivateTmp, or
# a container sharing the rest of the filesystem).
PRIVATE_TMP = ("unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs vc-private-tmp /tmp && exec "$0" "$@"')
BUSY = os.path.join(HERE, "busy_service.py")


def run_vcattach(*args, env=None, timeout=60, user=None, stdin=None):
    """Runs build/vcattach; user=(uid, gid) drops privileges first (root test runner)."""
    preexec = None
    if user is not None:
        def preexec():
            os.setgroups([])
            os.setgid(user[1])
            os.setuid(user[0])
    full_env = dict(os.environ)
    full_env.update(env or {})
    exe = VCATTACH if user is None else world_readable(VCATTACH)
    return subprocess.run([exe] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, preexec_fn=preexec, stdin=stdin)


def proc_state(pid):
    """State letter of /proc/PID/stat, or None when the process is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rindex(")") + 2]


def tracer_pid(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("TracerPid:"):
                return int(line.split()[1])
    return None


def assert_untouched(pid):
    """The target runs, unstopped and untraced (what every preflight failure must leave)."""
    assert proc_state(pid) in ("R", "S", "D"), "state %r" % proc_state(pid)
    assert tracer_pid(pid) == 0


def python_pid(pid):
    """With a wrapper (unshare --fork) the Python process is a child of the wrapper."""
    for _ in range(100):
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                kids = f.read().split()
        except OSError:
            kids = []
        if kids:
            return int(kids[0])
        try:
            if "python" in os.readlink("/proc/%d/exe" % pid):
                return pid
        except OSError:
            pass
        time.sleep(0.02)
    return pid


class Idle:
    """An idle interpreter (targets/idle.py), ready once its first line is printed."""

    def __init__(self, python, user=None, wrap=()):
        preexec = None
        if user is not None:
            def preexec():
                os.setgroups([])
                os.setgid(user[1])
                os.setuid(user[0])
        script = IDLE if user is None and not wrap else world_readable(IDLE)
        self.proc = subprocess.Popen(list(wrap) + [python["path"], script], stdout=subprocess.PIPE,
                                     text=True, preexec_fn=preexec, cwd="/")
        line = self.proc.stdout.readline()
        assert line.strip() == "ready", "idle target did not start: %r" % line
        self.pid = self.proc.pid if not wrap else self._python_child()

    def _python_child(self):
        return python_pid(self.proc.pid)

    def close(self):
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.proc.kill()
        self.proc.wait(10)
        self.proc.stdout.close()


class DummyAgents:
    """A directory holding a placeholder file named like every agent build, so that preflight
    checks *after* the agent lookup can be reached without loading anything: each test using
    it must fail in preflight (the placeholder is not an ELF; dlopen would refuse it)."""

    def __init__(self, file_mode=0o644, dir_mode=0o755):
        self.dir = tempfile.mkdtemp(prefix="vc-agents-", dir="/tmp")
        for p in PYTHONS:
            path = os.path.join(self.dir, "libvcagent-py%d.so" % p["minor"])
            with open(path, "w") as f:
                f.write("placeholder: preflight tests never load this\n")
            os.chmod(path, file_mode)
        os.chmod(self.dir, dir_mode)
        self.env = {"VCATTACH_AGENT_DIR": self.dir}

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def agents_built():
    return all(os.path.exists(os.path.join(BUILD, "libvcagent-py%d.so" % p["minor"]))
               for p in PYTHONS)


class Service:
    """targets/busy_service.py under one interpreter, in its own directory."""

    def __init__(self, python, workdir, user=None, wrap=()):
        self.python = python
        self.dir = str(workdir)
        os.makedirs(self.dir, exist_ok=True)
        self.log = open(os.path.join(self.dir, "service.log"), "w")
        preexec = None
        if user is not None:
            os.chmod(self.dir, 0o777)

            def preexec():
                os.setgroups([])
                os.setgid(user[1])
                os.setuid(user[0])
        script = BUSY if user is None and not wrap else world_readable(BUSY)
        self.proc = subprocess.Popen(list(wrap) + [python["path"], script, self.dir],
                                     stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir,
                                     preexec_fn=preexec)
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(self.dir, "ready")):
            assert self.proc.poll() is None, "service died: %s" % self.output()
            assert time.monotonic() < deadline, "service not ready"
            time.sleep(0.02)
        self.pid = python_pid(self.proc.pid) if wrap else self.proc.pid

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
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if not self.log.closed:
            self.log.close()

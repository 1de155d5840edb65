"""`vcattach --pid MASTER --subprocesses` from the host against a service in a container
(issue 19): Debian's gunicorn serving a Flask app under CPython 3.14 / 3.15 of the sid test
root (scripts/test-root), in mount and pid namespaces of its own with its own /proc
(`unshare --mount --pid --fork`, /proc mounted inside, chroot), as the host or a
`kubectl debug` container sees a pod's processes.

Each member gets the agent it can load (copied into the container's /tmp as its own user),
its control socket in its network namespace; pids are the host's, with the container's beside
them in the CLI's lines and in the trace's process names.  Checked: every worker traced with
its handler calls; a worker SIGKILLed mid-trace keeps what it streamed, and gunicorn's
replacement is traced from its start; remote-exec (PEP 768) as the method; a rootless-like
container in a user namespace of its own (skipped, with the reason, where the kernel refuses
one).  Every process is left running, unstopped and untraced."""
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.request

import pytest

from support.paths import BUILD, CHROOT_PYTHONS, PYTHONS, TESTS, TEST_ROOT, TEST_ROOT_ERROR, VCATTACH, root_workdir
from support.proc import NOBODY, as_user, assert_running_untraced, free_port, hang_report
from support.traces import decode, x_events

needs_root = pytest.mark.skipif(
    TEST_ROOT is None, reason="no sid test root (CPython 3.14/3.15): %s" % TEST_ROOT_ERROR)

APP = os.path.join(TESTS, "targets", "tree_flask_app.py")
# Own mount and pid namespaces, /proc of the new pid namespace mounted inside the root, then
# the root: "$0" is the root, "$@" the command inside it.
ENTER = 'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"'


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def descendants(pid):
    out = []
    for c in children(pid):
        out += [c] + descendants(c)
    return out


def ns_pid(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    return None


class Load:
    """A bounded local load until stop(): three client threads, each request with a
    timeout."""

    def __init__(self, port):
        self.url = "http://127.0.0.1:%d/" % port
        self.ok = self.failed = 0
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self.run) for _ in range(3)]
        for t in self.threads:
            t.start()

    def run(self):
        deadline = time.monotonic() + 300
        while not self.done.is_set() and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url, timeout=5) as resp:
                    resp.read()
                self.ok += 1
            except Exception:
                self.failed += 1
            time.sleep(0.05)  # a few dozen requests a second: the trace stays small to check

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join(30)


class ContainerGunicorn:
    """gunicorn -w WORKERS in its own mount and pid namespaces (and user namespace with
    userns, started as nobody: a rootless container) in the sid root.  .master is its host
    pid (pid 1 inside)."""

    def __init__(self, python, tmp_path, workers=2, userns=False):
        self.outside, self.inside = root_workdir(python, tmp_path, "vc-guni")
        shutil.copy2(APP, os.path.join(self.outside, "tree_flask_app.py"))
        self.port = free_port()
        interp = python["argv"][-1]  # its path inside the root
        unshare = ["unshare"] + (["--user", "--map-root-user"] if userns else []) + [
            "--mount", "--propagation", "private", "--pid", "--fork"]
        argv = unshare + ["sh", "-c", ENTER, python["root"], interp, "/usr/bin/gunicorn",
                          "-b", "127.0.0.1:%d" % self.port, "--chdir", self.inside,
                          "-w", str(workers), "--worker-tmp-dir", "/tmp", "tree_flask_app:app"]
        self.log = open(os.path.join(str(tmp_path), "gunicorn.log"), "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True,
                                     preexec_fn=as_user(NOBODY) if userns else None)
        self.master = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "the container ended: %s" % self.output()
            kids = children(self.proc.pid)
            if kids and "python" in self._exe(kids[0]) and len(children(kids[0])) >= workers:
                if self._answers():
                    self.master = kids[0]
                    return
            time.sleep(0.1)
        raise AssertionError("gunicorn in the container not ready: %s" % self.output())

    @staticmethod
    def _exe(pid):
        try:
            return os.readlink("/proc/%d/exe" % pid)
        except OSError:
            return ""

    def _answers(self):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/" % self.port, timeout=2):
                return True
        except Exception:
            return False

    def workers(self):
        return children(self.master)

    def output(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()[-3000:]

    def close(self):
        if self.master is not None:  # the namespace's init: the kernel ends the others
            try:
                os.kill(self.master, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(20)
        self.log.close()


@pytest.fixture
def container(tmp_path):
    made = []

    def start(python, **kw):
        c = ContainerGunicorn(python, tmp_path, **kw)
        made.append(c)
        return c
    yield start
    for c in made:
        c.close()


def chroot_python(minor):
    for p in CHROOT_PYTHONS:
        if p["minor"] == minor:
            return p
    pytest.skip("the sid root has no CPython 3.%d" % (minor - 300))


def process_names(events):
    return {e["pid"]: e["args"]["name"] for e in events
            if e.get("ph") == "M" and e.get("name") == "process_name"}


def handler_pids(events):
    return {e["pid"] for e in x_events(events)
            if e["name"].startswith("hello") or e["name"].startswith("handler_work")}


def check_untouched(c):
    for p in [c.master] + descendants(c.master):
        if os.path.exists("/proc/%d" % p):
            assert_running_untraced(p)


def trace(c, seconds, out, *extra, kill_after=None):
    """vcattach on the container's master under load; with kill_after, a worker SIGKILLed that
    many seconds after every process was attached (-v says when)."""
    load = Load(c.port)
    v = subprocess.Popen([VCATTACH, "--pid", str(c.master), "--subprocesses", "-t",
                          str(seconds), "-o", out, "-v", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err_lines = []
    attached = threading.Event()

    def read_stderr():
        for line in v.stderr:
            err_lines.append(line)
            if "processes attached in" in line:
                attached.set()
    reader = threading.Thread(target=read_stderr)
    reader.start()
    killed = None
    try:
        if kill_after is not None:
            assert attached.wait(120), "".join(err_lines)
            time.sleep(kill_after)
            killed = c.workers()[0]
            os.kill(killed, signal.SIGKILL)
        out_chunks = []
        out_reader = threading.Thread(target=lambda: out_chunks.append(v.stdout.read()))
        out_reader.start()
        try:
            v.wait(180)
        except subprocess.TimeoutExpired:
            raise AssertionError("%s after 180 s\nits stderr (the end):\n%s" % (
                hang_report(v.pid, [c.master]), "".join(err_lines)[-4000:]))
        out_reader.join(30)
        stdout = "".join(out_chunks)
    finally:
        if v.poll() is None:
            v.kill()
            v.wait(10)
        reader.join(30)
        load.stop()
    stderr = "".join(err_lines)
    assert v.returncode == 0, stderr + stdout + c.output()
    return stdout, stderr, killed, load


def check_trace(c, out, stdout, initial, killed=None, stderr=""):
    events = decode(out)
    stdout = stdout + stderr  # what vcattach said about a member it lost, beside the summary
    pids = {e["pid"] for e in x_events(events)}
    handlers = handler_pids(events)
    names = process_names(events)
    assert c.master in pids, stdout
    # host pids, the container's beside them: the master is pid 1 inside
    assert "pid %d (pid 1 in its namespace) and its subprocesses" % c.master in stdout, stdout
    assert "(pid 1 in its namespace)" in names[c.master], names
    for w in initial:
        assert w in handlers, "worker %d not in the trace:\n%s" % (w, stdout)
        assert "(pid %d in its namespace)" % ns_pid_of(w, names) in names[w], names
    if killed is not None:
        replacements = [p for p in c.workers() if p not in initial]
        assert replacements, stdout
        # the replacement is traced from its start (its first requests are in its trace)
        assert any(p in pids for p in replacements), (replacements, stdout)
    return events


def ns_pid_of(pid, names):
    """The container's pid the trace gives pid (read from its process name)."""
    name = names[pid]
    tail = name[name.rindex("(pid ") + 5:]
    return int(tail.split()[0])


@needs_root
@pytest.mark.parametrize("minor", [314, 315], ids=["py3.14", "py3.15"])
def test_gunicorn_in_container_every_worker_and_a_killed_one(minor, container, tmp_path):
    c = container(chroot_python(minor), workers=3)
    initial = c.workers()
    own = {w: ns_pid(w) for w in initial}
    assert all(own[w] != w for w in initial), own  # really in another pid namespace
    out = str(tmp_path / "svc.cvf")
    stdout, stderr, killed, load = trace(c, 4, out, kill_after=1.5)
    events = check_trace(c, out, stdout, initial, killed, stderr)
    names = process_names(events)
    for w in initial:  # the container's pid in the trace is the one NSpid gives
        assert ns_pid_of(w, names) == own[w], (w, own, names)
    # the killed worker keeps what it streamed before, and says so in the CLI's lines
    assert "pid %d (pid %d in its namespace) traced" % (killed, own[killed]) in stdout, stdout
    assert "agent copied into the target's mount namespace" in stderr, stderr
    assert load.failed <= 10, (load.ok, load.failed)
    check_untouched(c)


@needs_root
def test_gunicorn_in_container_remote_exec(container, tmp_path):
    c = container(chroot_python(314), workers=2)
    initial = c.workers()
    out = str(tmp_path / "rexec.cvf")
    stdout, stderr, _, load = trace(c, 3, out, "--method", "remote-exec")
    check_trace(c, out, stdout, initial, stderr=stderr)
    assert stderr.count("(remote-exec)") >= 1 + len(initial), stderr
    assert "falling back" not in stderr, stderr
    assert load.failed == 0, (load.ok, load.failed)
    check_untouched(c)


def userns_refusal():
    """Why this kernel cannot run the rootless-like container here, or None."""
    r = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "--pid", "--fork",
                        "sh", "-c", "mount -t proc proc /proc && echo ok"],
                       capture_output=True, text=True, timeout=30, preexec_fn=as_user(NOBODY))
    if r.returncode != 0 or "ok" not in r.stdout:
        return (r.stderr.strip() or "unshare --user failed").splitlines()[-1]
    return None


@needs_root
def test_gunicorn_in_rootless_container(container, tmp_path):
    why = userns_refusal()
    if why:
        print("skipped: an unprivileged user namespace with its own /proc: %s" % why)
        pytest.skip("no unprivileged user namespace with its own /proc here: %s" % why)
    c = container(chroot_python(314), workers=2, userns=True)
    with open("/proc/%d/status" % c.master) as f:
        uid = [line.split()[1] for line in f if line.startswith("Uid:")][0]
    assert uid == str(NOBODY[0])  # root inside, nobody on the host
    assert os.readlink("/proc/%d/ns/user" % c.master) != os.readlink("/proc/self/ns/user")
    initial = c.workers()
    out = str(tmp_path / "rootless.cvf")
    stdout, stderr, _, load = trace(c, 3, out)
    check_trace(c, out, stdout, initial)
    assert load.failed == 0, (load.ok, load.failed)
    check_untouched(c)


# A process of the tree that enters new namespaces (network, mount, pid) while it is traced:
# its child interpreter is found by the /proc scan, gets a control socket made in its network
# namespace (the tree's first one cannot be reached from there), and is named by our pid.
NEW_NS_ROOT = r"""
import subprocess, sys, time

def parent_work(n):
    return sum(range(n))

print("ready", flush=True)
sys.stdin.readline()                      # the test says when vcattach is tracing
child = subprocess.Popen(["unshare", "--net", "--mount", "--pid", "--fork", sys.executable,
                          "-c", "import time\n"
                                "def child_work(n):\n"
                                "    return sum(range(n))\n"
                                "while True:\n"
                                "    child_work(2000)\n"
                                "    time.sleep(0.01)\n"])
while True:
    parent_work(2000)
    time.sleep(0.01)
"""


def test_child_entering_new_namespaces_during_the_trace(tmp_path):
    pys = [p for p in PYTHONS if p["kind"] != "static"] or PYTHONS
    py = pys[-1]
    script = tmp_path / "new_ns_root.py"
    script.write_text(NEW_NS_ROOT)
    root = subprocess.Popen([py["path"], str(script)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert root.stdout.readline().strip() == "ready"
        out = str(tmp_path / "newns.cvf")
        v = subprocess.Popen([VCATTACH, "--pid", str(root.pid), "--subprocesses", "-t", "4",
                              "-o", out, "-v"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        time.sleep(1.5)  # attached by then (a single process: tens of ms)
        root.stdin.write("go\n")
        root.stdin.flush()
        stdout, stderr = v.communicate(timeout=120)
        assert v.returncode == 0, stderr + stdout
        kids = descendants(root.pid)
        inner = [p for p in kids if "python" in ContainerGunicorn._exe(p)]
        assert inner, (kids, stdout)
        child = inner[0]
        assert os.readlink("/proc/%d/ns/net" % child) != os.readlink("/proc/%d/ns/net" % root.pid)
        assert ns_pid(child) == 1
        assert "is in another network namespace: a control socket made there" in stderr, stderr
        assert "pid %d (pid 1 in its namespace) traced" % child in stdout, stdout
        events = decode(out)
        names = process_names(events)
        assert names[child].endswith("(pid 1 in its namespace)"), names
        by_pid = {}
        for e in x_events(events):
            by_pid.setdefault(e["pid"], set()).add(e["name"].split(" ")[0])
        assert "parent_work" in by_pid.get(root.pid, ()), stdout
        assert "child_work" in by_pid.get(child, ()), stdout
        for p in [root.pid] + kids:
            if os.path.exists("/proc/%d" % p):
                assert_running_untraced(p)
    finally:
        try:
            os.killpg(root.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        root.wait(10)


@pytest.mark.parametrize("build", ["tests", "asan/tests"], ids=["plain", "asan"])
def test_ns_pid_rewrite_of_what_an_agent_sends(build):
    """cli/ns_pid.c on hostile META/EVENTS frames (tests/unit/ns_pid_check.c): exact matches
    only, outputs within their computed bounds, a META at the spool's bound stays within it."""
    exe = os.path.join(BUILD, build, "ns-pid-check")
    assert os.path.exists(exe), "%s not built: run make test-prereqs" % exe
    r = subprocess.run([exe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all checks passed" in r.stdout

"""Targets on musl libc (issue 35), as Alpine's python:*-alpine images run them: the musl root of
scripts/test-root, Alpine-like (musl's loader as /lib/ld-musl-x86_64.so.1, nothing of glibc)
with two CPythons built by musl-gcc from Debian's sources: 3.13 (Debian 13's python3.13) under
/opt/python3.13 and 3.11 (Debian 12's python3.11) under /opt/python3.11.  Their musl agents
are built from the same CPython headers as the glibc agents (pyenv's 3.13.0 and 3.11.7), so
these tests also show that those headers describe a musl CPython's layout.  The tests marked
with both versions run on each; the others on 3.13.

  - a glibc agent is never loaded into a musl process: with no musl agent to be found (only the
    glibc libvcagent-py313.so in VCATTACH_AGENT_DIR), vcattach refuses in one line, exit 2,
    before the target is touched, and the target maps no agent;
  - the musl agent (build/libvcagent-py313-musl.so, agent/agent_musl.mk) needs musl's libc.so
    and nothing else (scripts/musl-agent-check, run on it again here);
  - a musl agent for every minor a glibc agent is built for (agent/agent_musl.mk), each
    needing musl's libc.so alone;
  - a busy two-thread target (targets/counted_threads.py) on the musl CPython, pid 1 of its own
    mount and pid namespaces (support.container), traced from the host by ptrace and by gdb:
    the musl agent is the one it maps, no glibc is mapped, and each thread's counted() calls in
    the trace equal the count the target kept itself, exactly;
  - an idle one (asleep, a thread in select): musl's libc has no unwind tables, so a thread
    blocked there is judged by its syscall (injector/safepoint_rules.def, SP_BARE_LIBC) and
    borrowed in its sleep; one whose every thread waits on a lock is refused, untouched;
  - a fork pool under `--subprocesses`: every worker of every pool born and ended during the
    trace has exactly the calls it counted itself (targets/pool_churn.py);
  - kill -9 of vcattach at random instants, from the injection to mid-trace, leaves the target
    running, untraced, its session ended by the agent, its threads never stopped;
  - the self-contained vcattach (`make install DESTDIR=...`) run inside the container, on its
    pid 1, with its -musl agent from the install: exact counts again;
  - the Python package's in-process loader (python/vcattach/_agent.py) names the musl agent
    under the musl CPython, the glibc one under the host's (the musl build has no _ctypes, so
    its libc test is run there alone, taken from the module's source).

Skipped, with the reason, when the musl root is not made (`make deps` makes it: a CPython build
of about 5 minutes) or the musl agent is not built (it is, by `make`, once the root exists)."""
import glob
import json
import os
import random
import re
import shutil
import signal
import subprocess
import time

import pytest

from support.container import SRV, ImageContainer, install_by_make_install
from support.paths import BUILD, MUSL_PYTHON_311, ROOT, TESTS, VCATTACH, agent_path, \
    debian_root_python, root_workdir
from support.pools import Pools, trace_pools
from support.proc import assert_running_untraced, assert_untouched, run_vcattach
from support.service import x_events
from support.traces import decode
from vcattach import cvf

MUSLS = {"3.13": debian_root_python("musl"), "3.11": debian_root_python("musl", MUSL_PYTHON_311)}
MUSL_VERSIONS = pytest.mark.parametrize("version", ["3.13", "3.11"])
COUNTED = os.path.join(TESTS, "targets", "counted_threads.py")
CALLS = 20000


def musl_python(version="3.13"):
    py, why = MUSLS[version]
    if py is None:
        pytest.skip(why)
    return py


def musl_agent(py):
    path = os.path.join(BUILD, "libvcagent-py%d-musl.so" % py["minor"])
    assert os.path.exists(path), "%s is not built: run make (the musl root exists)" % path
    return path


def maps_of(pid):
    with open("/proc/%d/maps" % pid) as f:
        return {line.split(None, 5)[-1].strip().replace(" (deleted)", "")
                for line in f if len(line.split(None, 5)) == 6}


def test_the_musl_root_is_alpine_like():
    """What the refusal and the agent choice are tested against: musl's loader, no glibc."""
    py = musl_python()
    assert os.path.isfile(os.path.join(py["root"], "lib/ld-musl-x86_64.so.1"))
    for glibc in ("lib/x86_64-linux-gnu/libc.so.6", "lib64/ld-linux-x86-64.so.2",
                  "usr/lib/x86_64-linux-gnu/libc.so.6"):
        assert not os.path.exists(os.path.join(py["root"], glibc)), glibc


def test_glibc_agent_is_never_loaded_into_a_musl_cpython(tmp_path):
    py = musl_python()
    glibc_agent = agent_path(py["minor"])
    if not os.path.exists(glibc_agent):
        pytest.skip("%s is not built: run make" % glibc_agent)
    agents = tmp_path / "agents"  # only the glibc agent for the target's minor is there
    agents.mkdir(mode=0o755)
    shutil.copy2(glibc_agent, str(agents))
    outside, inside = root_workdir(py, tmp_path, "vc-musl")
    with open(os.path.join(outside, "idle.py"), "w") as f:
        f.write("import time\nprint('ready', flush=True)\nwhile True:\n    time.sleep(0.05)\n")
    p = subprocess.Popen(py["argv"] + [inside + "/idle.py"], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        mapped = maps_of(p.pid)
        assert "/lib/ld-musl-x86_64.so.1" in {m[len(py["root"]):] if m.startswith(py["root"])
                                              else m for m in mapped}, mapped
        r = run_vcattach("--pid", p.pid, "-t", "1s", "-o", tmp_path / "o.cvf",
                         env={"VCATTACH_AGENT_DIR": str(agents)})
        assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert lines[0].startswith("vcattach: pid %d runs on musl libc (Alpine?) "
                                   "(/lib/ld-musl-x86_64.so.1); no musl agent built: "
                                   "libvcagent-py313-musl.so not found in %s" % (p.pid, agents)), \
            lines[0]
        assert_untouched(p.pid)
        assert not any("libvcagent" in m or "libc.so.6" in m for m in maps_of(p.pid))
    finally:
        p.kill()
        p.wait(10)


def test_a_musl_agent_for_every_minor():
    """Built from the glibc agents' CPython headers where no musl CPython of that minor is at
    hand (the layouts are the same on both C libraries: agent/agent_musl.mk)."""
    if not shutil.which("musl-gcc"):
        pytest.skip("musl-gcc is not installed (musl-tools): no musl agent is built")
    minors = sorted(re.match(r"libvcagent-py(\d+)\.so$", os.path.basename(p)).group(1)
                    for p in glob.glob(os.path.join(BUILD, "libvcagent-py*.so"))
                    if re.match(r"libvcagent-py\d+\.so$", os.path.basename(p)))
    assert minors, "no glibc agent is built: run make"
    for minor in minors:
        agent = os.path.join(BUILD, "libvcagent-py%s-musl.so" % minor)
        assert os.path.exists(agent), "%s is not built" % agent
        r = subprocess.run([os.path.join(ROOT, "scripts", "musl-agent-check"), agent],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr


def test_the_musl_agent_needs_musl_libc_alone():
    py = musl_python()
    agent = musl_agent(py)
    r = subprocess.run([os.path.join(ROOT, "scripts", "musl-agent-check"), agent],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    dyn = subprocess.run(["readelf", "-dW", "--dyn-syms", agent], capture_output=True,
                         text=True, check=True).stdout
    assert "GLIBC_" not in dyn and "libc.so.6" not in dyn


ON_MUSL = """import ast, os, sys
src = open(sys.argv[1]).read()
fn = [n for n in ast.parse(src).body if getattr(n, "name", "") == "_on_musl"][0]
exec(ast.get_source_segment(src, fn))
print(_on_musl())
"""


def test_the_python_package_names_the_musl_agent_on_musl(tmp_path):
    py = musl_python()
    outside, inside = root_workdir(py, tmp_path, "vc-pkg")
    shutil.copy2(os.path.join(ROOT, "python", "vcattach", "_agent.py"), outside)
    with open(os.path.join(outside, "on_musl.py"), "w") as f:
        f.write(ON_MUSL)
    for argv, want in ((py["argv"], "True"), (["/usr/bin/python3"], "False")):
        where = inside if argv is py["argv"] else outside
        r = subprocess.run(argv + [where + "/on_musl.py", where + "/_agent.py"],
                           capture_output=True, text=True, timeout=60)
        assert r.stdout.strip() == want, (argv, r.stdout, r.stderr)


class CountedContainer(ImageContainer):
    """targets/counted_threads.py as pid 1 of a container of the musl root."""

    def __init__(self, py, tmp_path):
        super().__init__(py, tmp_path, script=COUNTED)

    def go(self):
        open(self.host_path(SRV + "/go"), "w").close()

    def check_unharmed(self):
        """Running, untraced, and ends well: both threads spun throughout (their report)."""
        assert_running_untraced(self.pid)
        report = self.finish()
        assert set(report) == {"worker-0", "worker-1"} and min(report.values()) > 0, report

    def counts(self, timeout=60):
        path = self.host_path(SRV + "/counts.json")
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            assert self.proc.poll() is None, "the target ended: %s" % self.output()
            assert time.monotonic() < deadline, "the counted phase did not end"
            time.sleep(0.05)
        with open(path) as f:
            return json.load(f)


def counted_per_thread(trace):
    """{thread name: its counted() calls} in a loaded trace."""
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    traced = {}
    for e in x_events(trace):
        if e["name"].startswith("counted"):
            key = names.get(e["tid"], e["tid"])
            traced[key] = traced.get(key, 0) + 1
    return traced


def end_all(v, c):
    """vcattach v (if it still runs) killed, then the container."""
    if v is not None and v.poll() is None:
        v.kill()
        v.wait()
    c.close()


def start_trace(c, out, method="ptrace"):
    """vcattach on the container's service, long enough to be stopped; returns it once the
    session runs."""
    v = subprocess.Popen([VCATTACH, "--pid", str(c.pid), "-t", "120s", "-o", str(out),
                          "--method", method],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while run_vcattach("status", "--pid", c.pid, "-q").returncode != 0:
        if v.poll() is not None:
            raise AssertionError("vcattach ended: %s" % (v.communicate(),))
        assert time.monotonic() < deadline, "no session started"
        time.sleep(0.05)
    return v


@pytest.mark.parametrize("method", ["ptrace", "gdb"])
@MUSL_VERSIONS
def test_busy_threads_on_musl_traced_from_the_host_exactly(method, version, tmp_path):
    py = musl_python(version)
    musl_agent(py)
    c = CountedContainer(py, tmp_path)
    v = None
    try:
        out = tmp_path / "trace.cvf"
        v = start_trace(c, out, method)
        mapped = maps_of(c.pid)
        assert any(m.endswith("/libvcagent-py%d-musl.so" % py["minor"]) for m in mapped), mapped
        assert not any("libc.so.6" in m or "ld-linux" in m for m in mapped), mapped
        c.go()
        counts = c.counts()
        assert counts == {"worker-0": CALLS, "worker-1": CALLS}, counts
        r = run_vcattach("stop", "--pid", c.pid)
        assert r.returncode == 0, r.stdout + r.stderr
        stdout, stderr = v.communicate(timeout=120)
        assert v.returncode == 0, stdout + stderr
        decode(str(out))  # the C decoder and the Python reader agree
        trace = cvf.load(str(out))
        traced = counted_per_thread(trace)
        assert traced == counts, (traced, counts)
        c.check_unharmed()
    finally:
        end_all(v, c)


def test_kill_9_of_vcattach_at_random_instants_leaves_the_musl_target_running(tmp_path):
    """Three kills at random instants from vcattach's start (the injection takes a few ms of
    that, the session the rest), then one mid-trace while the threads are in their counted
    calls; after each the target runs untraced and a next vcattach can attach."""
    py = musl_python()
    musl_agent(py)
    c = CountedContainer(py, tmp_path)
    rng = random.Random()
    try:
        for i in range(4):
            out = tmp_path / ("trace%d.cvf" % i)
            if i < 3:
                v = subprocess.Popen([VCATTACH, "--pid", str(c.pid), "-t", "120s", "-o",
                                      str(out)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
                time.sleep(rng.uniform(0.0, 0.3))
            else:
                v = start_trace(c, out)
                c.go()  # the threads are in their counted calls, hooked, when vcattach dies
                time.sleep(0.05)
            v.send_signal(signal.SIGKILL)
            v.wait(10)
            deadline = time.monotonic() + 30  # the agent sees its stream end and unhooks
            while run_vcattach("status", "--pid", c.pid, "-q").returncode == 0:
                assert time.monotonic() < deadline, "the session outlived its vcattach"
                time.sleep(0.1)
            assert_running_untraced(c.pid)
        assert c.counts() == {"worker-0": CALLS, "worker-1": CALLS}
        c.check_unharmed()
    finally:
        c.close()


IDLE = """import select, sys, threading, time
def wait_once():
    select.select([], [], [], 0.2)
def waiter():
    while True:
        wait_once()
def tick():
    time.sleep(0.05)
threading.Thread(target=waiter, name="waiter", daemon=True).start()
print("ready", flush=True)
while True:
    tick()
"""

LOCKED = """import threading
ev = threading.Event()
t = threading.Thread(target=ev.wait)
t.start()
print("ready", flush=True)
t.join()
"""


def start_script(py, tmp_path, text):
    outside, inside = root_workdir(py, tmp_path, "vc-musl")
    with open(os.path.join(outside, "target.py"), "w") as f:
        f.write(text)
    p = subprocess.Popen(py["argv"] + [inside + "/target.py"], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.2)  # every thread in its wait
    return p


@pytest.mark.parametrize("method", ["ptrace", "gdb"])
@MUSL_VERSIONS
def test_idle_musl_target_is_borrowed_in_its_sleep(method, version, tmp_path):
    """Every thread blocked in musl's libc (nanosleep, select): no unwind tables there, so
    each is judged by its syscall, neither of which musl's loader, malloc or pthread_create
    makes.  Before, every frame in ld-musl-x86_64.so.1 counted as "in the dynamic loader", and
    an idle musl service could not be traced at all."""
    py = musl_python(version)
    musl_agent(py)
    p = start_script(py, tmp_path, IDLE)
    try:
        out = tmp_path / "idle.cvf"
        r = run_vcattach("--pid", p.pid, "-t", "1s", "-o", out, "--method", method, "-v")
        assert r.returncode == 0, r.stdout + r.stderr
        assert re.search(r"safe point: thread \d+ blocked in syscall", r.stderr), r.stderr
        names = {e["name"].split(" ")[0] for e in x_events(cvf.load(str(out)))}
        assert {"tick", "wait_once"} <= names, sorted(names)
        assert_running_untraced(p.pid)
    finally:
        p.kill()
        p.wait(10)


def test_musl_target_waiting_only_on_locks_is_refused_untouched(tmp_path):
    """A futex wait in musl's libc may be its loader's or malloc's lock, and without unwind
    tables nothing tells which: a target whose every thread waits on a lock is refused in one
    line, nothing run, the target as it was."""
    py = musl_python()
    musl_agent(py)
    p = start_script(py, tmp_path, LOCKED)
    try:
        r = run_vcattach("--pid", p.pid, "-t", "1s", "-o", tmp_path / "locked.cvf")
        assert r.returncode != 0, r.stdout + r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "in musl libc, not blocked in a syscall it never makes " \
            "under a lock" in lines[0] and "nothing was run" in lines[0], r.stderr
        assert_untouched(p.pid)
        assert not any("libvcagent" in m for m in maps_of(p.pid))
        assert not os.path.exists(tmp_path / "locked.cvf")
    finally:
        p.kill()
        p.wait(10)


# multiprocessing's semaphores are files in /dev/shm; the musl root has an empty /dev (as an
# Alpine image has: the runtime mounts one), so a tmpfs /dev with a /dev/shm is mounted in a
# mount namespace of the tree's own.  "$0" is the root; "$@" execs the interpreter.
WITH_DEV = ('mount -t tmpfs vc-dev "$0/dev" && mkdir "$0/dev/shm" && exec "$@"')


@MUSL_VERSIONS
def test_fork_pool_on_musl_every_worker_has_its_calls(version, tmp_path):
    py = musl_python(version)
    musl_agent(py)
    wrap = ["unshare", "--mount", "--propagation", "private", "sh", "-c", WITH_DEV, py["root"]]
    tree = Pools(py, "fork", tmp_path, wrap=wrap)
    try:
        r, (born, with_calls, expected, found) = trace_pools(tree, str(tmp_path / "pools.cvf"))
        print("musl %s fork: %d workers born during the trace, %d with calls in the trace, "
              "calls expected %d, found %d" % (py["version"], born, with_calls, expected, found))
        assert born >= 2 and expected > 0 and found == expected, r.stdout
        assert_running_untraced(tree.pid)
    finally:
        tree.close()


@MUSL_VERSIONS
def test_self_contained_vcattach_inside_the_musl_container(version, tmp_path):
    """A fully static vcattach (glibc's static libc, no loader, no library: it runs on musl
    too), installed into the container and run there on the service's pid 1, as `docker exec`
    runs it; it picks the -musl agent of its own install."""
    py = musl_python(version)
    musl_agent(py)
    c = CountedContainer(py, tmp_path)
    v = None
    try:
        prefix = install_by_make_install(c)
        vcattach = prefix + "/bin/vcattach"
        r = c.exec([vcattach, "--version"])
        assert r.returncode == 0, r.stdout + r.stderr
        v = subprocess.Popen(c.inside([vcattach, "--pid", "1", "-t", "120s", "-o",
                                       "/tmp/trace.cvf"]),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while c.exec([vcattach, "status", "--pid", "1", "-q"]).returncode != 0:
            assert v.poll() is None, v.communicate()
            assert time.monotonic() < deadline, "no session started"
            time.sleep(0.1)
        with open("/proc/%d/maps" % c.pid) as f:
            assert "%s/lib/vcattach/libvcagent-py%d-musl.so" % (prefix, py["minor"]) in f.read()
        c.go()
        counts = c.counts()
        r = c.exec([vcattach, "stop", "--pid", "1"])
        assert r.returncode == 0, r.stdout + r.stderr
        stdout, stderr = v.communicate(timeout=120)
        assert v.returncode == 0, stdout + stderr
        assert stdout.startswith("vcattach: pid 1 in "), stdout
        trace = cvf.load(c.host_path("/tmp/trace.cvf"))
        traced = counted_per_thread(trace)
        assert traced == counts == {"worker-0": CALLS, "worker-1": CALLS}, (traced, counts)
        c.check_unharmed()
    finally:
        end_all(v, c)

"""vcattach where operators debug services: in containers built on another glibc (issue 32),
on the Debian roots of scripts/test-root that stand for such images:
  bullseye  Debian 11: glibc 2.31, CPython 3.9 (python:*-slim-bullseye, Ubuntu 20.04's glibc)
  trixie    Debian 13: glibc 2.41, CPython 3.13 (today's python:*-slim)

From the host: the agents, built on this machine's newer glibc, load into bullseye's: its
CPython 3.9 traced by ptrace and by gdb, one process (targets/busy_service.py, chrooted) and a
`--subprocesses` tree whose fork pools are born during the trace (targets/fork_pool.py); a
failed dlopen in it says why (its libdl's dlerror text).

Inside: the self-contained vcattach put into a container of each root, as operators do (`make
install DESTDIR=/proc/PID/root PREFIX=/opt/vcattach`; `make dist`'s tarball unpacked there,
`docker cp`), then run inside the service's own mount and pid namespaces (nsenter, as `docker
exec`/`kubectl exec` run it) on its pid 1, with nothing else from the host.

Every target is left running, unstopped and untraced, and the service unharmed (its own
report).  Skipped, with the reason, when a root is not made (`make deps` makes them)."""
import os
import shutil
import subprocess
import time

import pytest

from support.container import ImageContainer, install_by_make_install, make_env
from support.paths import BUILD, ROOT, TESTS, VCATTACH, agent_path, debian_root_python, \
    root_workdir
from support.proc import assert_running_untraced, run_vcattach
from support.service import (assert_unharmed, check_service_threads, check_summary,
                             trace_with_late_thread)
from support.traces import decode, x_events
from vcattach import cvf

BULLSEYE, BULLSEYE_WHY = debian_root_python("bullseye")
TRIXIE, TRIXIE_WHY = debian_root_python("trixie")
INJECT_TEST = os.path.join(BUILD, "inject-test")
TARGETS = os.path.join(TESTS, "targets")


def configured_agent_minors():
    """The minors this machine builds agents for (build/config.mk's AGENT_PYINCS: the minors
    whose headers it has)."""
    try:
        with open(os.path.join(BUILD, "config.mk")) as f:
            for line in f:
                if line.startswith("AGENT_PYINCS :="):
                    return {int(w.split(":")[0]) for w in line.split(":=", 1)[1].split()
                            if w.split(":")[0].isdigit()}
    except OSError:
        pass
    return set()


def with_agent(py):
    """py, once its agent is built; a skip when this machine has no headers of its minor (a
    fresh Debian 12 has 3.11's only: the images' 3.9 and 3.13 agents come from pyenv's here)."""
    if not os.path.exists(agent_path(py["minor"])):
        if py["minor"] not in configured_agent_minors():
            pytest.skip("no agent for %s: this machine has no CPython 3.%d headers to build it "
                        "from (pyenv's 3.%d, say)" % (py["id"], py["minor"] - 300,
                                                      py["minor"] - 300))
        raise AssertionError("no agent for %s: run make" % py["id"])
    return py


def bullseye():
    if BULLSEYE is None:
        pytest.skip(BULLSEYE_WHY)
    return with_agent(BULLSEYE)


@pytest.mark.parametrize("method", ["ptrace", "gdb"])
def test_bullseye_service_traced_from_the_host(method, chroot_service, tmp_path):
    py = bullseye()
    svc = chroot_service(py)
    out = tmp_path / "trace.cvf"
    r = trace_with_late_thread(svc, out, "--method", method)
    events, _, drops = check_summary(r, out)
    assert drops == 0
    check_service_threads(cvf.load(str(out)), events)
    assert_running_untraced(svc.pid)
    assert_unharmed(svc, svc.finish())


# multiprocessing's locks are POSIX semaphores, files in /dev/shm, which a container has (a
# tmpfs) and the bare root has not: one mounted in a mount namespace of the tree's own, so the
# cached root is not changed.  "$0" is the root; every step execs, so the tree's first process
# is the one Popen started.
WITH_SHM = ('mount -t tmpfs vc-shm "$0/dev/shm" && exec chroot "$0" "$@"')


class ForkPoolTree:
    """targets/fork_pool.py under the root's interpreter (with a /dev/shm), in a session of its
    own (killed as a group at the end); .start_pools() lets its pools begin."""

    def __init__(self, py, tmp_path):
        self.outside, inside = root_workdir(py, tmp_path, "vc-tree")
        for target in ("fork_pool.py", "tree_target.py"):
            shutil.copy2(os.path.join(TARGETS, target), self.outside)
        self.p = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", WITH_SHM,
             py["root"], py["path"], inside + "/fork_pool.py", inside + "/go"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.pid = self.p.pid
        line = self.p.stdout.readline()
        assert line.strip() == "ready", self.p.stderr.read()

    def start_pools(self):
        open(os.path.join(self.outside, "go"), "w").close()

    def members(self):
        out = subprocess.run(["ps", "-o", "pid=", "-g", str(self.pid)], capture_output=True,
                             text=True).stdout.split()
        return [int(p) for p in out]

    def close(self):
        try:
            os.killpg(self.pid, 9)
        except ProcessLookupError:
            pass
        self.p.wait(10)


@pytest.mark.parametrize("method", ["ptrace", "gdb"])
def test_bullseye_fork_pool_tree_traced_from_the_host(method, tmp_path):
    py = bullseye()
    tree = ForkPoolTree(py, tmp_path)
    try:
        out = str(tmp_path / "tree.cvf")
        v = subprocess.Popen([VCATTACH, "--pid", str(tree.pid), "--subprocesses", "-t", "3",
                              "-o", out, "--method", method], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while v.poll() is None and time.monotonic() < deadline and \
                    run_vcattach("status", "--pid", tree.pid, "-q").returncode != 0:
                time.sleep(0.05)
            tree.start_pools()  # the workers are forks of a traced process
            stdout, stderr = v.communicate(timeout=120)
        finally:
            if v.poll() is None:
                v.kill()
                v.wait()
        assert v.returncode == 0, stdout + stderr
        pids = {}
        for e in x_events(decode(out)):
            pids.setdefault(e["pid"], []).append(e["name"])
        assert any(n.startswith("run_mp") for n in pids[tree.pid]), sorted(set(pids[tree.pid]))
        workers = [p for p in pids if p != tree.pid and
                   any(n.startswith("mp_work") for n in pids[p])]
        assert workers, stdout + "\npids with events: %s" % sorted(pids)
        for p in tree.members():
            if os.path.exists("/proc/%d" % p):
                assert_running_untraced(p)
    finally:
        tree.close()


@pytest.mark.parametrize("method", ["ptrace", "gdb"])
def test_failed_dlopen_in_bullseye_says_why(method, tmp_path):
    """glibc 2.31 keeps dlerror in libdl: the ptrace method calls libdl's dlopen and dlerror (not
    libc's __libc_dlopen_mode, which drops the text), so a file that is no library comes back
    with the loader's own words."""
    py = bullseye()
    if not os.path.exists(INJECT_TEST):
        pytest.skip("%s is not built: run make test-prereqs" % INJECT_TEST)
    outside, inside = root_workdir(py, tmp_path, "vc-idle")
    with open(os.path.join(outside, "idle.py"), "w") as f:
        f.write("import sys, time\nprint('ready', flush=True)\nwhile True:\n    time.sleep(0.05)\n")
    p = subprocess.Popen(py["argv"] + [inside + "/idle.py"], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        r = subprocess.run([INJECT_TEST, method, str(p.pid), "/etc/passwd", "file:/dev/null"],
                           capture_output=True, text=True, timeout=120)
        assert "dlopen(/etc/passwd) failed in the target: /etc/passwd: invalid ELF header" in \
            r.stdout, r.stdout + r.stderr
        assert_running_untraced(p.pid)
    finally:
        p.kill()
        p.wait(10)


def make_dist():
    """`make dist`: the tarball's path."""
    r = subprocess.run(["make", "-s", "BUILD=" + BUILD, "dist"], cwd=ROOT, env=make_env(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout.strip().splitlines()[-1].split("make dist: ", 1)[1]


def unpack_dist(dest):
    """make dist's tarball unpacked into dest (`tar -xzf` where `docker cp` put it): the path
    of the tree it holds (vcattach-VERSION), relative to dest."""
    tarball = make_dist()
    names = subprocess.run(["tar", "-tzf", tarball], capture_output=True, text=True,
                           check=True).stdout.split()
    top = names[0].split("/")[0]
    assert top + "/bin/vcattach" in names, names
    subprocess.run(["tar", "-xzf", tarball, "-C", dest], check=True)
    return top


def install_by_dist_tarball(c):
    return "/opt/" + unpack_dist(c.host_path("/opt"))


def root_python(root):
    py, why = (BULLSEYE, BULLSEYE_WHY) if root == "bullseye" else (TRIXIE, TRIXIE_WHY)
    if py is None:
        pytest.skip(why)
    return with_agent(py)


@pytest.mark.parametrize("root,install", [("bullseye", install_by_make_install),
                                          ("trixie", install_by_dist_tarball)],
                         ids=["bullseye-make-install", "trixie-make-dist"])
def test_self_contained_vcattach_traces_pid_1_inside_the_container(root, install, tmp_path):
    py = root_python(root)
    c = ImageContainer(py, tmp_path)
    try:
        prefix = install(c)
        vcattach = prefix + "/bin/vcattach"
        r = c.exec([vcattach, "--version"])
        assert r.returncode == 0, r.stdout + r.stderr  # runs on the image's libc: no library
        r = trace_with_late_thread(c, "/tmp/trace.cvf",
                                   command=c.inside([vcattach, "--pid", "1"]))
        check_pid_1_trace(c, r, c.host_path("/tmp/trace.cvf"))
        with open("/proc/%d/maps" % c.pid) as f:  # the installed agent, as the target sees it
            assert "%s/lib/vcattach/libvcagent-py%d.so" % (prefix, py["minor"]) in f.read()
        assert_running_untraced(c.pid)
        assert run_vcattach("status", "--pid", c.pid, "-q").returncode == 1  # no session left
        assert_unharmed(c, c.finish())
    finally:
        c.close()


def check_pid_1_trace(c, r, host_out):
    """The CLI's line names the service as pid 1 (what it is there), nothing dropped, and the
    trace holds every thread of the service with its own work."""
    events, _, drops = check_summary(r, "/tmp/trace.cvf")
    assert r.stdout.startswith("vcattach: pid 1 in "), r.stdout
    assert drops == 0
    check_service_threads(cvf.load(host_out), events)


# `kubectl debug -it POD --target=CONTAINER --profile=general --image=IMAGE`: a container of
# another image in the target's pid namespace (--target), with a mount namespace and root of its
# own.  Here that image is nearly empty: the tarball of `make dist` unpacked and a /proc, which
# the static vcattach needs and nothing else.  "$0" is the debug root.
DEBUG_ENTER = 'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"'


def test_self_contained_vcattach_from_an_ephemeral_debug_container(tmp_path):
    """vcattach in its own root and mount namespace, sharing only the service's pid namespace:
    the agent it loads is copied into the service's /tmp (the service cannot see the debug
    container's files), and the service traced by its pid 1."""
    py = root_python("bullseye")
    c = ImageContainer(py, tmp_path / "service")
    debug_root = tmp_path / "debug-root"
    try:
        for d in ("proc", "tmp", "opt"):
            (debug_root / d).mkdir(parents=True)
        top = unpack_dist(str(debug_root / "opt"))
        command = ["nsenter", "--target", str(c.pid), "--pid", "--", "unshare", "--mount",
                   "--propagation", "private", "--fork", "sh", "-c", DEBUG_ENTER,
                   str(debug_root), "/opt/%s/bin/vcattach" % top, "--pid", "1", "-v"]
        r = trace_with_late_thread(c, "/tmp/trace.cvf", command=command)
        assert "agent copied into the target's mount namespace as /tmp/.vcattach-" in r.stderr, \
            r.stderr
        check_pid_1_trace(c, r, str(debug_root / "tmp" / "trace.cvf"))
        assert_running_untraced(c.pid)
        assert_unharmed(c, c.finish())
    finally:
        c.close()

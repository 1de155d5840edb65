"""Issue 18 #3, #4: the status socket's stale SO_PEERCRED, and the remote-exec loader's
filesystem work done as root across the target's mounts.

#3: a listening socket keeps the pid of whoever called listen().  `nobody` binds the agent's
well-known status name `vcattach-agent-P` from a process with pid P, hands the socket to a
child and exits; the real (root) target then gets pid P (forced with
/proc/sys/kernel/ns_last_pid).  SO_PEERCRED then names the target: vcattach used to refuse the
attach ("already running") and print what the squatter sent for status.  Now the listener
must be one of the target's own fds (or SO_PEERPIDFD, on 6.5+, must name the live target),
and a squatter that never accepts (its backlog full) no longer makes status fail with EAGAIN.

#4: the loader script's directory (created, swept, removed) is now handled by a child in the
target's filesystem with the target's uid and gid, in a /tmp that must be root-owned (as the
target's user namespace maps uid 0) and sticky; a stale-looking directory that is a mount
point is never swept into.
"""
import os
import random
import shutil
import stat
import subprocess
import sys
import time

import pytest

from support.paths import CHROOT_PYTHONS, PYTHONS, SEAMS_VCATTACH, TEST_ROOT, VCATTACH, seams_env

NOBODY = 65534

TARGET = """
import time
print("ready", flush=True)
while True:
    sum(range(1000)); time.sleep(0.005)
"""

# argv[1]: "talk" (accepts and answers every request with its own STATUS and END) or "mute"
# (never accepts; its backlog is filled at once, so a blocking connect() would wait).
SQUATTER = r"""
import os, socket, struct, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0vcattach-agent-%d" % os.getpid())
s.listen(0 if sys.argv[1] == "mute" else 8)
r, w = os.pipe()
child = os.fork()
if child == 0:                      # keeps the socket that its parent (pid P) listened on
    os.close(r)
    held = []
    if sys.argv[1] == "mute":
        for _ in range(3):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.setblocking(False)
            try:
                c.connect("\0vcattach-agent-%d" % os.getppid())
            except OSError:
                pass
            held.append(c)
    os.write(w, b"x")
    os.close(w)
    while True:
        if sys.argv[1] == "mute":
            time.sleep(60)
            continue
        c, _ = s.accept()
        text = b"output=SQUATTER-TEXT\nelapsed_ms=1\n"
        try:
            c.recv(64)
            c.sendall(struct.pack("<II", 5, len(text)) + text)    # STATUS
            c.sendall(struct.pack("<II", 7, len(text)) + text)    # END
        except OSError:
            pass
        c.close()
os.close(w)
os.read(r, 1)
print(os.getpid(), child, flush=True)
"""


def vc(*args, timeout=90):
    return subprocess.run([VCATTACH] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout)


def as_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def spawn_with_pid(pid, argv, **kw):
    """argv started so that it gets pid (the next pid is forced through ns_last_pid; another
    process of the machine may take it first: a few tries)."""
    for _ in range(40):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        p = subprocess.Popen(argv, **kw)
        if p.pid == pid:
            return p
        p.kill()
        p.wait()
    pytest.fail("could not start a process with pid %d" % pid)


@pytest.fixture(params=["talk", "mute"])
def squatted_target(request):
    sq = subprocess.Popen([sys.executable, "-c", SQUATTER, request.param],
                          stdout=subprocess.PIPE, text=True, preexec_fn=as_nobody)
    line = sq.stdout.readline().split()
    sq.wait(10)
    pid, keeper = int(line[0]), int(line[1])
    try:
        t = spawn_with_pid(pid, PYTHONS[-1]["argv"] + ["-c", TARGET], stdout=subprocess.PIPE,
                           text=True)
    except BaseException:
        os.kill(keeper, 9)
        raise
    assert t.stdout.readline().strip() == "ready"
    yield t, request.param
    os.kill(keeper, 9)
    t.kill()
    t.wait()


def test_stale_peercred_squatter_neither_blocks_nor_speaks(squatted_target, tmp_path):
    t, mode = squatted_target
    out = tmp_path / "t.cvf"
    r = vc("--pid", t.pid, "-t", "1s", "-o", out, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "already running" not in r.stderr and "SQUATTER" not in r.stderr
    assert out.stat().st_size > 0

    s_out = tmp_path / "s.cvf"
    r = vc("start", "--pid", t.pid, "-t", "60s", "-o", s_out)
    assert r.returncode == 0, r.stderr
    st = vc("status", "--pid", t.pid, timeout=30)
    assert st.returncode == 0, st.stderr
    assert "SQUATTER" not in st.stdout + st.stderr
    assert "session running in pid %d" % t.pid in st.stdout, st.stdout
    stop = vc("stop", "--pid", t.pid, timeout=60)
    assert stop.returncode == 0, stop.stderr
    assert "SQUATTER" not in stop.stdout + stop.stderr
    assert s_out.stat().st_size > 0
    assert t.poll() is None


# ---- #4: the remote-exec loader's directory -------------------------------------------------

needs_root = pytest.mark.skipif(not CHROOT_PYTHONS, reason="no sid test root (CPython 3.14+)")

SLEEPER = """import time
print("ready", flush=True)
while True:
    time.sleep(0.02)
"""


def chroot_target(user, tmp_path):
    """A 3.14 interpreter of the test root running SLEEPER, as root or as nobody, in its own
    mount namespace with a private root-owned sticky /tmp (tmp_path/ptmp, mounts under it
    included): the test root's /tmp is shared with other runs, whose vcattach (maybe an older
    one) must neither sweep what these tests plant nor be raced by them.  (proc, ptmp)."""
    py = CHROOT_PYTHONS[0]
    priv = tmp_path / "ptmp"
    priv.mkdir(exist_ok=True)
    os.chmod(priv, 0o1777)
    userspec = "--userspec=%d:%d" % (NOBODY, NOBODY) if user == "nobody" else ""
    p = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c",
                          'mount --rbind "$0" "$1/tmp" && exec chroot %s "$1" "$2" -c "$3"'
                          % userspec, str(priv), py["root"], py["argv"][-1], SLEEPER],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")
    line = p.stdout.readline().strip()
    assert line == "ready", (line, p.stderr.read() if p.poll() is not None else "")
    return p, str(priv)


def stop(p):
    if p.poll() is None:
        p.kill()
    p.communicate(timeout=10)


def root_only_dir(tmp_path, name):
    """A root-owned host directory (mode 0700 unless said) holding attach.py: what root must
    never unlink or chmod on the target's behalf."""
    d = tmp_path / name
    d.mkdir()
    (d / "attach.py").write_text("keep")
    os.chmod(d, 0o700)
    return d


def unmount(path):
    subprocess.run(["umount", "-l", path], capture_output=True)
    try:
        os.rmdir(path)
    except OSError:
        pass


@needs_root
@pytest.mark.parametrize("user", ["root", "nobody"])
def test_sweep_never_enters_a_mount(user, tmp_path):
    """#4a: a stale-looking loader directory that is a bind mount of a root-owned host
    directory: its attach.py is still there after an attach (root used to unlink it)."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    host = root_only_dir(tmp_path, "host")
    tmp = tmp_path / "ptmp"
    tmp.mkdir()
    plant = os.path.join(tmp, ".vcattach-rx-%d-%016x" % (gone.pid, random.getrandbits(64)))
    os.mkdir(plant, 0o711)
    t = None
    try:
        subprocess.run(["mount", "--bind", str(host), plant], check=True)
        past = time.time() - 120
        os.utime(plant, (past, past))
        t, _ = chroot_target(user, tmp_path)
        r = vc("--pid", t.pid, "-t", "300ms", "-o", tmp_path / "o.cvf", "--method",
               "remote-exec")
        assert r.returncode == 0, r.stderr
        assert (host / "attach.py").read_text() == "keep"
        assert stat.S_IMODE(os.stat(host).st_mode) == 0o700
    finally:
        if t:
            stop(t)
        unmount(plant)


@needs_root
def test_loader_refuses_a_tmp_not_root_owned_and_sticky(tmp_path):
    """#4b: a target (nobody, in its own mount namespace) whose /tmp is its user's own,
    non-sticky directory: no loader directory is made there; auto falls back to ptrace."""
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    os.chown(hostile, NOBODY, NOBODY)
    os.chmod(hostile, 0o755)
    py = CHROOT_PYTHONS[0]
    t = subprocess.Popen(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         'mount --bind "$0" "$1/tmp" && exec chroot --userspec=%d:%d "$1" "$2" -c "$3"'
         % (NOBODY, NOBODY), str(hostile), py["root"], py["argv"][-1], SLEEPER],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")
    try:
        assert t.stdout.readline().strip() == "ready", t.stderr.read()
        r = vc("--pid", t.pid, "-t", "300ms", "-o", tmp_path / "o.cvf", "-v")
        assert r.returncode == 0, r.stderr
        assert "not root-owned and sticky" in r.stderr and "falling back to ptrace" in r.stderr
        assert "request posted" not in r.stderr, r.stderr
        assert not [n for n in os.listdir(hostile) if n.startswith(".vcattach-rx-")]
    finally:
        stop(t)


@needs_root
@pytest.mark.parametrize("user", ["root", "nobody"])
def test_directory_swapped_for_a_mount_keeps_its_mode(user, tmp_path):
    """#4c: a root-only 0700 directory mounted over the loader directory right after it was
    made (VCATTACH_TEST_RX_PAUSE_MS opens that window): refused, auto falls back to ptrace,
    and the directory keeps its mode (root used to fchmod it to 0711 before any check)."""
    secret = root_only_dir(tmp_path, "secret")
    t, tmp = chroot_target(user, tmp_path)
    inside = os.path.join(CHROOT_PYTHONS[0]["root"], "tmp")   # the private /tmp, in its namespace
    mounted = []
    try:
        p = subprocess.Popen([SEAMS_VCATTACH, "--pid", str(t.pid), "-t", "300ms", "-o",
                              str(tmp_path / "o.cvf"), "-v"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env=seams_env(VCATTACH_TEST_RX_PAUSE_MS="1500"))
        end = time.time() + 20
        while not mounted and time.time() < end and p.poll() is None:
            for n in os.listdir(tmp):
                if not n.startswith(".vcattach-rx-"):
                    continue
                if subprocess.run(["nsenter", "-t", str(t.pid), "-m", "mount", "--bind",
                                   str(secret), os.path.join(inside, n)]).returncode == 0:
                    mounted.append(n)
                    break
            time.sleep(0.002)
        err = p.communicate(timeout=60)[1]
        assert mounted, "no loader directory appeared: %s" % err
        assert p.returncode == 0, err
        assert "falling back to ptrace" in err and "request posted" not in err, err
        assert stat.S_IMODE(os.stat(secret).st_mode) == 0o700
        assert os.stat(secret).st_uid == 0
        assert (secret / "attach.py").read_text() == "keep"
        assert os.listdir(secret) == ["attach.py"]
    finally:
        stop(t)   # its mount namespace, and the mount in it, go with it


# ---- #5: reads of the target's memory are bounded -------------------------------------------

@needs_root
def test_blocking_memory_read_is_bounded(tmp_path):
    """#5: a read of the target's memory that never returns (a FUSE-backed mapping whose daemon
    stalls; VCATTACH_TEST_BLOCKING_READ=dbg makes the reader block so) ends at its deadline:
    remote-exec is refused with a timeout, auto goes on with ptrace."""
    t, _ = chroot_target("nobody", tmp_path)
    env = seams_env(VCATTACH_TEST_BLOCKING_READ="dbg")
    try:
        start = time.time()
        r = subprocess.run([SEAMS_VCATTACH, "--pid", str(t.pid), "--method", "remote-exec", "-t",
                            "300ms", "-o", str(tmp_path / "rx.cvf")], capture_output=True,
                           text=True, timeout=60, env=env)
        assert r.returncode != 0 and "timed out" in r.stderr, r.stderr
        assert time.time() - start < 15
        r = subprocess.run([SEAMS_VCATTACH, "--pid", str(t.pid), "-t", "300ms", "-o",
                            str(tmp_path / "auto.cvf")], capture_output=True, text=True,
                           timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "auto.cvf").stat().st_size > 0
        assert t.poll() is None
    finally:
        stop(t)


def test_blocking_cmdline_read_is_bounded(tmp_path):
    """#5: the tree workflow's read of a member's /proc/PID/cmdline (which reads the target's
    memory) that never returns (VCATTACH_TEST_BLOCKING_READ=cmdline) ends at its deadline:
    the member is named "?" and traced."""
    t = subprocess.Popen(PYTHONS[-1]["argv"] + ["-c", TARGET], stdout=subprocess.PIPE,
                         text=True)
    try:
        assert t.stdout.readline().strip() == "ready"
        start = time.time()
        r = subprocess.run([SEAMS_VCATTACH, "--pid", str(t.pid), "--subprocesses", "-t", "1s", "-v",
                            "-o", str(tmp_path / "tree.cvf")], capture_output=True, text=True,
                           timeout=60, env=seams_env(VCATTACH_TEST_BLOCKING_READ="cmdline"))
        assert r.returncode == 0, r.stderr
        assert time.time() - start < 20
        rows = [ln for ln in r.stdout.splitlines() if ln.strip().startswith("pid %d " % t.pid)]
        assert rows and ": ? " in rows[0] + " ", r.stdout
    finally:
        t.kill()
        t.wait()


def test_blocking_read_during_ptrace_is_bounded(tmp_path):
    """#5: a read of the target's memory by the ptrace method itself (PTRACE_PEEKDATA,
    process_vm_readv, the unwinder's reads) that never returns in the kernel
    (VCATTACH_TEST_BLOCKING_READ=peek makes it block so) is ended by the method's watchdog:
    vcattach exits with one line saying why, within the injection bound plus its grace, and the
    kernel detaches the target, which runs on (not stopped, not traced)."""
    t = subprocess.Popen(PYTHONS[-1]["argv"] + ["-c", TARGET], stdout=subprocess.PIPE,
                         text=True)
    try:
        assert t.stdout.readline().strip() == "ready"
        start = time.time()
        r = subprocess.run([SEAMS_VCATTACH, "--pid", str(t.pid), "--method", "ptrace", "-t", "1s",
                            "-o", str(tmp_path / "p.cvf")], capture_output=True, text=True,
                           timeout=60, env=seams_env(VCATTACH_TEST_BLOCKING_READ="peek"))
        took = time.time() - start
        assert r.returncode == 1, r.stderr
        assert "did not return within" in r.stderr and "runs on" in r.stderr, r.stderr
        assert took < 30, took
        time.sleep(0.2)
        with open("/proc/%d/status" % t.pid) as f:
            status = f.read()
        assert "TracerPid:\t0\n" in status, status
        assert "\nState:\tt" not in status and "\nState:\tT" not in status, status
        assert t.poll() is None
        # and it is still attachable: nothing was left half-done
        r = subprocess.run([VCATTACH, "--pid", str(t.pid), "-t", "300ms", "-o",
                            str(tmp_path / "after.cvf")], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
    finally:
        t.kill()
        t.wait(10)

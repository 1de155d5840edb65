"""Issue 9 #1, #2, #9: a target whose user controls its /tmp, attacking while we attach.

An unprivileged user (created by the suite, idempotently) starts the target in a user+mount
namespace (`unshare -Urm`) where its own directory is bind-mounted over /tmp (owned by it, not
sticky) and the build directory is hidden (so that vcattach must copy the agent into the
target's /tmp; a checkout under /tmp is hidden by the new /tmp already).  A
racer in the same namespace:
  - swaps every vcattach-* entry of that /tmp (the old control directories) with a symlink to
    a root-only host directory of canary files (renameat2 RENAME_EXCHANGE, in a loop, both
    ways), and so one agent copy directory (.vcattach-agent-*) in four;
  - bind-mounts that canary directory over another one in four;
  - and, before any attach, bind-mounts it over the agent copy's old predictable name
    (.vcattach-<FNV-1a of the agent>), where root used to write the agent.
Before the fixes, root's chmod/chown/unlink of the control socket landed on host files through
the swapped symlink (#1), and the agent was written into the bind-mounted host directory (#2).
After 20+ attaches (both methods) the canary files are unchanged (content, mode, owner, the
directory's entries), nothing named vcattach-* is left in the target's /tmp (#9), and the
target is alive and untraced.
"""
import os
import pwd
import random
import shutil
import signal
import stat
import subprocess
import tempfile
import time

import pytest

from support.paths import BUILD, VCATTACH, world_readable

USER = "vcattach-sec"
PYTHON = "/usr/bin/python3.11"   # readable by any user (the pyenv ones live under /root)
AGENT = os.path.join(BUILD, "libvcagent-py311.so")


@pytest.fixture(scope="module")
def sec_user():
    """The unprivileged test user (created once, kept: useradd is idempotent here)."""
    try:
        pw = pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", USER], check=True)
        pw = pwd.getpwnam(USER)
    return pw.pw_uid, pw.pw_gid


RACER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
canary = sys.argv[1].encode()
RENAME_EXCHANGE, MS_BIND, AT_FDCWD = 2, 4096, -100
seen = {}                              # copy directory -> how it is attacked
print("racing", os.getpid(), flush=True)
while True:
    try:
        names = os.listdir("/tmp")
    except OSError:
        continue
    for n in names:
        p = b"/tmp/" + n.encode()
        if n.startswith(".vcattach-agent-") and n not in seen:
            # one copy in four: the canary mounted over it; one in four: swapped with a
            # symlink to it, as below; the others are left alone so that attaches go on
            seen[n] = ("mount", "swap", None, None)[len(seen) % 4]
            if seen[n] == "mount":
                libc.mount(canary, p, None, MS_BIND, None)
        if (n.startswith("vcattach-") or seen.get(n) == "swap") and not os.path.islink(p):
            link = b"/tmp/.swap-" + n.encode()
            try:
                os.symlink(canary, link)
            except OSError:
                pass
            libc.renameat2(AT_FDCWD, link, AT_FDCWD, p, RENAME_EXCHANGE)
            libc.renameat2(AT_FDCWD, link, AT_FDCWD, p, RENAME_EXCHANGE)
"""

TARGET = r"""
import threading, time
def spin():
    while True:
        sum(range(1000)); time.sleep(0.002)
threading.Thread(target=spin, name="worker", daemon=True).start()
print("ready", flush=True)
while True:
    time.sleep(0.01)
"""


def fnv1a64(data):
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def snapshot(d):
    out = {}
    for n in sorted(os.listdir(d)):
        st = os.lstat(os.path.join(d, n))
        data = open(os.path.join(d, n), "rb").read() if stat.S_ISREG(st.st_mode) else None
        out[n] = (st.st_mode, st.st_uid, st.st_gid, data)
    st = os.lstat(d)
    return (st.st_mode, st.st_uid, st.st_gid), out


def readable_by(uid, gid, path):
    """Whether that user can read path (every directory on the way searchable)."""
    def as_user():
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    return subprocess.run(["test", "-r", path], preexec_fn=as_user).returncode == 0


def agent_for(uid, gid):
    """(environment for vcattach, the directory of the agent it uses).  A checkout the user
    cannot read (root's 0700 home) is refused by vcattach with advice to point
    VCATTACH_AGENT_DIR at a world-readable copy: so do that, as an operator would."""
    if readable_by(uid, gid, AGENT):
        return None, os.path.realpath(BUILD)
    copy = world_readable(AGENT)
    return dict(os.environ, VCATTACH_AGENT_DIR=os.path.dirname(copy)), os.path.dirname(copy)


@pytest.fixture
def hostile(sec_user):
    if not os.path.exists(AGENT):
        pytest.skip("%s not built" % AGENT)
    uid, gid = sec_user
    # root's, 0700, outside /tmp (which the target replaces) ...
    base = tempfile.mkdtemp(prefix="vcsec-", dir="/var/tmp")
    os.chmod(base, 0o755)                              # ... but traversable by the user
    home = os.path.join(base, "home")                  # the user's: becomes the target's /tmp
    empty = os.path.join(base, "empty")                # hides the agent's build directory
    for d in (home, empty):
        os.mkdir(d, 0o755)
        os.chown(d, uid, gid)
    canary = os.path.join(base, "canary")              # root-only host files
    os.mkdir(canary, 0o700)
    for name in ("ctl", "libvcagent-py311.so", "secret"):
        with open(os.path.join(canary, name), "w") as f:
            f.write("canary %s\n" % name)
        os.chmod(os.path.join(canary, name), 0o600)
    before = snapshot(canary)
    with open(AGENT, "rb") as f:
        old_copy = ".vcattach-%016x" % fnv1a64(f.read())
    with open(os.path.join(base, "racer.py"), "w") as f:
        f.write(RACER)
    with open(os.path.join(base, "target.py"), "w") as f:
        f.write(TARGET)
    # The agent's directory, hidden from the target (under /tmp it is hidden by the new /tmp)
    env, agent_dir = agent_for(uid, gid)
    hide = "" if agent_dir.startswith("/tmp/") else "mount --bind {empty} '%s'; " % agent_dir
    script = ("set -e; mount --bind {home} /tmp; " + hide +
              "mkdir /tmp/{old}; mount --bind {canary} /tmp/{old}; "
              "{py} {base}/racer.py {canary} & "
              "exec {py} {base}/target.py").format(home=home, empty=empty, old=old_copy,
                                                   canary=canary, py=PYTHON, base=base)

    def as_user():
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    errlog = open(os.path.join(base, "stderr"), "w+")
    t = subprocess.Popen(["unshare", "-Urm", "sh", "-c", script], stdout=subprocess.PIPE,
                         stderr=errlog, text=True, preexec_fn=as_user, start_new_session=True)
    # "racing PID" (the racer, started first) and "ready" (the target) in either order
    lines = [t.stdout.readline().split(), t.stdout.readline().split()]
    racer = [int(w[1]) for w in lines if len(w) == 2 and w[0] == "racing"]
    if not racer or ["ready"] not in lines:
        # the whole group (start_new_session): a racer whose line was not read is in it too,
        # and would otherwise spin on for the rest of the run
        for kill, pid in [(os.killpg, t.pid)] + [(os.kill, r) for r in racer]:
            try:
                kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        t.wait()
        errlog.seek(0)
        err = errlog.read()
        shutil.rmtree(base, ignore_errors=True)
        pytest.skip("cannot start a user+mount namespace target: %s" % err.strip())
    yield t, home, canary, before, env
    for pid in (racer[0], t.pid):  # by id: the racer and the target, both ours
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.killpg(t.pid, signal.SIGKILL)  # and anything else the script started
    except ProcessLookupError:
        pass
    t.wait()
    errlog.close()
    subprocess.run(["umount", "-l", os.path.join(home, old_copy)], capture_output=True)
    shutil.rmtree(base, ignore_errors=True)


def proc_status(pid):
    with open("/proc/%d/status" % pid) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def test_hostile_tmp_and_racer_cannot_touch_host_files(hostile, tmp_path):
    t, home, canary, before, env = hostile
    assert proc_status(t.pid)["Uid"].split()[0] != "0"
    ok = copied = 0
    errs = []
    runs = [("ptrace", i) for i in range(20)] + [("gdb", i) for i in range(4)]
    for method, i in runs:
        out = tmp_path / ("%s-%d.cvf" % (method, i))
        r = subprocess.run([VCATTACH, "--pid", str(t.pid), "-t", "200ms", "-o", str(out),
                            "--method", method, "-v"],
                           capture_output=True, text=True, timeout=120, env=env)
        # copied, or the copy an earlier attach left loaded reused
        copied += ("agent copied into the target's mount namespace" in r.stderr or
                   "agent already loaded in the target as /tmp/.vcattach-" in r.stderr)
        # the racer may make an attach fail (its copy directory mounted over): never succeed
        # through the host's files
        ok += r.returncode == 0
        errs.append(r.stderr)
        assert snapshot(canary) == before, "host canary changed after %s attach %d" % (
            method, i)
        assert t.poll() is None, "target died after %s attach %d: %s" % (method, i, r.stderr)
        st = proc_status(t.pid)
        assert st["TracerPid"].strip() == "0" and st["State"][0] in "RS", st
    assert ok >= 6, "\n".join(errs[:4]) + "\nmany attaches should succeed (%d of %d)" % (
        ok, len(runs))
    assert copied >= ok, "the agent was visible to the target: nothing to attack (%d copies)" % (
        copied)
    left = [n for n in os.listdir(home) if n.startswith("vcattach-")]
    assert left == [], left


def test_kill9_before_the_agent_connects_leaves_nothing(hostile, tmp_path):
    """#9: kill -9 of vcattach at random instants of the attach: no vcattach-* in the target's
    /tmp afterwards (the control socket is an abstract name: nothing to leave)."""
    t, home, canary, before, env = hostile
    rnd = random.Random(9)
    for i in range(10):
        p = subprocess.Popen([VCATTACH, "--pid", str(t.pid), "-t", "200ms", "-o",
                              str(tmp_path / ("k%d.cvf" % i)), "-q"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        time.sleep(rnd.uniform(0.0, 0.03))
        p.kill()
        p.wait()
        time.sleep(0.2)
    assert [n for n in os.listdir(home) if n.startswith("vcattach-")] == []
    assert snapshot(canary) == before


def test_start_status_stop_in_a_user_namespace(sec_user, tmp_path):
    """A target in its own user namespace (`unshare -Urm`, as rootless containers run) sees root
    as the overflow uid, and its agent answers only root or its own user: `status`, `stop` and
    the preflight's "already running" check must still find the session (they ask as the
    target's user)."""
    if not os.path.exists(AGENT):
        pytest.skip("%s not built" % AGENT)
    uid, gid = sec_user
    base = tempfile.mkdtemp(prefix="vcuns-", dir="/var/tmp")
    try:
        os.chmod(base, 0o755)
        with open(os.path.join(base, "target.py"), "w") as f:
            f.write(TARGET)
        out_dir = os.path.join(base, "out")           # the agent writes as the target's user
        os.mkdir(out_dir, 0o755)
        os.chown(out_dir, uid, gid)

        def as_user():
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
        # its own mount namespace too, so that the agent is copied to it when the checkout is
        # out of its reach (root's 0700 home)
        t = subprocess.Popen(["unshare", "-Urm", PYTHON, os.path.join(base, "target.py")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=as_user)
        try:
            if t.stdout.readline().strip() != "ready":
                t.kill()
                pytest.skip("cannot start a user namespace target: %s" % t.communicate()[1])
            assert os.readlink("/proc/%d/ns/user" % t.pid) != os.readlink("/proc/self/ns/user")
            out = os.path.join(out_dir, "s.cvf")

            env, _ = agent_for(uid, gid)

            def vc(*args):
                return subprocess.run([VCATTACH] + [str(a) for a in args], env=env,
                                      capture_output=True,
                                      text=True, timeout=120)
            r = vc("start", "--pid", t.pid, "-t", "60s", "-o", out)
            assert r.returncode == 0, r.stderr
            st = vc("status", "--pid", t.pid)
            assert st.returncode == 0 and "session running in pid %d" % t.pid in st.stdout, \
                (st.stdout, st.stderr)
            again = vc("start", "--pid", t.pid, "-t", "60s", "-o", out + ".2")
            assert again.returncode == 2 and "already running" in again.stderr, again.stderr
            stop = vc("stop", "--pid", t.pid)
            assert stop.returncode == 0, stop.stderr
            assert os.path.getsize(out) > 0 and os.stat(out).st_uid == uid
            gone = vc("status", "--pid", t.pid)
            assert gone.returncode == 1 and "no session" in gone.stdout, gone.stdout
            assert t.poll() is None
            st = proc_status(t.pid)
            assert st["TracerPid"].strip() == "0" and st["State"][0] in "RS", st
        finally:
            t.kill()
            t.wait()
    finally:
        shutil.rmtree(base, ignore_errors=True)

"""Issue 18: a traced tree's members and strangers against a root vcattach (`--subprocesses`).

Every member of a tree (any descendant of the traced process) and every other local user is
untrusted.  Attackers run as nobody (65534) against a root vcattach:

  * a descendant that answers `stop --subprocesses` on the agent's status name with an END
    whose output= is the name vcattach chose for it, where it has put a symlink to a root-only
    trace or a FIFO: root used to open it (following the link, or blocking forever), merge it
    into a 0644 file and unlink it.  Now stop opens parts O_NOFOLLOW|O_NONBLOCK in OUT's
    directory, only regular files of the member's user, copied with pread;
  * a member that truncates its own (valid) part as soon as root opens it: root used to map
    it and die of SIGBUS; now it merges a private copy;
  * a stranger that gets the pid of a skipped non-Python helper of the tree once it exited
    (the harness forces the reuse through /proc/sys/kernel/ns_last_pid) and connects to the
    tree's control socket: it used to receive CONFIG (the session token included) as a "fork
    child".  Now a member is bound to its start time and a stranger must descend from the
    tree;
  * the descendants walk (injector/proc_tree.c) on a synthetic 30 000-process table: was
    O(n^2), 0.8 s per 100 ms scan; its count of steps must grow as n log n;
  * a member that sends (or, for `start`, writes) a part that is not a .cvf: the merge used to
    fail as a whole, leaving every member's trace unmerged; now that part is named and left
    out, the others merged;
  * a member that plants OUT or OUT.tmp (a symlink to a root-only file, a file of its own) in
    the shared directory where root's merged trace goes, before or while `stop` merges: not
    written over (stop used to replace a file planted after it had seen OUT absent);
  * a member that starts many short-lived non-Python helpers: the member table forgets the
    gone ones (test-only VCATTACH_TEST_VERBOSE_KEEP lowers -v's bound so that a test sees it).
"""
import math
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import time

import pytest

from support.cvf_writer import write_cvf
from support.paths import (TESTS, BUILD, PYTHONS, SEAMS_VCATTACH, VCATTACH, agents_for_all,
                           seams_env, world_readable)
from support.proc import NOBODY, as_user
from support.traces import decode
from support.tree_root import PERL_MEMBER, SYSTEM_PY, TreeRoot, ctl_names, wait_for

# Its targets run as nobody: the agents where nobody reaches them (a clone under /root: a copy).
pytestmark = pytest.mark.usefixtures("agents_for_all")
_ = agents_for_all  # the fixture, imported for pytest to find

MARK = 777777  # the pid inside the root-only trace: never to be found in a merged file

# A member that answers STOP on the agent's status name: output= the name vcattach chose for
# it (OUT.PID.cvf), where it put a symlink (argv[3]) or a FIFO first.
HOSTILE_MEMBER = r"""
import os, socket, struct, sys
out_stem, kind, target, ready = sys.argv[1:5]
me = os.getpid()
part = "%s.%d.cvf" % (out_stem, me)
if kind == "symlink":
    os.symlink(target, part)
else:
    os.mkfifo(part, 0o666)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0vcattach-agent-%d" % me)
s.listen(4)
with open(ready + ".new", "w") as f:
    f.write(str(me))
os.rename(ready + ".new", ready)
while True:
    c, _ = s.accept()
    head = c.recv(8)
    end = ("status=0\noutput=%s\nevents=1\nthreads=1\ndrops=0\n" % part).encode()
    c.sendall(struct.pack("<II", 7, len(end)) + end)   # END
    c.close()
"""

# A member whose part (OUT.PID.cvf, a regular file of its own: it passes every check) is a
# large valid trace that it truncates as soon as root opens it (inotify IN_OPEN): a root that
# mmaps it and reads on dies of SIGBUS.
TRUNCATING_MEMBER = r"""
import ctypes, os, socket, struct, sys, time, zlib, json
out_stem, ready = sys.argv[1:3]
me = os.getpid()
part = "%s.%d.cvf" % (out_stem, me)
n = 100000
groups = []
for g in range(100):
    head = b"\x01" + struct.pack("<QQ", me, me) + b"f%d\0" % g
    groups.append(head + struct.pack("<QQq", n, 0, 1000) + b"\x04" + b"\x04\x04" * (n - 1))  # varint 1
blob = zlib.compress(b"[]")
with open(part, "wb") as f:
    f.write(struct.pack("<Q", 1) + b"".join(groups))
    f.write(b"\x05" + struct.pack("<QQ", 2, len(blob)) + blob)
libc = ctypes.CDLL(None, use_errno=True)
ino = libc.inotify_init()
libc.inotify_add_watch(ino, part.encode(), 0x20)          # IN_OPEN
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0vcattach-agent-%d" % me)
s.listen(4)
with open(ready + ".new", "w") as f:
    f.write(str(me))
os.rename(ready + ".new", ready)
c, _ = s.accept()
c.recv(8)
end = ("status=0\noutput=%s\nevents=1\nthreads=1\ndrops=0\n" % part).encode()
c.sendall(struct.pack("<II", 7, len(end)) + end)        # END
c.close()
os.read(ino, 4096)                                      # root opened the part
time.sleep(0.01)
os.truncate(part, 0)
time.sleep(30)
"""

# A stranger that connects to the tree's control socket and says HELLO: prints what it got.
STRANGER = r"""
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(4)
s.connect("\0" + sys.argv[1])
hello = b"pid=0\nversion=1\n"
try:
    s.sendall(struct.pack("<II", 1, len(hello)) + hello)     # HELLO
    head = s.recv(8)
    print("CONFIG" if len(head) == 8 and struct.unpack("<II", head)[0] == 2 else "refused")
except OSError:                                           # closed on us: turned away
    print("refused")
"""


@pytest.fixture
def shared_dir():
    """A /tmp-like directory (1777) the operator writes OUT into."""
    d = tempfile.mkdtemp(prefix="vc-shared-", dir="/tmp")
    os.chmod(d, 0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_stop_opens_no_part_a_member_planted(tmp_path, shared_dir, kind):
    secret_dir = tmp_path / "root-only"
    secret_dir.mkdir(mode=0o700)
    secret = str(secret_dir / "secret.cvf")
    write_cvf(secret, [(MARK, 1, "secret_function", 0, 1000)], {(MARK, 1): "MainThread"})
    os.chmod(secret, 0o600)
    spec = os.path.join(shared_dir, "spawn")
    tree = TreeRoot(SYSTEM_PY, spec, user=NOBODY)
    stop = None
    try:
        out = os.path.join(shared_dir, "out.cvf")
        r = subprocess.run([VCATTACH, "start", "--pid", str(tree.pid), "--subprocesses", "-t",
                            "60s", "-o", out], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        ready = os.path.join(shared_dir, "hostile.ready")
        tree.spawn([SYSTEM_PY, "-c", HOSTILE_MEMBER, out[:-4], kind, secret, ready])
        hostile = int(wait_for(lambda: os.path.exists(ready) and open(ready).read(), 10,
                               "the hostile member"))
        stop = subprocess.Popen([VCATTACH, "stop", "--pid", str(tree.pid), "--subprocesses"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            so, se = stop.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            stop.kill()
            stop.communicate()
            pytest.fail("stop --subprocesses blocked on the member's %s" % kind)
        assert stop.returncode == 1, (so, se)
        assert "out.%d.cvf" % hostile in se and "not merged" in se, se
        assert os.path.exists(out), (so, se)  # the real part is merged
        pids = {e.get("pid") for e in decode(out)}
        assert tree.pid in pids and MARK not in pids
        assert not os.path.exists(out + ".tmp")
        assert os.path.lexists(os.path.join(shared_dir, "out.%d.cvf" % hostile))  # not ours
        assert os.stat(secret).st_mode & 0o777 == 0o600
    finally:
        tree.close()


def test_part_truncated_while_merged_cannot_sigbus(tmp_path, shared_dir):
    spec = os.path.join(shared_dir, "spawn")
    tree = TreeRoot(SYSTEM_PY, spec, user=NOBODY)
    try:
        out = os.path.join(shared_dir, "out.cvf")
        r = subprocess.run([VCATTACH, "start", "--pid", str(tree.pid), "--subprocesses", "-t",
                            "60s", "-o", out], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        ready = os.path.join(shared_dir, "member.ready")
        tree.spawn([SYSTEM_PY, "-c", TRUNCATING_MEMBER, out[:-4], ready])
        wait_for(lambda: os.path.exists(ready), 60, "the truncating member")
        s = subprocess.run([VCATTACH, "stop", "--pid", str(tree.pid), "--subprocesses"],
                           capture_output=True, text=True, timeout=120)
        assert s.returncode in (0, 1), (s.returncode, s.stdout, s.stderr)  # not -SIGBUS
        assert not os.path.exists(out + ".tmp")
    finally:
        tree.close()


def take_pid(pid, argv):
    """Starts argv as nobody with pid `pid` (ns_last_pid = pid - 1 right before the fork), or
    returns None if another process took it first."""
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(pid - 1))
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, preexec_fn=as_user(NOBODY),
                         cwd="/")
    if p.pid == pid:
        return p
    p.kill()
    p.wait()
    return None


def test_reused_pid_of_a_skipped_helper_gets_no_config(tmp_path):
    shared = [p for p in PYTHONS if p["kind"] != "static"]
    if not shared:
        pytest.skip("needs a CPython with a shared libpython (pyenv's, say); this machine has "
                    "only %s" % ", ".join(p["id"] for p in PYTHONS))
    py = shared[-1]
    spec = str(tmp_path / "spawn")
    tree = TreeRoot(py["argv"][0], spec)
    trace = None
    try:
        before = ctl_names()
        out = str(tmp_path / "tree.cvf")
        trace = subprocess.Popen([VCATTACH, "--pid", str(tree.pid), "--subprocesses", "-t",
                                  "25s", "-o", out], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        name = wait_for(lambda: ctl_names() - before, 20, "the tree's control socket").pop()
        got = None
        for attempt in range(6):
            kids = lambda: set(subprocess.run(["ps", "-o", "pid=", "--ppid", str(tree.pid)],
                                              capture_output=True, text=True).stdout.split())
            had = kids()
            tree.spawn(["/bin/sleep", "0.4"])  # a non-Python helper: skipped, then gone
            helper = int(wait_for(lambda: kids() - had, 5, "the helper").pop())
            wait_for(lambda: not os.path.exists("/proc/%d" % helper), 5, "the helper's exit")
            time.sleep(0.3)  # vcattach's 100 ms scan has seen it gone
            got = take_pid(helper, [SYSTEM_PY, "-c", STRANGER, name])
            if got is not None:
                break
        if got is None:
            pytest.skip("could not get a freed pid back (a busy machine)")
        said = got.communicate(timeout=15)[0].strip()
        assert said == "refused", said
        assert trace.poll() is None  # the trace goes on
    finally:
        if trace is not None:
            trace.send_signal(signal.SIGINT)
            try:
                trace.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                trace.kill()
                trace.communicate()
        tree.close()


# A member that answers STOP on the agent's status name with the name vcattach chose for its
# part (OUT.PID.cvf), a regular file of its own that passes every check, but not a .cvf.
MALFORMED_PART_MEMBER = r"""
import os, socket, struct, sys
out_stem, ready = sys.argv[1:3]
me = os.getpid()
part = "%s.%d.cvf" % (out_stem, me)
with open(part, "wb") as f:
    f.write(struct.pack("<Q", 1) + b"\x01" + b"\xff" * 64)   # a header, then no record
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0vcattach-agent-%d" % me)
s.listen(4)
with open(ready + ".new", "w") as f:
    f.write(str(me))
os.rename(ready + ".new", ready)
while True:
    c, _ = s.accept()
    c.recv(8)
    end = ("status=0\noutput=%s\nevents=1\nthreads=1\ndrops=0\n" % part).encode()
    c.sendall(struct.pack("<II", 7, len(end)) + end)   # END
    c.close()
"""

# A member of a `--subprocesses` trace that is no Python process (vcattach skips it, so it is
# not injected) and speaks the agent's side of the control socket itself: HELLO, STARTED
# once it has its CONFIG, and at STOP a DATA frame that is not a .cvf, then a clean END.
MALFORMED_DATA_MEMBER = PERL_MEMBER + r"""
my ($ready) = @ARGV;
sendf(1, "pid=$$\nversion=1\n");                              # HELLO
my $t = recvf();
die "no CONFIG\n" unless defined $t && $t == 2;
sendf(3, "");                                                 # STARTED
open(my $f, '>', "$ready.new") or die; print $f $$; close $f; rename("$ready.new", $ready);
do { $t = recvf() } while (defined $t && $t != 4);            # ... until STOP
sendf(9, pack("VV", 0, 1000) . ("\0" x 24));                  # CHUNK: 1000 records, holds one
sendf(7, "status=0\nevents=1\nthreads=1\ndrops=0\n");         # END
sleep 30;
"""


def test_malformed_part_does_not_sink_the_stop_merge(shared_dir):
    spec = os.path.join(shared_dir, "spawn")
    tree = TreeRoot(SYSTEM_PY, spec, user=NOBODY)
    try:
        out = os.path.join(shared_dir, "out.cvf")
        r = subprocess.run([VCATTACH, "start", "--pid", str(tree.pid), "--subprocesses", "-t",
                            "60s", "-o", out], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        ready = os.path.join(shared_dir, "member.ready")
        tree.spawn([SYSTEM_PY, "-c", MALFORMED_PART_MEMBER, out[:-4], ready])
        hostile = int(wait_for(lambda: os.path.exists(ready) and open(ready).read(), 10,
                               "the member with a malformed part"))
        s = subprocess.run([VCATTACH, "stop", "--pid", str(tree.pid), "--subprocesses"],
                           capture_output=True, text=True, timeout=120)
        assert s.returncode == 1, (s.stdout, s.stderr)  # incomplete: one part is not merged
        said = [l for l in s.stderr.splitlines() if "pid %d" % hostile in l]
        assert len(said) == 1 and "malformed" in said[0] and "not merged" in said[0], s.stderr
        assert os.path.exists(out), (s.stdout, s.stderr)  # the good part is merged
        pids = {e.get("pid") for e in decode(out)}
        assert tree.pid in pids and hostile not in pids
        assert not os.path.exists("%s.%d.cvf" % (out[:-4], tree.pid))  # merged: removed
        assert os.path.exists("%s.%d.cvf" % (out[:-4], hostile))  # left out: it stays
        assert "1 processes traced" in s.stdout, s.stdout
    finally:
        tree.close()


def test_malformed_data_does_not_sink_the_trace_merge(tmp_path, shared_dir):
    perl = shutil.which("perl")
    if perl is None:
        pytest.skip("no perl: the fake member is a Perl script")
    spec = os.path.join(shared_dir, "spawn")
    tree = TreeRoot(SYSTEM_PY, spec, user=NOBODY)
    trace = None
    try:
        before = ctl_names()
        out = str(tmp_path / "tree.cvf")
        trace = subprocess.Popen([VCATTACH, "--pid", str(tree.pid), "--subprocesses", "-t",
                                  "60s", "-o", out], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        name = wait_for(lambda: ctl_names() - before, 20, "the tree's control socket").pop()
        ready = os.path.join(shared_dir, "member.ready")
        tree.spawn([perl, "-e", MALFORMED_DATA_MEMBER, name, ready])
        hostile = int(wait_for(lambda: os.path.exists(ready) and open(ready).read(), 20,
                               "the fake member's STARTED"))
        trace.send_signal(signal.SIGINT)
        so, se = trace.communicate(timeout=120)
        # a member whose stream is malformed is a lost member: the trace of the others is
        # written and the summary counts it lost (the tree's convention for lost members)
        assert trace.returncode == 0, (so, se)
        listed = [l for l in so.splitlines() if l.startswith("  pid %d " % hostile)]
        assert "1 lost" in so and len(listed) == 1 and " lost: " in listed[0], so
        assert "broke the protocol" in listed[0] and "CHUNK length" in listed[0], so
        pids = {e.get("pid") for e in decode(out)}
        assert tree.pid in pids and hostile not in pids
    finally:
        if trace is not None and trace.poll() is None:
            trace.kill()
            trace.communicate()
        tree.close()


@pytest.fixture(scope="module")
def window_member(tmp_path_factory):
    """tests/security/window_member.c built once (a member passing a hostile window)."""
    d = tmp_path_factory.mktemp("window-member")
    os.chmod(str(d), 0o755)
    exe = str(d / "window_member")
    here = TESTS
    subprocess.run(["cc", "-O1", "-I", os.path.join(os.path.dirname(here), "common"), "-o",
                    exe, os.path.join(here, "security", "window_member.c")], check=True)
    return world_readable(exe)  # run as nobody


@pytest.mark.parametrize("kind", ["fifo", "garbage", "lying", "chunks", "shrink"])
def test_hostile_window_is_read_safely(shared_dir, window_member, kind):
    """A member's agent passes the memfd it records into (its window), which vcattach reads
    when the member ends without END.  A `nobody` member that is not Python passes a pipe (a
    read would block), random bytes, a head that claims 2^40 chunks, chunks of impossible
    owners, counts and ids, or a memfd cut to its head while vcattach reads it: the trace of
    the tree is written, vcattach neither hangs nor dies, the member is accounted for."""
    exe = VCATTACH
    spec = os.path.join(shared_dir, "spawn")
    tree = TreeRoot(SYSTEM_PY, spec, user=NOBODY)
    trace = None
    try:
        before = ctl_names()
        out = os.path.join(shared_dir, "tree.cvf")
        trace = subprocess.Popen([exe, "--pid", str(tree.pid), "--subprocesses", "-t", "60s",
                                  "-o", out, "-v"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        name = wait_for(lambda: ctl_names() - before, 20, "the tree's control socket").pop()
        ready = os.path.join(shared_dir, "member.ready")
        tree.spawn([window_member, name, ready, kind])
        hostile = int(wait_for(lambda: os.path.exists(ready) and open(ready).read(), 20,
                               "the fake member's STARTED"))
        wait_for(lambda: not os.path.exists("/proc/%d" % hostile), 20, "the member's end")
        time.sleep(0.5)  # its connection's end and its window are taken
        assert trace.poll() is None, trace.communicate()
        trace.send_signal(signal.SIGINT)
        so, se = trace.communicate(timeout=120)
        assert trace.returncode == 0, (so, se)
        listed = [l for l in so.splitlines() if l.startswith("  pid %d " % hostile)]
        assert len(listed) == 1, so
        assert tree.pid in {e.get("pid") for e in decode(out)}
        if kind in ("fifo", "garbage", "lying"):
            assert "its window could not be read" in se, se
    finally:
        if trace is not None and trace.poll() is None:
            trace.kill()
            trace.communicate()
        tree.close()


def as_nobody_run(code, *args):
    r = subprocess.run([SYSTEM_PY, "-c", code] + list(args), preexec_fn=as_user(NOBODY),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


PLANT = r"""
import os, sys
kind, path, target = sys.argv[1:4]
if kind == "symlink":
    os.symlink(target, path)
else:
    with open(path, "w") as f:
        f.write("nobody's own file\n")
"""


def wait_closed_after_read(watch, name, timeout):
    """Waits until the file `name` of the directory that the inotify fd `watch` watches
    (IN_CLOSE_NOWRITE) was opened for reading and closed."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ready, _, _ = select.select([watch], [], [], max(0, end - time.monotonic()))
        if not ready:
            break
        data = os.read(watch, 65536)
        while data:
            _, mask, _, n = struct.unpack("iIII", data[:16])
            if mask & 0x10 and data[16:16 + n].rstrip(b"\0").decode() == name:
                return
            data = data[16 + n:]
    raise AssertionError("timed out waiting for a read of " + name)


def dir_watch(path):
    """An inotify fd watching the directory path for files closed after a read."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    assert fd >= 0 and libc.inotify_add_watch(fd, path.encode(), 0x10) >= 0  # IN_CLOSE_NOWRITE
    return fd


def planted_state(path):
    st = os.lstat(path)
    what = os.readlink(path) if os.path.islink(path) else open(path).read()
    return st.st_ino, st.st_uid, what


@pytest.mark.parametrize("when,kind", [("stop", "symlink"), ("stop", "file"),
                                       ("stop", "tmp-symlink"), ("stop-race", "symlink"),
                                       ("stop-race", "file"), ("trace", "symlink"),
                                       ("trace", "file")])
def test_merged_out_is_not_written_over_a_planted_file(tmp_path, shared_dir, when, kind):
    """`nobody` plants OUT (or OUT.tmp) in the shared directory where root's merged trace is
    to go, as a symlink to a root-only file or as a file of its own: after `stop
    --subprocesses` (OUT recorded by `start`; planted before it, or once it has looked at OUT
    and is merging: the window the test-only VCATTACH_TEST_MERGE_PAUSE_MS widens, where stop
    used to replace it) or at the end of `--subprocesses -o OUT`, what was planted is still
    there unchanged and the root-only file is untouched."""
    secret_dir = tmp_path / "root-only"
    secret_dir.mkdir(mode=0o700)
    secret = str(secret_dir / "secret")
    with open(secret, "w") as f:
        f.write("root's own\n")
    os.chmod(secret, 0o600)
    spec = os.path.join(shared_dir, "spawn")
    tree = TreeRoot(SYSTEM_PY, spec, user=NOBODY)
    trace = None
    out = os.path.join(shared_dir, "out.cvf")
    at = out + ".tmp" if kind == "tmp-symlink" else out
    try:
        if when == "stop":
            r = subprocess.run([VCATTACH, "start", "--pid", str(tree.pid), "--subprocesses",
                                "-t", "60s", "-o", out], capture_output=True, text=True,
                               timeout=120)
            assert r.returncode == 0, r.stderr
            as_nobody_run(PLANT, kind.replace("tmp-", ""), at, secret)
            planted = planted_state(at)
            s = subprocess.run([VCATTACH, "stop", "--pid", str(tree.pid), "--subprocesses"],
                               capture_output=True, text=True, timeout=120)
            so, se, rc = s.stdout, s.stderr, s.returncode
        elif when == "stop-race":
            r = subprocess.run([VCATTACH, "start", "--pid", str(tree.pid), "--subprocesses",
                                "-t", "60s", "-o", out], capture_output=True, text=True,
                               timeout=120)
            assert r.returncode == 0, r.stderr
            watch = dir_watch(shared_dir)
            stop = subprocess.Popen([SEAMS_VCATTACH, "stop", "--pid", str(tree.pid),
                                     "--subprocesses"], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True,
                                    env=seams_env(VCATTACH_TEST_MERGE_PAUSE_MS="2000"))
            try:  # stop copies the root's part (written at STOP), then looks at OUT
                wait_closed_after_read(watch, "out.%d.cvf" % tree.pid, 60)
            finally:
                os.close(watch)
            time.sleep(0.5)  # stop has looked at OUT (absent) and pauses before writing it
            as_nobody_run(PLANT, kind, at, secret)
            planted = planted_state(at)
            so, se = stop.communicate(timeout=120)
            rc = stop.returncode
        if when.startswith("stop"):
            # nothing merged anywhere else: the parts stay for a merge by hand
            assert os.path.exists("%s.%d.cvf" % (out[:-4], tree.pid)), (so, se)
        else:
            before = ctl_names()
            trace = subprocess.Popen([VCATTACH, "--pid", str(tree.pid), "--subprocesses", "-t",
                                      "60s", "-o", out], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
            wait_for(lambda: ctl_names() - before, 20, "the tree's control socket")
            as_nobody_run(PLANT, kind, at, secret)
            planted = planted_state(at)
            trace.send_signal(signal.SIGINT)
            so, se = trace.communicate(timeout=120)
            rc = trace.returncode
            # the trace is kept in root's own OUT.tmp, and the message says so
            assert os.stat(out + ".tmp").st_uid == 0 and out + ".tmp" in se, (so, se)
        assert rc == 1, (so, se)
        assert planted_state(at) == planted, (so, se)
        with open(secret) as f:
            assert f.read() == "root's own\n"
        assert os.stat(secret).st_mode & 0o777 == 0o600
    finally:
        if trace is not None and trace.poll() is None:
            trace.kill()
            trace.communicate()
        tree.close()


# A non-Python member that starts `count` short-lived non-Python helpers, one every 20 ms,
# then waits for them all.
HELPERS = "for i in $(seq %d); do /bin/sleep 0.2 & /bin/sleep 0.02; done; wait"


def test_member_table_forgets_gone_helpers(tmp_path, shared_dir):
    """A tree member (as `nobody`) starts 150 short-lived non-Python helpers during a `-v`
    trace whose member table keeps at most 16 entries before it compacts (the test-only
    VCATTACH_TEST_VERBOSE_KEEP; 4096 otherwise): the table stays near that bound, far below
    the number of helpers seen, and every one seen is counted (listed, or in the count of the
    forgotten)."""
    spec = os.path.join(shared_dir, "spawn")
    tree = TreeRoot(SYSTEM_PY, spec, user=NOBODY)
    trace = None
    try:
        before = ctl_names()
        out = str(tmp_path / "tree.cvf")
        trace = subprocess.Popen([SEAMS_VCATTACH, "--pid", str(tree.pid), "--subprocesses",
                                  "-v", "-t", "60s", "-o", out], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True,
                                 env=seams_env(VCATTACH_TEST_VERBOSE_KEEP="16"))
        wait_for(lambda: ctl_names() - before, 20, "the tree's control socket")
        done = os.path.join(shared_dir, "helpers.done")
        tree.spawn(["/bin/sh", "-c", HELPERS % 150 + "; touch " + done])
        wait_for(lambda: os.path.exists(done), 60, "the helpers")
        time.sleep(0.3)  # the last ones are seen gone
        trace.send_signal(signal.SIGINT)
        so, se = trace.communicate(timeout=120)
        assert trace.returncode == 0, (so, se)
        print(so)
        summary = [l for l in so.splitlines() if "non-Python skipped" in l]
        assert len(summary) == 1, so
        skipped = int(summary[0].split(" non-Python skipped")[0].rsplit(", ", 1)[1])
        # helpers gone before their executable could be read are counted apart
        unseen = re.search(r", (\d+) ended unseen", summary[0])
        unseen = int(unseen.group(1)) if unseen else 0
        table = [l for l in so.splitlines() if "member table:" in l]
        assert len(table) == 1, so
        peak = int(table[0].split("member table: ")[1].split()[0])
        forgotten = int(table[0].split("; ")[1].split()[0])
        listed = sum(1 for l in so.splitlines() if l.startswith("  pid ") and " skipped: " in l)
        assert skipped + unseen >= 60, so  # most of the 150 helpers were seen
        assert forgotten > 0 and listed + forgotten == skipped + unseen, so
        # compacted at 16: what remains is the live processes and what one scan adds
        assert peak <= 16 + 40 and peak < (skipped + unseen) / 2, so
    finally:
        if trace is not None and trace.poll() is None:
            trace.kill()
            trace.communicate()
        tree.close()


def walk_steps(n):
    """proc-tree-bench on an n-process synthetic host: the walk's own count of its steps
    (comparisons, binary-search probes, links), and its printed line."""
    r = subprocess.run([os.path.join(BUILD, "tests", "proc-tree-bench"), str(n)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    print(r.stdout.strip())  # the time per scan there is information, not a check
    return int(r.stdout.split(":")[1].split("steps")[0])


def test_descendants_walk_is_not_quadratic():
    small, big = walk_steps(3000), walk_steps(30000)
    # O(n log n): at most 2 n log2(n) steps (~416 000 at 30 000; the O(n^2) walk it replaced
    # took a scan of every link per tree level), and ten times the processes cost about
    # 10 * log(30 000)/log(3 000) = 13 times the steps (100 times for a quadratic walk).
    assert big <= 2 * 30000 * math.log2(30000), big
    assert big <= 15 * small, (small, big)

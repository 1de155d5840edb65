"""Issue 29: nothing that crosses the boundary is trusted (SECURITY.md, "What the agent sends",
"Budgets" and "The terminal").

A red-team pass as a hostile target user against a root vcattach; each finding is reproduced
here for real, and each test failed on the code before its fix:

  1. a tree member (a `nobody` process under a root-owned service) speaks for its own agent
     on the tree's control socket and sends a META with a 20-digit pid, a CLOCK that makes
     timestamps 21 characters long, a 10-digit thread and 10-digit task numbers, and 2000
     asyncio task names of 48 control characters: root's vcattach overflowed its heap while
     building the trace (spool_build.c reserved 448 bytes per task instant; one needs 454);
  2. `vcattach recover` of a spool the target's user wrote: a DROP record's 20-digit call
     count (201 bytes where 192 were reserved) and the same task records;
  3. a member whose process name is not UTF-8 (an argument in Latin-1) made the whole merged
     trace unreadable ("process name is not valid UTF-8"), the root-owned master's with it;
  4. budgets: `--last` dropped the --max-trace-mb cap after its first rotation (150 MiB for a
     cap of 20); every name an agent sends was kept in root's memory (1500 names of 200 KB:
     290 MiB); `recover` of a 4 KiB sparse spool wrote a 256 MiB trace;
  5. a member's command line reached root's terminal raw (an OSC title, clear-screen, colours,
     BEL, a C1 CSI, a bidi override), and `summary` passed C1 controls through;
  7. test-only environment hooks were compiled into the vcattach root runs.
(6, the borrowed thread's vector state, is tests/system/test_inject_kill.py::test_vector_state_comes_home.)
"""
import os
import random
import shutil
import signal
import struct
import subprocess
import tempfile
import time

import pytest

from support.cvf_writer import write_cvf
from support.paths import ASAN_VCATTACH, BUILD, PYTHONS, VCATTACH, agents_for_all
from support.traces import decode
from support.tree_root import PERL_MEMBER, SYSTEM_PY, TreeRoot, ctl_names, wait_for
from vcattach import cvf

SETPRIV = shutil.which("setpriv")
PERL = shutil.which("perl")

# A member that is not Python (so vcattach does not inject it) and speaks the agent's side of
# the tree's control socket itself, as any descendant can: HELLO, STARTED, then what its mode
# says, END after STOP.  Runs as nobody.
HOSTILE_MEMBER = PERL_MEMBER + r"""
my ($ready, $mode) = @ARGV;
sub rec { pack("Q<Q<VV", @_) }
sendf(1, "pid=$$\nversion=1\n");                                   # HELLO
my $t = recvf();
die "no CONFIG\n" unless defined $t && $t == 2;
sendf(3, "threads=1\nbackend=fake\n");                             # STARTED
sendf(11, pack("Vl<VV", 0, 2147483647, 1, 0) . "t");              # THREADS: a 10-digit tid
my $recs = rec(1, 1, 0, 0); my $n = 1;                              # one call of key 0
if ($mode eq "overflow") {
    sendf(12, pack("Q<Q<d<", 0, ~0 - 551615, 1.0));                # CLOCK: 21-character ts
    for my $k (1 .. 2000) {                                         # tasks, 10-digit numbers
        my $task = 4294967295 - $k;
        $recs .= rec(1 + $k, $task, 4294967291, 0);                 # TASK step
        $recs .= ("\x01" x 16) . pack("VV", 4294967290 - $_, $task) for 0 .. 2;  # its name
        $n += 4;
    }
}
sendf(9, pack("VV", 0, $n) . $recs);                               # CHUNK
if ($mode eq "names") {                                             # 1500 names of 200 KB
    for my $f (0 .. 299) {
        my $p = '';
        $p .= pack("VV", 5 * $f + $_, 200000) . (chr(65 + $_) x 200000) for 0 .. 4;
        sendf(10, $p);
    }
}
sendf(10, pack("VV", 0, 1) . "f");                                  # NAMES: key 0 is "f"
sendf(13, pack("Q<", ~0) . "hostile \xff\xfe\x1b[2J name");         # META: 20-digit pid
open(my $f, '>', "$ready.new") or die; print $f $$; close $f; rename("$ready.new", $ready);
do { $t = recvf() } while (defined $t && $t != 4);                  # ... until STOP
sendf(7, "status=0\nevents=1\nthreads=1\ndrops=0\n");               # END
sleep 30;
"""

needs_tools = pytest.mark.skipif(not (PERL and SETPRIV),
                                 reason="the hostile member needs perl and setpriv")


def as_nobody(argv):
    return [SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups"] + argv


def trace_with_hostile_member(exe, tmp_path, mode, sample_rss=False):
    """Traces a root-owned service with --subprocesses while a `nobody` member speaks for its
    agent in `mode`; returns (rc, stdout, stderr, out path, hostile pid, peak RSS KiB)."""
    shared = tempfile.mkdtemp(prefix="vc-boundary-", dir="/tmp")
    os.chmod(shared, 0o1777)
    svc = TreeRoot(SYSTEM_PY, os.path.join(shared, "spawn"))
    trace = None
    try:
        before = ctl_names()
        out = str(tmp_path / "tree.cvf")
        trace = subprocess.Popen([exe, "--pid", str(svc.pid), "--subprocesses", "-t", "60s",
                                  "-o", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env=dict(os.environ, VCATTACH_AGENT_DIR=BUILD))
        name = wait_for(lambda: ctl_names() - before, 30, "the tree's control socket").pop()
        ready = os.path.join(shared, "member.ready")
        svc.spawn(as_nobody([PERL, "-e", HOSTILE_MEMBER, name, ready, mode]))
        hostile = int(wait_for(lambda: os.path.exists(ready) and open(ready).read(), 60,
                               "the hostile member's frames"))
        peak = 0
        if sample_rss:  # what the frames left in root's memory once they are all in
            time.sleep(1)
            peak = vm_hwm(trace.pid)
        trace.send_signal(signal.SIGINT)
        so, se = trace.communicate(timeout=300)
        return (trace.returncode, so.decode(errors="replace"), se.decode(errors="replace"),
                out, hostile, peak)
    finally:
        if trace is not None and trace.poll() is None:
            trace.kill()
            trace.communicate()
        svc.close()
        shutil.rmtree(shared, ignore_errors=True)


def vm_hwm(pid):
    """Peak resident set of a live process, KiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


# ---- 1 and 3: a member's hostile stream, and its name -------------------------------------

@needs_tools
@pytest.mark.parametrize("build", ["plain", "asan"])
def test_hostile_member_stream_cannot_overflow_root(tmp_path, build):
    """#1, #3: root's vcattach builds the merged trace from the hostile member's stream: no
    overflow (the ASan build aborts on any), exit 0, every reader reads the file, the member's
    2000 task instants are in it with their names escaped, and its name (not UTF-8) is
    repaired instead of spoiling the service's trace."""
    exe = ASAN_VCATTACH if build == "asan" else VCATTACH
    if not os.path.exists(exe):
        pytest.fail("%s is missing: run `make test` (it builds it)" % exe)
    rc, so, se, out, hostile, _ = trace_with_hostile_member(exe, tmp_path, "overflow")
    assert "AddressSanitizer" not in se and "runtime error" not in se, se
    assert rc == 0, (rc, so, se)
    events = decode(out)
    tasks = [e for e in events if e.get("name") == "vcattach task"]
    assert len(tasks) == 2000, len(tasks)
    assert all(e["args"]["name"] == "\x01" * 48 for e in tasks)
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names.get(hostile, "").startswith("hostile ??\x1b[2J"), names  # its pid, not its claim
    assert any(e.get("ph") == "X" and e.get("pid") != hostile for e in events), \
        "the service's own calls are missing"


def test_non_utf8_process_name_keeps_the_merged_trace_readable(tmp_path, agents_for_all):
    """#3, with a real interpreter: a child of a root-owned service, run as nobody with an
    argument in Latin-1, names its process with bytes that are not UTF-8.  The merged trace
    used to be refused by every reader."""
    shared = tempfile.mkdtemp(prefix="vc-boundary-", dir="/tmp")
    os.chmod(shared, 0o1777)
    svc = TreeRoot(SYSTEM_PY, os.path.join(shared, "spawn"))
    try:
        child = as_nobody([]) if SETPRIV else []  # Debian's python3: nobody can run it
        svc.spawn(child + [SYSTEM_PY, "-c", "import time\nwhile True: sum(range(99)); "
                                        "time.sleep(0.002)", b"caf\xe9-\xff"])
        time.sleep(1)
        out = str(tmp_path / "tree.cvf")
        r = subprocess.run([VCATTACH, "--pid", str(svc.pid), "--subprocesses", "-t", "2s",
                            "-o", out], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        events = decode(out)
        names = [e["args"]["name"] for e in events if e.get("name") == "process_name"]
        assert any("caf?-?" in n for n in names), names
        assert len(names) >= 2, names
        r = subprocess.run([VCATTACH, "summary", out], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
    finally:
        svc.close()
        shutil.rmtree(shared, ignore_errors=True)


# ---- 2 and 4: spools the target's user wrote --------------------------------------------------

def spool_record(kind, payload):
    return struct.pack("<II", kind, len(payload)) + payload


def hostile_spool(path, tasks=2000, sparse_segment=0):
    """A spool as `vcattach start`'s agent (the target's user) could write it: a thread with a
    10-digit tid, a clock for 21-character timestamps, a 20-digit pid, one call, a drop of
    2^64 - 1 calls, and `tasks` task steps with 48 control characters for a name.  With
    sparse_segment, a segment that claims that many bytes of a hole instead."""
    recs = [spool_record(11, struct.pack("<IiII", 0, 2147483647, 1, 0) + b"t"),
            spool_record(12, struct.pack("<QQd", 0, 2**64 - 551616, 1.0)),
            spool_record(13, struct.pack("<Q", 2**64 - 1) + b"hostile"),
            spool_record(10, struct.pack("<II", 0, 1) + b"f"),
            spool_record(100, struct.pack("<IIII", 0, 0, 0, 0))]
    if sparse_segment:
        head = struct.pack("<IIII", 101, 24 + sparse_segment, 0, sparse_segment // 2) + \
            struct.pack("<QQ", 1, 2)  # zeros decode as calls of 2 bytes each
        body = b"".join(recs) + head
    else:
        recs.append(spool_record(101, struct.pack("<IIQQ", 0, 1, 1, 2) + b"\x00\x01"))
        recs.append(spool_record(102, struct.pack("<IIQQQ", 0, 0, 1, 1, 2**64 - 1)))
        steps = b"".join(struct.pack("<QQ", 1 + k, 4294967295 - k) for k in range(1, tasks + 1))
        recs.append(spool_record(104, struct.pack("<II", 0, tasks) + steps))
        for k in range(1, tasks + 1):
            for part in range(3):
                recs.append(spool_record(105, struct.pack("<II", 4294967295 - k, part) +
                                         b"\x01" * 16))
        body = b"".join(recs)
    with open(path, "wb") as f:
        f.write(b"VCSPOOL1" + b"\0" * 8 + body)
        if sparse_segment:
            f.truncate(16 + len(body) + sparse_segment)


@pytest.mark.parametrize("build", ["plain", "asan"])
def test_recover_of_a_hostile_spool(tmp_path, build):
    """#2: recover builds a spool its user wrote with oversized numbers and control-character
    task names: no overflow, exit 0, a readable trace with every instant."""
    exe = ASAN_VCATTACH if build == "asan" else VCATTACH
    spool = tmp_path / "x.cvf.spool"
    hostile_spool(str(spool))
    out = str(tmp_path / "x.cvf")
    r = subprocess.run([exe, "recover", str(spool), "-o", out], capture_output=True,
                       text=True, timeout=120)
    assert "AddressSanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stderr
    events = cvf.load(out)["traceEvents"]
    drops = [e for e in events if e.get("name") == "vcattach dropped"]
    assert len(drops) == 1 and drops[0]["args"]["calls"] == 2**64 - 1, drops
    assert len([e for e in events if e.get("name") == "vcattach task"]) == 2000


def test_recover_refuses_a_sparse_spool(tmp_path):
    """#4: a 4 KiB spool on disk whose segment claims 32 M calls in 64 MiB of a hole is refused
    (a spool is written front to back and has none; its OUT was hundreds of MiB), and nothing
    is written."""
    spool = tmp_path / "s.cvf.spool"
    hostile_spool(str(spool), sparse_segment=64 << 20)
    assert os.stat(spool).st_blocks * 512 <= 64 << 10  # sparse indeed, on this filesystem
    out = tmp_path / "s.cvf"
    r = subprocess.run([VCATTACH, "recover", str(spool), "-o", str(out)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "is not a spool vcattach wrote (it has a hole" in r.stderr, r.stderr
    assert not out.exists() and not os.path.exists(str(out) + ".tmp")


def test_recover_output_is_capped(tmp_path):
    """#4: recover's OUT never takes more than --max-trace-mb (by default 8 times the spools'
    size and 64 MiB): a spool claiming more calls than it holds ends with one line."""
    spool = tmp_path / "c.cvf.spool"
    # 4 MiB of varints that decode to 2 M calls of random times: a real segment, no hole
    rnd = random.Random(7)
    data = bytearray()
    while len(data) < (4 << 20) - 10:
        data += bytes([rnd.randrange(1, 128), rnd.randrange(1, 128)])
    count = len(data) // 2
    recs = [spool_record(11, struct.pack("<IiII", 0, 77, 1, 0) + b"t"),
            spool_record(10, struct.pack("<II", 0, 1) + b"f"),
            spool_record(100, struct.pack("<IIII", 0, 0, 0, 0)),
            spool_record(101, struct.pack("<IIQQ", 0, count, 1, 2) + bytes(data))]
    spool.write_bytes(b"VCSPOOL1" + b"\0" * 8 + b"".join(recs))
    out = tmp_path / "c.cvf"
    r = subprocess.run([VCATTACH, "recover", str(spool), "-o", str(out), "--max-trace-mb",
                        "1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "OUT would pass 1 MiB (--max-trace-mb)" in r.stderr, r.stderr
    assert not out.exists() and not os.path.exists(str(out) + ".tmp")
    r = subprocess.run([VCATTACH, "recover", str(spool), "-o", str(out)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr  # within the default cap
    assert out.stat().st_size < 8 * spool.stat().st_size + (64 << 20)


# ---- 4: budgets of a live trace --------------------------------------------------------------

@needs_tools
def test_names_are_budgeted_in_roots_memory(tmp_path):
    """#4: 1500 names of 200 KB (300 MB) from one member: each is cut to what a .cvf keeps
    (511 bytes), so root's vcattach stays small (it grew by 290 MiB), the trace is written,
    and the key the calls use is still named."""
    rc, so, se, out, hostile, peak = trace_with_hostile_member(VCATTACH, tmp_path, "names",
                                                                sample_rss=True)
    assert rc == 0, (so, se)
    assert peak < 120 * 1024, "root's vcattach peaked at %d MiB" % (peak >> 10)
    events = decode(out)
    assert any(e.get("ph") == "X" and e.get("pid") == hostile and e["name"] == "f"
               for e in events)
    spool_total = sum(os.path.getsize(os.path.join(tmp_path, n)) for n in os.listdir(tmp_path)
                      if n.endswith(".spool"))
    assert spool_total == 0  # removed once built


def busy_target(py):
    code = ("import threading\n"
            "def f(i): return i + 1\n"
            "def spin():\n"
            "    while True:\n"
            "        for i in range(1000): f(i)\n"
            "for _ in range(2): threading.Thread(target=spin, daemon=True).start()\n"
            "print('ready', flush=True)\n"
            "threading.Event().wait()\n")
    p = subprocess.Popen(py["argv"] + ["-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_last_keeps_the_spool_cap(tmp_path):
    """#4: `--last 1s --max-trace-mb 20` on a busy target: the two generations on disk never
    hold more than 20 MiB together (the new generation was made without the cap: 150 MiB),
    the trace is written, and vcattach says it kept less than --last when the cap was the
    bound."""
    py = PYTHONS[-1]
    t = busy_target(py)
    try:
        out = tmp_path / "l.cvf"
        p = subprocess.Popen([VCATTACH, "--pid", str(t.pid), "--last", "1s", "--max-trace-mb",
                              "20", "-o", str(out)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        spools = [str(out) + ".spool", str(out) + ".spool.prev"]
        top = 0
        end = time.monotonic() + 6
        while time.monotonic() < end and p.poll() is None:
            size = 0
            for s in spools:
                try:
                    size += os.path.getsize(s)
                except OSError:
                    pass
            top = max(top, size)
            time.sleep(0.02)
        p.send_signal(signal.SIGINT)
        so, se = p.communicate(timeout=120)
        assert p.returncode == 0, se
        assert top <= 20 << 20, "the spool held %.1f MiB" % (top / 2**20)
        events = cvf.load(str(out))["traceEvents"]
        assert any(e.get("name") == "vcattach last" for e in events)
        assert any(e.get("ph") == "X" for e in events)
    finally:
        t.kill()
        t.wait()


# ---- 5: the terminal -----------------------------------------------------------------------

EVIL = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\r\u009b31m\u202eevil\u2066"
RAW = ["\x1b", "\x07", "\r", "\u009b", "\u202e", "\u2066"]


def assert_no_raw_controls(text):
    for c in RAW:
        assert c not in text, "raw %r reached the terminal: %r" % (c, text)


def test_member_command_line_reaches_the_terminal_escaped(tmp_path):
    """#5: a member of the tree (as nobody) whose command line holds an OSC title, clear-screen,
    colours, BEL, CR, a C1 CSI and bidi controls: the tree's list of processes shows them as
    escapes (it used to print them raw)."""
    shared = tempfile.mkdtemp(prefix="vc-boundary-", dir="/tmp")
    os.chmod(shared, 0o1777)
    svc = TreeRoot(SYSTEM_PY, os.path.join(shared, "spawn"))
    try:
        child = as_nobody([]) if SETPRIV else []
        svc.spawn(child + ["/bin/sleep", "30", EVIL])  # not Python: listed as skipped with -v
        svc.spawn(child + [SYSTEM_PY, "-c", "import time\nwhile True: time.sleep(0.01)", EVIL])
        time.sleep(1)
        r = subprocess.run([VCATTACH, "--pid", str(svc.pid), "--subprocesses", "-v", "-t",
                            "1s", "-o", str(tmp_path / "t.cvf")], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert_no_raw_controls(r.stdout + r.stderr)
        assert "\\x1b]0;owned\\x07" in r.stdout and "\\u009b31m" in r.stdout, r.stdout
        assert "\\u202eevil\\u2066" in r.stdout, r.stdout
    finally:
        svc.close()
        shutil.rmtree(shared, ignore_errors=True)


def test_summary_and_requests_escape_c1_and_bidi(tmp_path):
    """#5: names in a trace (functions, threads, the process) with a C1 CSI, bidi overrides,
    ESC and CR: `summary` and `requests` print them escaped (C1 and bidi went through)."""
    path = write_cvf(str(tmp_path / "evil.cvf"),
                     [(1, 1, "handler" + EVIL, 0, 50000), (1, 1, "inner" + EVIL, 10000, 5000)],
                     thread_names={(1, 1): "t" + EVIL})
    for cmd in (["summary", path], ["summary", path, "--merged"],
                ["requests", path, "--entry", "handler*"]):
        r = subprocess.run([VCATTACH] + cmd, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (cmd, r.stderr)
        assert_no_raw_controls(r.stdout + r.stderr)
        assert "\\u009b31m" in r.stdout, (cmd, r.stdout)


# ---- 7: test seams -----------------------------------------------------------------------------

def test_root_binary_has_no_test_seams():
    """#7: the vcattach operators run reads no VCATTACH_TEST_* variable (they exist in
    build/seams/vcattach only)."""
    with open(VCATTACH, "rb") as f:
        data = f.read()
    assert b"VCATTACH_TEST_" not in data
    seams = os.path.join(BUILD, "seams", "vcattach")
    with open(seams, "rb") as f:
        assert b"VCATTACH_TEST_MERGE_PAUSE_MS" in f.read()

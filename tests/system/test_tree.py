"""`vcattach --subprocesses`: a process tree traced into one .cvf (issue 13).

Real trees: os.fork children (long-lived ones present at attach, short-lived ones forked
during the trace that leave through os._exit), multiprocessing pools created during the trace
(fork, forkserver, spawn), subprocess.run of a Python and of a shell child, and Debian's
gunicorn serving a Flask app under a bounded local load, with a worker killed mid-trace.
Every test checks that every process of the tree is left running, unstopped and untraced.
"""
import collections
import os
import signal
import subprocess
import threading
import time
import urllib.request

import pytest

from support.paths import PYTHONS, TESTS, VCATTACH
from support.proc import assert_running_untraced, communicate_or_explain, free_port
from support.traces import decode, load_json, x_events

TARGET = os.path.join(TESTS, "targets", "tree_target.py")
APP_DIR = os.path.join(TESTS, "targets")


def by_minor(*minors):
    """Shared builds of these minors; where the machine has none (a fresh Debian 12 has only
    its static 3.11), the one interpreter pick() takes, so that the test still runs."""
    rows = [p for p in PYTHONS if p["minor"] in minors and p["kind"] != "static"]
    if not rows and PYTHONS:
        rows = [_pick(minors[0], PYTHONS)]
    return [pytest.param(p, id=p["id"]) for p in rows]


def _pick(minor, rows):
    for ok in (lambda p: p["minor"] == minor and p["kind"] != "static",
               lambda p: p["kind"] != "static", lambda p: True):
        for p in rows:
            if ok(p):
                return p


def pick(minor, other_than=None):
    """The interpreter for a test that needs one: a shared build of that minor, else any
    shared build, else any (a fresh Debian 12 has only its static 3.11).  With other_than, one
    of another minor, or a skip saying why."""
    rows = [p for p in PYTHONS if other_than is None or p["minor"] != other_than["minor"]]
    if not rows:
        pytest.skip("needs two CPython minors on this machine; it has only %s"
                    % other_than["version"])
    return _pick(minor, rows)


class Tree:
    """A target tree in its own session (`with Tree(argv) as tree:`), killed as a group at the
    end.  settle: seconds to let it run after "ready" (children forked, first calls made)."""

    def __init__(self, argv, settle=0, **kw):
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, start_new_session=True, **kw)
        self.pid = self.p.pid
        try:
            line = self.p.stdout.readline()
            assert line.strip() == "ready", self.p.stderr.read()
        except BaseException:
            self.close()
            raise
        time.sleep(settle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait(10)


def descendants(pid):
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                         text=True).stdout.split()
    pids = [int(x) for x in out]
    for p in list(pids):
        pids += descendants(p)
    return pids


def long_children(pid):
    """The fork tree's two long-lived children, in fork order: [ping-pong, worker].  Chosen by
    start time, not by pid: a short-lived child (one every 0.3 s) may be in the listing, and
    has the highest pid unless pids wrapped."""
    def started(p):
        try:
            with open("/proc/%d/stat" % p) as f:
                return int(f.read().rsplit(")", 1)[1].split()[19]), p
        except (OSError, ValueError, IndexError):
            return None
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                         text=True).stdout.split()
    kids = sorted(s for s in (started(int(x)) for x in out) if s is not None)
    assert len(kids) >= 2, kids
    return [p for _, p in kids[:2]]


def check_alive(pids):
    for p in pids:
        if os.path.exists("/proc/%d" % p):
            assert_running_untraced(p)


def trace_tree(pid, out, seconds, *extra, timeout=120):
    r = subprocess.run([VCATTACH, "--pid", str(pid), "--subprocesses", "-t", str(seconds),
                        "-o", out, "-f", *extra], capture_output=True, text=True,
                       timeout=timeout)
    return r


def per_pid(events):
    got = {}
    for e in x_events(events):
        got.setdefault(e["pid"], []).append(e)
    return got


def names_of(events, ph_name):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in events
            if e.get("ph") == "M" and e.get("name") == ph_name}


@pytest.mark.parametrize("py", by_minor(308, 312))
def test_fork_tree_one_trace(py, tmp_path):
    with Tree([py["path"], TARGET, "fork"], settle=0.3) as tree:
        at_attach = [tree.pid] + descendants(tree.pid)
        out = str(tmp_path / "tree.cvf")
        r = trace_tree(tree.pid, out, 2)
        assert r.returncode == 0, r.stderr
        assert "processes traced" in r.stdout, r.stdout
        events = decode(out)
        pids = per_pid(events)
        # every process there at attach, with its own functions
        for p in at_attach:
            if os.path.exists("/proc/%d" % p):
                assert p in pids, (p, sorted(pids), r.stdout)
        assert any(e["name"].startswith("child_work") for p in at_attach[1:] for e in pids[p])
        # short-lived children forked during the trace reconnected and sent their trace at
        # os._exit
        born = [p for p in pids if p not in at_attach]
        assert born, r.stdout
        assert any(any(e["name"].startswith("short_child") or e["name"].startswith("child_work")
                       for e in pids[p]) for p in born), r.stdout
        # every process named from its command line; main threads named MainThread with the
        # process's own tid
        procs = names_of(events, "process_name")
        threads = names_of(events, "thread_name")
        for p in pids:
            assert "tree_target.py" in procs[(p, p)]
            assert threads.get((p, p)) == "MainThread", (p, threads)
            assert {e["tid"] for e in pids[p]} <= {t for (q, t) in threads if q == p}
        # summary: a header listing the processes, --pid selects one
        s = subprocess.run([VCATTACH, "summary", out, "--top", "3"], capture_output=True,
                           text=True, timeout=60)
        assert s.returncode == 0, s.stderr
        assert "process %d:" % tree.pid in s.stdout
        s = subprocess.run([VCATTACH, "summary", out, "--pid", str(at_attach[2]), "--merged"],
                           capture_output=True, text=True, timeout=60)
        assert s.returncode == 0 and "child_work" in s.stdout and "clock_wait" not in s.stdout
        check_alive(at_attach)


@pytest.mark.parametrize("py", by_minor(308, 312))
def test_fork_while_the_parents_agent_is_in_a_send(py, tmp_path):
    """Children forked while the parent's agent thread was in a send (vcattach stopped reading:
    the socket full) stream their own traces and answer the STOP.  The lock of that send was
    copied held into each child, by a thread the child does not have: its agent thread waited
    for it for ever, and vcattach for its trace (ten minutes, then 30 s of silence)."""
    with Tree([py["path"], TARGET, "fork-on-signal"], settle=0.3) as tree:
        out = str(tmp_path / "sending.cvf")
        v = subprocess.Popen([VCATTACH, "--pid", str(tree.pid), "--subprocesses", "-t", "4",
                              "-o", out, "-v"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        try:
            deadline = time.time() + 60
            while time.time() < deadline and not os.path.exists(out + ".%d.spool" % tree.pid):
                time.sleep(0.05)  # the root's session streams: its spool is there
            time.sleep(0.3)
            os.kill(v.pid, signal.SIGSTOP)  # vcattach reads nothing: the parent's send waits
            time.sleep(0.7)
            os.kill(tree.pid, signal.SIGUSR1)  # three forks while it waits
            time.sleep(0.5)
        finally:
            os.kill(v.pid, signal.SIGCONT)
        stdout, stderr = communicate_or_explain(v, 90, targets=[tree.pid])
        assert v.returncode == 0, stderr + stdout
        for bad in ("sent nothing", "did not start", "did not connect", "exited (or was"):
            assert bad not in stdout, stdout
        pids = per_pid(decode(out))
        children = [p for p in pids if p != tree.pid]
        assert len(children) == 3, (sorted(pids), stdout)
        for p in children:
            names = collections.Counter(e["name"].split(" ")[0] for e in pids[p])
            assert names["child_work"] >= 10 and names["child_leaf"] >= 200, (p, names)
        check_alive([tree.pid] + descendants(tree.pid))


@pytest.mark.parametrize("py", by_minor(308, 312))
def test_fork_child_returns_through_the_frames_it_was_forked_in(py, tmp_path):
    """A child forked 7 calls deep returns through those frames: each ends in the child's
    trace under its own name.  Their keys were the parent's table's ids, which the child's new
    table gives to other functions: unless pinned again at the fork they ended under another
    function's name, or as "unknown function"."""
    with Tree([py["path"], TARGET, "fork-deep"], settle=0.2) as tree:
        out = str(tmp_path / "deep.cvf")
        r = trace_tree(tree.pid, out, 2)
        assert r.returncode == 0, r.stderr
        assert "names never came" not in r.stdout, r.stdout
        pids = per_pid(decode(out))
        children = [p for p in pids if p != tree.pid and
                    any(e["name"].startswith("after_fork_work") for e in pids[p])]
        assert len(children) >= 2, r.stdout  # one every 0.1 s when idle; a loaded CI forks fewer
        for p in children:
            names = collections.Counter(e["name"].split(" ")[0] for e in pids[p])
            # the six forked_in frames above the fork and the one that forked, each once
            assert names["forked_in"] == 7, (p, names)
            assert names["after_fork_work"] == 1 and names["child_work"] == 1, (p, names)
            assert names["child_leaf"] == 100, (p, names)
            assert not [n for n in names if n.startswith("unknown")], (p, names)
        check_alive([tree.pid] + descendants(tree.pid))


@pytest.mark.parametrize("py", by_minor(312))
def test_one_clock_across_processes(py, tmp_path):
    """A pipe ping-pong between the parent and a child bounds the clock offset between their
    traces from both sides: a read cannot return before the matching write started."""
    with Tree([py["path"], TARGET, "fork"], settle=0.3) as tree:
        child = long_children(tree.pid)[0]  # the first fork: the ping-pong child
        out = str(tmp_path / "clock.cvf")
        r = trace_tree(tree.pid, out, 3)
        assert r.returncode == 0, r.stderr
        ev = x_events(decode(out))

        def inside(pid, outer, inner):
            outs = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                          if e["pid"] == pid and e["name"].startswith(outer))
            ins = [e for e in ev if e["pid"] == pid and e["name"] == inner]
            res = []
            for a, b in outs:
                res += [e for e in ins if a <= e["ts"] and e["ts"] + e["dur"] <= b]
            return sorted(res, key=lambda e: e["ts"])
        pings = inside(tree.pid, "clock_ping", "posix.write")
        waits = inside(tree.pid, "clock_wait", "posix.read")
        child_reads = inside(child, "clock_pong", "posix.read")
        child_writes = inside(child, "clock_pong", "posix.write")
        # ~40 rounds a second when idle; a loaded machine (CI) has made 19 in 2 s: 10 bound
        # the clock as well as 100
        assert len(pings) > 10 and len(child_reads) > 10, (len(pings), len(child_reads))
        # match each child read to the latest parent write that started before it ended
        worst_fwd = worst_back = None
        for cr in child_reads:
            end = cr["ts"] + cr["dur"]
            before = [p for p in pings if p["ts"] <= end + 50]
            if before:
                slack = end - before[-1]["ts"]
                worst_fwd = slack if worst_fwd is None else min(worst_fwd, slack)
        for cw in child_writes:
            after = [w for w in waits if w["ts"] + w["dur"] >= cw["ts"] - 50]
            if after:
                slack = after[0]["ts"] + after[0]["dur"] - cw["ts"]
                worst_back = slack if worst_back is None else min(worst_back, slack)
        # causality holds across the two traces within a few µs
        # the two slacks bound the clock offset between the processes: [-fwd, +back] µs
        print("clock slack forward %s µs, back %s µs" % (worst_fwd, worst_back))
        assert worst_fwd is not None and worst_fwd >= -5, worst_fwd
        assert worst_back is not None and worst_back >= -5, worst_back


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
@pytest.mark.parametrize("py", by_minor(308, 312))
def test_multiprocessing_pools_born_during_trace(py, method, tmp_path):
    with Tree([py["path"], TARGET, "mp", method], settle=0.5) as tree:
        before = set([tree.pid] + descendants(tree.pid))
        out = str(tmp_path / "mp.cvf")
        r = trace_tree(tree.pid, out, 3)
        assert r.returncode == 0, r.stderr + r.stdout
        pids = per_pid(decode(out))
        workers = [p for p in pids if p not in before
                   and any(e["name"].startswith("mp_work") for e in pids[p])]
        assert workers, (method, r.stdout, sorted(pids))
        check_alive([tree.pid] + descendants(tree.pid))


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
@pytest.mark.parametrize("py", by_minor(312))
def test_pool_workers_terminated_by_with_keep_their_trace(py, method, tmp_path):
    """`with ctx.Pool(2) as pool:` ends its workers with SIGTERM: they never stop their
    session, yet what they streamed is kept (before streaming, every one was "lost" with 0
    bytes).  A worker that had begun tracing is lost only if it ended before any of its calls
    reached vcattach (the agent hands its chunks over every 100 ms)."""
    with Tree([py["path"], TARGET, "pool-with", method], settle=0.5) as tree:
        before = set([tree.pid] + descendants(tree.pid))
        out = str(tmp_path / "pool.cvf")
        r = trace_tree(tree.pid, out, 3, "-v")
        assert r.returncode == 0, r.stderr + r.stdout
        pids = per_pid(decode(out))
        workers = [p for p in pids if p not in before
                   and any(e["name"].startswith("mp_work") for e in pids[p])]
        assert workers, (method, r.stdout, sorted(pids))
        assert "its trace up to then is kept" in r.stdout, r.stdout
        lost_while_tracing = [l for l in r.stdout.splitlines()
                              if " lost: " in l and "while tracing" in l
                              and "before any of its calls reached vcattach" not in l]
        assert not lost_while_tracing, r.stdout
        check_alive([tree.pid] + descendants(tree.pid))


def test_subprocess_python_child_traced_shell_skipped(tmp_path):
    py = pick(312)
    with Tree([py["path"], TARGET, "subprocess"]) as tree:
        out = str(tmp_path / "sub.cvf")
        r = trace_tree(tree.pid, out, 3, "-v")
        assert r.returncode == 0, r.stderr
        pids = per_pid(decode(out))
        assert any(any(e["name"].startswith("sub_child_fn") for e in evs)
                   for p, evs in pids.items() if p != tree.pid), r.stdout
        assert "skipped: /bin/sh -c sleep 0.4" in r.stdout, r.stdout


def test_mixed_python_versions(tmp_path):
    """A 3.12 parent whose Python children are 3.8: each gets the agent of its version."""
    parent = pick(312)
    child = pick(308, other_than=parent)
    with Tree([parent["path"], TARGET, "subprocess", child["path"]]) as tree:
        out = str(tmp_path / "mixed.cvf")
        r = trace_tree(tree.pid, out, 3, "-v")
        assert r.returncode == 0, r.stderr
        assert "is Python 3.8: injected" in r.stderr and "is Python 3.12: injected" in r.stderr
        pids = per_pid(decode(out))
        assert any(any(e["name"].startswith("sub_child_fn") for e in evs)
                   for p, evs in pids.items() if p != tree.pid), r.stdout


def test_stopped_process_reported_rest_traced(tmp_path):
    py = pick(312)
    with Tree([py["path"], TARGET, "fork"], settle=0.3) as tree:
        stopped = long_children(tree.pid)[1]  # the long-lived worker (not the ping-pong)
        os.kill(stopped, signal.SIGSTOP)
        try:
            out = str(tmp_path / "stopped.cvf")
            r = trace_tree(tree.pid, out, 1)
            assert r.returncode == 0, r.stderr
            assert "pid %d not traced" % stopped in r.stdout and "stopped" in r.stdout, r.stdout
            pids = per_pid(decode(out))
            assert tree.pid in pids and stopped not in pids
            assert subprocess.run(["ps", "-o", "stat=", "-p", str(stopped)], capture_output=True,
                                  text=True).stdout.strip().startswith("T")  # left as it was
        finally:
            os.kill(stopped, signal.SIGCONT)


def test_member_silent_after_stop_is_given_up_alone_with_its_trace(tmp_path):
    """A process stopped (SIGSTOP) while traced cannot answer STOP: the others' traces are
    collected and written at once, its own is what it streamed before (and its window), and
    vcattach says so in its line and while it waits, instead of waiting for --collect-timeout
    (ten minutes by default) and calling it lost.  Its agent unhooks when it runs again."""
    py = pick(312)
    with Tree([py["path"], TARGET, "fork"], settle=0.3) as tree:
        stopped = long_children(tree.pid)[1]  # the long-lived worker (not the ping-pong)
        out = str(tmp_path / "silent.cvf")
        v = subprocess.Popen([VCATTACH, "--pid", str(tree.pid), "--subprocesses", "-t", "2s",
                              "--collect-timeout", "4s", "-o", out, "-f"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1.5)
            os.kill(stopped, signal.SIGSTOP)
            t0 = time.monotonic()
            stdout, stderr = v.communicate(timeout=60)
            took = time.monotonic() - t0
        finally:
            os.kill(stopped, signal.SIGCONT)
            if v.poll() is None:
                v.kill()
        assert v.returncode == 0, stderr + stdout
        assert took < 30, took  # the silence bound (4 s here), not a transfer's timeout
        line = [ln for ln in stdout.splitlines() if "pid %d " % stopped in ln]
        assert line and "sent nothing for 4 s after STOP" in line[0], stdout
        assert "its process is stopped, or holds the GIL" in line[0], stdout
        assert "its trace up to then is kept" in line[0], stdout
        assert "collecting the traces for" in stderr and "pid %d:" % stopped in stderr, stderr
        pids = per_pid(decode(out))
        assert any(e["name"].startswith("child_work") for e in pids.get(stopped, [])), stdout
        assert tree.pid in pids, stdout
        # running again, it finds its controller gone and removes its hooks
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                assert_running_untraced(stopped)
                break
            except AssertionError:
                time.sleep(0.2)
        check_alive([tree.pid] + descendants(tree.pid))


def test_start_status_stop_on_a_tree(tmp_path):
    py = pick(312)
    with Tree([py["path"], TARGET, "fork"], settle=0.3) as tree:
        members = [tree.pid] + descendants(tree.pid)
        out = str(tmp_path / "detached.cvf")
        r = subprocess.run([VCATTACH, "start", "--pid", str(tree.pid), "--subprocesses", "-t",
                            "30", "-o", out], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        time.sleep(0.5)
        s = subprocess.run([VCATTACH, "status", "--pid", str(tree.pid), "--subprocesses"],
                           capture_output=True, text=True, timeout=60)
        assert s.returncode == 0, s.stderr
        for p in members[:3]:
            assert "session running in pid %d" % p in s.stdout, s.stdout
        s = subprocess.run([VCATTACH, "stop", "--pid", str(tree.pid), "--subprocesses"],
                           capture_output=True, text=True, timeout=120)
        assert s.returncode == 0, s.stderr
        assert "processes traced" in s.stdout
        pids = per_pid(decode(out))
        assert set(members[:3]) <= set(pids)
        assert not [f for f in os.listdir(tmp_path) if f.startswith("detached.")
                    and f != "detached.cvf" and not f.endswith(".json")]
        s = subprocess.run([VCATTACH, "status", "--pid", str(tree.pid), "--subprocesses"],
                           capture_output=True, text=True, timeout=60)
        assert s.returncode == 1
        check_alive(members)


def test_max_processes_bounds_the_tree(tmp_path):
    py = pick(312)
    with Tree([py["path"], TARGET, "fork"], settle=0.3) as tree:
        out = str(tmp_path / "bounded.cvf")
        r = trace_tree(tree.pid, out, 1, "--max-processes", "2")
        assert r.returncode == 0, r.stderr
        pids = per_pid(decode(out))
        assert tree.pid in pids, (sorted(pids), r.stdout)
        # the bound is on processes traced at once: a short-lived child that ended gives its
        # place to the next one, so more than 2 pids may be in the trace, never 2 at a time
        spans = sorted((min(e["ts"] for e in evs), max(e["ts"] + e["dur"] for e in evs))
                       for evs in pids.values())
        for i, (start, _) in enumerate(spans):
            live = [s for s in spans[:i + 1] if s[1] > start]
            assert len(live) <= 2, (spans, r.stdout)
        assert "over --max-processes" in r.stdout, r.stdout
        bad = subprocess.run([VCATTACH, "--pid", str(tree.pid), "--max-processes", "2"],
                             capture_output=True, text=True, timeout=30)
        assert bad.returncode == 2 and "add --subprocesses" in bad.stderr


def test_summary_and_convert_take_several_files(tmp_path):
    """Traces of two processes taken separately are read as one trace."""
    py = pick(312)
    with Tree([py["path"], TARGET, "fork"], settle=0.3) as tree:
        child = long_children(tree.pid)[1]
        a, b = str(tmp_path / "a.cvf"), str(tmp_path / "b.cvf")
        for pid, out in ((tree.pid, a), (child, b)):
            r = subprocess.run([VCATTACH, "--pid", str(pid), "-t", "0.5", "-o", out],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
        s = subprocess.run([VCATTACH, "summary", a, b, "--top", "2"], capture_output=True,
                           text=True, timeout=60)
        assert s.returncode == 0, s.stderr
        assert "in 2 processes" in s.stdout
        assert "process %d:" % tree.pid in s.stdout and "process %d:" % child in s.stdout
        merged = str(tmp_path / "ab.json")
        c = subprocess.run([VCATTACH, "convert", a, b, "-o", merged], capture_output=True,
                           text=True, timeout=60)
        assert c.returncode == 0, c.stderr
        assert set(per_pid(load_json(merged)["traceEvents"])) == {tree.pid, child}
        c = subprocess.run([VCATTACH, "convert", a, b], capture_output=True, text=True,
                           timeout=60)
        assert c.returncode == 2 and "-o OUT" in c.stderr


def test_filters_reach_every_process(tmp_path):
    py = pick(312)
    with Tree([py["path"], TARGET, "fork"], settle=0.3) as tree:
        out = str(tmp_path / "filtered.cvf")
        r = trace_tree(tree.pid, out, 1, "--no-c-calls")
        assert r.returncode == 0, r.stderr
        pids = per_pid(decode(out))
        assert len(pids) >= 3, r.stdout
        for p, evs in pids.items():  # forked children too: their CONFIG has the filters
            assert not [e for e in evs if e["name"].startswith(("posix.", "time."))], p


def test_hint_without_subprocesses(tmp_path):
    py = pick(312)
    with Tree([py["path"], TARGET, "fork"]) as tree:
        out = str(tmp_path / "one.cvf")
        r = subprocess.run([VCATTACH, "--pid", str(tree.pid), "-t", "0.5", "-o", out],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "Python child process" in r.stdout and "--subprocesses traces them all" in r.stdout
        pids = per_pid(decode(out))
        assert list(pids) == [tree.pid]


def test_kill9_of_vcattach_unhooks_every_process(tmp_path):
    py = pick(312)
    with Tree([py["path"], TARGET, "fork"], settle=0.3) as tree:
        members = [tree.pid] + descendants(tree.pid)
        out = str(tmp_path / "killed.cvf")
        v = subprocess.Popen([VCATTACH, "--pid", str(tree.pid), "--subprocesses", "-o", out],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(2)
        v.kill()
        v.wait(10)
        # each agent sees its controller vanish and writes its partial trace itself
        partial = str(tmp_path / ("killed.%d.partial.cvf" % tree.pid))
        for _ in range(100):
            if os.path.exists(partial):
                break
            time.sleep(0.1)
        assert os.path.exists(partial), os.listdir(tmp_path)
        assert per_pid(decode(partial)).get(tree.pid)
        time.sleep(0.5)
        check_alive(members)
        # no agent session is left running in any of them
        for p in members:
            if os.path.exists("/proc/%d" % p):
                s = subprocess.run([VCATTACH, "status", "--pid", str(p)], capture_output=True,
                                   text=True, timeout=30)
                assert s.returncode == 1, s.stdout
        assert not os.path.exists(out)


# ---- gunicorn ------------------------------------------------------------------------------

class Load:
    """A bounded local load: a few client threads, each request with a timeout."""

    def __init__(self, port, seconds):
        self.url = "http://127.0.0.1:%d/" % port
        self.ok = self.failed = 0
        self.end = time.time() + seconds
        self.threads = [threading.Thread(target=self.run) for _ in range(3)]
        for t in self.threads:
            t.start()

    def run(self):
        while time.time() < self.end:
            try:
                with urllib.request.urlopen(self.url, timeout=5) as resp:
                    resp.read()
                self.ok += 1
            except Exception:
                self.failed += 1
            time.sleep(0.005)

    def join(self):
        for t in self.threads:
            t.join(30)


def gunicorn_available():
    return os.path.exists("/usr/bin/gunicorn") and subprocess.run(
        ["/usr/bin/python3", "-c", "import flask"], capture_output=True).returncode == 0


def start_gunicorn(port, *extra):
    p = subprocess.Popen(["/usr/bin/python3", "/usr/bin/gunicorn", "-b", "127.0.0.1:%d" % port,
                          "--chdir", APP_DIR, *extra, "tree_flask_app:app"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    for _ in range(100):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=2):
                break
        except Exception:
            time.sleep(0.1)
    return p


@pytest.mark.skipif(not gunicorn_available(), reason="gunicorn/flask not installed "
                    "(scripts/install-deps.sh)")
@pytest.mark.slow
@pytest.mark.parametrize("workers", [["-w", "3"], ["-w", "2", "-k", "gthread", "--threads", "2"],
                                     ["-w", "2", "--max-requests", "30", "--preload"]],
                         ids=["sync", "gthread", "max-requests"])
def test_gunicorn_whole_service(workers, tmp_path):
    """Debian's gunicorn and Flask under load, every worker traced (a SIGKILLed one keeps what
    it sent; a replacement is traced from its fork).  max-requests preloads the app: each of
    its 30-request workers would otherwise import Flask (~170 k calls): dozens of them in 4 s
    on a loaded machine, 11 M calls, more than the trace's reader is asked to decode."""
    port = free_port()
    g = start_gunicorn(port, *workers)
    try:
        time.sleep(0.5)
        master = g.pid
        initial = descendants(master)
        assert initial
        load = Load(port, 5)
        out = str(tmp_path / "service.cvf")
        v = subprocess.Popen([VCATTACH, "--pid", str(master), "--subprocesses", "-t", "4",
                              "-o", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        killed = None
        if workers[0:2] == ["-w", "3"]:
            time.sleep(2)
            killed = initial[0]
            os.kill(killed, signal.SIGKILL)
        stdout, stderr = communicate_or_explain(v, 120, targets=[master])
        load.join()
        assert v.returncode == 0, stderr + stdout
        pids = per_pid(decode(out))
        assert master in pids, stdout
        handlers = [p for p in pids if any(e["name"].startswith("hello") or
                                           e["name"].startswith("handler_work")
                                           for e in pids[p])]
        for w in initial:
            if w != killed and w in pids and "--max-requests" not in workers:
                assert w in handlers, (w, stdout)
        assert len(handlers) >= 2, stdout
        if killed:
            replacements = [p for p in pids if p not in initial and p != master]
            assert replacements, stdout  # gunicorn's new worker, traced from its start
            # the SIGKILLed worker keeps what it streamed before (before streaming: lost)
            assert killed in handlers, (killed, stdout)
            assert load.failed <= 10, (load.ok, load.failed)
        else:
            assert load.failed == 0, (load.ok, load.failed)
        if "--max-requests" in workers:
            assert [p for p in pids if p not in initial and p != master], stdout
        check_alive([master] + descendants(master))
    finally:
        try:
            os.killpg(g.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        g.wait(10)

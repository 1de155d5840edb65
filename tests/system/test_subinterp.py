"""Every interpreter of the process (issue 19): sub-interpreters made with _xxsubinterpreters
(3.8-3.11, shared GIL: what mod_wsgi's Py_NewInterpreter makes) are traced like the main one,
existing at attach or created during the trace, each (OS thread, interpreter) on a track of
its own named "NAME [interp N]"; their keys never mix with another interpreter's; one
destroyed during the trace keeps its events and names; a thread switching interpreters 2000
times, 30 interpreters created and destroyed in a tight loop and one that fails to start leave
the target correct.  From 3.12 every sub-interpreter is traced the same way, each asked to hook
itself through a pending call (agent/interps.c): those under the main GIL (the "legacy" config:
Py_NewInterpreter, mod_wsgi's) and those with their own GIL (the default, PEP 734's
concurrent.interpreters and InterpreterPoolExecutor), whose hooks then run in parallel with the
main interpreter's under the lock among GILs (agent/hooklock.h); those that end before they
are hooked are counted, and the trace, the CLI's line and `summary` say how many were.

The target (targets/subinterp_target.py) counts its own calls of work() per interpreter; the
trace read by the independent Python reader (support.traces.decode) must hold exactly as many
on that interpreter's track."""
import collections
import json
import os
import select
import signal
import subprocess

import re

import pytest

import shutil

from support.paths import TESTS, CHROOT_PYTHONS, PYTHONS, VCATTACH, root_workdir
from support.proc import run_vcattach
from support.traces import check_nesting, decode
from test_e2e_attach import wait_session

TARGET = os.path.join(TESTS, "targets",
                      "subinterp_target.py")
WORK_MODULE = os.path.join(os.path.dirname(TARGET), "subinterp_work.py")
N = 50
A_CALLS = 1000 * (N // 5)  # A: 1000 run_string calls of N/5 work() each (the target's A_RUNS)

SHARED_GIL = [p for p in PYTHONS if p["minor"] <= 311]
# --hook eval needs 3.9-3.11 and, on 3.11, 3.11.4+ (the agent refuses older ones)
EVAL = [p for p in SHARED_GIL if p["minor"] >= 309 and
        tuple(int(x) for x in p["version"].split(".")[:3]) not in [(3, 11, i) for i in range(4)]]
# 3.14/3.15 (the test root) also make interpreters with concurrent.interpreters and an
# InterpreterPoolExecutor during the trace
OWN_GIL = [p for p in PYTHONS if p["minor"] >= 312] + CHROOT_PYTHONS


def params(rows):
    return [pytest.param(p, id=p["id"]) for p in rows]


def copy_target(path, outside):
    """A target and the module it imports (targets/subinterp_work.py) into a test-root dir."""
    for f in (path, WORK_MODULE):
        shutil.copy2(f, os.path.join(outside, os.path.basename(f)))


def target_argv(python, tmp_path):
    """How to run the target under python: a host one directly, a test-root one (3.14, 3.15)
    chrooted, with a copy of the target under the root."""
    if not python["root"]:
        return [python["path"], TARGET]
    outside, inside = root_workdir(python, tmp_path, "vc-subinterp")
    copy_target(TARGET, outside)
    return python["argv"] + [os.path.join(inside, "subinterp_target.py")]


class SubinterpTarget:
    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, cwd="/",
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.pid = self.p.pid
        assert self.line(30) == "ready", self.p.stderr.read()

    def line(self, timeout):
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        assert r, "target silent for %ss" % timeout
        out = self.p.stdout.readline().strip()
        assert out, "target ended: %s" % self.p.stderr.read()
        return out

    def ask(self, cmd, timeout=120):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        return json.loads(self.line(timeout))

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(10)
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            f.close()


def untraced_checksum(argv):
    out = subprocess.run(argv + ["--check", str(N)], capture_output=True, text=True,
                         timeout=120, check=True, cwd="/")
    return int(out.stdout)


def trace_scenario(python, tmp_path, mode, *options, legacy=False):
    """Attaches until the target has run its scenario (mode: how B waits for the hook), then
    Ctrl-C; returns (target's report, events, hooks left after detach); the trace is
    tmp_path/sub.cvf.  legacy: the target's interpreters share the main GIL (3.12+)."""
    out = str(tmp_path / "sub.cvf")
    argv = target_argv(python, tmp_path) + (["--legacy"] if legacy else [])
    t = SubinterpTarget(argv)
    vc = None
    try:
        vc = subprocess.Popen([VCATTACH, "--pid", str(t.pid), "-o", out] + list(options),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_session(t.pid, proc=vc)
        assert vc.poll() is None, vc.communicate()
        report = t.ask("go %d %s" % (N, mode))
        vc.send_signal(signal.SIGINT)
        stdout, stderr = vc.communicate(timeout=120)
        assert vc.returncode == 0, (stdout, stderr)
        report_stdout = stdout
        hooks = t.ask("check")["hooks"]
        assert t.p.wait(30) == 0
    finally:
        if vc is not None and vc.poll() is None:
            vc.kill()
            vc.wait()
        t.close()
    report["argv"] = argv
    report["vc_stdout"] = report_stdout
    return report, decode(out), hooks


def untraced_note(events):
    """The detach instant's count of sub-interpreters left alone (agent/interps.c)."""
    [detach] = [e for e in events if e.get("name") == "vcattach detach"]
    return detach["args"]["interps_untraced"]


def work_counts(events):
    """{thread track name: calls of a function named work (...)} and the names per track."""
    names = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    counts = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and e["name"].startswith("work ("):
            counts[names.get(e["tid"], "?")] += 1
    return counts, names


def check_common(python, report, events, hooks):
    assert report["checksum"] == untraced_checksum(report["argv"])  # results unchanged
    assert all(h == "None" for h in hooks), hooks  # no hook left in any interpreter
    check_nesting(events)  # every call paired, per track
    assert not [e for e in events if e.get("ph") == "X" and e["name"] in ("", "?")]


@pytest.mark.parametrize("python", params(SHARED_GIL))
def test_every_interpreter_traced_with_exact_counts(python, tmp_path):
    """Profile backend: main, A (existing at attach, entered 1000 times from the main thread)
    and B (created during the trace, destroyed before its end) each have exactly the calls of
    work() the target counted, on a track of their own; B's names were read before it went."""
    report, events, hooks = trace_scenario(python, tmp_path, "profile", "--hook", "profile")
    check_exact_counts(python, report, events, hooks)
    # every interpreter traced: nothing said to be left alone
    assert untraced_note(events) == 0
    assert "not traced" not in report["vc_stdout"], report["vc_stdout"]


@pytest.mark.parametrize("python", params(OWN_GIL))
def test_main_gil_sub_interpreters_traced_from_3_12(python, tmp_path):
    """3.12+, sys.monitoring (the default): the same scenario with A, B and the short-lived
    ones made under the main GIL (what mod_wsgi's Py_NewInterpreter makes).  Each hooks itself
    through a pending call (agent/interps.c): exact counts per interpreter, a track each, our
    sys.monitoring tool and end callback gone from every interpreter after the detach.  On
    3.14+ the PEP 734 interpreters (own GIL) are traced beside them, exactly too."""
    report, events, hooks = trace_scenario(python, tmp_path, "profile", legacy=True)
    check_exact_counts(python, report, events, hooks)
    pep734_counts(python, report, events)  # own GIL: traced beside the legacy ones
    [detach] = [e for e in events if e.get("name") == "vcattach detach"]
    n, shared = untraced_note(events), detach["args"].get("interps_untraced_shared_gil", 0)
    # the short-lived and failing ones may end before they run Python hooked: counted, shared
    # (one caught while being made is counted with its GIL unknown)
    assert shared <= n <= 31 + (0 if python["minor"] < 314 else 5 + 64), detach


def pep734_counts(python, report, events):
    """3.14+: the 5 concurrent.interpreters ones and the pool's workers (own GIL, made during
    the trace, each waiting for the hook first) have exactly the work() calls they counted."""
    pep = report["pep734"]
    ci = {int(k): v for k, v in pep.get("ci", {}).items()}
    pool = {int(k): v for k, v in pep.get("pool", {}).items()}
    # (the pool starts its second worker only if the first is busy when a call comes)
    assert (len(ci), min(len(pool), 1), sum(pool.values())) == (
        (5, 1, 200) if python["minor"] >= 314 else (0, 0, 0)), pep
    counts, names = work_counts(events)
    for i, n in ci.items():
        assert counts["MainThread [interp %d]" % i] == n == N // 10, (i, counts)
    for i, n in pool.items():
        [label] = [v for v in names.values() if v.startswith("InterpreterPoolExecutor") and
                   v.endswith(" [interp %d]" % i)]
        assert counts[label] == n, (label, n, counts)


def check_exact_counts(python, report, events, hooks):
    check_common(python, report, events, hooks)
    # 3.14+: the PEP 734 interpreters' tracks (their counts: pep734_counts)
    more = tuple("MainThread [interp %s]" % i for i in report.get("pep734", {}).get("ci", {}))
    counts, names = work_counts(events)
    ids = report["ids"]
    want = {int(k): v for k, v in report["counts"].items()}
    assert want == {0: N, ids["A"]: A_CALLS, ids["B"]: 2 * N}
    assert counts["MainThread"] == want[0], counts
    for key in ("A", "B"):
        label = "MainThread [interp %d]" % ids[key]
        assert label in names.values(), names
        assert counts[label] == want[ids[key]], (key, counts, collections.Counter(
            e["name"] for e in events if e.get("ph") == "X" and names.get(e["tid"]) == label))
    # the interpreter as data too: an instant on each sub-interpreter track
    marks = {e["tid"]: e["args"] for e in events if e.get("name") == "vcattach interpreter"}
    by_name = {v: k for k, v in names.items()}
    for key in ("A", "B"):
        tid = by_name["MainThread [interp %d]" % ids[key]]
        assert marks[tid] == {"interp": ids[key], "os_tid": by_name["MainThread"]}, marks
    # the short-lived interpreters (hooked or not, depending on when the visit came): at most
    # their 3 calls each, on their own tracks, never on main's, A's or B's
    for label, n in counts.items():
        if label not in ("MainThread", "MainThread [interp %d]" % ids["A"],
                         "MainThread [interp %d]" % ids["B"]) + more and \
                not label.startswith("InterpreterPoolExecutor"):
            assert label.startswith("MainThread [interp ") and n <= 3, (label, n)
    # the sub-interpreters' work() is its own key (defined in run_string's code), main's is
    # the file's
    subs = {e["name"] for e in events if e.get("ph") == "X" and e["name"].startswith("work (")
            and names.get(e["tid"], "").startswith("MainThread [interp ")}
    # (run_string's code is "<string>", "<script>" from 3.14)
    assert subs and all("<string>" in s or "<script>" in s for s in subs), subs


@pytest.mark.parametrize("python", params(EVAL))
def test_eval_backend_every_interpreter(python, tmp_path):
    """--hook eval (PEP 523, per interpreter): main's and A's calls exact, B (hooked at the
    next visit, which its 0.5 s wait usually covers) never more than it made."""
    report, events, hooks = trace_scenario(python, tmp_path, "eval", "--hook", "eval",
                                           "--no-c-calls")
    check_common(python, report, events, hooks)
    counts, names = work_counts(events)
    ids = report["ids"]
    assert counts["MainThread"] == N
    assert counts["MainThread [interp %d]" % ids["A"]] == A_CALLS, counts
    assert counts["MainThread [interp %d]" % ids["B"]] <= 2 * N, counts


@pytest.mark.parametrize("python", params(OWN_GIL))
def test_own_gil_sub_interpreters_traced_from_3_12(python, tmp_path):
    """3.12+, sys.monitoring: the same scenario with A, B and the short-lived ones made with
    their own GIL (the default config, PEP 684), their hooks running in parallel with the main
    interpreter's: the session goes parallel (agent/hooklock.h).  Exact counts per
    interpreter, a track each, nothing of ours left in any interpreter after the detach, the
    target's results unchanged.  On 3.14+ also the interpreters that concurrent.interpreters
    and an InterpreterPoolExecutor make during the trace: each has exactly the work() calls it
    counted itself, on its own track (the pool's on its worker thread's)."""
    report, events, hooks = trace_scenario(python, tmp_path, "profile")
    check_exact_counts(python, report, events, hooks)
    pep734_counts(python, report, events)
    # none shares the main GIL; the short-lived ones may end before a visit hooks them: counted
    [detach] = [e for e in events if e.get("name") == "vcattach detach"]
    n = untraced_note(events)
    assert detach["args"].get("interps_untraced_shared_gil", 0) == 0, detach
    assert n <= 31 + (0 if python["minor"] < 314 else 5 + 64), detach


IDLE = os.path.join(os.path.dirname(TARGET), "subinterp_idle.py")


def idle_session(t, tmp_path, name, n):
    """One trace while A calls work() n times, stopped while A runs nothing; the events."""
    out = str(tmp_path / name)
    vc = subprocess.Popen([VCATTACH, "--pid", str(t.pid), "-o", out], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        wait_session(t.pid, proc=vc)
        report = t.ask("work %d" % n)
        assert report["hooked"], report
        vc.send_signal(signal.SIGINT)  # A is idle now: it cannot unhook itself in time
        stdout, stderr = vc.communicate(timeout=120)
        assert vc.returncode == 0, (stdout, stderr)
    finally:
        if vc.poll() is None:
            vc.kill()
            vc.wait()
    return decode(out), report


@pytest.mark.parametrize("gil", ["main", "own"])
@pytest.mark.parametrize("python", params(OWN_GIL))
def test_idle_sub_interpreter_unhooks_itself_later(python, gil, tmp_path):
    """3.12+: a sub-interpreter (under the main GIL, or with its own) that runs nothing while
    the trace stops keeps our hooks, inert, until it next runs Python: then its queued request
    removes them before its first statement.  Its keys are named at the stop all the same (an
    own-GIL one's from their characters only, agent/names.c).  A second session attached
    meanwhile replaces what the first left (the first's request must not unhook the second),
    and counts A's calls exactly."""
    argv = [python["path"], IDLE] if not python["root"] else None
    if argv is None:
        outside, inside = root_workdir(python, tmp_path, "vc-idle")
        copy_target(IDLE, outside)
        argv = python["argv"] + [os.path.join(inside, "subinterp_idle.py")]
    argv += ["--own"] if gil == "own" else []
    t = SubinterpTarget(argv)
    try:
        first, r1 = idle_session(t, tmp_path, "first.cvf", 300)
        second, r2 = idle_session(t, tmp_path, "second.cvf", 500)
        end = t.ask("check")
        assert t.p.wait(30) == 0
    finally:
        t.close()
    # no tool of ours left in A or main; A's results as untraced (the sum of its work)
    assert end["tools"] == [[None] * 6, [None] * 6], end
    expect = sum((i * 7 + 3) % 1009 for i in range(300)) + \
        sum((i * 7 + 3) % 1009 for i in range(500))
    assert end["sum"] == expect and end["count"] == 800, end
    for events, n in ((first, 300), (second, 500)):
        check_nesting(events)
        counts, names = work_counts(events)
        [label] = [v for v in names.values() if v.startswith("MainThread [interp ")]
        assert counts[label] == n, (counts, names)
        assert untraced_note(events) == 0


HOST = os.path.join(os.path.dirname(VCATTACH), "tests", "subinterp-host")
HOST_PYTHONS = [p for p in OWN_GIL if p["kind"] == "shared"]


@pytest.mark.skipif(not os.path.exists(HOST),
                    reason="build/tests/subinterp-host is missing (make test-prereqs)")
@pytest.mark.parametrize("python", params(HOST_PYTHONS))
def test_c_host_serving_from_a_sub_interpreter(python, tmp_path):
    """3.12+: a C host serving requests from a Py_NewInterpreter sub-interpreter the way
    mod_wsgi's daemons do (tests/targets/subinterp_host.c: worker threads made by C, each
    with its own thread state there, taken and let go around every request): every work()
    call on the sub-interpreter's tracks, one per worker, none on the main interpreter's;
    nothing of ours left in it; the host ends its interpreters and exits cleanly."""
    threads, requests, calls = 3, 200, 40
    lib = os.path.join(os.path.dirname(os.path.dirname(python["path"])), "lib",
                       "libpython3.%d.so.1.0" % (python["minor"] % 100))
    assert os.path.exists(lib), lib
    host = SubinterpTarget([HOST, lib, str(threads), str(requests), str(calls)])
    out = str(tmp_path / "host.cvf")
    vc = subprocess.Popen([VCATTACH, "--pid", str(host.pid), "-o", out], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        wait_session(host.pid, proc=vc)
        report = host.ask("go")
        vc.send_signal(signal.SIGINT)
        stdout, stderr = vc.communicate(timeout=120)
        assert vc.returncode == 0, (stdout, stderr)
        end = host.ask("check")
        assert host.p.wait(30) == 0
    finally:
        if vc.poll() is None:
            vc.kill()
            vc.wait()
        host.close()
    n = threads * requests * calls
    assert report == {"count": n, "sum": threads * requests * sum(
        (i * 7 + 3) % 1009 for i in range(calls))}, report
    assert end["tools"] == [None] * 6, end
    events = decode(out)
    check_nesting(events)
    counts, names = work_counts(events)
    sub = {label: c for label, c in counts.items() if label.endswith(" [interp 1]")}
    assert sum(sub.values()) == n and len(sub) == threads, (counts, names)
    assert sum(counts.values()) == n  # nothing on the main interpreter's tracks
    assert untraced_note(events) == 0


CHURN = os.path.join(os.path.dirname(TARGET), "subinterp_churn.py")


def trace_until_exit(argv, out, duration):
    """Starts a target that prints "ready", traces it for duration into out, lets it finish:
    vcattach's result and the target's last line (JSON), both checked for success."""
    t = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd="/")
    try:
        r, _, _ = select.select([t.stdout], [], [], 30)
        assert r and t.stdout.readline().strip() == "ready", t.stderr.read()
        vc = run_vcattach("-v", "--pid", str(t.pid), "-t", duration, "-o", out, timeout=120)
        if vc.returncode != 0 and t.poll() is not None:  # the target's own end, said
            raise AssertionError("the target ended (%s) before vcattach could trace it: %s\n"
                                 "vcattach: %s" % (t.returncode, t.stderr.read()[-3000:],
                                                   vc.stderr[-3000:]))
        assert vc.returncode == 0, (vc.stdout, vc.stderr)
        stdout, stderr = t.communicate(timeout=60)
        assert t.returncode == 0, stderr
    finally:
        if t.poll() is None:
            t.kill()
            t.wait()
    return vc, json.loads(stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("python", params(OWN_GIL))
def test_own_gil_churn_target_unharmed(python, tmp_path):
    """3.12+: 4 threads make and destroy own-GIL interpreters nonstop while vcattach traces
    (the agent walks the runtime's list under its lock at every visit, asks each new one to
    hook itself, and each that did unhooks itself in its atexit, on its own thread, beside
    the others) and a "legacy" one (main GIL) lives throughout, running tick() from a fifth
    thread: the target keeps working and exits cleanly, the legacy one is traced (its own
    track), every other track is a churning thread's in one of its interpreters, and the
    own-GIL interpreters the trace saw but did not hook are counted as such."""
    argv = [python["path"], CHURN] if not python["root"] else None
    if argv is None:
        outside, inside = root_workdir(python, tmp_path, "vc-churn")
        shutil.copy2(CHURN, os.path.join(outside, "subinterp_churn.py"))
        argv = python["argv"] + [os.path.join(inside, "subinterp_churn.py")]
    out = str(tmp_path / "churn.cvf")
    vc, result = trace_until_exit(argv + ["8"], out, "2s")
    assert result["ok"] and all(n > 0 for n in result["made"]), result
    events = decode(out)
    names = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    churned = {v for v in names.values()
               if "(churn) [interp " in v}  # own-GIL ones hooked in time: a track each
    n = untraced_note(events)
    assert len(churned) + n <= sum(result["made"]), (len(churned), n, result)
    assert churned or n, (names, n)  # every visit saw some
    # none of them shares the main GIL: the "legacy" one is traced (agent/compat.c tells them
    # apart by the GIL each runs under)
    [detach] = [e for e in events if e.get("name") == "vcattach detach"]
    assert detach["args"].get("interps_untraced_shared_gil", 0) == 0, detach
    r = run_vcattach("summary", out, "--top", "3")
    assert r.returncode == 0, r.stderr
    if n:
        plural = "" if n == 1 else "s"
        assert "; %d sub-interpreter%s not traced (CPython 3.12+, ended before hooked or " \
            "--hook profile: %d with their own GIL)" % (n, plural, n) in vc.stdout, vc.stdout
        assert "\n%d sub-interpreter%s not traced (CPython 3.12+, ended before they ran Python " \
            "hooked, or --hook profile: their calls are not in this trace); %d with their own " \
            "GIL\n" % (n, plural, n) in r.stdout, r.stdout[:2000]
    # what the hooked ones ran (their start's imports, seeded, then their module code), on
    # their churning thread's track, every key named
    ran = collections.Counter(e["name"] for e in events if e.get("ph") == "X" and
                              "(churn) [interp " in names.get(e["tid"], ""))
    assert not churned or ran["<module> (<string>:1)"] + ran["<module> (<script>:1)"] >= 1, ran
    assert not [k for k in ran if not k or k.startswith("?")], ran
    # the legacy one's calls, on a track of its own (the ticker thread in it), never more
    # than it made
    check_nesting(events)
    counts = collections.Counter(e["tid"] for e in events
                                 if e.get("ph") == "X" and e["name"].startswith("tick ("))
    assert counts and all(names[tid].endswith("[interp %d]" % result["legacy"])
                          for tid in counts), (counts, names)
    assert 0 < sum(counts.values()) <= result["ticks"], (counts, result)


LEGACY_CHURN = os.path.join(os.path.dirname(TARGET), "subinterp_legacy_churn.py")


@pytest.mark.parametrize("python", params([p for p in PYTHONS if p["minor"] >= 312]))
def test_main_gil_churn_never_counted_as_own_gil(python, tmp_path):
    """3.12+: main-GIL sub-interpreters made and destroyed back to back.  Those the agent hooked
    are traced; one it saw being made or ended and could not hook is counted as under the main
    GIL, never as one with its own (what a visit saw of its GIL is kept until it is gone)."""
    out = str(tmp_path / "legacy-churn.cvf")
    # 6 s of visits: each hooks an interpreter only if it lives on until its next statement,
    # and CI once saw a 3 s trace hook a single one (its visits starved on a loaded machine)
    vc, result = trace_until_exit([python["path"], LEGACY_CHURN, "10"], out, "6s")
    made = result["made"]
    events = decode(out)
    [detach] = [e for e in events if e.get("name") == "vcattach detach"]
    untraced = detach["args"].get("interps_untraced", 0)
    assert detach["args"].get("interps_untraced_shared_gil", 0) == untraced, detach
    assert "with their own GIL" not in vc.stdout, vc.stdout
    check_nesting(events)
    works = [e for e in events if e.get("ph") == "X" and e["name"].startswith("work (")]
    tracks = {e["tid"] for e in works}
    assert works and len(tracks) > 1, (len(works), made)  # several interpreters traced
    assert len(works) <= 2000 * made


def by_interp_sections(text):
    """{section title: {function name: calls}} of `vcattach summary --by interp` (working
    tables only)."""
    sections, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^(main interpreter|interpreter \d+): \d+ threads? merged", line)
        if m:
            cur = sections.setdefault(m.group(1), {})
        elif line.startswith("  waiting:"):
            cur = None
        elif cur is not None:
            # self, self%, total, total%, calls, mean, p50, p99, max[, on-CPU, off-CPU, on%[,
            # starved (scheduler events)]]
            row = re.match(r"^\s+[\d.]+\s+[\d.]+%\s+[\d.]+\s+[\d.]+%\s+([\d,]+)\s+"
                           r"(?:[\d.]+\s+){4}(?:[\d.]+\s+[\d.]+\s+[\d.]+%\s+(?:[\d.]+\s+)?)?"
                           r"\s*(.+)$",
                           line)
            if row:
                cur[row.group(2)] = int(row.group(1).replace(",", ""))
    return sections


@pytest.mark.parametrize("python", params(SHARED_GIL[-1:]))
def test_summary_by_interp(python, tmp_path):
    """`vcattach summary --by interp`: a table per interpreter, with the same exact counts."""
    report, events, hooks = trace_scenario(python, tmp_path, "profile")
    ids = report["ids"]
    r = run_vcattach("summary", tmp_path / "sub.cvf", "--by", "interp", "--top", "10000")
    assert r.returncode == 0, r.stderr
    sec = by_interp_sections(r.stdout)
    work = lambda title: sum(n for f, n in sec[title].items() if f.startswith("work ("))
    assert work("main interpreter") == N, r.stdout[:3000]
    assert work("interpreter %d" % ids["A"]) == A_CALLS
    assert work("interpreter %d" % ids["B"]) == 2 * N
    bad = run_vcattach("summary", tmp_path / "sub.cvf", "--by", "interp", "--merged")
    assert bad.returncode == 2 and "--by interp excludes" in bad.stderr
    assert run_vcattach("summary", "--help").stdout.count("--by interp") == 1


IN_PROCESS = r'''
import json, sys, time
try:
    import _xxsubinterpreters as I  # 3.8-3.12
except ImportError:
    import _interpreters as I  # 3.13+
import vcattach

def create():
    """3.8-3.11: the only kind; 3.12+: under the main GIL (the kind traced there)."""
    if sys.version_info < (3, 12):
        return I.create()
    try:
        return I.create("legacy")
    except TypeError:
        return I.create(isolated=False)

def run(interp, code):
    err = I.run_string(interp, code)  # 3.13+ returns the error instead of raising it
    if err is not None:
        raise SystemExit(str(err))

WORK = "import atexit\nCOUNT = 0\ndef work(x):\n    global COUNT\n    COUNT += 1\n    return x\n"
HOOKED = """
import sys, time
def hooked():
    mon = getattr(sys, "monitoring", None)
    on = sys.getprofile() is not None or (mon is not None and mon.get_tool(2) == "vcattach")
    return on and atexit._ncallbacks() > 0
deadline = time.monotonic() + 20
while not hooked() and time.monotonic() < deadline:
    time.sleep(0.01)
"""
UNHOOKED = """
import sys
mon = getattr(sys, "monitoring", None)
assert sys.getprofile() is None and (mon is None or mon.get_tool(2) is None)
"""
a = create()
run(a, WORK)
with vcattach.trace(sys.argv[1]):
    run(a, HOOKED + "for i in range(300): work(i)")
    b = create()
    run(b, WORK)
    run(b, HOOKED + "for i in range(70): work(i)")
    I.destroy(b)
run(a, UNHOOKED)
mon = getattr(sys, "monitoring", None)
print(json.dumps({"A": int(a), "B": int(b), "main_hook": repr(sys.getprofile()),
                  "main_tool": repr(mon and mon.get_tool(2))}))
'''


@pytest.mark.parametrize("python", params(SHARED_GIL[:1] + SHARED_GIL[-1:] +
                                           [p for p in OWN_GIL if not p["root"]]))
def test_in_process_trace_file_output(python, tmp_path):
    """The in-process API writes the .cvf itself (agent/emit.c, not the stream): the same
    tracks per interpreter, exact counts, the interpreter instants, B's names read before it
    was destroyed (3.12+: interpreters under the main GIL, hooked through pending calls, A
    idle when the trace stops and unhooked by its queued request)."""
    from support.paths import python_env
    out = str(tmp_path / "inproc.cvf")
    r = subprocess.run([python["path"], "-c", IN_PROCESS, out], capture_output=True,
                       text=True, timeout=120, env=python_env())
    assert r.returncode == 0, r.stderr
    ids = json.loads(r.stdout)
    assert ids["main_hook"] == "None" and ids["main_tool"] == "None", ids
    events = decode(out)
    check_nesting(events)
    counts, names = work_counts(events)
    assert counts["MainThread [interp %d]" % ids["A"]] == 300, counts
    assert counts["MainThread [interp %d]" % ids["B"]] == 70, counts
    marks = {e["args"]["interp"] for e in events if e.get("name") == "vcattach interpreter"}
    assert {ids["A"], ids["B"]} <= marks
    assert not [e for e in events if e.get("ph") == "X" and e["name"].startswith("?")]


PARALLEL = os.path.join(os.path.dirname(TARGET), "subinterp_parallel.py")


@pytest.mark.slow  # a minute in all: the slow group, which CI runs once after `make test`
@pytest.mark.parametrize("python", params(OWN_GIL))
def test_parallel_sessions_back_to_back(python, tmp_path):
    """3.12+: the main thread and two own-GIL sub-interpreters call work() nonstop, in
    parallel, while four sessions attach and detach one after the other (plain, without C
    calls, with a file filter in force, with a depth limit): each session's trace pairs
    every call on every track and has the sub-interpreters' calls on their own tracks, every
    key named; the target's results stay right, no thread of it stalls for good, it exits
    cleanly, and nothing of ours is left (the next session finds everything free)."""
    argv = [python["path"], PARALLEL] if not python["root"] else None
    if argv is None:
        outside, inside = root_workdir(python, tmp_path, "vc-parallel")
        shutil.copy2(PARALLEL, os.path.join(outside, "subinterp_parallel.py"))
        argv = python["argv"] + [os.path.join(inside, "subinterp_parallel.py")]
    t = subprocess.Popen(argv + ["120"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd="/")
    outs = []
    try:
        r, _, _ = select.select([t.stdout], [], [], 60)
        assert r and t.stdout.readline().strip() == "ready", t.stderr.read()
        for k, extra in enumerate([[], ["--no-c-calls"], ["--exclude", "*/no-such-dir/*"],
                                   ["--max-depth", "100"]]):
            out = str(tmp_path / ("p%d.cvf" % k))
            vc = run_vcattach("--pid", str(t.pid), "-t", "1s", "-o", out, *extra, timeout=120)
            assert vc.returncode == 0, (extra, vc.stdout, vc.stderr)
            outs.append((extra, out))
        stdout, stderr = t.communicate(timeout=60)  # stdin closed: the target ends
        assert t.returncode == 0, stderr
    finally:
        if t.poll() is None:
            t.kill()
            t.wait()
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["ok"] and all(n > 0 for n in result["calls"]), result
    for extra, out in outs:
        events = decode(out)
        check_nesting(events)
        counts, names = work_counts(events)
        for i in result["ids"]:
            [label] = [v for v in names.values() if v.endswith(" [interp %d]" % i)]
            assert counts[label] > 0, (extra, label, counts)
        assert counts["MainThread"] > 0, (extra, counts)
        assert not [e for e in events if e.get("ph") == "X" and
                    (not e["name"] or e["name"].startswith("?"))], extra
        assert untraced_note(events) == 0, extra

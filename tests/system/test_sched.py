"""Working vs waiting, exact: vcattach records the scheduler's context switches of the traced
threads (cli/sched_events.c: perf_event_open per thread, read by vcattach, never the target),
the trace carries them as counters "sched TID" (keys on_cpu, runnable) and one instant
"vcattach sched", and `vcattach summary` splits every call's span into on-CPU, runnable
(CPU starved) and blocked (trace/sched_split.c).

Real targets (tests/targets/sched_mix.py) under a pyenv interpreter:
  1. a worker that alternates ~1 ms of pure-Python computation with ~3 ms blocked on a lock
     another thread holds: lock.acquire's on-CPU self time is at most 2 % of the worker's
     on-CPU (working) time, and the computation is at least 90 % on-CPU in the time it was
     not starved (on a shared box the computation may be preempted: that is runnable time,
     its own column, neither work nor a wait);
  2. four GIL-free busy threads pinned to one core: their hashing is mostly runnable, not
     blocked, and the waiting table does not get it;
  3. --no-sched: the sampled split, and the header says so; a perf_event_open that fails
     (the seam VCATTACH_TEST_SCHED_DENY: EACCES, as in a locked-down container) falls back to
     it and says why;
  4. a ring too small for the switch rate (the seam VCATTACH_TEST_SCHED_PAGES=1) loses
     records: the kernel's PERF_RECORD_LOST counts reach the trace and the summary's header.
And a hand-written trace whose states are known checks the split's arithmetic exactly.
"""
import json
import re
import subprocess
import time

import pytest

from support.paths import PYTHONS, SEAMS_VCATTACH, TESTS, VCATTACH, seams_env
from support.targets import Target
from vcattach import cvf

import os

TARGET = os.path.join(TESTS, "targets", "sched_mix.py")


def python_311_or_312():
    for minor in (312, 311, 313):
        for p in PYTHONS:
            if p["minor"] == minor and "pyenv" in p["path"]:
                return p
    pytest.skip("no pyenv 3.11-3.13 interpreter")


class SchedMix(Target):
    def __init__(self, python, *args):
        super().__init__(python, [TARGET] + list(args), stdin=subprocess.PIPE)

    def wait_ready(self, deadline):
        line = self.readline(max(0.0, deadline - time.monotonic()))
        assert line.strip() == "ready", "sched_mix did not start: %r %s" % (
            line, self.stderr_if_dead())


def trace(python, mode, out, extra=(), binary=VCATTACH, env=None, seconds="3s"):
    with SchedMix(python, mode) as t:
        r = subprocess.run([binary, "--pid", str(t.pid), "-t", seconds, "-o", out] +
                           list(extra), capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode == 0, r.stderr
        t.assert_untouched()
    return r


def summary(path, *extra):
    r = subprocess.run([VCATTACH, "summary", path, "--top", "100"] + list(extra),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def sections(text):
    """{thread: {"title": line, "work": {func: row}, "wait": {func: row}}}; a row is the
    list of numbers before the name (self ms, self%, total ms, total%, calls, mean, p50, p99,
    max, on-CPU ms, off-CPU ms, on%, starved ms for the working table)."""
    out, cur, table = {}, None, None
    for line in text.splitlines():
        m = re.match(r"^(\S.*) \(pid \d+, tid \d+\): ", line)
        if m:
            cur = out.setdefault(m.group(1), {"title": line, "work": {}, "wait": {}})
            table = "work"
            continue
        if cur is None:
            continue
        if line.startswith("  waiting: "):
            table = "wait"
            continue
        cells = line.split()
        if not cells or cells[0] in ("self", "wait") or line.startswith("  …"):
            continue
        nums = []
        for c in cells:
            try:
                nums.append(float(c.rstrip("%").replace(",", "")))
            except ValueError:
                if c != "-":
                    break
                nums.append(None)
        name = cells[len(nums):]
        if table == "wait" and name and name[0] in ("lock", "sleep", "off-CPU", "at", "io",
                                                     "select", "socket", "subprocess"):
            name = name[2:] if name[0] == "at" else name[1:]
        if name:
            cur[table].setdefault(name[0], nums)
    return out


def find(rows, prefix):
    for k, v in rows.items():
        if k == prefix or k.startswith(prefix):
            return v
    raise AssertionError("%s not in %s" % (prefix, sorted(rows)))


def folded(path, *extra):
    """{(frame, ..., leaf): µs} of `convert --format collapsed` (all threads merged)."""
    r = subprocess.run([VCATTACH, "convert", path, "--format", "collapsed", "-o", "-"] +
                       list(extra), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        stack, us = line.rsplit(" ", 1)
        out[tuple(stack.split(";"))] = int(us)
    return out


def sched_counters(path):
    events = cvf.load(path)["traceEvents"]
    counters = [e for e in events if e.get("ph") == "C" and e["name"].startswith("sched ")]
    notes = [e for e in events if e.get("ph") == "i" and e.get("name") == "vcattach sched"]
    return counters, notes


def test_lock_bound_worker_exact(tmp_path):
    python = python_311_or_312()
    out = str(tmp_path / "lock.cvf")
    trace(python, "lock", out)
    counters, notes = sched_counters(out)
    assert counters and notes and notes[0]["args"]["recorded"] == 1, notes
    assert all(set(c["args"]) <= {"on_cpu", "runnable"} for c in counters)
    text = summary(out)
    assert "CPU exact (scheduler events)" in text, text[:2000]
    worker = sections(text)["worker"]
    working_ms = float(re.search(r"\(([\d.]+) (ms|s) working", worker["title"]).group(1))
    if re.search(r"\([\d.]+ s working", worker["title"]):
        working_ms *= 1000
    acquire = find(worker["work"], "_thread.lock.acquire") if any(
        k.startswith("_thread.lock.acquire") for k in worker["work"]) else [0.0]
    assert acquire[0] <= 0.02 * working_ms, (acquire, working_ms, text)
    work = find(worker["work"], "work")
    on, off, starved = work[9], work[10], work[12]
    blocked = off - starved
    assert on > 100, work  # it computed for a good part of 3 s
    assert on / (on + blocked) >= 0.90, (on, off, starved, text)
    # the lock's blocked time is waiting, labelled lock
    assert find(worker["wait"], "_thread.lock.acquire")[0] > 500, text
    # the working flame graph's stacks: the worker's computation is wide, its lock waits are
    # not (in wall time they are seconds wide)
    wall, working = folded(out), folded(out, "--working")
    work_stack = lambda stacks: sum(v for k, v in stacks.items() if k[-1].startswith("work ("))
    acquire_stack = lambda stacks: sum(v for k, v in stacks.items()
                                       if k[-1].startswith("_thread.lock.acquire"))
    assert acquire_stack(working) <= 0.02 * work_stack(working), (working, wall)
    assert acquire_stack(wall) > 20 * max(1, acquire_stack(working)), (wall, working)


def test_starved_threads_are_runnable_not_blocked(tmp_path):
    python = python_311_or_312()
    out = str(tmp_path / "starved.cvf")
    trace(python, "starved", out)
    text = summary(out)
    assert "CPU exact (scheduler events)" in text
    secs = sections(text)
    spins = [v for k, v in secs.items() if k.startswith("spin-")]
    assert len(spins) == 4, sorted(secs)
    for s in spins:
        sha = find(s["work"], "_hashlib.openssl_sha256")
        on, off, starved = sha[9], sha[10], sha[12]
        assert starved > 0.5 * (on + off), (sha, s["title"])  # 4 on 1 core: ~3/4 waiting
        assert off - starved < 0.2 * (on + off), (sha, s["title"])  # for the core, not blocked
        assert "CPU starved" in s["title"]


def test_no_sched_is_the_sampled_estimate(tmp_path):
    python = python_311_or_312()
    out = str(tmp_path / "nosched.cvf")
    trace(python, "lock", out, ["--no-sched"])
    counters, notes = sched_counters(out)
    assert not counters and not notes
    text = summary(out)
    assert "CPU estimated (sampled)" in text and "CPU exact" not in text


def test_denied_perf_falls_back_and_says_why(tmp_path):
    python = python_311_or_312()
    out = str(tmp_path / "denied.cvf")
    r = trace(python, "lock", out, binary=SEAMS_VCATTACH,
              env=seams_env(VCATTACH_TEST_SCHED_DENY="1"))
    assert "no scheduler events" in r.stderr and "Permission denied" in r.stderr, r.stderr
    counters, notes = sched_counters(out)
    assert not counters and notes and notes[0]["args"]["recorded"] == 0
    text = summary(out)
    assert "CPU estimated (sampled)" in text
    assert "no scheduler events: perf_event_open" in text


def test_lost_records_are_counted(tmp_path):
    python = python_311_or_312()
    out = str(tmp_path / "lost.cvf")
    r = trace(python, "flip", out, binary=SEAMS_VCATTACH,
              env=seams_env(VCATTACH_TEST_SCHED_PAGES="1"))
    counters, notes = sched_counters(out)
    assert notes and notes[0]["args"]["lost"] > 0, (notes, r.stderr)
    assert "lost (a ring was full)" in r.stderr
    text = summary(out)
    assert re.search(r"scheduler events lost: [1-9]", text), text[:1500]


MS = 1000.0  # µs


def known_states(tmp_path):
    """The trace of test_split_arithmetic_on_known_states, as JSON; its path."""
    ev = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "w"}}]
    for name, s, e in (("f", 0, 100), ("g", 20, 60), ("time.sleep", 100, 200)):
        ev.append({"ph": "X", "name": name, "cat": "FEE", "pid": 1, "tid": 7,
                   "ts": s * MS, "dur": (e - s) * MS})
    for ts, on, run in ((0, 1, 0), (30, 0, 1), (50, 0, 0), (80, 1, 0), (100, 0, 0),
                        (200, 0, 0)):
        ev.append({"ph": "C", "name": "sched 7", "pid": 1, "tid": 7, "ts": ts * MS,
                   "args": {"on_cpu": on, "runnable": run}})
    path = tmp_path / "known.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    return path


def test_split_arithmetic_on_known_states(tmp_path):
    """Thread 7: f 0..100 ms with g 20..60 inside.  States: on-CPU 0..30, runnable 30..50,
    blocked 50..80, on-CPU 80..100.  g (20..60): 10 on, 20 runnable, 10 blocked; f's self
    (0..20, 60..100): 20 + 20 on, 20 blocked.  time.sleep 100..200 blocked all through."""
    text = summary(str(known_states(tmp_path)))
    assert "CPU exact (scheduler events)" in text
    w = sections(text)["w"]
    f, g = find(w["work"], "f"), find(w["work"], "g")
    assert f[0] == pytest.approx(40.0) and f[12] == pytest.approx(0.0)  # self on, starved
    assert g[0] == pytest.approx(10.0) and g[12] == pytest.approx(20.0)
    assert find(w["wait"], "g")[0] == pytest.approx(10.0)  # blocked: off-CPU
    assert find(w["wait"], "f")[0] == pytest.approx(20.0)
    assert find(w["wait"], "time.sleep")[0] == pytest.approx(100.0)
    assert "20.000 ms runnable" not in w["title"] and "CPU starved" in w["title"]


def test_working_stacks_on_known_states(tmp_path):
    """`convert --working` on the known states above: each stack weighs its self on-CPU time
    (f 40 ms, f;g 10 ms, time.sleep nothing) instead of its wall time (60, 40, 100 ms), in the
    folded stacks, the speedscope profile (sampled, weights in µs) and the flame graph."""
    path = str(tmp_path / "known.cvf")
    subprocess.run([VCATTACH, "convert", str(known_states(tmp_path)), "-o", path], check=True,
                   timeout=60)
    assert folded(path) == {("f",): 60000, ("f", "g"): 40000, ("time.sleep",): 100000}
    assert folded(path, "--working") == {("f",): 40000, ("f", "g"): 10000}

    r = subprocess.run([VCATTACH, "convert", path, "--format", "speedscope", "--working",
                        "-o", "-"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    names = [f["name"] for f in doc["shared"]["frames"]]
    (prof,) = doc["profiles"]
    assert prof["type"] == "sampled" and prof["unit"] == "microseconds"
    got = {tuple(names[i] for i in s): w for s, w in zip(prof["samples"], prof["weights"])}
    assert got == {("f",): 40000, ("f", "g"): 10000} and prof["endValue"] == 50000

    svg = str(tmp_path / "working.svg")
    subprocess.run([VCATTACH, "convert", path, "--format", "svg", "--working", "-o", svg],
                   check=True, timeout=60)
    text = open(svg).read()
    assert "flame graph of working (on-CPU) time" in text
    widths = {m.group(2): float(m.group(1)) for m in re.finditer(
        r'data-w="([\d.]+)"[^>]*><title>([^<(]+?)[ <(]', text)}
    assert widths["g"] == pytest.approx(0.2, abs=1e-6), widths  # 10 of the 50 ms on-CPU
    assert "time.sleep" not in widths, widths  # it ran nothing: no width, not drawn


def test_working_without_cpu_data_goes_by_names(tmp_path):
    """--working with a format that has no stacks to weigh is a usage error (exit 2).  On a
    trace without on-CPU data (no scheduler events, no CPU samples: an older agent's,
    VizTracer's) working time is what `summary` calls working there: a call's self time
    unless its name says it waits."""
    ev = [{"ph": "X", "name": name, "cat": "FEE", "pid": 1, "tid": 7, "ts": s * MS,
           "dur": d * MS} for name, s, d in (("f", 0, 10), ("g", 2, 3), ("time.sleep", 10, 5))]
    src, path = tmp_path / "plain.json", str(tmp_path / "plain.cvf")
    src.write_text(json.dumps({"traceEvents": ev}))
    subprocess.run([VCATTACH, "convert", str(src), "-o", path], check=True, timeout=60)
    r = subprocess.run([VCATTACH, "convert", path, "--working", "-o", str(tmp_path / "x.json")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--working applies to --format svg" in r.stderr, r.stderr
    assert not (tmp_path / "x.json").exists()
    assert folded(path) == {("f",): 7000, ("f", "g"): 3000, ("time.sleep",): 5000}
    assert folded(path, "--working") == {("f",): 7000, ("f", "g"): 3000}

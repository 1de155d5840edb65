"""On-CPU vs off-CPU, measured: the agent samples every traced thread's CPU clock
(agent/cpu_sample.c), the trace carries the samples as counters "cpu TID" (ph "C"), and
`vcattach summary` splits every function's inclusive time with them (trace/cpu.c).

The target (targets/cpu_split.py) has a thread per way of spending a call: asleep in
time.sleep, hashing in C, blocked on a pipe read (_io.BufferedReader.read, on no list), in
libc poll through ctypes (on no list), and half hashing half asleep; each thread reads its own
CPU clock (time.thread_time) and CLOCK_MONOTONIC around every call.  Checked:
  1. per call of 50 ms or more, the on-CPU share the trace's samples give (interpolated here
     as docs/cvf-format.md says) is within 10 percentage points of the thread's own clock;
  2. `vcattach summary`'s on-CPU and off-CPU columns are that same interpolation, summed;
  3. the pipe read and the poll, named on no list, come out off-CPU: in the waiting table
     (kind off-CPU), their threads >= 90 % waiting, while the hash thread's working time is
     its on-CPU time (within 10 points of its own clock).
"""
import json
import os
import re
import subprocess
import time

import pytest

from support.paths import PYTHONS, TESTS, VCATTACH
from support.targets import Target
from vcattach import cvf

TARGET = os.path.join(TESTS, "targets", "cpu_split.py")
WORKERS = ("sleep", "hash", "pipe", "poll", "mixed")
MIN_CALL_S = 0.050


def wanted_pythons():
    """(python, how): `trace` under 3.11 (pyenv), the static 3.11 (Debian's), 3.12
    (sys.monitoring), 3.13 when built; `start` (the agent spools itself) under 3.12."""
    rows = []
    for p in PYTHONS:
        if p["minor"] in (311, 312, 313):
            if not any(r["minor"] == p["minor"] and r["kind"] == p["kind"] for r in rows):
                rows.append(p)
    params = [pytest.param(p, "trace", id=p["id"]) for p in rows]
    params += [pytest.param(p, "start", id=p["id"] + "-start") for p in rows
               if p["minor"] == 312][:1]
    return params


def human_ms(text):
    """`vcattach requests`' durations ("139.4 µs", "167.809 ms", "1.2 s") in ms."""
    v, unit = text.split()
    return float(v) * {"µs": 1e-3, "ms": 1.0, "s": 1e3}[unit]


class CpuSplit(Target):
    def __init__(self, python):
        super().__init__(python, [TARGET], stdin=subprocess.PIPE)

    def wait_ready(self, deadline):
        line = self.readline(max(0.0, deadline - time.monotonic()))
        assert line.strip() == "ready", "cpu_split target did not start: %r %s" % (
            line, self.stderr_if_dead())

    def finish(self, timeout=60):
        """Stops the workers; their calls: [(func, start_us, end_us, cpu_s)]."""
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        line = self.readline(timeout)
        assert line, "cpu_split target printed no report"
        return [(f, s * 1e6, e * 1e6, c) for f, s, e, c in json.loads(line)["calls"]]


def samples_by_tid(events):
    out = {}
    for e in events:
        if e.get("ph") == "C" and e["name"].startswith("cpu "):
            assert e["name"] == "cpu %d" % e["tid"]
            out.setdefault(e["tid"], []).append((e["ts"], e["args"]["ms"] * 1000.0))
    for v in out.values():
        v.sort()
    return out


def on_cpu_us(samples, start, end):
    """The documented estimate: the clock at start and at end interpolated linearly between
    the samples around them; outside the samples nothing is counted."""
    def at(x):
        for (t0, c0), (t1, c1) in zip(samples, samples[1:]):
            if t0 <= x <= t1:
                return c0 if t1 == t0 else c0 + (c1 - c0) * (x - t0) / (t1 - t0)
        return None
    a, b = max(start, samples[0][0]), min(end, samples[-1][0])
    if b <= a:
        return 0.0
    return min(max(at(b) - at(a), 0.0), b - a)


def summary_rows(path, kinds=None, sections=None):
    """{thread name: {function name without location: (on ms, off ms)}} from the working and
    waiting tables (the first row of a name wins: its on/off columns are the same in both).
    kinds: a dict that gets {thread name: {function: kind}} of the waiting table's rows
    (measured, a function can be in both tables: its on-CPU self time is work, its off-CPU
    self time waiting); sections: a dict that gets {thread name: (in calls, working,
    waiting)} in ms, from the section lines."""
    out = subprocess.run([VCATTACH, "summary", path, "--top", "100"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows, current, waiting = {}, None, False
    for line in out.stdout.splitlines():
        m = re.match(r"^(\S.*) \(pid \d+, tid \d+\): [\d,]+ calls?, (\S+ \S+) in calls "
                     r"\((\S+ \S+) working, (\S+ \S+) waiting\)", line)
        if m:
            current, waiting = rows.setdefault(m.group(1), {}), False
            if kinds is not None:
                kinds.setdefault(m.group(1), {})
            if sections is not None:
                sections[m.group(1)] = tuple(human_ms(m.group(i)) for i in (2, 3, 4))
            thread = m.group(1)
            continue
        if line.startswith("  waiting: "):
            waiting = True
            continue
        m = re.match(r"^\s+.*?\s(-?[\d.]+)\s+(-?[\d.]+)\s+([\d.]+)%  (?:(\S+(?: attach)?)\s+)?"
                     r"(\S+)(?: \(.*\))?$", line)
        if m and current is not None and not line.lstrip().startswith(("self", "wait ms")):
            current.setdefault(m.group(5), (float(m.group(1)), float(m.group(2))))
            if waiting and kinds is not None and m.group(4) != "at attach":
                kinds[thread][m.group(5)] = m.group(4)
    return out.stdout, rows


@pytest.mark.parametrize("python,how", wanted_pythons())
def test_on_cpu_matches_the_threads_own_clocks(python, how, tmp_path):
    out = str(tmp_path / "out.cvf")
    with CpuSplit(python) as t:
        if how == "trace":
            r = subprocess.run([VCATTACH, "--pid", str(t.pid), "-t", "3s", "--no-sched", "-o", out],
                               capture_output=True, text=True, timeout=120)
        else:  # no controller: the agent's own spool must carry the samples too
            r = subprocess.run([VCATTACH, "start", "--pid", str(t.pid), "-o", out],
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr
            time.sleep(3)
            r = subprocess.run([VCATTACH, "stop", "--pid", str(t.pid)], capture_output=True,
                               text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        calls = t.finish()
        t.assert_untouched()
    trace = cvf.load(out)["traceEvents"]
    tids = {e["args"]["name"]: e["tid"] for e in trace
            if e.get("ph") == "M" and e["name"] == "thread_name"}
    samples = samples_by_tid(trace)
    for w in WORKERS:
        assert w in tids, "thread %s not in the trace: %s" % (w, sorted(tids))
        assert len(samples.get(tids[w], ())) >= 2, "thread %s has no CPU samples" % w

    # 1. per call of 50 ms or more: the samples against the thread's own clock
    checked = {}
    for w in WORKERS:
        func, tid = w + "_call", tids[w]
        traced = [(e["ts"], e["ts"] + e["dur"]) for e in trace
                  if e.get("ph") == "X" and e["tid"] == tid and e["name"].startswith(func + " ")
                  and not (e.get("args") or {}).get("vcattach")]
        mine = [(s, e, c) for f, s, e, c in calls if f == func]
        first, last = samples[tid][0][0], samples[tid][-1][0]
        for s, e in traced:
            near = [m for m in mine if abs(m[0] - s) < 3000 and abs(m[1] - e) < 3000]
            if not near or e - s < MIN_CALL_S * 1e6 or s < first or e > last:
                continue  # cut by the trace's end, short, or not all of it sampled
            ms, me, mc = near[0]
            truth = mc * 1e6 / (me - ms)
            measured = on_cpu_us(samples[tid], s, e) / (e - s)
            assert abs(measured - truth) <= 0.10, (
                "%s call at %.0f µs, %.1f ms: on-CPU %.1f%% measured, %.1f%% by the thread's "
                "own clock" % (func, s, (e - s) / 1000, measured * 100, truth * 100))
            checked[w] = checked.get(w, 0) + 1
            if os.environ.get("CPU_SPLIT_VERBOSE"):
                print(w, round(truth, 3), round(measured, 3))
    assert set(checked) == set(WORKERS), "calls checked per worker: %s" % checked

    # 2. summary's columns are the same interpolation summed over the calls
    kinds, sections = {}, {}
    text, rows = summary_rows(out, kinds, sections)
    assert "CPU estimated (sampled): each thread's CPU clock sampled every" in text
    for w in WORKERS:
        func, tid = w + "_call", tids[w]
        spans = [(e["ts"], e["ts"] + e["dur"]) for e in trace
                 if e.get("ph") == "X" and e["tid"] == tid and e["name"].startswith(func + " ")]
        first, last = samples[tid][0][0], samples[tid][-1][0]
        want_on = sum(on_cpu_us(samples[tid], s, e) for s, e in spans) / 1000
        covered = sum(max(0.0, min(e, last) - max(s, first)) for s, e in spans) / 1000
        want_off = covered - want_on
        on, off = rows[w][func]
        assert abs(on - want_on) <= 0.05 * want_on + 1.0, (w, on, want_on)
        assert abs(off - want_off) <= 0.05 * want_off + 1.0, (w, off, want_off)

    # 3. waits that no list names are off-CPU all the same
    for w, func in (("pipe", "_io.BufferedReader.read"), ("poll", "poll_call"),
                    ("sleep", "time.sleep")):
        on, off = rows[w][func]
        assert off > 0 and on / (on + off) < 0.10, (w, func, on, off)
    # ... and they are in the waiting table: the pipe read and the poll as measured off-CPU
    # time (no list names them), time.sleep under its listed kind
    for w, func, kind in (("pipe", "_io.BufferedReader.read", "off-CPU"),
                          ("poll", "poll_call", "off-CPU"), ("sleep", "time.sleep", "sleep")):
        assert kinds[w].get(func) == kind, (w, func, kinds[w])
    for w in ("pipe", "poll"):
        busy, working, waiting = sections[w]
        assert waiting >= 0.90 * busy, (w, sections[w])

    # 3b. the hash thread's working time is its on-CPU time: its share of the time in calls
    # within 10 points of the thread's own clock over its calls
    mine = [(s, e, c) for f, s, e, c in calls if f == "hash_call"]
    first, last = samples[tids["hash"]][0][0], samples[tids["hash"]][-1][0]
    inside = [(s, e, c) for s, e, c in mine if s >= first and e <= last]
    assert inside, "no hash_call within the hash thread's samples"
    truth = sum(c * 1e6 for _, _, c in inside) / sum(e - s for s, e, _ in inside)
    busy, working, waiting = sections["hash"]
    assert abs(working / busy - truth) <= 0.10, (
        "hash thread: %.1f%% working, %.1f%% on-CPU by its own clock" % (
            100 * working / busy, 100 * truth))
    assert kinds["hash"].get("_hashlib.openssl_sha256") in (None, "off-CPU"), kinds["hash"]

    # 4. `vcattach requests` measures a request's on-CPU time the same way
    r = subprocess.run([VCATTACH, "requests", out, "--entry", "pipe_call", "-n", "3"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    measured = re.findall(r"measured: (\S+ \S+) on-CPU, (\S+ \S+) off-CPU of (\S+ \S+) in calls$",
                          r.stdout, re.M)  # (a request partly before the first sample: not)
    assert measured, r.stdout
    for on, off, busy in measured:
        assert human_ms(off) > 0.9 * human_ms(busy), (on, off, busy)


def test_summary_says_when_cpu_was_not_measured(tmp_path):
    """A trace without samples (VizTracer's, an older vcattach's): the name list, said so."""
    from support.cvf_writer import write_cvf
    path = str(tmp_path / "old.cvf")
    write_cvf(path, [(1, 1, "f", 0, 100000)])
    out = subprocess.run([VCATTACH, "summary", path], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "CPU not measured (no CPU samples in this trace)" in out.stdout
    assert "on-CPU ms" not in out.stdout


def _counter_group(pid, tid, name, key, rows):
    """A .cvf counter group (docs/cvf-format.md 0x04): rows of (ts_ns, tag, payload bytes)."""
    import struct
    out = b"\x04" + struct.pack("<QQ", pid, tid) + name.encode() + b"\0"
    out += struct.pack("<Q", 1) + key.encode() + b"\0" + struct.pack("<Q", len(rows))
    for ts, tag, payload in rows:
        out += struct.pack("<qB", ts, tag) + payload
    return out


def test_hostile_cpu_counters_are_not_trusted(tmp_path):
    """A file may say anything: a CPU clock going back, NaN, negative, absurd values, a
    counter named for another thread.  summary takes what is sane (on-CPU between 0 and the
    call's duration) and never fails or crashes on the rest."""
    import struct
    from support.cvf_writer import _zblob, write_cvf
    base = str(tmp_path / "base.cvf")
    MS_TICKS = 100000  # 1 ms in 10 ns ticks
    write_cvf(base, [(1, 7, "f", 0, 100 * MS_TICKS), (1, 7, "g", 10 * MS_TICKS, 50 * MS_TICKS)],
              thread_names={(1, 7): "w"})
    data = open(base, "rb").read()
    other_at = len(data) - 1 - len(_zblob([]))  # counters go before the other-events record
    assert data[other_at] == 5
    f = lambda v: (0x24, struct.pack("<d", v))
    rows = [(0, *f(0.0)), (20_000_000, *f(10.0)), (40_000_000, *f(5.0)),  # goes back
            (60_000_000, *f(float("nan"))), (70_000_000, *f(-3.0)), (80_000_000, *f(1e300)),
            (90_000_000, 0x23, struct.pack("<q", 40)), (100_000_000, 0x22, b"")]
    groups = (_counter_group(1, 7, "cpu 7", "ms", rows)
              + _counter_group(1, 7, "cpu 8", "ms", [(0, *f(0.0)), (5, *f(99.0))])
              + _counter_group(1, 7, "cpu 7", "other", [(0, *f(0.0)), (5, *f(99.0))]))
    path = str(tmp_path / "hostile.cvf")
    with open(path, "wb") as out:
        out.write(data[:other_at] + groups + data[other_at:])
    r = subprocess.run([VCATTACH, "summary", path], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "CPU estimated (sampled)" in r.stdout
    _, rows_by_thread = summary_rows(path)
    for func, dur_ms in (("f", 100.0), ("g", 50.0)):
        on, off = rows_by_thread["w"][func]
        assert 0 <= on <= dur_ms and 0 <= off <= dur_ms and abs(on + off - dur_ms) < 0.01
    # the sane samples: 0 ms at 0, 10 at 20 ms, 40 at 90 ms, 40 at 100 ms: f ran 40 ms
    assert abs(rows_by_thread["w"]["f"][0] - 40.0) < 0.01
    # --sort cpu ranks by measured on-CPU time (the 10th column), most first
    r = subprocess.run([VCATTACH, "summary", path, "--sort", "cpu", "--all"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    on = [float(line.split()[9]) for line in r.stdout.splitlines()
          if re.match(r"^\s+[\d.]+\s+[\d.]+%", line)]
    assert len(on) == 2 and on == sorted(on, reverse=True) and on[0] > on[1], r.stdout

"""`vcattach summary` with CPU samples: working vs waiting measured, not guessed by name.

A hand-built Chrome-trace JSON: calls, and per thread a "cpu TID" counter (ph "C", args.ms
the thread's cumulative on-CPU ms) sampled every 10 ms, its rate changing only on sample
times, so the interpolation is exact and every figure is known in advance
(trace/summary.h, "Waiting, measured"):
  w (tid 7), samples 0..400 ms:
    ext.query   0..100   clock +10 ms   unlisted: 10 working, 90 waiting (kind off-CPU)
    time.sleep  100..200 clock +0       listed:   100 waiting (kind sleep)
    crunch      200..300 clock +100     CPU-bound: 100 working, no waiting
    outer       300..400 contains inner 320..360; the clock runs at full rate 300..320,
                half 320..360, not at all 360..400: outer self 60 ms = 20 on + 40 off,
                inner 40 ms = 20 on + 20 off; outer's working inclusive time is 40
  x (tid 8), samples only 50..150 ms (full rate to 100, then stopped):
    calc        0..100   50 ms sampled, all on-CPU; 50 ms before the first sample: by name,
                         unlisted, so working: 100 working
    time.sleep  100..200 50 ms sampled off-CPU, 50 ms after the last sample: listed, so
                         waiting: 100 waiting (kind sleep)
  y (tid 9), no samples: ext.query 0..100 is working, by name, as without samples.
  z (tid 10), samples 0..200 ms, the clock running 0..50 and 100..150 only:
    poller      0..200, in progress at attach, contains handle 100..150: the gap before
                its first child is 50 on-CPU (work) and 50 off-CPU ("at attach"); after
                handle, 50 off-CPU (kind off-CPU); handle 50 working
  v (tid 11), samples 50..200 ms, the clock stopped:
    time.sleep  0..100 contains cb 20..40, both partly before the first sample: the sleep's
                unsampled self time is waiting by its name, and so is cb's, inside it,
                booked to the sleep: 100 waiting, nothing working
  u (tid 12), samples 0..100 ms, the clock stopped:
    time.sleep  0..100 in progress at attach: listed, so its off-CPU time is kind sleep,
                not "at attach" (as without samples)
"""
import json
import subprocess

import pytest

from support.paths import VCATTACH

PID = 1


def x(tid, name, start_ms, end_ms):
    return {"ph": "X", "name": name, "cat": "FEE", "pid": PID, "tid": tid,
            "ts": start_ms * 1000.0, "dur": (end_ms - start_ms) * 1000.0}


def clock(tid, rates, start_ms, end_ms):
    """Samples every 10 ms from start to end; rates: [(until_ms, on-CPU ms per ms)]."""
    out, cpu, t = [], 0.0, start_ms
    while True:
        out.append({"ph": "C", "name": "cpu %d" % tid, "pid": PID, "tid": tid,
                    "ts": t * 1000.0, "args": {"ms": cpu}})
        if t >= end_ms:
            return out
        rate = next(r for until, r in rates if t < until)
        cpu += 10 * rate
        t += 10


def trace(tmp_path, with_cpu=True):
    events = [{"ph": "M", "name": "thread_name", "pid": PID, "tid": tid, "args": {"name": n}}
              for tid, n in ((7, "w"), (8, "x"), (9, "y"), (10, "z"), (11, "v"), (12, "u"))]
    events += [x(7, "ext.query", 0, 100), x(7, "time.sleep", 100, 200), x(7, "crunch", 200, 300),
               x(7, "outer", 300, 400), x(7, "inner", 320, 360),
               x(8, "calc", 0, 100), x(8, "time.sleep", 100, 200),
               x(9, "ext.query", 0, 100),
               dict(x(10, "poller", 0, 200), args={"vcattach": "at_attach"}),
               x(10, "handle", 100, 150),
               x(11, "time.sleep", 0, 100), x(11, "cb", 20, 40),
               dict(x(12, "time.sleep", 0, 100), args={"vcattach": "at_attach"})]
    if with_cpu:
        events += clock(7, [(100, 0.1), (200, 0.0), (320, 1.0), (360, 0.5), (400, 0.0)], 0, 400)
        events += clock(8, [(100, 1.0), (150, 0.0)], 50, 150)
        events += clock(10, [(50, 1.0), (100, 0.0), (150, 1.0), (200, 0.0)], 0, 200)
        events += clock(11, [(200, 0.0)], 50, 200)
        events += clock(12, [(100, 0.0)], 0, 100)
    path = tmp_path / ("cpu.json" if with_cpu else "nocpu.json")
    path.write_text(json.dumps({"traceEvents": events}))
    return str(path)


def ms(text):
    v, unit = text.split()
    return float(v) * {"µs": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def tables(path, *args):
    """{section title: {"line": (in calls, working, waiting) ms,
                        "work": {name: (self ms, total ms)}, "wait": {name: (wait ms, kind)}}}"""
    out = subprocess.run([VCATTACH, "summary", path, "--top", "100"] + list(args),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    sections, cur, waiting = {}, None, False
    import re
    for line in out.stdout.splitlines()[1:]:
        m = re.match(r"^(\S.*): [\d,]+ calls?, (\S+ \S+) in calls(?: \((\S+ \S+) working, "
                     r"(\S+ \S+) waiting\))?", line)
        if m:
            cur = sections.setdefault(m.group(1), {"work": {}, "wait": {}})
            cur["line"] = tuple(ms(g) if g else None for g in m.group(2, 3, 4))
            waiting = False
            continue
        if line.startswith("  waiting: "):
            waiting = True
            continue
        t = line.split()
        if cur is None or len(t) < 8 or not re.match(r"^-?[\d.]+$", t[0]):
            continue
        if waiting:
            if t[-3:-1] != ["at", "attach"]:  # at-attach rows: read from the text
                cur["wait"][t[-1]] = (float(t[0]), t[-2])
        else:
            cur["work"][t[-1]] = (float(t[0]), float(t[2]))
    return out.stdout, sections


def close(a, b):
    return abs(a - b) < 0.002


def test_measured_split_per_thread(tmp_path):
    text, s = tables(trace(tmp_path))
    assert "CPU estimated (sampled)" in text
    w = s["w (pid 1, tid 7)"]
    busy, working, waiting = w["line"]
    assert close(busy, 400) and close(working, 150) and close(waiting, 250), w["line"]
    want_work = {"crunch": (100, 100), "outer": (20, 40), "inner": (20, 20),
                 "ext.query": (10, 10)}
    assert set(w["work"]) == set(want_work), w["work"]
    for name, (self_ms, total_ms) in want_work.items():
        got = w["work"][name]
        assert close(got[0], self_ms) and close(got[1], total_ms), (name, got)
    assert list(w["work"]) == ["crunch", "inner", "outer", "ext.query"] or \
        list(w["work"]) == ["crunch", "outer", "inner", "ext.query"], list(w["work"])
    want_wait = {"time.sleep": (100, "sleep"), "ext.query": (90, "off-CPU"),
                 "outer": (40, "off-CPU"), "inner": (20, "off-CPU")}
    assert set(w["wait"]) == set(want_wait), w["wait"]
    for name, (wait_ms, kind) in want_wait.items():
        assert close(w["wait"][name][0], wait_ms) and w["wait"][name][1] == kind, (name, w["wait"])
    assert list(w["wait"])[:2] == ["time.sleep", "ext.query"], list(w["wait"])

    # x: the unsampled parts of its calls go by the names
    xs = s["x (pid 1, tid 8)"]
    busy, working, waiting = xs["line"]
    assert close(busy, 200) and close(working, 100) and close(waiting, 100), xs["line"]
    assert set(xs["work"]) == {"calc"} and close(xs["work"]["calc"][0], 100), xs["work"]
    assert xs["wait"] == {"time.sleep": (100.0, "sleep")}, xs["wait"]

    # z: a call in progress at attach: its gap's off-CPU part is "at attach"
    zs = s["z (pid 1, tid 10)"]
    busy, working, waiting = zs["line"]
    assert close(busy, 200) and close(working, 100) and close(waiting, 100), zs["line"]
    assert close(zs["work"]["poller"][0], 50) and close(zs["work"]["handle"][0], 50), zs["work"]
    assert zs["wait"] == {"poller": (50.0, "off-CPU")}, zs["wait"]
    attach = [l for l in text.splitlines() if "at attach  poller" in l]
    assert len(attach) == 1 and close(float(attach[0].split()[0]), 50), attach

    # v: unsampled time inside a listed wait is the wait's, as without samples
    vs = s["v (pid 1, tid 11)"]
    busy, working, waiting = vs["line"]
    assert close(busy, 100) and close(working, 0) and close(waiting, 100), vs["line"]
    assert vs["wait"] == {"time.sleep": (100.0, "sleep")}, vs["wait"]

    # u: a listed call in progress at attach keeps its kind
    us = s["u (pid 1, tid 12)"]
    assert us["wait"] == {"time.sleep": (100.0, "sleep")}, us["wait"]
    assert not [l for l in text.splitlines() if "at attach  time.sleep" in l]

    # y: no samples, the names only: an unlisted call is all work
    ys = s["y (pid 1, tid 9)"]
    assert close(ys["line"][1], 100) and close(ys["line"][2], 0), ys["line"]
    assert ys["wait"] == {} and close(ys["work"]["ext.query"][0], 100), ys


def test_measured_split_merged_and_all(tmp_path):
    path = trace(tmp_path)
    _, s = tables(path, "--merged")
    ((title, m),) = s.items()
    busy, working, waiting = m["line"]
    assert close(busy, 1100) and close(working, 450) and close(waiting, 650), m["line"]
    # ext.query: 10 on-CPU on w, 100 by name on y; 90 off-CPU on w
    assert close(m["work"]["ext.query"][0], 110), m["work"]
    assert m["wait"]["ext.query"] == (90.0, "off-CPU"), m["wait"]
    assert m["wait"]["time.sleep"] == (400.0, "sleep"), m["wait"]
    # --all: no split, every self time ranked as work, as without samples
    _, s = tables(path, "--all", "--thread", "w")
    ((title, a),) = s.items()
    assert a["wait"] == {} and a["line"][1] is None, a
    assert close(a["work"]["ext.query"][0], 100) and close(a["work"]["outer"][0], 60), a["work"]


def test_without_samples_the_names_decide(tmp_path):
    text, s = tables(trace(tmp_path, with_cpu=False))
    assert "CPU not measured" in text and "off-CPU" not in text
    w = s["w (pid 1, tid 7)"]
    busy, working, waiting = w["line"]
    assert close(busy, 400) and close(working, 300) and close(waiting, 100), w["line"]
    assert w["wait"] == {"time.sleep": (100.0, "sleep")}, w["wait"]
    assert close(w["work"]["ext.query"][0], 100) and close(w["work"]["outer"][0], 60)

"""`vcattach convert --format speedscope|collapsed`: the exports for other viewers.

speedscope output is validated structurally (schema fields, one evented profile per thread,
every O closed by a C of the same frame, properly nested, `at` sorted and inside
[startValue, endValue]) and numerically: self times recomputed from its events equal an
independent computation from the input events.  Collapsed stacks are checked line by line
against known self times.  Traces are written as .cvf by support/cvf_writer.py.
"""
import json
import os
import subprocess

import pytest

from support.cvf_writer import known_trace, oracle, random_events, write_cvf
from support.paths import TESTS, VCATTACH, corpus_names


def _wired():
    try:
        out = subprocess.run([VCATTACH, "convert", "--help"], capture_output=True, text=True,
                             timeout=30)
    except OSError:
        return False
    return "speedscope" in out.stdout and "collapsed" in out.stdout


pytestmark = pytest.mark.skipif(
    not _wired(), reason="vcattach convert has no --format speedscope|collapsed yet "
                         "(trace/convert_job.c's format table needs the two rows from export.h)")


def convert(src, fmt, dst, check=True):
    proc = subprocess.run([VCATTACH, "convert", str(src), "--format", fmt, "-o", str(dst),
                           "--force"], capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def speedscope(src, tmp_path):
    dst = tmp_path / (os.path.basename(str(src)) + ".speedscope.json")
    convert(src, "speedscope", dst)
    with open(str(dst), encoding="utf-8") as f:
        return json.load(f)


def collapsed(src, tmp_path):
    dst = tmp_path / (os.path.basename(str(src)) + ".folded")
    convert(src, "collapsed", dst)
    lines = dst.read_text(encoding="utf-8").splitlines()
    stacks = {}
    for line in lines:
        stack, value = line.rsplit(" ", 1)
        assert stack not in stacks, "one line per distinct stack"
        stacks[stack] = int(value)
    return stacks


def validate_speedscope(doc):
    """Checks the file's structure; returns {profile name: {frame name: self ticks}}."""
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    assert doc["exporter"].startswith("vcattach ")
    frames = doc["shared"]["frames"]
    assert all(isinstance(f["name"], str) for f in frames)
    assert 0 <= doc["activeProfileIndex"] < len(doc["profiles"])
    selfs = {}
    for prof in doc["profiles"]:
        assert prof["type"] == "evented" and prof["unit"] == "microseconds"
        assert prof["startValue"] <= prof["endValue"]
        stack, last, per_frame = [], prof["startValue"], {}
        for ev in prof["events"]:
            at = round(ev["at"] * 100)  # exact: the export writes ticks as decimal µs
            assert ev["at"] >= last, "events sorted by at"
            assert prof["startValue"] <= ev["at"] <= prof["endValue"]
            last = ev["at"]
            assert 0 <= ev["frame"] < len(frames)
            if ev["type"] == "O":
                stack.append([ev["frame"], at, 0])
            else:
                assert ev["type"] == "C"
                frame, opened, child = stack.pop()
                assert frame == ev["frame"], "C closes the innermost open frame"
                name = frames[frame]["name"]
                per_frame[name] = per_frame.get(name, 0) + (at - opened) - child
                if stack:
                    stack[-1][2] += at - opened
        assert stack == [], "every O has its C"
        assert prof["events"], "no empty profiles"
        selfs[prof["name"]] = per_frame
    return selfs


# ---- speedscope ---------------------------------------------------------------------------

def test_speedscope_known_trace(tmp_path):
    doc = speedscope(known_trace(tmp_path), tmp_path)
    validate_speedscope(doc)
    names = [f["name"] for f in doc["shared"]["frames"]]
    assert sorted(names) == ["A", "B", "C", "D"]
    profiles = {p["name"]: p for p in doc["profiles"]}
    assert list(profiles) == ["MainThread (tid 1)", "worker (tid 2)"]
    main = profiles["MainThread (tid 1)"]
    assert (main["startValue"], main["endValue"]) == (0, 100000)
    assert [(e["type"], names[e["frame"]], e["at"]) for e in main["events"]] == [
        ("O", "A", 0), ("O", "B", 10000), ("O", "A", 15000), ("C", "A", 20000),
        ("C", "B", 40000), ("C", "A", 100000)]
    worker = profiles["worker (tid 2)"]
    assert [(e["type"], names[e["frame"]], e["at"]) for e in worker["events"]] == [
        ("O", "C", 0), ("O", "D", 10000), ("C", "D", 20000), ("O", "D", 30000),
        ("C", "D", 35000), ("C", "C", 50000)]


def test_speedscope_clips_overlapping_calls(tmp_path):
    path = write_cvf(str(tmp_path / "overlap.cvf"),
                     [(1, 1, "P", 0, 1000), (1, 1, "Q", 500, 1000)])
    doc = speedscope(path, tmp_path)
    validate_speedscope(doc)
    names = [f["name"] for f in doc["shared"]["frames"]]
    assert [(e["type"], names[e["frame"]], e["at"]) for e in doc["profiles"][0]["events"]] == [
        ("O", "P", 0), ("O", "Q", 5), ("C", "Q", 10), ("C", "P", 10)]


def test_speedscope_frames_and_awkward_names(tmp_path):
    evil = 'quote" back\\slash\nnewline \u00e9t\u00e9 (/srv/x y.py:42)'
    path = write_cvf(str(tmp_path / "names.cvf"),
                     [(1, 1, "handler (/srv/app/views.py:120)", 0, 100),
                      (1, 1, evil, 10, 10), (1, 1, "builtins.len", 30, 5)])
    doc = speedscope(path, tmp_path)
    frames = {f["name"]: f for f in doc["shared"]["frames"]}
    assert frames["handler (/srv/app/views.py:120)"]["file"] == "/srv/app/views.py"
    assert frames["handler (/srv/app/views.py:120)"]["line"] == 120
    assert frames[evil]["file"] == "/srv/x y.py" and frames[evil]["line"] == 42
    assert "file" not in frames["builtins.len"]


def test_speedscope_self_times_match_oracle(tmp_path):
    events = random_events(6000)
    doc = speedscope(write_cvf(str(tmp_path / "random.cvf"), events), tmp_path)
    selfs = validate_speedscope(doc)
    expected, _ = oracle(events)
    got = {int(name.rsplit("tid ", 1)[1].rstrip(")")): v for name, v in selfs.items()}
    assert got == {tid: {n: s["self"] for n, s in stats.items()}
                   for (_, tid), stats in expected.items()}


@pytest.mark.parametrize("name", corpus_names() or ["(corpus absent)"])
def test_speedscope_corpus_is_well_formed(name, corpus_dir, tmp_path):
    doc = speedscope(os.path.join(corpus_dir, name + ".cvf"), tmp_path)
    if doc["profiles"]:
        validate_speedscope(doc)


# ---- collapsed ----------------------------------------------------------------------------

def test_collapsed_known_trace(tmp_path):
    stacks = collapsed(known_trace(tmp_path), tmp_path)
    # self µs: A outer 100-30, B 30-5, inner A 5; C 50-10-5, D 10+5
    assert stacks == {"A": 70000, "A;B": 25000, "A;B;A": 5000, "C": 35000, "C;D": 15000}


def test_collapsed_names_are_one_field(tmp_path):
    path = write_cvf(str(tmp_path / "names.cvf"),
                     [(1, 1, "outer;x (/a.py:1)", 0, 500), (1, 1, "in\nner", 100, 200)])
    assert collapsed(path, tmp_path) == {"outer:x (/a.py:1)": 3, "outer:x (/a.py:1);inner": 2}


def test_collapsed_matches_stack_oracle(tmp_path):
    events = random_events(6000)
    stacks = collapsed(write_cvf(str(tmp_path / "random.cvf"), events), tmp_path)
    expected = {}
    by_thread = {}
    for pid, tid, name, ts, dur, _ in events:
        by_thread.setdefault(tid, []).append((ts, ts + dur, name))
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e[0], -e[1]))
        stack = []  # [end, path, child, start]

        def close():
            end, path, child, start = stack.pop()
            expected[path] = expected.get(path, 0) + (end - start) - child
            if stack:
                stack[-1][2] += end - start

        for ts, end, name in evs:
            while stack and stack[-1][0] <= ts:
                close()
            if stack:
                end = min(end, stack[-1][0])
            stack.append([end, (stack[-1][1] + ";" if stack else "") + name, 0, ts])
        while stack:
            close()
    rounded = {k: (v + 50) // 100 for k, v in expected.items() if (v + 50) // 100 > 0}
    assert stacks == rounded


# ---- bad input ----------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["speedscope", "collapsed"])
def test_corrupt_input_leaves_nothing(fmt, tmp_path):
    good = open(known_trace(tmp_path), "rb").read()
    bad = tmp_path / "truncated.cvf"
    bad.write_bytes(good[:50])
    dst = tmp_path / "out"
    proc = convert(bad, fmt, dst, check=False)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "offset" in proc.stderr
    assert not dst.exists() and not (tmp_path / "out.tmp").exists()


# ---- counters beyond 64 bits (issue 10) ------------------------------------------------------

def _python_reader():
    import sys
    sys.path.insert(0, os.path.join(TESTS, "..", "python"))
    from vcattach import cvf
    return cvf


def test_counter_values_beyond_64_bits_round_trip(tmp_path):
    """VizTracer writes Python ints of any size as counter values; the .cvf carries them as
    LONG_STRING (tag 0x25) and the way back prints the same digits."""
    big, neg = 2 ** 70 + 3, -(2 ** 65)
    src = tmp_path / "big.json"
    src.write_text(json.dumps({"traceEvents": [
        {"ph": "C", "name": "mem", "pid": 1, "tid": 1, "ts": 1.0,
         "args": {"rss": big, "small": 5, "neg": neg}},
        {"ph": "C", "name": "mem", "pid": 1, "tid": 1, "ts": 2.0,
         "args": {"rss": big, "small": 2 ** 63 - 1, "neg": 7}},
        {"ph": "X", "name": "f", "pid": 1, "tid": 1, "ts": 0.5, "dur": 3.0},
    ]}))
    cvf_path = tmp_path / "big.cvf"
    proc = subprocess.run([VCATTACH, "convert", str(src), "-o", str(cvf_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    raw = cvf_path.read_bytes()
    assert b"\x25" + str(big).encode() + b"\x00" in raw
    doc = _python_reader().load(str(cvf_path))
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    assert [c["args"] for c in sorted(counters, key=lambda c: c["ts"])] == [
        {"rss": big, "small": 5, "neg": neg}, {"rss": big, "small": 2 ** 63 - 1, "neg": 7}]
    back = tmp_path / "back.json"
    proc = subprocess.run([VCATTACH, "convert", str(cvf_path), "-o", str(back)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    again = json.loads(back.read_text())
    assert sorted((c["ts"], c["args"]["rss"]) for c in again["traceEvents"]
                  if c["ph"] == "C") == [(1.0, big), (2.0, big)]


def test_big_integer_outside_a_counter_is_a_clear_error(tmp_path):
    src = tmp_path / "bad.json"
    src.write_text(json.dumps({"traceEvents": [
        {"ph": "i", "name": "x", "pid": 1, "tid": 1, "ts": 1, "args": {"v": 2 ** 70}}]}))
    proc = subprocess.run([VCATTACH, "convert", str(src), "-o", str(tmp_path / "o.cvf")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "beyond 64 bits" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.cvf").exists()


# ---- convert --from/--to/--min-dur (issue 10) ------------------------------------------------

def _window_oracle(events, start, end, min_dur):
    """(pid, tid, name, ts, dur) in ticks kept by a window [start, end] (absolute ticks)."""
    kept = []
    for pid, tid, name, ts, dur, _ in events:
        if dur < min_dur or ts + dur < start or ts > end:
            continue
        a, b = max(ts, start), min(ts + dur, end)
        kept.append((pid, tid, name, a, b - a))
    return sorted(kept)


@pytest.mark.parametrize("window", [("200us", "0.6ms", None), ("0", "300us", "1us"),
                                    ("0.0005", None, None), (None, None, "5us")])
def test_window_keeps_and_clips_the_calls_of_the_range(window, tmp_path):
    events = random_events(6000)
    src = write_cvf(str(tmp_path / "w.cvf"), events)
    first = min(e[3] for e in events)
    frm, to, min_dur = window
    args = []
    for opt, v in (("--from", frm), ("--to", to), ("--min-dur", min_dur)):
        if v is not None:
            args += [opt, v]

    def ticks(text):
        for unit, scale in (("ms", 100_000), ("us", 100), ("", 100_000_000)):
            if text.endswith(unit) and (unit or text.replace(".", "").isdigit()):
                return round(float(text[:len(text) - len(unit)] if unit else text) * scale)

    start = first + (ticks(frm) if frm else 0)
    end = first + ticks(to) if to else 2 ** 62
    want = _window_oracle(events, start, end, ticks(min_dur) if min_dur else 0)
    assert want and len(want) < len(events) or min_dur
    out = tmp_path / "w.json"
    proc = subprocess.run([VCATTACH, "convert", src, "-o", str(out)] + args,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = sorted((e["pid"], e["tid"], e["name"], round(e["ts"] * 100), round(e["dur"] * 100))
                 for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X")
    assert got == want
    # the exports see the same window: collapsed self times add up to the kept calls' roots
    folded = tmp_path / "w.folded"
    proc = subprocess.run([VCATTACH, "convert", src, "--format", "collapsed", "-o",
                           str(folded)] + args, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    doc = speedscope_windowed(src, tmp_path, args)
    for prof in doc["profiles"]:
        assert prof["startValue"] >= start / 100 - 0.01
        assert prof["endValue"] <= min(end, 2 ** 62) / 100 + 0.01


def speedscope_windowed(src, tmp_path, args):
    dst = tmp_path / "w.speedscope.json"
    proc = subprocess.run([VCATTACH, "convert", str(src), "--format", "speedscope", "-o",
                           str(dst), "--force"] + args, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(dst.read_text())
    validate_speedscope(doc)
    return doc


@pytest.mark.parametrize("args,words", [
    (["--from", "x"], "--from takes a time"), (["--min-dur", "-1ms"], "--min-dur takes a time"),
    (["--from", "2", "--to", "1"], "--to comes before --from")])
def test_window_usage_errors(args, words, tmp_path):
    src = write_cvf(str(tmp_path / "w.cvf"), random_events(100))
    proc = subprocess.run([VCATTACH, "convert", src, "-o", str(tmp_path / "o.json")] + args,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and words in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.json").exists()

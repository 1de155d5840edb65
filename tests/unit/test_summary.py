"""`vcattach summary`: self/total/calls/mean/max per function, per thread or merged.

Traces are real .cvf files written byte by byte by support/cvf_writer.py (an independent
writer), so the numbers are known in advance:
  MainThread: A(0..100 ms) contains B(10..40) contains A(15..20)   (recursion through B)
  worker:     C(0..50) contains D(10..20) and D(30..35)
plus the agent's drop report, an instant event with args.dropped = 7.
Larger traces (random, and the VizTracer corpus) are checked against an independent Python
computation of the same definitions (support.cvf_writer.oracle).
"""
import json
import os
import re
import struct
import subprocess

import pytest

from support.cvf_writer import (DROPS, KNOWN_EVENTS, KNOWN_NAMES, MS, PERCENTILE_ERROR,
                                known_trace, nearest_rank, oracle, oracle_split, random_events,
                                wait_kind, write_cvf)
from support.paths import TESTS, VCATTACH, corpus_names

# ---- running and parsing the command ------------------------------------------------------

# self ms, self%, total ms, total%, calls, mean µs, p50 µs, p99 µs, max µs, function
ROW = re.compile(r"^\s+(-?[\d.]+)\s+([\d.]+)%\s+(-?[\d.]+)\s+([\d.]+)%\s+([\d,]+)\s+([\d.]+)"
                 r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)  (.*)$")
# wait ms, wait%, calls, mean µs, p50 µs, p99 µs, max µs, kind, function
WAIT_ROW = re.compile(r"^\s+(-?[\d.]+)\s+([\d.]+)%\s+([\d,]+|-)\s+([\d.]+|-)\s+([\d.]+|-)"
                      r"\s+([\d.]+|-)\s+([\d.]+|-)  (\S+(?: attach)?)\s+(.*)$")
SECTION = re.compile(r"^(\S.*): ([\d,]+) calls?, (.*) in calls(?: \((.*) working, (.*) waiting\))?$")


def summary(*args, check=True):
    proc = subprocess.run([VCATTACH, "summary"] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""
    return proc


def parse(stdout, waits=None):
    """(header line, {section title: [(name, row dict) in printed order]}, more-counts).
    waits: a dict that gets {section title: [(name, wait row dict)]} of the waiting tables."""
    lines = stdout.splitlines()
    sections, more, current, in_wait = {}, {}, None, False
    for line in lines[1:]:
        m = SECTION.match(line)
        if m:
            current, in_wait = m.group(1), False
            sections[current] = []
            continue
        if line.startswith("  waiting: "):
            in_wait = True
            if waits is not None:
                waits[current] = []
            continue
        m = WAIT_ROW.match(line) if in_wait else ROW.match(line)
        if m and in_wait:
            if waits is not None:
                waits[current].append((m.group(9), dict(
                    wait_ms=float(m.group(1)), wait_pct=float(m.group(2)),
                    calls=None if m.group(3) == "-" else int(m.group(3).replace(",", "")),
                    p50_us=None if m.group(5) == "-" else float(m.group(5)),
                    p99_us=None if m.group(6) == "-" else float(m.group(6)),
                    kind=m.group(8))))
            continue
        if m:
            sections[current].append((m.group(10), dict(
                self_ms=float(m.group(1)), self_pct=float(m.group(2)),
                total_ms=float(m.group(3)), total_pct=float(m.group(4)),
                calls=int(m.group(5).replace(",", "")), mean_us=float(m.group(6)),
                p50_us=float(m.group(7)), p99_us=float(m.group(8)), max_us=float(m.group(9)))))
            continue
        m = re.match(r"^  … (\d+) more functions?", line)
        if m:
            more[current + (" waiting" if in_wait else "")] = int(m.group(1))
    return lines[0], sections, more


# ---- the known trace ----------------------------------------------------------------------

def test_known_trace_per_thread(tmp_path):
    path = known_trace(tmp_path)
    header, sections, more = parse(summary(path).stdout)
    assert header == ("%s: 100.000 ms span, 6 calls, 2 threads, 7 calls dropped (agent "
                      "buffers were full: the trace is incomplete)" % path)
    assert list(sections) == ["MainThread (pid 1, tid 1)", "worker (pid 1, tid 2)"]
    main = dict(sections["MainThread (pid 1, tid 1)"])
    # A: outer self 100 - 30 (B) = 70, inner self 5; total 100, the recursion counted once
    assert main["A"] == dict(self_ms=75.0, self_pct=75.0, total_ms=100.0, total_pct=100.0,
                             calls=2, mean_us=52500.0, p50_us=5000.0, p99_us=100000.0,
                             max_us=100000.0)
    assert main["B"] == dict(self_ms=25.0, self_pct=25.0, total_ms=30.0, total_pct=30.0,
                             calls=1, mean_us=30000.0, p50_us=30000.0, p99_us=30000.0,
                             max_us=30000.0)
    assert [name for name, _ in sections["MainThread (pid 1, tid 1)"]] == ["A", "B"]
    worker = dict(sections["worker (pid 1, tid 2)"])
    assert worker["C"]["self_ms"] == 35.0 and worker["C"]["total_ms"] == 50.0
    assert worker["D"] == dict(self_ms=15.0, self_pct=30.0, total_ms=15.0, total_pct=30.0,
                               calls=2, mean_us=7500.0, p50_us=5000.0, p99_us=10000.0,
                               max_us=10000.0)
    assert more == {}


def test_known_trace_merged_sorts_and_top(tmp_path):
    path = known_trace(tmp_path)
    _, sections, more = parse(summary(path, "--merged", "--sort", "total").stdout)
    rows = sections["all 2 threads merged"]
    # totals 100 (A), 50 (C), 30 (B), 15 (D); busy 150 ms
    assert [name for name, _ in rows] == ["A", "C", "B", "D"]
    assert dict(rows)["A"]["self_pct"] == 50.0
    _, sections, _ = parse(summary(path, "--merged", "--sort", "calls").stdout)
    assert [r["calls"] for _, r in sections["all 2 threads merged"]] == [2, 2, 1, 1]
    _, sections, more = parse(summary(path, "--merged", "--top", "1").stdout)
    assert [name for name, _ in sections["all 2 threads merged"]] == ["A"]
    assert more == {"all 2 threads merged": 3}


def test_thread_selection_by_name_and_tid(tmp_path):
    path = known_trace(tmp_path)
    by_name = parse(summary(path, "--thread", "worker").stdout)[1]
    by_tid = parse(summary(path, "--thread", "2").stdout)[1]
    assert list(by_name) == list(by_tid) == ["worker (pid 1, tid 2)"]
    assert by_name == by_tid


def test_many_threads_show_the_busiest(tmp_path):
    """A thread-per-request server has hundreds of threads: tables for the busiest only."""
    events = [(1, 100 + t, "work", i * MS, MS // 2) for t in range(25) for i in range(t + 1)]
    path = write_cvf(str(tmp_path / "threads.cvf"), events)
    out = summary(path).stdout
    titles = list(parse(out)[1])
    assert len(titles) == 12  # the default --max-threads, in thread order
    assert titles[0] == "thread 113 (pid 1, tid 113)" and titles[-1].endswith("tid 124)")
    assert out.rstrip().endswith("… 13 more threads with 91 calls: --thread NAME shows one, "
                                 "--max-threads 0 all, --merged all in one table")
    assert len(parse(summary(path, "--max-threads", "0").stdout)[1]) == 25
    assert list(parse(summary(path, "--max-threads", "2").stdout)[1]) == [
        "thread 123 (pid 1, tid 123)", "thread 124 (pid 1, tid 124)"]
    err = summary(path, "--thread", "nope", check=False).stderr
    assert err.count("(tid ") == 20 and err.rstrip().endswith("… (5 more)")


def test_json_input_gives_the_same_tables(tmp_path):
    """A Chrome-trace JSON of the same events summarises identically."""
    events = [{"ph": "M", "name": "thread_name", "pid": p, "tid": t, "args": {"name": n}}
              for (p, t), n in KNOWN_NAMES.items()]
    events += [{"ph": "X", "name": n, "cat": "FEE", "pid": p, "tid": t, "ts": ts / 100,
                "dur": d / 100} for p, t, n, ts, d in KNOWN_EVENTS]
    events.append(DROPS)
    jpath = tmp_path / "known.json"
    jpath.write_text(json.dumps({"traceEvents": events}))
    from_cvf = summary(known_trace(tmp_path)).stdout.split("\n", 1)[1]
    from_json = summary(jpath).stdout.split("\n", 1)[1]
    assert from_cvf == from_json


def test_several_files_a_json_among_them_are_one_trace(tmp_path):
    """Several inputs are one trace (issue 13), a Chrome-trace JSON among them as well as a
    .cvf (issue 30: one input path for every offline command; the merge reads .cvf only, so
    the JSON is converted first)."""
    a = write_cvf(str(tmp_path / "a.cvf"), [(1, 1, "A", 0, 10 * MS), (1, 1, "B", MS, 2 * MS)])
    b_events = [(2, 2, "C", 0, 5 * MS), (2, 2, "D", MS, MS)]
    b_cvf = write_cvf(str(tmp_path / "b.cvf"), b_events)
    b_json = tmp_path / "b.json"
    b_json.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "name": n, "cat": "FEE", "pid": p, "tid": t, "ts": ts / 100, "dur": d / 100}
        for p, t, n, ts, d in b_events]}))
    with_cvf = summary(a, b_cvf, "--merged").stdout
    with_json = summary(a, b_json, "--merged").stdout
    assert with_json == with_cvf and "2 files: " in with_json and "in 2 processes" in with_json
    out = tmp_path / "ab.json"
    c = subprocess.run([VCATTACH, "convert", a, str(b_json), "-o", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert c.returncode == 0, c.stderr
    assert {(e["pid"], e["name"]) for e in json.loads(out.read_text())["traceEvents"]
            if e.get("ph") == "X"} == {(1, "A"), (1, "B"), (2, "C"), (2, "D")}
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    _one_line_error(summary(a, bad, check=False), 1, "bad.json", "JSON")


def test_overlapping_calls_are_clipped_to_their_parent(tmp_path):
    """P(0..10) and Q(5..15) overlap without nesting: Q counts as P's child up to 10."""
    path = write_cvf(str(tmp_path / "overlap.cvf"),
                     [(1, 1, "P", 0, 10 * MS), (1, 1, "Q", 5 * MS, 10 * MS)])
    header, sections, _ = parse(summary(path).stdout)
    assert "no drop count recorded" in header
    rows = dict(sections["thread 1 (pid 1, tid 1)"])
    assert rows["P"]["self_ms"] == 5.0 and rows["Q"]["self_ms"] == 5.0
    assert rows["Q"]["max_us"] == 5000.0


def test_control_characters_in_names_stay_on_one_row(tmp_path):
    path = write_cvf(str(tmp_path / "names.cvf"), [(1, 1, "evil\nname\x1b[2J", 0, MS)],
                     {(1, 1): "bad\rthread"})
    out = summary(path).stdout
    assert "evil\\nname\\x1b[2J" in out and "\x1b" not in out and "\r" not in out
    assert "\nbad\\rthread (pid 1, tid 1): 1 call, " in out


# ---- agreement with an independent computation --------------------------------------------

def check_percentiles(row, durations, name):
    """p50/p99 printed (µs, 2 decimals) against the exact nearest-rank values, within the
    histogram's stated relative error and the printing's rounding."""
    for q, key in ((0.50, "p50_us"), (0.99, "p99_us")):
        exact = nearest_rank(durations, q) / 100
        assert abs(row[key] - exact) <= PERCENTILE_ERROR * exact + 0.0051, (name, key, row,
                                                                             exact)


def check_against_oracle(path, events):
    """`summary --all` against oracle(), and the default (waiting apart) against
    oracle_split()."""
    expected, busy = oracle(events)
    _, sections, more = parse(summary(path, "--top", "100000", "--all").stdout)
    assert more == {}
    titles = {tuple(map(int, re.search(r"\(pid (\d+), tid (\d+)\)$", t).groups())): t
              for t in sections}
    assert set(titles) == set(expected)
    for tid, stats in expected.items():
        rows = dict(sections[titles[tid]])
        assert set(rows) == set(stats)
        for name, s in stats.items():
            r = rows[name]
            assert r["calls"] == s["calls"], name
            assert r["self_ms"] == pytest.approx(s["self"] / MS, abs=0.0006), name
            assert r["total_ms"] == pytest.approx(s["total"] / MS, abs=0.0006), name
            assert r["max_us"] == pytest.approx(s["max"] / 100, abs=0.006), name
            if s["calls"]:
                assert r["mean_us"] == pytest.approx(s["sum"] / s["calls"] / 100,
                                                     abs=0.006), name
            check_percentiles(r, s["durs"], name)
            assert r["total_ms"] <= busy[tid] / MS + 0.0006

    expected, busy, waiting = oracle_split(events)
    waits = {}
    _, sections, more = parse(summary(path, "--top", "100000").stdout, waits)
    assert more == {}
    for tid, stats in expected.items():
        title = titles[tid]
        rows = dict(sections.get(title, []))
        work = {n: s for n, s in stats.items() if wait_kind(n) is None and
                (s["calls"] or s["self"] or s["total"])}
        assert set(rows) == set(work), title
        for name, s in work.items():
            r = rows[name]
            assert r["calls"] == s["calls"], name
            assert r["self_ms"] == pytest.approx(s["self"] / MS, abs=0.0006), name
            assert r["total_ms"] == pytest.approx(s["total"] / MS, abs=0.0006), name
        wrows = dict(waits.get(title, []))
        waited = {n: s for n, s in stats.items() if s["wait"] or s["at_attach"]}
        assert set(wrows) == set(waited), title
        for name, s in waited.items():
            r = wrows[name]
            if s["wait"]:
                assert r["kind"] == wait_kind(name), name
                check_percentiles(r, s["durs"], name)
                assert r["wait_ms"] == pytest.approx(s["wait"] / MS, abs=0.0006), name
                assert r["calls"] == s["calls"], name
            else:
                assert r["kind"] == "at attach" and r["calls"] is None, (name, r)
                assert r["wait_ms"] == pytest.approx(s["at_attach"] / MS, abs=0.0006), name
        assert sum(s["self"] for s in work.values()) + waiting[tid] <= busy[tid]


def test_percentiles_from_a_json_trace_within_the_stated_error(tmp_path):
    """p50/p99 of wide-spread durations (1 tick to 10 s, log-uniform: the histogram's exact
    and logarithmic ranges both), written as Chrome JSON and converted with `vcattach
    convert`, against the exact nearest-rank values computed here."""
    import random
    rnd = random.Random(11)
    events, durs, now = [], {"work (/srv/app.py:1)": [], "time.sleep": []}, 0
    for i in range(3001):
        name = "time.sleep" if i % 3 == 0 else "work (/srv/app.py:1)"
        dur = int(10 ** rnd.uniform(0, 9))
        events.append({"ph": "X", "name": name, "pid": 1, "tid": 1, "ts": now / 100,
                       "dur": dur / 100})
        durs[name].append(dur)
        now += dur + 1
    src = tmp_path / "wide.json"
    src.write_text(json.dumps({"traceEvents": events}))
    out = str(tmp_path / "wide.cvf")
    r = subprocess.run([VCATTACH, "convert", str(src), "-o", out], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    waits = {}
    _, sections, _ = parse(summary(out).stdout, waits)
    (rows,), (wrows,) = sections.values(), waits.values()
    check_percentiles(dict(rows)["work (/srv/app.py:1)"], durs["work (/srv/app.py:1)"], "work")
    check_percentiles(dict(wrows)["time.sleep"], durs["time.sleep"], "time.sleep")
    assert "within 0.99 percent" in summary("--help").stdout


def test_random_trace_with_waits_and_marks_matches_oracle(tmp_path):
    events = random_events(20000, waits=True)
    path = write_cvf(str(tmp_path / "waits.cvf"), events)
    check_against_oracle(path, events)


def test_random_recursive_trace_matches_oracle(tmp_path):
    events = random_events(20000)
    path = write_cvf(str(tmp_path / "random.cvf"), events)
    check_against_oracle(path, events)


def test_group_larger_than_a_load_slice_matches_oracle(tmp_path):
    """summary loads a trace compact (trace/model_runs.c), sorting each group in slices of
    2^18 events: a function with more calls than that on one thread, out of walk order in its
    group (the writer sorts ties by ascending duration), with equal calls across slices, still
    walks as the full model does."""
    events, ts = [], 0
    for i in range(280000):
        if i % 3 == 0:  # an outer call and an inner one with the same start
            events += [(1, 7, "hot (/srv/app.py:1)", ts, 30), (1, 7, "hot (/srv/app.py:1)", ts, 10)]
            ts += 40
        else:
            events.append((1, 7, "hot (/srv/app.py:1)", ts, 5 + i % 4))
            ts += 10
    events.append((1, 7, "outer (/srv/app.py:9)", 0, ts))
    path = write_cvf(str(tmp_path / "big.cvf"), events)
    check_against_oracle(path, events)


@pytest.mark.parametrize("name", corpus_names() or ["(corpus absent)"])
def test_corpus_traces_match_oracle(name, corpus_dir):
    with open(os.path.join(corpus_dir, name + ".expected.json")) as f:
        data = json.load(f)
    events = [(e["pid"], e["tid"], e["name"], round(e["ts"] * 100), round(e["dur"] * 100))
              for e in data["traceEvents"] if e["ph"] == "X"]
    if not events:
        pytest.skip("%s has no complete events" % name)
    check_against_oracle(os.path.join(corpus_dir, name + ".cvf"), events)


# ---- bad input ----------------------------------------------------------------------------

def _one_line_error(proc, code, *words):
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("vcattach summary: ")
    for w in words:
        assert w in proc.stderr


def test_unreadable_and_corrupt_files(tmp_path):
    good = open(known_trace(tmp_path), "rb").read()
    (tmp_path / "truncated.cvf").write_bytes(good[:40])
    (tmp_path / "empty.cvf").write_bytes(b"")
    (tmp_path / "version2.cvf").write_bytes(struct.pack("<Q", 2) + good[8:])
    (tmp_path / "garbage.cvf").write_bytes(os.urandom(64).replace(b"{", b"x").replace(b"[", b"x"))
    (tmp_path / "bad.json").write_text('{"traceEvents": [')
    _one_line_error(summary(tmp_path / "missing.cvf", check=False), 1, "missing.cvf",
                    "No such file")
    _one_line_error(summary(tmp_path, check=False), 1, "directory")
    _one_line_error(summary(tmp_path / "truncated.cvf", check=False), 1, "offset")
    _one_line_error(summary(tmp_path / "empty.cvf", check=False), 1, "empty")
    _one_line_error(summary(tmp_path / "version2.cvf", check=False), 1, "version")
    _one_line_error(summary(tmp_path / "garbage.cvf", check=False), 1, "garbage.cvf")
    _one_line_error(summary(tmp_path / "bad.json", check=False), 1, "JSON")


def test_usage_errors(tmp_path):
    path = known_trace(tmp_path)
    _one_line_error(summary(check=False), 2, "which trace")
    # several files are one trace (issue 13); one of them unreadable: one line naming it
    _one_line_error(summary(path, tmp_path / "absent.cvf", check=False), 1, "absent.cvf")
    _one_line_error(summary(path, "--top", "0", check=False), 2, "--top")
    _one_line_error(summary(path, "--top", "x", check=False), 2, "--top")
    _one_line_error(summary(path, "--sort", "name", check=False), 2, "--sort")
    _one_line_error(summary(path, "--max-threads", "-1", check=False), 2, "--max-threads")
    _one_line_error(summary(path, "--bogus", check=False), 2, "--bogus")
    _one_line_error(summary(path, "--merged", "--thread", "worker", check=False), 2, "exclude")
    _one_line_error(summary(path, "--thread", "nope", check=False), 2, "MainThread", "worker")
    assert summary("--help").stdout.startswith("usage: vcattach summary")


# ---- real traces: waiting apart from working ---------------------------------------------

TARGETS = os.path.join(TESTS, "targets")


def _agent_for(py):
    from support.paths import BUILD
    major, minor = py["version"].split(".")[:2]
    agent = os.path.join(BUILD, "libvcagent-py%d%02d.so" % (int(major), int(minor)))
    return agent if os.path.exists(agent) else None


def _traced_pythons():
    from support.paths import PYTHONS
    return [pytest.param(p, id=p["id"]) for p in PYTHONS]


def trace_waiting(py, tmp_path, seconds="1.0"):
    agent = _agent_for(py)
    if not agent:
        pytest.skip("no agent built for %s" % py["id"])
    out = str(tmp_path / "waiting.cvf")
    proc = subprocess.run([py["path"], os.path.join(TARGETS, "waiting.py"), out, seconds],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, VCATTACH_AGENT=agent))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.system
@pytest.mark.parametrize("py", _traced_pythons())
def test_real_trace_ranks_work_above_waits(py, tmp_path):
    path = trace_waiting(py, tmp_path)
    waits = {}
    _, sections, _ = parse(summary(path, "--merged", "--top", "5").stdout, waits)
    (title, rows), = sections.items()
    assert rows[0][0].startswith("crunch ("), rows
    kinds = {row["kind"] for _, row in waits[title]}
    assert {"sleep", "lock"} <= kinds, waits[title]
    waited = dict(waits[title])
    assert any(n.startswith("time.sleep") for n in waited), waited
    # --all: everything ranked together, as before: a wait comes first
    _, every, _ = parse(summary(path, "--merged", "--top", "5", "--all").stdout)
    (rows_all,) = every.values()
    assert wait_kind(rows_all[0][0]) is not None, rows_all
    # per thread, the tid and thread-name columns stay
    _, per_thread, _ = parse(summary(path, "--thread", "cruncher").stdout)
    (title,) = per_thread
    assert re.match(r"^cruncher \(pid \d+, tid \d+\)$", title)
    assert per_thread[title][0][0].startswith("crunch (")


def _hook_params():
    from support.paths import PYTHONS
    params = []
    for p in PYTHONS:
        params.append(pytest.param(p, "auto", id="%s-auto" % p["id"]))
        if tuple(int(x) for x in p["version"].split(".")[:2]) >= (3, 12):
            params.append(pytest.param(p, "profile", id="%s-profile" % p["id"]))
    return params


@pytest.mark.system
@pytest.mark.parametrize("py,hook", _hook_params())
def test_real_coroutine_resumes_are_slices_not_calls(py, hook, tmp_path):
    """20 lookups, each awaiting twice: 20 calls in the summary (not 60), while the timeline
    keeps every slice, the resumes marked; the time suspended is nobody's self time."""
    agent = _agent_for(py)
    if not agent:
        pytest.skip("no agent built for %s" % py["id"])
    out = str(tmp_path / "async.cvf")
    proc = subprocess.run([py["path"], os.path.join(TARGETS, "async_lookups.py"), out, "20",
                           hook], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, VCATTACH_AGENT=agent))
    assert proc.returncode == 0, proc.stderr
    _, sections, _ = parse(summary(out, "--merged", "--top", "1000", "--all").stdout)
    (rows,) = sections.values()
    rows = dict(rows)
    (lookup,) = [r for n, r in rows.items() if n.startswith("lookup (")]
    (numbers,) = [r for n, r in rows.items() if n.startswith("numbers (")]
    assert lookup["calls"] == 20, lookup
    assert numbers["calls"] == 1, numbers
    # 40 awaits of 2 ms each (80 ms) were spent suspended, outside every slice; the slices'
    # own time is wall time (a preemption on a loaded machine counts)
    assert lookup["self_ms"] < 70.0, lookup
    js = tmp_path / "async.json"
    conv = subprocess.run([VCATTACH, "convert", out, "-o", str(js)], capture_output=True,
                          text=True, timeout=60)
    assert conv.returncode == 0, conv.stderr
    slices = [e for e in json.loads(js.read_text())["traceEvents"]
              if e["ph"] == "X" and e["name"].startswith("lookup (")]
    resumes = [e for e in slices if e.get("args", {}).get("vcattach") == "resume"]
    assert len(slices) == 60 and len(resumes) == 40, (len(slices), len(resumes))
    gens = [e for e in json.loads(js.read_text())["traceEvents"]
            if e["ph"] == "X" and e["name"].startswith("numbers (")]
    assert len(gens) == 6 and sum(1 for e in gens if e.get("args")) == 5
    # the header counts calls too, the slices apart
    xs = [e for e in json.loads(js.read_text())["traceEvents"] if e["ph"] == "X"]
    n_resume = sum(1 for e in xs if e.get("args", {}).get("vcattach") == "resume")
    head = summary(out).stdout.splitlines()[0]
    m = re.search(r" ([\d,]+) calls \(\+([\d,]+) resume slices\), ", head)
    assert m, head
    assert int(m.group(2).replace(",", "")) == n_resume >= 45, (head, n_resume)
    assert int(m.group(1).replace(",", "")) == len(xs) - n_resume, (head, len(xs))


@pytest.mark.system
@pytest.mark.parametrize("py", _traced_pythons())
def test_real_call_in_progress_at_attach_is_waiting(py, tmp_path):
    """An idle pool worker blocked in SimpleQueue.get (C, invisible to the hooks) when the
    trace starts: its seeded `_worker` frame is marked, and its time until then shows as
    waiting "at attach", not as the worker's self time; `crunch` stays first."""
    agent = _agent_for(py)
    if not agent:
        pytest.skip("no agent built for %s" % py["id"])
    out = str(tmp_path / "waiting.cvf")
    proc = subprocess.run([py["path"], os.path.join(TARGETS, "waiting.py"), out, "1.0"],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, VCATTACH_AGENT=agent, WAITING_POOL="1"))
    assert proc.returncode == 0, proc.stderr
    waits = {}
    _, sections, _ = parse(summary(out, "--merged", "--top", "1000").stdout, waits)
    (title, rows), = sections.items()
    assert rows[0][0].startswith("crunch ("), rows[:3]
    worker = [r for n, r in rows if n.startswith("_worker (")]
    assert not worker or worker[0]["self_ms"] < 100, worker
    at_attach = {n: r for n, r in waits[title] if r["kind"] == "at attach"}
    assert any(n.startswith("_worker (") for n in at_attach), waits[title]
    assert max(r["wait_ms"] for n, r in at_attach.items() if n.startswith("_worker (")) > 500
    # the timeline: the seeded frames are marked; the innermost one says what the thread was
    # doing in the kernel (its state and wchan/syscall), known where CPython records the
    # thread's OS id (3.11+)
    js = tmp_path / "waiting.json"
    conv = subprocess.run([VCATTACH, "convert", out, "-o", str(js)], capture_output=True,
                          text=True, timeout=60)
    assert conv.returncode == 0, conv.stderr
    marked = [e for e in json.loads(js.read_text())["traceEvents"]
              if e["ph"] == "X" and e.get("args", {}).get("vcattach") == "at_attach"]
    assert any(e["name"].startswith("_worker (") for e in marked), marked[:5]
    if tuple(int(x) for x in py["version"].split(".")[:2]) >= (3, 11):
        blocked = [e["args"]["blocked"] for e in marked if "blocked" in e["args"]]
        assert blocked and all(b[0] in "SDRT" for b in blocked), blocked
        assert any(b.startswith("S ") for b in blocked), blocked


SUBCLASS_PROGRAM = r'''
import sqlite3, sys
sys.path.insert(0, sys.argv[3])
import vcattach

class Wrapper(sqlite3.Cursor):
    def execute(self, sql, *args):          # a Python method of the C method's name
        return super().execute(sql, *args)

class Items(list):
    pass

con = sqlite3.connect(":memory:")
items = Items()
with vcattach.trace(sys.argv[1], hook=sys.argv[2]):
    for i in range(3):
        con.cursor(Wrapper).execute("select 1")
        items.append(i)
'''


@pytest.mark.system
@pytest.mark.parametrize("py,hook", _hook_params())
def test_real_c_methods_are_named_after_their_defining_type(py, hook, tmp_path):
    """sqlite3.Cursor.execute called through a Python subclass is `sqlite3.Cursor.execute`, not
    `Wrapper.execute` (the subclass's Python method has that name); list.append on a list
    subclass is `list.append`."""
    agent = _agent_for(py)
    if not agent:
        pytest.skip("no agent built for %s" % py["id"])
    out = str(tmp_path / "names.cvf")
    from support.paths import ROOT
    proc = subprocess.run([py["path"], "-c", SUBCLASS_PROGRAM, out, hook,
                           os.path.join(ROOT, "python")], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, VCATTACH_AGENT=agent))
    assert proc.returncode == 0, proc.stderr
    _, sections, _ = parse(summary(out, "--merged", "--top", "1000", "--all").stdout)
    (rows,) = sections.values()
    names = {n: r for n, r in rows}
    assert names.get("sqlite3.Cursor.execute", {}).get("calls") == 3, sorted(names)
    assert names.get("list.append", {}).get("calls") == 3, sorted(names)
    # the Python method: "Wrapper.execute (<string>:7)", "execute (…)" before 3.11
    assert [n for n in names if n.startswith(("Wrapper.execute (", "execute ("))], sorted(names)
    assert "Wrapper.execute" not in names and "Items.append" not in names, sorted(names)

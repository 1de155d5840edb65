"""asyncio task markers, offline: `vcattach requests` by task, `convert --tasks`, `summary`.

The agent writes, per thread, a counter "task TID" (key "id": at ts the thread began a step
of that task; ts = the start of the step's top coroutine event) and per task an instant
"vcattach task" (args task, name).  Synthetic Chrome-JSON traces built here (converted to
.cvf by `vcattach convert`) have every number known: two ASGI requests interleaved on one
event loop thread (A: 4 steps, B: 4 steps), A creating two child tasks through
BaseEventLoop.create_task (C1 started later from the ready queue, C2 started eagerly inside
its create_task call), the event loop's Handle._run around each step (not a task's), and the
same trace without markers (today's rule: overlapping requests merge).
"""
import json
import re
import subprocess

import pytest

from support.paths import VCATTACH
from support.traces import convert, load_json

MS = 100_000  # ticks (10 ns) per ms
PID = TID = 30
TRACK = 2_000_000_000  # convert --tasks: a task's track is tid TRACK + its id

RUN_ASGI = ("RequestResponseCycle.run_asgi "
            "(/usr/lib/python3/dist-packages/uvicorn/protocols/http/h11_impl.py:364)")
HANDLE_RUN = "Handle._run (/usr/lib/python3.11/asyncio/events.py:78)"
CREATE_TASK = "BaseEventLoop.create_task (/usr/lib/python3.11/asyncio/base_events.py:436)"
APP = "app (/srv/app.py:10)"
FETCH = "fetch (/srv/app.py:30)"
COMPUTE = "compute (/srv/app.py:50)"
EAGER = "eager_job (/srv/app.py:40)"
DATA_RECEIVED = "H11Protocol.data_received (/usr/lib/python3/dist-packages/uvicorn/x.py:1)"


def x(name, ts, dur, mark=None, pid=PID, tid=TID):
    ev = {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": ts / 100, "dur": dur / 100}
    if mark:
        ev["args"] = {"vcattach": mark}
    return ev


def marker(ts, task_id, pid=PID, tid=TID):
    return {"ph": "C", "name": "task %d" % tid, "pid": pid, "tid": tid, "ts": ts / 100,
            "args": {"id": task_id}}


def named(task_id, name, ts=0, pid=PID, tid=TID):
    args = {"task": task_id}
    if name is not None:
        args["name"] = name
    return {"ph": "i", "s": "t", "name": "vcattach task", "pid": pid, "tid": tid,
            "ts": ts / 100, "args": args}


def step(events, marks, task_id, coro, ts, dur, first, inner=None, handle=True):
    """One task step: Handle._run ⊃ coro (the marked event) ⊃ inner (default: app)."""
    if handle:
        events.append(x(HANDLE_RUN, ts - 10, dur + 20))
    events.append(x(coro, ts, dur, None if first else "resume"))
    events.append(x(inner or APP, ts + 10, dur - 20, None if first else "resume"))
    marks.append(marker(ts, task_id))


# Request A (task 1): 10 → 32 ms; B (task 2): 13 → 27 ms; C1 (task 3) and C2 (task 4) are
# A's children: their work is A's.
A_MS, B_MS = 22.0, 14.0


def trace_events(with_markers=True, create_task=CREATE_TASK):
    ev, marks = [{"ph": "M", "name": "thread_name", "pid": PID, "tid": TID,
                  "args": {"name": "MainThread"}},
                 {"ph": "i", "name": "vcattach attach", "pid": PID, "tid": PID, "ts": 0,
                  "s": "p", "args": {}},
                 {"ph": "i", "name": "vcattach detach", "pid": PID, "tid": PID,
                  "ts": 100 * MS / 100, "s": "p", "args": {"dropped": 0}}], []
    # uvicorn's data_received creates A's and B's tasks: outside any task step
    ev.append(x(DATA_RECEIVED, 9 * MS, MS // 2))
    ev.append(x(create_task, 9 * MS + 100, 1000))
    ev.append(x(DATA_RECEIVED, 12 * MS, MS // 2))
    ev.append(x(create_task, 12 * MS + 100, 1000))
    # A's first step creates C1 (queued) and C2 (eager: its first step runs inside the call)
    step(ev, marks, 1, RUN_ASGI, 10 * MS, MS, True)
    ev.append(x(create_task, 10 * MS + 20_000, 30_000))
    ev.append(x(create_task, 10 * MS + 60_000, 30_000))
    step(ev, marks, 4, EAGER, 10 * MS + 65_000, 20_000, True, handle=False)
    step(ev, marks, 3, FETCH, 11 * MS + MS // 2, MS // 2, True)
    step(ev, marks, 2, RUN_ASGI, 13 * MS, MS // 2, True)
    step(ev, marks, 1, RUN_ASGI, 14 * MS, MS, False)
    step(ev, marks, 2, RUN_ASGI, 16 * MS, MS, False)
    step(ev, marks, 3, FETCH, 18 * MS, MS, False, inner=COMPUTE)
    step(ev, marks, 1, RUN_ASGI, 20 * MS, MS, False)
    step(ev, marks, 2, RUN_ASGI, 22 * MS, MS, False)
    step(ev, marks, 4, EAGER, 24 * MS, MS, False)
    step(ev, marks, 2, RUN_ASGI, 26 * MS, MS, False)
    step(ev, marks, 1, RUN_ASGI, 30 * MS, 2 * MS, False)
    # a call of no task, after everything
    for k in range(6):
        ev.append(x("idle (/srv/app.py:99)", (40 + k) * MS, MS // 2))
    if with_markers:
        ev += marks
        ev += [named(1, "Task-1"), named(2, None), named(3, ""), named(4, "conn-7")]
    return ev


def write(tmp_path, events, name="tasks"):
    src = tmp_path / (name + ".json")
    src.write_text(json.dumps({"traceEvents": events}))
    out = str(tmp_path / (name + ".cvf"))
    convert(str(src), out)
    return out


def run(*args, check=True):
    proc = subprocess.run([VCATTACH] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


UNIT_MS = {"s": 1000.0, "ms": 1.0, "µs": 0.001}


def requests_blocks(stdout):
    """[(ms, block text)] of the listed requests, in order."""
    blocks = []
    for line in stdout.splitlines():
        m = re.match(r"^  (?:#\d+\s+)?([\d.]+) (s|ms|µs)\+?(?: \([^)]*\))?  at ", line)
        if m:
            blocks.append([float(m.group(1)) * UNIT_MS[m.group(2)], line])
        elif blocks and line.startswith("      "):
            blocks[-1][1] += "\n" + line
    return blocks


# ---- requests -----------------------------------------------------------------------------

def test_requests_by_task_separates_concurrent_requests(tmp_path):
    path = write(tmp_path, trace_events())
    out = run("requests", path).stdout
    assert re.match(r"^.*: 2 requests, recognised as ASGI RequestResponseCycle.run_asgi "
                    r"\(uvicorn\) ×2$", out.splitlines()[0]), out
    blocks = requests_blocks(out)
    assert [ms for ms, _ in blocks] == pytest.approx([A_MS, B_MS], abs=0.0006)
    a, b = blocks[0][1], blocks[1][1]
    # A's slices: its 4 steps, C1's 2, C2's resume (its eager first step is inside A's first)
    assert "(7 slices: a coroutine; asyncio task Task-1 + 2 tasks it created)" in a, a
    assert "(4 slices: a coroutine; asyncio task Task-2)" in b, b
    # the children's work is in A's breakdown, not B's
    assert "compute 999.8 µs" in a and "eager_job" in a, a  # C1's and C2's self time
    assert "waiting: 0.0 µs of 7.500 ms in calls" in a  # 5 ms of A, 1.5 of C1, 1 of C2
    assert "suspended (awaiting) 14.500 ms" in a
    assert "compute" not in b and "eager_job" not in b and "fetch" not in b, b
    assert "suspended (awaiting)" in a and "suspended (awaiting)" in b
    assert run("requests", path).stderr == ""


def test_requests_by_task_before_python_3_11(tmp_path):
    """Before 3.11 names carry no class: "create_task (…/asyncio/base_events.py:N)"."""
    bare = "create_task (/usr/lib/python3.10/asyncio/base_events.py:429)"
    blocks = requests_blocks(run("requests", write(tmp_path, trace_events(True, bare))).stdout)
    assert [ms for ms, _ in blocks] == pytest.approx([A_MS, B_MS], abs=0.0006)
    assert "(7 slices: a coroutine; asyncio task Task-1 + 2 tasks it created)" in blocks[0][1]
    assert "compute" in blocks[0][1]


def test_requests_by_task_cut_by_the_trace(tmp_path):
    """Task 1 began before the trace (its first step is a resume), task 2 still ran at the
    detach (its last step ends there), task 3 is complete; all three interleaved."""
    pid = tid = 40
    ev = [{"ph": "i", "name": "vcattach attach", "pid": pid, "tid": tid, "ts": 0, "s": "p",
           "args": {}},
          {"ph": "i", "name": "vcattach detach", "pid": pid, "tid": tid, "ts": 10 * MS / 100,
           "s": "p", "args": {"dropped": 0}}]
    for task_id, ts, dur, first in ((1, 1 * MS, MS // 2, False), (3, 2 * MS, MS // 2, True),
                                    (2, 3 * MS, MS // 2, True), (3, 4 * MS, MS // 2, False),
                                    (1, 5 * MS, MS // 2, False), (2, 8 * MS, 2 * MS, False)):
        ev.append(x(RUN_ASGI, ts, dur, None if first else "resume", pid, tid))
        ev.append(marker(ts, task_id, pid, tid))
    out = run("requests", write(tmp_path, ev, "cut")).stdout
    assert "1 request," in out.splitlines()[0] and "2 more cut" in out.splitlines()[0], out
    blocks = requests_blocks(out)
    assert [ms for ms, _ in blocks] == pytest.approx([2.5, 7.0, 4.5], abs=0.0006)
    assert "(began before the trace)" in blocks[2][1], blocks
    assert "still running when the trace stopped" in blocks[1][1], blocks


def test_requests_without_markers_keep_todays_rule(tmp_path):
    path = write(tmp_path, trace_events(with_markers=False))
    out = run("requests", path).stdout
    blocks = requests_blocks(out)
    # today: a resume extends the latest request of its function on the thread, so A keeps
    # only its first slice and B takes every resume from 14 ms to 32 ms
    assert sorted(ms for ms, _ in blocks) == pytest.approx([1.0, 19.0], abs=0.0006)


# ---- convert --tasks ------------------------------------------------------------------------

def test_convert_tasks_moves_steps_to_task_tracks(tmp_path):
    path = write(tmp_path, trace_events())
    out = str(tmp_path / "tasks_tracks.json")
    r = convert(path, out, "--tasks")
    assert r.stderr == ""
    evs = load_json(out)["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in evs
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert names[TRACK + 1] == "task Task-1 RequestResponseCycle.run_asgi"
    assert names[TRACK + 2] == "task Task-2 RequestResponseCycle.run_asgi"
    assert names[TRACK + 3] == "task Task-3 fetch"
    assert names[TRACK + 4] == "task conn-7 eager_job"
    assert names[TID] == "MainThread"
    xs = [e for e in evs if e.get("ph") == "X"]
    by_tid = {}
    for e in xs:
        by_tid.setdefault(e["tid"], []).append(e)
    # every step (the marked event and its descendants) on its task's track
    run_asgi = [e for e in xs if e["name"] == RUN_ASGI]
    assert sorted((e["ts"], e["tid"]) for e in run_asgi) == [
        (1e4, TRACK + 1), (1.3e4, TRACK + 2), (1.4e4, TRACK + 1), (1.6e4, TRACK + 2),
        (2e4, TRACK + 1), (2.2e4, TRACK + 2), (2.6e4, TRACK + 2), (3e4, TRACK + 1)]
    assert {e["tid"] for e in xs if e["name"] == COMPUTE} == {TRACK + 3}
    assert {e["tid"] for e in xs if e["name"] == EAGER} == {TRACK + 4}
    # the create_task calls inside A's first step are A's; the eager step inside one is C2's
    ct = sorted((e["ts"], e["tid"]) for e in xs if e["name"] == CREATE_TASK)
    assert ct == [(9001.0, TID), (10200.0, TRACK + 1), (10600.0, TRACK + 1), (12001.0, TID)]
    # the rest stays on its thread: the event loop's Handle._run, data_received, idle
    assert {e["tid"] for e in xs if e["name"] in (HANDLE_RUN, DATA_RECEIVED)} == {TID}
    assert {e["tid"] for e in xs if e["name"].startswith("idle")} == {TID}
    assert len(xs) == len([e for e in load_json(convert_plain(path, tmp_path))["traceEvents"]
                           if e.get("ph") == "X"])


def convert_plain(path, tmp_path):
    out = str(tmp_path / "plain.json")
    convert(path, out)
    return out


def test_convert_tasks_without_markers_and_unsupported_formats(tmp_path):
    path = write(tmp_path, trace_events(with_markers=False))
    out = str(tmp_path / "plain_tasks.json")
    r = convert(path, out, "--tasks")
    assert len(r.stderr.strip().splitlines()) == 1 and "no asyncio tasks" in r.stderr
    plain = load_json(convert_plain(path, tmp_path))["traceEvents"]
    assert load_json(out)["traceEvents"] == plain  # nothing moves
    # --tasks needs tracks: chrome only, and a .cvf input
    for fmt in ("svg", "speedscope", "collapsed"):
        r = run("convert", path, "-o", str(tmp_path / ("o." + fmt)), "--format", fmt, "--tasks",
                check=False)
        assert r.returncode == 2 and "--tasks applies to --format chrome" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    src = str(tmp_path / "src.json")
    with open(src, "w") as f:
        json.dump({"traceEvents": trace_events()}, f)
    r = run("convert", src, "-o", str(tmp_path / "o.cvf"), "--tasks", check=False)
    assert r.returncode == 2 and "--tasks applies to a .cvf input" in r.stderr
    assert "--tasks" in run("convert", "--help").stdout


# ---- summary --------------------------------------------------------------------------------

ROW = re.compile(r"^\s+(-?[\d.]+)\s+([\d.]+)%\s+(-?[\d.]+)\s+([\d.]+)%\s+([\d,]+)\s+([\d.]+)"
                 r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)  (.*)$")


def calls_of(stdout, short):
    for line in stdout.splitlines():
        m = ROW.match(line)
        if m and m.group(10).startswith(short + " ("):
            return int(m.group(5).replace(",", ""))
    return None


def test_summary_counts_a_coroutine_once_per_task(tmp_path):
    path = write(tmp_path, trace_events())
    out = run("summary", path, "--merged").stdout
    assert "asyncio: 4 tasks (12 steps)" in out.splitlines()[:6], out
    assert calls_of(out, "RequestResponseCycle.run_asgi") == 2
    assert calls_of(out, "fetch") == 1 and calls_of(out, "eager_job") == 1
    plain = run("summary", write(tmp_path, trace_events(False), "plain"), "--merged").stdout
    assert "asyncio:" not in plain
    assert calls_of(plain, "RequestResponseCycle.run_asgi") == 2


# ---- malformed markers --------------------------------------------------------------------------

def test_malformed_markers_are_ignored(tmp_path):
    ev = trace_events()
    ev += [
        marker(5 * MS, 7),                 # no event starts there
        # on calls of no task (one sample per timestamp: the .cvf keeps one)
        marker(42 * MS, 0),                # zero
        marker(43 * MS, -5),               # negative
        marker(44 * MS, 3e12),             # beyond any task id
        marker(45 * MS, 1.5),              # not an integer
        named(2, 123),                     # a name that is not a string (task 2: "Task-2")
        named(0, "zero"), named(-1, "neg"), named("x", "bad id"),
        # not the agent's: another thread's name, not a tid, another key
        {"ph": "C", "name": "task 31", "pid": PID, "tid": TID, "ts": 1, "args": {"id": 1}},
        {"ph": "C", "name": "task abc", "pid": PID, "tid": TID, "ts": 1, "args": {"id": 1}},
        {"ph": "C", "name": "task %d" % TID, "pid": PID, "tid": 32, "ts": 1, "args": {"n": 1}},
    ]
    # an id never named, on the non-task call at 40 ms: "Task-99"
    ev.append(marker(40 * MS, 99))
    path = write(tmp_path, ev, "malformed")
    blocks = requests_blocks(run("requests", path).stdout)
    assert [ms for ms, _ in blocks] == pytest.approx([A_MS, B_MS], abs=0.0006)
    s = run("summary", path).stdout
    assert "asyncio: 6 tasks" in s, s  # 1-4, 99 and 7 (a marker with no event still counts)
    out = str(tmp_path / "malformed_tasks.json")
    convert(path, out, "--tasks")
    evs = load_json(out)["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in evs
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert names[TRACK + 2] == "task Task-2 RequestResponseCycle.run_asgi"
    assert names[TRACK + 99] == "task Task-99 idle"
    assert TRACK + 7 not in names and TRACK not in names
    idle = sorted((e["ts"], e["tid"]) for e in evs
                  if e.get("ph") == "X" and e["name"].startswith("idle"))
    assert idle == [(4e4, TRACK + 99)] + [((40 + k) * 1e3, TID) for k in range(1, 6)]

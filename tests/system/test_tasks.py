"""asyncio task steps (agent/tasks.c, docs/cvf-format.md "What vcattach adds for asyncio"):
the agent marks the start of every task step with the running task's number ("task TID"
counters) and names each task once ("vcattach task" instants).

The target (targets/asyncio_tasks.py) interleaves concurrent tasks whose steps are known:
req-N tasks run `handler` in 5 steps, their gathered children `child` in 2.  Checked on every
interpreter (3.8-3.11 the profile hook, and the eval hook; 3.12+ sys.monitoring; 3.14/3.15 in
the test root): every marker starts an X event of a coroutine of the target on its thread;
a task number always runs one coroutine function; a task whose whole life is inside the trace
has exactly its known number of steps; named tasks keep their names.
"""
import bisect
import os
import shutil
import subprocess
from collections import defaultdict

import pytest

from support.paths import ALL_PYTHONS, TESTS, VCATTACH, root_workdir
from support.traces import convert, load_json

TARGET = os.path.join(TESTS, "targets", "asyncio_tasks.py")
STEPS = {"handler": 5, "child": 2}


def params():
    rows = [pytest.param(p, (), id=p["id"]) for p in ALL_PYTHONS]
    for lo, hi in ((309, 311), (312, 313)):  # the frame evaluator before and with sys.monitoring
        rows += [pytest.param(p, ("--hook", "eval", "--no-c-calls"), id=p["id"] + "-eval")
                 for p in ALL_PYTHONS if lo <= p["minor"] <= hi and p["kind"] != "static"][:1]
    return rows


def start(python, tmp_path):
    if python["root"]:
        outside, inside = root_workdir(python, tmp_path, "vc-tasks")
        shutil.copy2(TARGET, os.path.join(outside, "asyncio_tasks.py"))
        argv = python["argv"] + [os.path.join(inside, "asyncio_tasks.py")]
    else:
        argv = [python["path"], TARGET]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd="/")
    assert p.stdout.readline().strip() == "ready", p.stderr.read()
    return p


def short(name):
    return name.split(" (")[0]


@pytest.mark.parametrize("python,extra", params())
def test_task_steps_are_marked(python, extra, tmp_path):
    p = start(python, tmp_path)
    try:
        out = str(tmp_path / "tasks.cvf")
        r = subprocess.run([VCATTACH, "--pid", str(p.pid), "-t", "1s", "-o", out, *extra],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert p.poll() is None, "the target died"
    finally:
        p.kill()
        p.wait()
    js = str(tmp_path / "tasks.json")
    convert(out, js)
    events = load_json(js)["traceEvents"]
    xs = defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            xs[e["tid"]].append(e)
    starts = {}
    for tid, v in xs.items():
        v.sort(key=lambda e: e["ts"])
        starts[tid] = [e["ts"] for e in v]
    marks = [e for e in events if e.get("ph") == "C" and e["name"].startswith("task ")]
    named = {e["args"]["task"]: e for e in events if e.get("name") == "vcattach task"}
    assert len(marks) > 100, (len(marks), r.stderr)
    # every marker starts an X event (10 ns rounding apart) of one of the target's coroutines
    func_of, steps, firsts = {}, defaultdict(int), {}
    for m in marks:
        assert m["name"] == "task %d" % m["tid"], m
        task = m["args"]["id"]
        assert isinstance(task, int) and task >= 1, m
        v, ts = xs[m["tid"]], starts.get(m["tid"], [])
        lo, hi = bisect.bisect_left(ts, m["ts"] - 0.011), bisect.bisect_right(ts, m["ts"] + 0.011)
        starting = v[lo:hi]
        coro = [e for e in starting if short(e["name"]) in ("handler", "child", "main")]
        assert coro, (m, [e["name"] for e in starting])
        e = max(coro, key=lambda e: e["dur"])  # the outermost starting there
        # one coroutine function per task number
        assert func_of.setdefault(task, short(e["name"])) == short(e["name"]), (task, e)
        steps[task] += 1
        resume = (e.get("args") or {}).get("vcattach") == "resume"
        if task not in firsts:
            firsts[task] = not resume and e["ts"] > 0
    # every task is named, and req-N tasks are handler's
    assert set(named) == set(steps), set(steps) ^ set(named)
    for task, fn in func_of.items():
        name = named[task]["args"]["name"]
        if fn == "handler":
            assert name.startswith("req-"), (task, name)
        elif fn == "child":
            assert name.startswith("Task-"), (task, name)
    # tasks that started inside the trace and are not the last ones have all their steps
    detach = max(e["ts"] for e in events if e.get("name") == "vcattach detach")
    whole = [t for t, fn in func_of.items() if fn in STEPS and firsts[t]
             and named[t]["ts"] < detach - 200e3]  # began at least 200 ms before the end
    assert len(whole) >= 20, (len(whole), len(func_of))
    wrong = {t: (func_of[t], steps[t]) for t in whole if steps[t] != STEPS[func_of[t]]}
    assert not wrong, wrong


def test_no_tasks_marks_nothing(tmp_path):
    """--no-tasks: the same target traced without a single task marker or name."""
    # the host's own 3.12+ where there is one, else the test root's (a fresh Debian 12 has
    # only 3.11 on the host)
    python = next((p for p in ALL_PYTHONS if not p["root"] and p["minor"] >= 312), None) or \
        next((p for p in ALL_PYTHONS if p["minor"] >= 312), None)
    if python is None:
        pytest.skip("no CPython 3.12+ on this machine nor in a test root")
    p = start(python, tmp_path)
    try:
        out = str(tmp_path / "plain.cvf")
        r = subprocess.run([VCATTACH, "--pid", str(p.pid), "-t", "500ms", "--no-tasks", "-o",
                            out], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    finally:
        p.kill()
        p.wait()
    js = str(tmp_path / "plain.json")
    convert(out, js)
    events = load_json(js)["traceEvents"]
    assert any(e.get("ph") == "X" and short(e["name"]) == "handler" for e in events)
    assert not [e for e in events if e.get("ph") == "C" and e["name"].startswith("task ")]
    assert not [e for e in events if e.get("name") == "vcattach task"]

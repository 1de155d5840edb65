"""End-to-end tests of the in-process agent (agent/, python/vcattach/__init__.py).

Each interpreter of the matrix runs one target script (TARGET below) that traces itself with
the Python API several times in the same process — main workload with threads, generators,
asyncio and exceptions; the same workload with the legacy hook on 3.12+; a tiny buffer;
foreign profilers — and reports what it saw (results, hooks left behind) as JSON.  Every
.cvf is decoded by both readers (the C decoder through `vcattach convert`, and
vcattach.cvf, support.traces.decode), which must agree; the assertions run on the decoded events.
"""
import os
import re
import subprocess
import textwrap

import pytest

from support.agent_scripts import run_script_once
from support.paths import ALL_PYTHONS, agent_path, python_params
from support.traces import check_nesting, count, decode, named, x_events

N_LEAF = 100000

TARGET = textwrap.dedent(r'''
    import asyncio, json, os, sys, threading, time
    import vcattach

    OUT = sys.argv[1]
    N = %(n)d
    report = {"version": list(sys.version_info[:3])}

    def leaf():
        return 1

    def inner():
        return len("abc") + len("x".upper())

    def middle():
        return inner() + inner()

    def outer():
        return middle()

    def gen(n):
        for i in range(n):
            yield i

    def raiser(i):
        raise ValueError(i)

    def catcher(k):
        caught = 0
        for i in range(k):
            try:
                raiser(i)
            except ValueError:
                caught += 1
        return caught

    async def coro_leaf(i):
        await asyncio.sleep(0)
        return i

    async def coro_main():
        return sum(await asyncio.gather(*[coro_leaf(i) for i in range(10)]))

    def early_body():
        return 2

    def late_body():
        return 3

    def early_thread(ev):
        ev.wait()
        for _ in range(1000):
            early_body()

    def late_thread():
        for _ in range(500):
            late_body()

    def raw_body():
        return 4

    def raw_thread(lock):
        # a thread created outside threading: found by the agent's periodic scan (legacy
        # hook) or on its first event (sys.monitoring)
        time.sleep(0.3)
        for _ in range(200):
            raw_body()
        lock.release()

    def workload():
        for _ in range(N):
            leaf()
        for _ in range(10):
            outer()
        list(gen(5))
        catcher(7)
        asyncio.run(coro_main())

    def hooks_state():
        st = {"getprofile": repr(sys.getprofile()),
              "threading_profile_hook": repr(threading._profile_hook)}
        if hasattr(sys, "monitoring"):
            st["tools"] = [sys.monitoring.get_tool(i) for i in range(6)]
        return st

    def session(path, hook, **kw):
        ev = threading.Event()
        early = threading.Thread(target=early_thread, args=(ev,), name="early-worker")
        early.start()
        before = hooks_state()
        with vcattach.trace(path, hook=hook, **kw) as t:
            ev.set()
            late = threading.Thread(target=late_thread, name="late-worker")
            late.start()
            import _thread
            raw_done = _thread.allocate_lock()
            raw_done.acquire()
            _thread.start_new_thread(raw_thread, (raw_done,))
            workload()
            late.join()
            early.join()
            raw_done.acquire()
        return {"result": t.result._asdict(), "before": before, "after": hooks_state()}

    report["main"] = session(OUT + ".main.cvf", "auto")
    if sys.version_info >= (3, 12):
        report["profile"] = session(OUT + ".profile.cvf", "profile")

    # Drops: the same single-thread workload with a large and a tiny buffer.
    def drop_run(path, mb):
        with vcattach.trace(path, buffer_mb=mb) as t:
            for _ in range(N):
                leaf()
        return t.result._asdict()
    report["big"] = drop_run(OUT + ".big.cvf", 64)
    report["small"] = drop_run(OUT + ".small.cvf", 1)

    # Foreign profilers: a clear refusal, and the foreign profiler keeps working.
    calls = []
    def pyprof(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "leaf":
            calls.append(1)
    sys.setprofile(pyprof)
    try:
        vcattach.start(OUT + ".refused1.cvf")
        report["setprofile_refusal"] = None
        vcattach.stop()
    except vcattach.VcattachError as e:
        report["setprofile_refusal"] = str(e)
    leaf(); leaf()
    report["setprofile_still"] = [len(calls), sys.getprofile() is pyprof]
    sys.setprofile(None)

    import cProfile, pstats, io
    pr = cProfile.Profile()
    pr.enable()
    try:
        vcattach.start(OUT + ".refused2.cvf")
        report["cprofile_refusal"] = None
        vcattach.stop()
    except vcattach.VcattachError as e:
        report["cprofile_refusal"] = str(e)
    for _ in range(3):
        leaf()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).print_stats("leaf")
    report["cprofile_still"] = s.getvalue()
    report["refused_files"] = [os.path.exists(OUT + ".refused%%d.cvf" %% i) for i in (1, 2)]
    report["final"] = hooks_state()

    # After everything, tracing works again.
    with vcattach.trace(OUT + ".last.cvf") as t:
        leaf()
    report["last"] = t.result._asdict()
    print(json.dumps(report))
''') % {"n": N_LEAF}


_RUNS = {}


@pytest.fixture(params=python_params(chroot=True))
def run(request, tmp_path_factory):
    py = request.param
    if py["id"] not in _RUNS:
        base, rep = run_script_once(py, tmp_path_factory.mktemp("agent-" + py["id"]),
                                    {"target.py": TARGET})
        _RUNS[py["id"]] = (py, base, rep, {})
    py, base, rep, cache = _RUNS[py["id"]]

    def events(kind):
        if kind not in cache:
            cache[kind] = decode(base + "." + kind + ".cvf")
        return cache[kind]
    return py, rep, events


def _check_main(rep, ev, name_of_session):
    res = rep[name_of_session]["result"]
    assert res["status"] == 0 and res["dropped"] == 0
    leaf = named(ev, "leaf")
    assert len(leaf) == N_LEAF
    assert all(e["name"].endswith("target.py:9)") for e in leaf)
    by_tid = check_nesting(ev)
    # nested calls: every inner() lies inside a middle(), every middle() inside an outer()
    outer, middle, inner = named(ev, "outer"), named(ev, "middle"), named(ev, "inner")
    assert (len(outer), len(middle), len(inner)) == (10, 10, 20)
    for child_list, parent_list in ((inner, middle), (middle, outer)):
        for c in child_list:
            assert any(p["ts"] <= c["ts"] and c["ts"] + c["dur"] <= p["ts"] + p["dur"] + 1e-9
                       for p in parent_list)
    # C calls named as VizTracer names them
    assert count(ev, "builtins.len") >= 40
    assert count(ev, "str.upper") == 20
    # result agrees with the trace
    assert res["events"] == len(x_events(ev))
    assert res["threads"] == len(by_tid)
    # threads: started before and during tracing, each on its own tid with its name
    names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    tids = {}
    for fn, tname, n in (("early_body", "early-worker", 1000), ("late_body", "late-worker", 500),
                         ("leaf", "MainThread", N_LEAF)):
        evs = named(ev, fn)
        assert len(evs) == n, fn
        tid_set = {e["tid"] for e in evs}
        assert len(tid_set) == 1, fn
        tid = tid_set.pop()
        assert names.get(tid) == tname
        tids[tname] = tid
    assert len(set(tids.values())) == 3
    raw = named(ev, "raw_body")
    assert len(raw) == 200 and len({e["tid"] for e in raw}) == 1
    raw_tid = raw[0]["tid"]
    assert raw_tid not in tids.values() and names.get(raw_tid) == "Thread-%d" % raw_tid
    assert tids["MainThread"] == ev[0]["pid"] if ev[0]["ph"] == "M" else True
    # generators: one event per resume (5 yields + the final return)
    assert len(named(ev, "gen")) == 6
    # exceptions raised and caught: every raiser() paired, inside catcher()
    assert len(named(ev, "raiser")) == 7 and len(named(ev, "catcher")) == 1
    # asyncio coroutines: each coroutine resumed and paired
    assert len(named(ev, "coro_main")) >= 2
    assert len(named(ev, "coro_leaf")) >= 20
    # attach/detach instants
    inst = [e for e in ev if e["ph"] == "i"]
    assert {e["name"] for e in inst} >= {"vcattach attach", "vcattach detach"}


@pytest.mark.parametrize("dummy", [0], ids=[""])
def test_agent_main_trace(run, dummy):
    py, rep, events = run
    _check_main(rep, events("main"), "main")


def test_agent_hook_profile(run):
    """hook=profile (the legacy Py_tracefunc): selected explicitly on 3.12+, where monitoring is
    the default, and the default itself before 3.12."""
    py, rep, events = run
    key = "profile" if tuple(rep["version"][:2]) >= (3, 12) else "main"
    _check_main(rep, events(key), key)
    inst = [e for e in events(key) if e["name"] == "vcattach attach"]
    assert inst[0]["args"]["backend"] == "profile"


def test_agent_cleanup_and_second_trace(run):
    py, rep, events = run
    for key in ("main", "profile"):
        if key not in rep:
            continue
        before, after = rep[key]["before"], rep[key]["after"]
        assert after["getprofile"] == "None"
        assert after["threading_profile_hook"] == before["threading_profile_hook"] == "None"
        if "tools" in after:
            assert "vcattach" not in after["tools"] and after["tools"] == before["tools"]
    assert rep["final"]["getprofile"] == "None"
    assert rep["final"]["threading_profile_hook"] == "None"
    assert "tools" not in rep["final"] or all(t is None for t in rep["final"]["tools"])
    last = events("last")
    assert named(last, "leaf") and rep["last"]["status"] == 0


def test_agent_drops(run):
    py, rep, events = run
    big, small = rep["big"], rep["small"]
    assert big["dropped"] == 0 and small["dropped"] > 0
    ev_big, ev_small = events("big"), events("small")
    assert len(x_events(ev_big)) == big["events"] and len(x_events(ev_small)) == small["events"]
    # exactly the lost records are missing
    assert small["events"] + small["dropped"] == big["events"]
    detach = [e for e in ev_small if e["name"] == "vcattach detach"][0]
    assert detach["args"]["dropped"] == small["dropped"]
    check_nesting(ev_small)
    leaf_small = named(ev_small, "leaf")
    assert 0 < len(leaf_small) < N_LEAF
    # the newest calls are kept: the last leaf call of both traces is there
    assert max(e["ts"] for e in leaf_small) >= max(e["ts"] for e in named(ev_small, "leaf"))
    assert small["records_bytes"] <= 1 << 20


def test_agent_foreign_profiler_refused(run):
    py, rep, events = run
    assert rep["setprofile_refusal"] and "another profiler" in rep["setprofile_refusal"]
    assert rep["setprofile_still"] == [2, True]
    assert rep["cprofile_refusal"] and "profiler" in rep["cprofile_refusal"]
    assert re.search(r"^\s+3\s.*\(leaf\)$", rep["cprofile_still"], re.M), rep["cprofile_still"]
    assert rep["refused_files"] == [False, False]


def test_agent_builds_not_linked_to_libpython():
    minors = sorted({p["minor"] for p in ALL_PYTHONS})
    for m in minors:
        path = agent_path(m)
        assert os.path.exists(path), "missing %s: run make" % path
        r = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True)
        assert "libpython" not in r.stdout
        r = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True,
                           check=True)
        exported = {l.split()[-1] for l in r.stdout.splitlines() if " T " in l}
        assert exported and all(n.startswith("vc_") for n in exported), exported

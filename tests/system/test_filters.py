"""Filters (issue 11): --include/--exclude, --no-c-calls, --max-depth, --min-dur.

In-process sessions on every interpreter of the matrix (host and the sid root's 3.14/3.15):
exact counts of the included functions and absence of the excluded ones under each filter and
their combinations; the filters recorded in the trace; a second session after a filtered one
sees every call (nothing of ours left disabled); on 3.12+ co-resident sys.monitoring tools keep
their events and their own DISABLEd locations; on 3.9-3.13 the frame-evaluation backend traces
Python calls exactly like the profile hook, is auto's choice for --no-c-calls (on 3.12/3.13
unless a sub-interpreter exists) and refuses a foreign evaluator.  Then the CLI:
attach with filters (trace and start/stop), the summary line and `vcattach summary`'s header,
and its usage errors.
"""
import json
import os
import shutil
import subprocess
import textwrap

import pytest

from support.agent_scripts import run_script_once
from support.paths import PYTHONS, VCATTACH, python_env, python_params
from support.proc import run_vcattach
from support.targets import Target

N = 40   # calls of mine() per session
K = 5    # leaf() calls (and abs() calls) per heavy()

LIBX = textwrap.dedent('''\
    def heavy(k):
        s = 0
        for i in range(k):
            s += leaf(i)
        return s

    def leaf(i):
        return abs(i)
    ''')

TARGET = textwrap.dedent('''\
    import collections, json, os, sys, time
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import vcattach
    from vcattach import cvf
    import libx

    N, K = %(n)d, %(k)d
    OUT = sys.argv[1]
    report = {}

    def mine(k):
        return libx.heavy(k) + len(str(k))

    def d1(): return d2()
    def d2(): return d3()
    def d3(): return d4()
    def d4(): return len("x")

    def slow(): time.sleep(0.006)
    def fast(): return 1

    def gen(n):
        for i in range(n):
            yield libx.leaf(i)

    def workload():
        for _ in range(N):
            mine(K)

    def session(name, body, **kw):
        path = OUT + "." + name + ".cvf"
        with vcattach.trace(path, **kw) as t:
            body()
        ev = cvf.load(path)["traceEvents"]
        xs = [e for e in ev if e.get("ph") == "X"]
        counts = collections.Counter(e["name"].split(" (")[0] for e in xs)
        meta = {e["name"]: e.get("args") for e in ev if e.get("ph") == "i"}
        spans = {}
        for e in xs:
            n = e["name"].split(" (")[0]
            if n in ("start", "workload") and n not in spans:
                spans[n] = [e["ts"], e["ts"] + e["dur"]]
        resumes = collections.Counter(e["name"].split(" (")[0] for e in xs
                                      if (e.get("args") or {}).get("vcattach") == "resume")
        report[name] = {"counts": dict(counts), "meta": meta, "spans": spans,
                        "resumes": dict(resumes),
                        "dropped": t.result.dropped, "events": t.result.events}

    def depth_body():
        for _ in range(N):
            d1()

    def dur_body():
        for _ in range(5):
            slow()
        for _ in range(20):
            fast()

    def gen_body():
        for _ in range(N):
            sum(gen(K))

    session("all", workload)
    session("exclude", workload, exclude="*libx*")
    session("include", workload, include=["*/nothing/*", "*target.py"])
    session("no_c", workload, no_c_calls=True)
    session("exclude_no_c", workload, exclude=["*libx*"], no_c_calls=True)
    def depth_and_work():
        for _ in range(N):
            d1()
            mine(K)

    # depth (0-based): <module> 0 (seeded), session 1, the body 2, d1 3, d2 4, d3 5
    session("depth", depth_body, max_depth=5)
    session("depth_exclude", depth_and_work, max_depth=5, exclude="*libx*")
    session("min_dur", dur_body, min_dur="3ms")
    session("gen_no_c", gen_body, no_c_calls=True)
    # heavy() and leaf() do not run between these two: a later unfiltered session must still
    # see every call of theirs (sys.monitoring: nothing of ours left disabled).
    session("exclude_again", workload, exclude="*libx*")
    session("after", workload)

    if sys.version_info >= (3, 12):
        mon = sys.monitoring
        masks = {}
        def probe():
            masks["no_c"] = mon.get_events(mon.PROFILER_ID)
            workload()
        # (hook=monitoring: auto takes the frame evaluator for --no-c-calls on 3.12/3.13)
        session("no_c_probe", probe, no_c_calls=True, hook="monitoring")
        C = mon.events.CALL | mon.events.C_RETURN | mon.events.C_RAISE
        report["no_c_mask"] = [bool(masks["no_c"] & C), bool(masks["no_c"] & mon.events.PY_START)]
        report["after_tool"] = mon.get_tool(mon.PROFILER_ID)
        report["after_events"] = mon.get_events(mon.PROFILER_ID)
        # Two co-resident tools: a counter (never disables) and a coverage-like tool that
        # disables every location after its first event.
        E = mon.events
        seen = collections.Counter()
        covered = collections.Counter()
        def counter(code, offset):
            seen[code.co_name] += 1
        def coverage(code, offset):
            covered[code.co_name] += 1
            return mon.DISABLE
        mon.use_tool_id(3, "counter")
        mon.use_tool_id(mon.COVERAGE_ID, "coverage")
        mon.register_callback(3, E.PY_START, counter)
        mon.register_callback(mon.COVERAGE_ID, E.PY_START, coverage)
        mon.set_events(3, E.PY_START)
        mon.set_events(mon.COVERAGE_ID, E.PY_START)
        phases = []
        for name, kw in (("before", None), ("during", {"exclude": "*libx*"}), ("after", None)):
            seen.clear()
            if kw is None:
                workload()
            else:
                session("coresident", workload, **kw)
            phases.append([name, seen["heavy"], seen["leaf"], covered["heavy"], covered["leaf"]])
        report["coresident_phases"] = phases
        report["coresident_tools"] = [mon.get_tool(3), mon.get_tool(mon.COVERAGE_ID)]
        mon.set_events(3, 0)
        mon.set_events(mon.COVERAGE_ID, 0)
        mon.free_tool_id(3)
        mon.free_tool_id(mon.COVERAGE_ID)

    if (3, 12) <= sys.version_info < (3, 14):
        # A sub-interpreter at attach: auto keeps sys.monitoring for --no-c-calls (the frame
        # evaluator hooks the main interpreter only there).
        try:
            import _interpreters as interpreters
        except ImportError:
            import _xxsubinterpreters as interpreters
        sub = interpreters.create()
        session("no_c_subinterp", workload, no_c_calls=True)
        interpreters.destroy(sub)

    if (3, 9) <= sys.version_info < (3, 14):
        ok = sys.version_info >= (3, 11, 4) or sys.version_info < (3, 11)
        for hook in ("profile", "eval"):
            if hook == "eval" and not ok:
                continue
            session("hook_" + hook, lambda: (workload(), gen_body(), depth_body()),
                    hook=hook, no_c_calls=True)
        try:
            vcattach.start(OUT + ".eval_c.cvf", hook="eval")
            vcattach.stop()
            report["eval_with_c"] = None
        except vcattach.VcattachError as e:
            report["eval_with_c"] = str(e)
    print(json.dumps(report))
''') % {"n": N, "k": K}

_RUNS = {}


@pytest.fixture(params=python_params(chroot=True))
def run(request, tmp_path_factory):
    py = request.param
    if py["id"] not in _RUNS:
        _, rep = run_script_once(py, tmp_path_factory.mktemp("filters-" + py["id"]),
                                 {"target.py": TARGET, "libx.py": LIBX})
        _RUNS[py["id"]] = (py, rep)
    return _RUNS[py["id"]]


def counts(rep, name):
    r = rep[name]
    assert r["dropped"] == 0
    return r["counts"]


def test_unfiltered_baseline(run):
    py, rep = run
    c = counts(rep, "all")
    assert (c["mine"], c["heavy"], c["leaf"]) == (N, N, N * K)
    assert c["builtins.abs"] == N * K and c["builtins.len"] == N
    assert rep["all"]["meta"]["vcattach attach"]["filtered"] is False
    assert "vcattach filters" not in rep["all"]["meta"]


@pytest.mark.parametrize("name", ["exclude", "include"])
def test_exclude_and_include(run, name):
    """The library's functions and the C calls they make are gone; the caller's are exact."""
    py, rep = run
    c = counts(rep, name)
    assert c["mine"] == N and c["builtins.len"] == N
    for absent in ("heavy", "leaf", "builtins.abs"):
        assert absent not in c, (name, c)
    meta = rep[name]["meta"]
    assert meta["vcattach attach"]["filtered"] is True
    f = meta["vcattach filters"]
    if name == "exclude":
        assert f["exclude"] == ["*libx*"] and f["include"] == []
    else:
        assert f["include"] == ["*/nothing/*", "*target.py"] and f["exclude"] == []


def test_no_c_calls(run):
    py, rep = run
    c = counts(rep, "no_c")
    assert (c["mine"], c["heavy"], c["leaf"]) == (N, N, N * K)
    assert not [k for k in c if k.startswith(("builtins.", "time."))], c
    assert rep["no_c"]["meta"]["vcattach filters"]["no_c_calls"] is True
    # auto's backend for --no-c-calls: the frame evaluator where it sees every Python call
    # (3.9-3.13, not 3.11.0-3.11.3), else sys.monitoring (3.12+) or the profile hook
    want = "eval" if _eval_exact(py) else "monitoring" if py["minor"] >= 312 else "profile"
    assert rep["no_c"]["meta"]["vcattach attach"]["backend"] == want
    if "no_c_subinterp" in rep:
        assert rep["no_c_subinterp"]["meta"]["vcattach attach"]["backend"] == "monitoring"
        c = counts(rep, "no_c_subinterp")
        assert (c["mine"], c["heavy"], c["leaf"]) == (N, N, N * K)
    c = counts(rep, "exclude_no_c")
    assert c["mine"] == N and c["workload"] == 1
    assert not [k for k in c if k in ("heavy", "leaf") or k.startswith("builtins.")], c


def test_no_c_calls_unsubscribes(run):
    """3.12+: with --no-c-calls our tool has no CALL/C_RETURN/C_RAISE events at all."""
    py, rep = run
    if py["minor"] < 312:
        pytest.skip("sys.monitoring is 3.12+")
    assert rep["no_c_mask"] == [False, True]


def test_generators_no_c_calls(run):
    """A generator is one call per resume (the legacy hook's count): K yields + the last."""
    py, rep = run
    c = counts(rep, "gen_no_c")
    assert c["gen"] == N * (K + 1) and c["leaf"] == N * K


def test_max_depth(run):
    """<module> (seeded), session() and the body take depths 1-3: --max-depth 5 keeps d1 and
    d2 only, and the depth stays exact across the calls it does not record (d4's len() is
    not kept, mine()'s at depth 5 is)."""
    py, rep = run
    c = counts(rep, "depth")
    assert c["d1"] == N and c["d2"] == N
    assert "d3" not in c and "d4" not in c and "builtins.len" not in c
    assert rep["depth"]["meta"]["vcattach filters"]["max_depth"] == 5
    c = counts(rep, "depth_exclude")
    assert (c["d1"], c["d2"], c["mine"], c["builtins.len"]) == (N, N, N, N)
    assert "d3" not in c and "heavy" not in c and "builtins.abs" not in c


def test_min_dur(run):
    py, rep = run
    c = counts(rep, "min_dur")
    assert c["slow"] == 5 and "fast" not in c
    assert rep["min_dur"]["meta"]["vcattach filters"]["min_dur_ns"] == 3000000


def test_nothing_left_after_a_filtered_session(run):
    """heavy/leaf excluded (on 3.12+: DISABLEd), not run in between, then traced in full."""
    py, rep = run
    assert "heavy" not in counts(rep, "exclude_again")
    c = counts(rep, "after")
    assert (c["mine"], c["heavy"], c["leaf"], c["builtins.abs"]) == (N, N, N * K, N * K)
    assert "vcattach filters" not in rep["after"]["meta"]
    if py["minor"] >= 312:
        assert rep["after_tool"] is None and rep["after_events"] == 0


def test_coresident_monitoring_tools(run):
    """Our DISABLEs and their undoing at stop touch only our tool: a counting tool sees every
    call in every phase, a coverage-like tool's own DISABLEd locations stay disabled."""
    py, rep = run
    if py["minor"] < 312:
        pytest.skip("sys.monitoring is 3.12+")
    for phase, heavy, leaf, cov_heavy, cov_leaf in rep["coresident_phases"]:
        assert (heavy, leaf) == (N, N * K), phase
        assert (cov_heavy, cov_leaf) == (1, 1), phase
    assert rep["coresident_tools"] == ["counter", "coverage"]
    assert "heavy" not in counts(rep, "coresident")


def test_eval_backend_exact(run):
    """3.9-3.13: the frame evaluator counts Python calls exactly as the profile hook does."""
    py, rep = run
    if not 309 <= py["minor"] <= 313:
        pytest.skip("the frame-evaluation backend is 3.9-3.13")
    assert "hook=eval sees Python calls only" in rep["eval_with_c"]
    prof = counts(rep, "hook_profile")
    assert prof["gen"] == N * (K + 1) and prof["d4"] == N and prof["heavy"] == N
    if "hook_eval" not in rep:
        assert py["version"] < "3.11.4"
        return
    ev = counts(rep, "hook_eval")
    assert rep["hook_eval"]["meta"]["vcattach attach"]["backend"] == "eval"
    for name in ("mine", "heavy", "leaf", "gen", "d1", "d2", "d3", "d4", "workload"):
        assert ev[name] == prof[name], (name, ev, prof)
    assert not [k for k in ev if k.startswith("builtins.")]
    # generator resumes are marked as resume slices alike (K per generator: all but the first)
    assert rep["hook_eval"]["resumes"]["gen"] == rep["hook_profile"]["resumes"]["gen"] == N * K
    # vcattach.start() was running at attach (seeded) and returned unseen by the evaluator:
    # it must end before the body's first call, not enclose it.
    for name in ("hook_profile", "hook_eval"):
        spans = rep[name]["spans"]
        assert spans["start"][1] <= spans["workload"][0], (name, spans)


# ---- the frame evaluator refuses another one ---------------------------------------------

EXT = r'''
#define PY_SSIZE_T_CLEAN
#include <Python.h>
/* A foreign PEP 523 evaluator: calls CPython's own. */
#if PY_VERSION_HEX >= 0x030B0000
static PyObject *other(PyThreadState *ts, struct _PyInterpreterFrame *f, int exc)
#else
static PyObject *other(PyThreadState *ts, PyFrameObject *f, int exc)
#endif
{
    return _PyEval_EvalFrameDefault(ts, f, exc);
}
static PyObject *install(PyObject *m, PyObject *a)
{
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), other);
    Py_RETURN_NONE;
}
static PyObject *remove_(PyObject *m, PyObject *a)
{
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), _PyEval_EvalFrameDefault);
    Py_RETURN_NONE;
}
static PyObject *is_ours(PyObject *m, PyObject *a)
{
    return PyBool_FromLong(_PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()) ==
                           (_PyFrameEvalFunction)other);
}
static PyMethodDef methods[] = {
    {"install", install, METH_NOARGS, NULL}, {"remove", remove_, METH_NOARGS, NULL},
    {"is_ours", is_ours, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "othereval", NULL, -1, methods};
PyMODINIT_FUNC PyInit_othereval(void) { return PyModule_Create(&mod); }
'''

EXT_SCRIPT = textwrap.dedent('''\
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import othereval, vcattach
    out = {}
    def leaf(): return 1
    othereval.install()
    for hook in ("eval", "auto"):
        try:
            with vcattach.trace(sys.argv[1] + "/t.cvf", hook=hook, no_c_calls=True) as t:
                leaf()
            out[hook] = "ok"
        except vcattach.VcattachError as e:
            out[hook] = str(e)
    out["still_theirs"] = othereval.is_ours()
    othereval.remove()
    print(json.dumps(out))
''')


def _eval_exact(p):
    v = tuple(int(x) for x in p["version"].split(".")[:3])
    return (3, 9) <= v[:2] <= (3, 10) or (3, 11, 4) <= v < (3, 14)


# On a machine with no such interpreter (a fresh Debian 12 has only 3.11.2) one parameter that
# skips, saying why.
EVAL_EXACT = [pytest.param(p, id=p["id"]) for p in PYTHONS if _eval_exact(p)] or [
    pytest.param(None, id="none", marks=pytest.mark.skip(
        reason="needs CPython 3.9, 3.10 or 3.11.4+ (3.11.2-3.11.3 inline __getitem__ past any "
               "evaluator, gh-104405); this machine has none"))]


@pytest.mark.parametrize("py", EVAL_EXACT)
def test_eval_refuses_another_evaluator(py, tmp_path):
    """hook=eval refuses, auto falls back to the profile hook, the foreign one stays."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    src = tmp_path / "othereval.c"
    src.write_text(EXT)
    so = tmp_path / "othereval.so"
    r = subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-I", py["include"], str(src), "-o",
                        str(so)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    (tmp_path / "s.py").write_text(EXT_SCRIPT)
    p = subprocess.run([py["path"], str(tmp_path / "s.py"), str(tmp_path)], capture_output=True,
                       text=True, timeout=120, env=python_env())
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert "another frame evaluator is installed" in out["eval"] and "--hook profile" in out["eval"]
    assert out["auto"] == "ok" and out["still_theirs"] is True


# ---- the CLI ------------------------------------------------------------------------------

SERVICE = textwrap.dedent('''\
    import os, sys, time
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import libx
    def mine(k):
        return libx.heavy(k) + len(str(k))
    print("ready", flush=True)
    end = time.time() + 120
    while time.time() < end:
        mine(5)
        time.sleep(0.001)
''')


class Looper(Target):
    SOURCE = SERVICE

    def __init__(self, python, workdir):
        os.makedirs(workdir, exist_ok=True)
        with open(os.path.join(workdir, "svc.py"), "w") as f:
            f.write(self.SOURCE)
        with open(os.path.join(workdir, "libx.py"), "w") as f:
            f.write(LIBX)
        super().__init__(python, [os.path.join(workdir, "svc.py")], cwd=workdir)

    def wait_ready(self, deadline):
        import time
        line = self.readline(max(0.1, deadline - time.monotonic()))
        assert line.strip() == "ready", "target did not start: %r" % line


def cli_pythons():
    by_minor = {}
    for p in PYTHONS:
        if p["minor"] in (311, 312):
            by_minor.setdefault(p["minor"], p)
    return [pytest.param(p, id=p["id"]) for p in by_minor.values()]


def x_counts(path):
    from vcattach import cvf
    ev = cvf.load(path)["traceEvents"]
    c = {}
    for e in ev:
        if e.get("ph") == "X":
            k = e["name"].split(" (")[0]
            c[k] = c.get(k, 0) + 1
    return c, {e["name"]: e.get("args") for e in ev if e.get("ph") == "i"}


@pytest.mark.parametrize("py", cli_pythons())
def test_cli_trace_and_start_with_filters(py, tmp_path, start_target):
    t = start_target(Looper, py, str(tmp_path / "w"))
    out = str(tmp_path / "f.cvf")
    r = run_vcattach("trace", "-p", str(t.pid), "-t", "1s", "-o", out, "--exclude", "*libx*",
                     "--no-c-calls", "--max-depth", "50", "--min-dur", "0.1us", timeout=120)
    assert r.returncode == 0, r.stderr
    assert "[filtered: --exclude '*libx*' --no-c-calls --max-depth 50 --min-dur 100ns]" in r.stdout
    c, meta = x_counts(out)
    assert c.get("mine", 0) > 0 and "heavy" not in c and "leaf" not in c
    assert not [k for k in c if "." in k and not k.startswith("<")], c
    f = meta["vcattach filters"]
    assert f == {"include": [], "exclude": ["*libx*"], "no_c_calls": True, "max_depth": 50,
                 "min_dur_ns": 100}
    s = subprocess.run([VCATTACH, "summary", out], capture_output=True, text=True, timeout=60)
    assert s.returncode == 0
    assert s.stdout.splitlines()[1] == ("FILTERED trace (not every call was kept): --exclude "
                                        "'*libx*' --no-c-calls --max-depth 50 --min-dur 100ns")
    # start/stop: the same keywords reach the detached session; then a full trace again
    out2 = str(tmp_path / "s.cvf")
    r = run_vcattach("start", "-p", str(t.pid), "-t", "30s", "-o", out2, "--include", "*svc.py",
                     timeout=120)
    assert r.returncode == 0, r.stderr
    r = run_vcattach("stop", "-p", str(t.pid), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "[filtered: --include '*svc.py']" in r.stdout
    c, meta = x_counts(out2)
    assert c.get("mine", 0) > 0 and c.get("builtins.len", 0) == c["mine"] and "heavy" not in c
    out3 = str(tmp_path / "full.cvf")
    r = run_vcattach("trace", "-p", str(t.pid), "-t", "1s", "-o", out3, timeout=120)
    assert r.returncode == 0 and "filtered" not in r.stdout
    c, meta = x_counts(out3)
    # the trace starts and ends inside the loop: a call at either edge may be cut
    assert abs(c["heavy"] - c["mine"]) <= 1 and abs(c["leaf"] - 5 * c["heavy"]) <= 5
    assert c["heavy"] > 0 and "vcattach filters" not in meta
    s = subprocess.run([VCATTACH, "summary", out3], capture_output=True, text=True, timeout=60)
    assert "FILTERED" not in s.stdout


def null_trace(t, tmp_path, duration):
    """`vcattach trace --null-hook` of t for duration: the trace's (X counts, instants)."""
    out = str(tmp_path / "null.cvf")
    r = run_vcattach("trace", "-p", str(t.pid), "-t", duration, "-o", out, "--null-hook",
                     timeout=120)
    assert r.returncode == 0, r.stderr
    return x_counts(out)


@pytest.mark.parametrize("py", cli_pythons())
def test_cli_null_hook_sets_the_hooks_and_records_nothing(py, tmp_path, start_target):
    """--null-hook (bench/service's floor): the session runs with its backend in place and
    records no call; the trace says so; a trace after it records every call again."""
    t = start_target(Looper, py, str(tmp_path / "w"))
    c, meta = null_trace(t, tmp_path, "1s")
    assert "mine" not in c and "heavy" not in c and "leaf" not in c, c
    attach = meta["vcattach attach"]
    assert attach["null_hook"] == 1 and attach["backend"], attach
    out2 = str(tmp_path / "full.cvf")
    r = run_vcattach("trace", "-p", str(t.pid), "-t", "1s", "-o", out2, timeout=120)
    assert r.returncode == 0, r.stderr
    c, meta = x_counts(out2)
    assert c.get("mine", 0) > 0 and meta["vcattach attach"]["null_hook"] == 0
    t.assert_running_untraced()


HELD = textwrap.dedent('''\
    import time
    def held():
        time.sleep(1.5)
    print("ready", flush=True)
    held()
    end = time.time() + 120
    while time.time() < end:
        time.sleep(0.01)
''')


class Holder(Looper):
    """A call (held) running at the attach that returns 1.5 s after "ready"."""
    SOURCE = HELD


@pytest.mark.parametrize("py", cli_pythons())
def test_null_hook_shows_no_call_caught_at_the_attach(py, tmp_path, start_target):
    """The null hook seeded the frames running at the attach like a real hook, but no hook of
    it pops them: `held`, which returns 1.5 s into a 3 s trace, was closed at the stop as if
    it had run to the end (a loaded CI machine caught `mine` so).  Nothing is seeded now."""
    t = start_target(Holder, py, str(tmp_path / "w"))
    c, meta = null_trace(t, tmp_path, "3s")
    assert c == {}, c
    assert meta["vcattach attach"]["null_hook"] == 1
    t.assert_running_untraced()


@pytest.mark.parametrize("args,msg", [
    (["--min-dur", "5"], "bad minimum duration '5'"),
    (["--max-depth", "0"], "maximum depth"),
    (["--exclude", ""], "empty pattern"),
    (["--hook", "jit"], "unknown hook 'jit'"),
])
def test_cli_filter_usage_errors(args, msg):
    r = run_vcattach("trace", "-p", "1", *args)
    assert r.returncode == 2 and msg in r.stderr, r.stderr


def test_cli_hook_eval_needs_no_c_calls(tmp_path, start_target):
    py = next((p for p in PYTHONS if p["minor"] == 311), None)
    if py is None:
        pytest.skip("no 3.11")
    t = start_target(Looper, py, str(tmp_path / "w"))
    r = run_vcattach("trace", "-p", str(t.pid), "-t", "1s", "-o", str(tmp_path / "x.cvf"),
                     "--hook", "eval")
    assert r.returncode == 2 and "--hook eval sees Python calls only" in r.stderr
    t.assert_running_untraced()


def test_python_api_rejects_bad_filters(tmp_path):
    """Bad keywords fail before any agent is loaded, naming the fix."""
    import vcattach
    out = str(tmp_path / "x.cvf")
    for kw, msg in (({"min_dur": "5"}, "give seconds or a string with a unit"),
                    ({"min_dur": -1}, "must not be negative"),
                    ({"max_depth": 0}, "max_depth must be at least 1"),
                    ({"exclude": ""}, "empty pattern"),
                    ({"include": ["a\nb"]}, "newline"),
                    ({"hook": "jit"}, "hook must be one of")):
        with pytest.raises(ValueError, match=msg):
            vcattach.start(out, **kw)
    assert vcattach._min_dur_ns("50us") == 50000 and vcattach._min_dur_ns(0.002) == 2000000
    assert vcattach._min_dur_ns("1.5ms") == 1500000 and vcattach._min_dur_ns("200ns") == 200

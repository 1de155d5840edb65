"""The Python package (python/vcattach) as a package: `pip install ./python` into a directory
and importing it from there on every interpreter of the matrix; the typed Result; `with
vcattach.trace()` letting the body's own exception through even when stopping fails too; and
the one override of the agent lookup (VCATTACH_AGENT_DIR, as for the CLI; VCATTACH_AGENT, a
file, kept as a deprecated alias).  Each check runs in a real interpreter process."""
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from support.cvf_writer import known_trace
from support.paths import (PYTHON_SRC, PYTHONS, ROOT, agent_name, agent_path, python_env,
                           python_params)
from support.traces import named

from vcattach import cvf


@pytest.fixture(params=python_params())
def py(request):
    p = request.param
    if not os.path.exists(agent_path(p["minor"])):
        pytest.fail("agent not built for %s: run make" % p["id"])
    return p


def _run(py, code, *args, env=None, cwd=None):
    """Runs code in py; returns its last stdout line as JSON, and the process."""
    r = subprocess.run([py["path"], "-c", textwrap.dedent(code)] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=120,
                       env=python_env() if env is None else env, cwd=cwd)
    assert r.returncode == 0, "%s failed:\n%s\n%s" % (py["id"], r.stdout, r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1]), r


# ---- pip install ./python ---------------------------------------------------------------

@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """./python installed with pip (Debian's python3 and setuptools: no network, no build
    isolation) into a fresh directory.  pip builds in the source directory, so it is given a
    copy of ./python: the tree stays clean."""
    base = tmp_path_factory.mktemp("pip")
    src, target = base / "src", base / "target"
    shutil.copytree(PYTHON_SRC, str(src),
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps",
                        "--no-build-isolation", "--no-index", "--no-cache-dir",
                        "--disable-pip-version-check", "--target", str(target), str(src)],
                       capture_output=True, text=True, timeout=300, cwd=str(base))
    if r.returncode != 0 and "No module named pip" in r.stderr:
        pytest.skip("pip is not installed for %s (Debian: python3-pip)" % sys.executable)
    assert r.returncode == 0, r.stdout + r.stderr
    return str(target)


def test_pip_install_then_import_on_every_interpreter(installed, tmp_path):
    """The installed copy (not the source tree) is what gets imported, on 3.8 and up: its .cvf
    reader decodes like the in-tree one, and Result is a typed NamedTuple."""
    files = sorted(os.listdir(os.path.join(installed, "vcattach")))
    assert {"__init__.py", "_agent.py", "cvf.py"} <= set(files), files
    trace = known_trace(tmp_path)
    want = json.dumps(cvf.load(trace), sort_keys=True)
    code = r'''
        import json, sys
        sys.path.insert(0, sys.argv[1])
        import vcattach, vcattach.cvf
        print(json.dumps({"file": vcattach.cvf.__file__, "version": vcattach.__version__,
                          "fields": list(vcattach.Result._fields),
                          "types": {k: v.__name__
                                    for k, v in vcattach.Result.__annotations__.items()},
                          "trace": json.dumps(vcattach.cvf.load(sys.argv[2]),
                                              sort_keys=True)}))
    '''
    for p in PYTHONS:
        # -I: no PYTHONPATH, no user site, no current directory on sys.path
        r = subprocess.run([p["path"], "-I", "-c", textwrap.dedent(code), installed, trace],
                           capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
        assert r.returncode == 0, (p["id"], r.stderr)
        got = json.loads(r.stdout)
        assert got["file"].startswith(installed + os.sep), (p["id"], got["file"])
        assert got["trace"] == want, p["id"]
        assert got["fields"] == ["events", "threads", "dropped", "bytes", "gil_hold_us",
                                 "records_bytes", "status", "error"], p["id"]
        assert set(got["types"].values()) == {"int", "str"} and got["types"]["error"] == "str"
    with open(os.path.join(ROOT, "common", "version.h")) as f:
        version = re.search(r'#define VC_VERSION_STRING "([^"]+)"', f.read()).group(1)
    assert got["version"] == version, "python/vcattach/__init__.py and common/version.h differ"
    dist = [d for d in os.listdir(installed) if d.endswith(".dist-info")]
    assert dist == ["vcattach-%s.dist-info" % version], dist


# ---- trace.__exit__ never masks the body's exception ---------------------------------------

BODY_RAISES = r'''
    import json, logging, os, shutil, sys, vcattach
    logging.basicConfig(stream=sys.stderr, format="LOG %(name)s %(levelname)s %(message)s")
    def leaf():
        return 1
    work = sys.argv[1]
    rep = {}

    # the body raises, stopping works: the body's exception, and the trace is written
    try:
        with vcattach.trace(os.path.join(work, "ok.cvf")) as t:
            leaf()
            raise KeyError("body")
    except KeyError as e:
        rep["plain"] = {"exc": repr(e), "status": t.result.status,
                        "stop_error": repr(t.stop_error)}

    # the body raises AND stopping fails (its output directory is gone): still the body's
    # exception, with the stop failure kept, logged, and noted (3.11+)
    gone = os.path.join(work, "gone")
    os.mkdir(gone)
    try:
        with vcattach.trace(os.path.join(gone, "x.cvf")) as t:
            leaf()
            shutil.rmtree(gone)
            raise KeyError("body")
    except KeyError as e:
        rep["both"] = {"exc": repr(e), "result": t.result, "stop_error": str(t.stop_error),
                       "notes": getattr(e, "__notes__", None),
                       "context": repr(e.__context__)}
    except vcattach.VcattachError as e:
        rep["both"] = {"exc": "masked by: %s" % e}

    # only stopping fails: its VcattachError propagates
    os.mkdir(gone)
    try:
        with vcattach.trace(os.path.join(gone, "y.cvf")):
            shutil.rmtree(gone)
        rep["stop_only"] = "no error"
    except vcattach.VcattachError as e:
        rep["stop_only"] = str(e)
    rep["active"] = vcattach.active()
    print(json.dumps(rep))
'''


def test_trace_body_exception_is_never_masked(py, tmp_path):
    rep, r = _run(py, BODY_RAISES, tmp_path)
    assert rep["plain"] == {"exc": "KeyError('body')", "status": 0, "stop_error": "None"}, rep
    assert len(named(cvf.load(str(tmp_path / "ok.cvf"))["traceEvents"], "leaf")) == 1
    both = rep["both"]
    assert both["exc"] == "KeyError('body')", both
    assert both["result"] is None and "gone/x.cvf" in both["stop_error"], both
    assert both["context"] == "None", both
    if tuple(int(v) for v in py["version"].split(".")[:2]) >= (3, 11):
        assert both["notes"] and "stopping the trace failed too" in both["notes"][0], both
    assert re.search(r"^LOG vcattach ERROR .*gone/x\.cvf.*while the traced block raised "
                     r"KeyError", r.stderr, re.M), r.stderr
    assert "gone/y.cvf" in rep["stop_only"], rep
    assert rep["active"] is False


# ---- the agent override ---------------------------------------------------------------------

OVERRIDE = r'''
    import json, os, sys, warnings, vcattach
    from vcattach import _agent
    warnings.simplefilter("always")
    def leaf():
        return 1
    rep = {}
    with warnings.catch_warnings(record=True) as caught:
        rep["found"] = _agent.find_agent()
        try:
            with vcattach.trace(sys.argv[1]) as t:
                leaf()
            rep["events"] = t.result.events
            with open("/proc/self/maps") as f:
                rep["mapped"] = sorted({l.split()[-1] for l in f if "libvcagent" in l})
        except vcattach.VcattachError as e:
            rep["error"] = str(e)
            rep["cause"] = type(e.__cause__).__name__
    rep["warnings"] = [[w.category.__name__, str(w.message)] for w in caught]
    print(json.dumps(rep))
'''


def test_agent_dir_override(py, tmp_path):
    """VCATTACH_AGENT_DIR=DIR loads DIR/libvcagent-pyXY.so and nothing else (the CLI's
    variable, with the same meaning); a DIR without it is a clear error naming both."""
    agents = tmp_path / "agents"
    agents.mkdir()
    name = agent_name(py["minor"])
    copy = str(agents / name)
    shutil.copy2(agent_path(py["minor"]), copy)
    out = str(tmp_path / "t.cvf")
    rep, _ = _run(py, OVERRIDE, out, env=python_env(VCATTACH_AGENT_DIR=str(agents)))
    assert rep["found"] == copy and rep["mapped"] == [copy], rep
    assert rep["events"] >= 1 and rep["warnings"] == [], rep
    assert len(named(cvf.load(out)["traceEvents"], "leaf")) == 1

    empty = tmp_path / "empty"
    empty.mkdir()
    rep, _ = _run(py, OVERRIDE, str(tmp_path / "none.cvf"),
                  env=python_env(VCATTACH_AGENT_DIR=str(empty)))
    assert rep["found"] is None, rep
    assert "VCATTACH_AGENT_DIR" in rep["error"] and str(empty) in rep["error"] \
        and name in rep["error"], rep
    assert rep["cause"] == "AgentNotFound", rep  # raised from the lookup's own error
    assert not (tmp_path / "none.cvf").exists()

    # both set: the directory wins, the deprecated file variable is not even read
    rep, _ = _run(py, OVERRIDE, str(tmp_path / "both.cvf"),
                  env=python_env(VCATTACH_AGENT_DIR=str(agents),
                                 VCATTACH_AGENT=str(tmp_path / "no-such.so")))
    assert rep["found"] == copy and rep["warnings"] == [], rep


def test_agent_file_variable_is_a_deprecated_alias(py, tmp_path):
    """VCATTACH_AGENT=FILE still loads FILE, with a DeprecationWarning naming the variable to
    use instead."""
    copy = str(tmp_path / "libvcagent-renamed.so")
    shutil.copy2(agent_path(py["minor"]), copy)
    out = str(tmp_path / "t.cvf")
    rep, _ = _run(py, OVERRIDE, out, env=python_env(VCATTACH_AGENT=copy))
    assert rep["found"] == copy and rep["mapped"] == [copy], rep
    assert [w[0] for w in rep["warnings"]] == ["DeprecationWarning"], rep
    assert "VCATTACH_AGENT_DIR" in rep["warnings"][0][1], rep
    assert len(named(cvf.load(out)["traceEvents"], "leaf")) == 1

"""Where things are, found once per test run.

The suite runs on Debian's /usr/bin/python3 (its pytest); target processes are started with
each interpreter of the supported matrix explicitly, found by scripts/find-pythons (by
version, never by a fixed path).
  ROOT      the repository            BUILD   ROOT/build, or $VC_BUILD (make's outputs)
  VCATTACH  BUILD/vcattach            SHARED  ROOT/../shared (may be absent: tests skip)
  PYTHON_SRC ROOT/python (the vcattach package, put on sys.path here for the test modules)
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("VC_BUILD", os.path.join(ROOT, "build"))
VCATTACH = os.path.join(BUILD, "vcattach")
ASAN_VCATTACH = os.path.join(BUILD, "asan", "vcattach")
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared"))
CORPUS = os.path.join(SHARED, "corpus")
PYTHON_SRC = os.path.join(ROOT, "python")
TESTS = os.path.join(ROOT, "tests")

# The test modules read traces with the in-tree vcattach.cvf (not an installed copy).
if PYTHON_SRC not in sys.path:
    sys.path.insert(0, PYTHON_SRC)

# Variables that redirect the agent lookup (the CLI's and the Python package's): a test that
# wants one sets it explicitly, so none may leak in from the environment of the test run.
AGENT_OVERRIDES = ("VCATTACH_AGENT_DIR", "VCATTACH_AGENT")


def _find_pythons():
    out = subprocess.run([os.path.join(ROOT, "scripts", "find-pythons"), "--json"],
                         capture_output=True, text=True, check=True, timeout=120)
    rows = json.loads(out.stdout)
    for r in rows:
        r["id"] = "py%s%s" % (r["version"], "-static" if r["kind"] == "static" else "")
    return rows


PYTHONS = _find_pythons()


def python_params():
    """pytest.param per interpreter of the matrix, id like py3.11.2-static."""
    return [pytest.param(p, id=p["id"]) for p in PYTHONS]


def one_python():
    """The interpreter for tests that need just one: a static build if there is one (the
    harder case for the injector: no libpython to find symbols in)."""
    static = [p for p in PYTHONS if p["kind"] == "static"]
    return (static or PYTHONS)[0]


def agent_name(minor):
    """File name of the agent build for a CPython minor like 311."""
    return "libvcagent-py%d.so" % minor


def agent_path(minor):
    return os.path.join(BUILD, agent_name(minor))


def agents_built():
    return all(os.path.exists(agent_path(p["minor"])) for p in PYTHONS)


def python_env(**extra):
    """Environment for a target that imports the in-tree vcattach package and finds the agent
    the default way (no override variable, whatever the test run's environment has)."""
    env = dict(os.environ, PYTHONPATH=PYTHON_SRC)
    for name in AGENT_OVERRIDES:
        env.pop(name, None)
    env.update(extra)
    return env


def corpus_names():
    """Names NAME for which ../shared/corpus has NAME.cvf (empty when shared/ is absent)."""
    if not os.path.isdir(CORPUS):
        return []
    return sorted(f[:-4] for f in os.listdir(CORPUS) if f.endswith(".cvf"))

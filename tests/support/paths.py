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
import shutil
import subprocess
import sys
import tempfile

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


def _test_root():
    """(root, None) when scripts/test-root has made the sid root (3.14/3.15), or (None, why).
    Never makes it (minutes): `make test` and `make deps` do, before the suite starts."""
    script = os.path.join(ROOT, "scripts", "test-root")
    if os.environ.get("VC_NO_TEST_ROOT"):
        return None, "VC_NO_TEST_ROOT is set"
    if os.geteuid() != 0:
        return None, "the chroot targets need root"
    try:
        if subprocess.run([script, "--check"], capture_output=True, timeout=60).returncode != 0:
            return None, "it is not made: `make test` or `make deps` makes it (scripts/test-root)"
        r = subprocess.run([script, "--path"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "scripts/test-root failed: %s" % e
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["scripts/test-root failed"])[-1]
    return r.stdout.strip().splitlines()[-1], None


TEST_ROOT, TEST_ROOT_ERROR = _test_root()


def _find_pythons():
    out = subprocess.run([os.path.join(ROOT, "scripts", "find-pythons"), "--json"],
                         capture_output=True, text=True, check=True, timeout=120)
    rows = json.loads(out.stdout)
    for r in rows:
        r["id"] = "py%s%s%s" % (r["version"], "-static" if r["kind"] == "static" else "",
                                "-chroot" if r["root"] else "")
    return rows


# PYTHONS: the host's interpreters (run as [path]); CHROOT_PYTHONS: those of the test root
# (3.14, 3.15), run as py["argv"] == ["chroot", ROOT, path], which see only files under ROOT.
ALL_PYTHONS = _find_pythons()
PYTHONS = [p for p in ALL_PYTHONS if not p["root"]]
CHROOT_PYTHONS = [p for p in ALL_PYTHONS if p["root"]]


def python_params(chroot=False):
    """pytest.param per interpreter of the matrix, id like py3.11.2-static; with chroot=True
    the test root's interpreters too (the test must start them with py["argv"] and give them
    paths from root_workdir)."""
    return [pytest.param(p, id=p["id"]) for p in (ALL_PYTHONS if chroot else PYTHONS)]


# Directories made under the test root's /tmp; conftest removes them at the session's end.
ROOT_DIRS = []


def root_workdir(py, host_dir, name="vc"):
    """(outside, inside): a fresh directory the interpreter py can use, as the host and as py
    see it.  For a host interpreter that is host_dir itself; for a chroot one a new directory
    under ROOT/tmp (the only part of the cached root tests may touch), removed at session end."""
    if not py["root"]:
        return str(host_dir), str(host_dir)
    outside = tempfile.mkdtemp(prefix=name + "-", dir=os.path.join(py["root"], "tmp"))
    os.chmod(outside, 0o755)
    ROOT_DIRS.append(outside)
    return outside, outside[len(py["root"]):]


def copy_vcattach_into(outside, minor):
    """Puts python/vcattach and the agent for minor under outside/ in the source-tree layout
    (python/vcattach, build/libvcagent-pyXY.so) so find_agent() finds the copy."""
    shutil.copytree(os.path.join(ROOT, "python", "vcattach"),
                    os.path.join(outside, "python", "vcattach"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    os.makedirs(os.path.join(outside, "build"), exist_ok=True)
    shutil.copy2(agent_path(minor), os.path.join(outside, "build"))


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


# ---- files other users and other mount namespaces open ------------------------------------
# A target started as another user (nobody), or with a private /tmp, opens its script, the agent
# or the injector itself; the clone may be out of its reach: under root's 0700 home, or under
# /tmp, which a private /tmp hides.  Such tests give it a copy that every user can read, made
# once per session under /var/tmp (not /tmp); conftest removes them when the session ends.
COPIES = {"root": None, "dirs": {}}


def world_readable(path):
    """The path of a world-readable copy of the file PATH (same basename, its directory shared
    with the other copies of files from PATH's directory; executable if PATH is)."""
    path = os.path.abspath(path)
    if COPIES["root"] is None:
        COPIES["root"] = tempfile.mkdtemp(prefix="vcattach-tests-", dir="/var/tmp")
        os.chmod(COPIES["root"], 0o755)
    src_dir, name = os.path.split(path)
    dst_dir = COPIES["dirs"].get(src_dir)
    if dst_dir is None:
        dst_dir = os.path.join(COPIES["root"], str(len(COPIES["dirs"])))
        os.mkdir(dst_dir)
        os.chmod(dst_dir, 0o755)
        COPIES["dirs"][src_dir] = dst_dir
    dst = os.path.join(dst_dir, name)
    if not os.path.exists(dst):
        shutil.copyfile(path, dst)
        os.chmod(dst, 0o755 if os.access(path, os.X_OK) else 0o644)
    return dst

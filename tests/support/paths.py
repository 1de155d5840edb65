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
# The CLI with the test seams (common/test_seam.h): only tests that open a race window use it.
SEAMS_VCATTACH = os.path.join(BUILD, "seams", "vcattach")


def seams_env(**seams):
    """The environment for SEAMS_VCATTACH with the given VCATTACH_TEST_* seams set: ours, plus
    the agents' directory (the seams build lives in BUILD/seams, not beside them)."""
    env = dict(os.environ, VCATTACH_AGENT_DIR=FOR_ALL["dir"] or BUILD)
    env.update(seams)
    return env
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


def test_root(name="sid"):
    """(root, None) when scripts/test-root has made the root NAME (sid: CPython 3.14/3.15;
    bullseye, trixie: see debian_root_python), or (None, why).  Never makes it (minutes):
    `make test` and `make deps` do, before the suite starts."""
    script = os.path.join(ROOT, "scripts", "test-root")
    if os.environ.get("VC_NO_TEST_ROOT"):
        return None, "VC_NO_TEST_ROOT is set"
    if os.geteuid() != 0:
        return None, "the chroot targets need root"
    try:
        if subprocess.run([script, name, "--check"], capture_output=True,
                          timeout=60).returncode != 0:
            return None, ("it is not made: `make test` or `make deps` makes it "
                          "(scripts/test-root %s)" % name)
        r = subprocess.run([script, name, "--path"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "scripts/test-root failed: %s" % e
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["scripts/test-root failed"])[-1]
    return r.stdout.strip().splitlines()[-1], None


TEST_ROOT, TEST_ROOT_ERROR = test_root("sid")


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


# The roots that stand for container images of another C library (scripts/test-root): each
# with the interpreter the tests run in it.  Not part of the matrix above (every test on every
# interpreter): the modules that need them take them from debian_root_python.
DEBIAN_ROOT_PYTHONS = {"bullseye": "/usr/bin/python3.9",   # glibc 2.31, python:*-slim-bullseye
                       "trixie": "/usr/bin/python3.13",    # glibc 2.41, today's python:*-slim
                       # musl, python:*-alpine: Debian 13's CPython 3.13 built with musl-gcc
                       "musl": "/opt/python3.13/bin/python3.13"}
# The musl root's other CPython: Debian 12's 3.11 built with musl-gcc (debian_root_python's
# path argument)
MUSL_PYTHON_311 = "/opt/python3.11/bin/python3.11"


def debian_root_python(name, path=None):
    """(row, None) for the interpreter of the root NAME (or the one at path in it), a row like
    find-pythons' (minor, path, argv = chroot ROOT path, root, version, kind, id), or (None,
    why) when the root is not made."""
    root, why = test_root(name)
    if root is None:
        return None, "no %s test root: %s" % (name, why)
    path = path or DEBIAN_ROOT_PYTHONS[name]
    argv = ["chroot", root, path]
    out = subprocess.run(argv + ["-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        return None, "%s in the %s root does not run: %s" % (path, name, out.stderr.strip())
    version = out.stdout.strip()
    major, minor = version.split(".")[:2]
    return {"minor": int(major) * 100 + int(minor), "path": path, "argv": argv, "root": root,
            "version": version, "kind": "static", "host_path": root + path, "include": "-",
            "id": "py%s-%s" % (version, name)}, None


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


def reachable_by_all(path):
    """Whether every user can reach PATH: each directory from / down to it searchable by
    others (a clone under root's 0700 home is not)."""
    d = os.path.abspath(path)
    while True:
        if not os.stat(d).st_mode & 0o001:
            return False
        if d == "/":
            return True
        d = os.path.dirname(d)


def agent_dir_for_all():
    """A directory of the agents that a target of any user can load them from: BUILD when every
    user reaches it, else world-readable copies of its agents (a fresh machine's clone under
    /root: vcattach refuses an agent the target's user cannot reach)."""
    if reachable_by_all(BUILD):
        return BUILD
    agents = [f for f in os.listdir(BUILD) if f.startswith("libvcagent-py") and f.endswith(".so")]
    copies = [world_readable(os.path.join(BUILD, f)) for f in sorted(agents)]
    return os.path.dirname(copies[0]) if copies else BUILD


FOR_ALL = {"dir": None}  # set by agents_for_all for the test it serves (seams_env reads it)


@pytest.fixture
def agents_for_all(monkeypatch):
    """For a test whose targets run as another user (nobody): VCATTACH_AGENT_DIR points at a
    directory every user reaches, when the build directory is not one (see agent_dir_for_all;
    unchanged otherwise)."""
    d = agent_dir_for_all()
    if d != BUILD:
        monkeypatch.setenv("VCATTACH_AGENT_DIR", d)
        FOR_ALL["dir"] = d
    yield d
    FOR_ALL["dir"] = None

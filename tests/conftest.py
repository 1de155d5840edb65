"""Shared fixtures for the whole suite.

The suite runs on Debian's /usr/bin/python3 (its pytest); target processes are started with
each interpreter of the supported matrix explicitly, found by scripts/find-pythons (by
version, never by a fixed path).  Paths:
  ROOT      the repository            BUILD   ROOT/build (make's outputs)
  VCATTACH  BUILD/vcattach            SHARED  ROOT/../shared (may be absent: tests skip)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("VC_BUILD", os.path.join(ROOT, "build"))
VCATTACH = os.path.join(BUILD, "vcattach")
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared"))
CORPUS = os.path.join(SHARED, "corpus")

sys.path.insert(0, os.path.join(ROOT, "python"))


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


def agent_path(minor):
    return os.path.join(BUILD, "libvcagent-py%d.so" % minor)


def corpus_names():
    """Names NAME for which ../shared/corpus has NAME.cvf (empty when shared/ is absent)."""
    if not os.path.isdir(CORPUS):
        return []
    return sorted(f[:-4] for f in os.listdir(CORPUS) if f.endswith(".cvf"))


@pytest.fixture
def corpus_dir():
    if not os.path.isdir(CORPUS):
        pytest.skip("../shared/corpus is absent (a user's clone): corpus tests need it")
    return CORPUS


# ---- files other users and other mount namespaces open ------------------------------------
# A target started as another user (nobody), or with a private /tmp, opens its script, the agent
# or the injector itself; the clone may be out of its reach: under root's 0700 home, or under
# /tmp, which a private /tmp hides.  Such tests give it a copy that every user can read, made
# once per session under /var/tmp (not /tmp) and removed when the session ends.
_COPIES = {"root": None, "dirs": {}}


def world_readable(path):
    """The path of a world-readable copy of the file PATH (same basename, its directory shared
    with the other copies of files from PATH's directory; executable if PATH is)."""
    path = os.path.abspath(path)
    if _COPIES["root"] is None:
        _COPIES["root"] = tempfile.mkdtemp(prefix="vcattach-tests-", dir="/var/tmp")
        os.chmod(_COPIES["root"], 0o755)
    src_dir, name = os.path.split(path)
    dst_dir = _COPIES["dirs"].get(src_dir)
    if dst_dir is None:
        dst_dir = os.path.join(_COPIES["root"], str(len(_COPIES["dirs"])))
        os.mkdir(dst_dir)
        os.chmod(dst_dir, 0o755)
        _COPIES["dirs"][src_dir] = dst_dir
    dst = os.path.join(dst_dir, name)
    if not os.path.exists(dst):
        shutil.copyfile(path, dst)
        os.chmod(dst, 0o755 if os.access(path, os.X_OK) else 0o644)
    return dst


def pytest_sessionfinish(session, exitstatus):
    if _COPIES["root"] is not None:
        shutil.rmtree(_COPIES["root"], ignore_errors=True)


def pytest_report_header(config):
    lines = ["vcattach build: %s" % BUILD, "interpreters: " + ", ".join(
        "%s=%s" % (p["id"], p["path"]) for p in PYTHONS)]
    if not os.path.isdir(CORPUS):
        lines.append("../shared/corpus absent: corpus tests will be skipped")
    return lines

"""Shared fixtures for the whole suite.

The suite runs on Debian's /usr/bin/python3 (its pytest); target processes are started with
each interpreter of the supported matrix explicitly, found by scripts/find-pythons (by
version, never by a fixed path).  Paths:
  ROOT      the repository            BUILD   ROOT/build (make's outputs)
  VCATTACH  BUILD/vcattach            SHARED  ROOT/../shared (may be absent: tests skip)
"""
import json
import os
import subprocess
import sys

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


def pytest_report_header(config):
    lines = ["vcattach build: %s" % BUILD, "interpreters: " + ", ".join(
        "%s=%s" % (p["id"], p["path"]) for p in PYTHONS)]
    if not os.path.isdir(CORPUS):
        lines.append("../shared/corpus absent: corpus tests will be skipped")
    return lines

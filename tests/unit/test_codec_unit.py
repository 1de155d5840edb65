"""Runs the C unit programs of common/ (tests/unit/test_*.c: the codec, the bounded text builder
and the terminal sanitizer, built by `make test` into build/tests/ and, instrumented with
ASan+UBSan, into build/asan/tests/) so their results end up in pytest's summary.  Each program exits nonzero and prints the failed CHECKs on a failure."""
import glob
import os
import subprocess

import pytest

from support.paths import BUILD, ROOT

UNIT_SRCS = sorted(glob.glob(os.path.join(ROOT, "tests", "unit", "test_*.c")))
NAMES = [os.path.basename(s)[:-2] for s in UNIT_SRCS]


def _run(path):
    if not os.path.exists(path):
        pytest.fail("%s is missing: run `make test` (it builds the unit programs)" % path)
    r = subprocess.run([path], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, "%s failed (rc %d):\n%s%s" % (path, r.returncode, r.stdout,
                                                            r.stderr)
    assert "checks passed" in r.stdout


@pytest.mark.parametrize("name", NAMES)
def test_unit_program(name):
    _run(os.path.join(BUILD, "tests", name))


@pytest.mark.parametrize("name", NAMES)
def test_unit_program_asan(name):
    _run(os.path.join(BUILD, "asan", "tests", name))

"""The tree builds warning-free (-Wall -Wextra -Werror) with clang as well as gcc (the main
build, which every other test uses, is gcc's).  Built into build/clang so it never disturbs
the outputs the rest of the suite runs."""
import os
import shutil
import subprocess

import pytest

from support.paths import ALL_PYTHONS, BUILD, ROOT


def test_tree_builds_with_clang():
    if not shutil.which("clang"):
        pytest.skip("clang is not installed (scripts/install-deps.sh installs it)")
    out = os.path.join(BUILD, "clang")
    r = subprocess.run(["make", "-s", "-j2", "CC=clang", "BUILD=" + out, "all"], cwd=ROOT,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "warning:" not in r.stderr, r.stderr[-3000:]
    assert os.access(os.path.join(out, "vcattach"), os.X_OK)
    for minor in {p["minor"] for p in ALL_PYTHONS}:
        assert os.path.exists(os.path.join(out, "libvcagent-py%d.so" % minor))
    r = subprocess.run([os.path.join(out, "vcattach"), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "convert" in r.stdout

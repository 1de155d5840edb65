"""The build: `make` only builds (it installs no package and makes no test root: `make deps`,
`make demo` and `make test` do that, after one line saying so), stops with one line naming
what is missing and the fix, and the tree builds warning-free (-Wall -Wextra -Werror) with clang
as well as gcc (the main build, which every other test uses, is gcc's).  Fresh builds go into
build/clang or a temporary directory, so they never disturb the outputs the rest of the suite
runs.  Installers are replaced on PATH by fakes that fail loudly and log every call."""
import os
import shutil
import subprocess

import pytest

from support.paths import ALL_PYTHONS, BUILD, ROOT

FAKE = """#!/bin/sh
echo "$0 $*" >> "%s"
echo "FAKE $0 called: make must not install anything" >&2
exit 97
"""
# pkg-config that knows no jansson, the real one for everything else
NO_JANSSON = """#!/bin/sh
for a in "$@"; do [ "$a" = jansson ] && exit 1; done
exec %s "$@"
"""


@pytest.fixture
def no_installers(tmp_path):
    """(env, log): an environment whose PATH starts with fake apt-get, apt, debootstrap and sudo
    that append their command line to log; without the variables of a make this test may run
    under (a jobserver it cannot use)."""
    bindir, log = tmp_path / "fakebin", tmp_path / "installers.log"
    bindir.mkdir()
    for name in ("apt-get", "apt", "debootstrap", "sudo"):
        (bindir / name).write_text(FAKE % log)
        (bindir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env["PATH"] = "%s:%s" % (bindir, env.get("PATH", "/usr/bin:/bin"))
    return env, log


def make(args, env, timeout=300):
    return subprocess.run(["make"] + args, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def calls(log):
    return log.read_text() if log.exists() else ""


def test_make_installs_nothing_and_makes_no_test_root(tmp_path, no_installers):
    """On a machine without the sid root (VC_TEST_ROOT_DIR: an empty directory), `make` records
    the configuration and would build: no installer, no debootstrap, no setup step."""
    env, log = no_installers
    env["VC_TEST_ROOT_DIR"] = str(tmp_path / "no-root")
    out = tmp_path / "b"
    r = make(["-n", "BUILD=%s" % out, "all"], env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert calls(log) == ""
    for word in ("install-deps", "test-root", "debootstrap", "apt-get"):
        assert word not in r.stdout + r.stderr, word
    config = (out / "config.mk").read_text()  # made for real, even under -n
    assert "AGENT_PYINCS := 3" in config and ":%s" % (tmp_path / "no-root") not in config
    assert "/vcattach" in r.stdout  # the link of the CLI is what it would do
    assert "inject-test" not in r.stdout, "test fixtures are built by `make test`, not `make`"


@pytest.mark.parametrize("what", ["jansson", "compiler"])
def test_missing_build_need_is_one_line(tmp_path, no_installers, what):
    env, log = no_installers
    out = tmp_path / "b"
    args = ["BUILD=%s" % out, "all"]
    if what == "jansson":
        fake = tmp_path / "fakebin" / "pkg-config"
        fake.write_text(NO_JANSSON % shutil.which("pkg-config"))
        fake.chmod(0o755)
        want = "missing: libjansson-dev (jansson);"
    else:
        args.append("CC=%s" % (tmp_path / "no-such-cc"))
        want = "missing: a working C compiler (%s: build-essential);" % (tmp_path / "no-such-cc")
    r = make(args, env, timeout=60)
    assert r.returncode != 0
    lines = (r.stdout + r.stderr).splitlines()
    assert len(lines) == 1, lines
    assert want in lines[0], lines
    assert "run 'make deps' (or scripts/install-deps.sh), then make again" in lines[0], lines
    assert calls(log) == ""
    assert not (out / "config.mk").exists() and not (out / "common").exists()


def test_make_test_sets_up_then_builds_then_runs_pytest_once(tmp_path, no_installers):
    env, log = no_installers
    r = make(["-n", "BUILD=%s" % (tmp_path / "b"), "test", "PYTEST_ARGS=-x test_cli.py"], env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert calls(log) == ""
    text = r.stdout
    steps = [text.find(s) for s in ("scripts/install-deps.sh --check", "scripts/test-root --all --check",
                                    "test-prereqs", "inject-test", "-m pytest")]
    assert -1 not in steps and steps == sorted(steps), (steps, text[-3000:])
    assert text.count("-m pytest") == 1 and "-x test_cli.py" in text


@pytest.mark.slow  # a whole second build: 1.5 minutes of the 30 make test may take
def test_tree_builds_with_clang(no_installers):
    if not shutil.which("clang"):
        pytest.skip("clang is not installed (scripts/install-deps.sh installs it)")
    env, log = no_installers
    out = os.path.join(BUILD, "clang")
    # configured afresh (where the old `make` installed packages and made the test root)
    if os.path.exists(os.path.join(out, "config.mk")):
        os.unlink(os.path.join(out, "config.mk"))
    r = subprocess.run(["make", "-s", "-j2", "CC=clang", "BUILD=" + out, "all"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "warning:" not in r.stderr, r.stderr[-3000:]
    assert calls(log) == ""
    assert os.access(os.path.join(out, "vcattach"), os.X_OK)
    for minor in {p["minor"] for p in ALL_PYTHONS}:
        assert os.path.exists(os.path.join(out, "libvcagent-py%d.so" % minor))
    r = subprocess.run([os.path.join(out, "vcattach"), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "convert" in r.stdout

"""Fixtures and pytest hooks for the whole suite, nothing else: the helpers every test module
shares (paths, the interpreter matrix, process and trace helpers) are in support/, which test
modules import directly."""
import os
import shutil

import pytest

from support import gdb_probe
from support.chroot import ChrootService
from support.paths import ALL_PYTHONS, BUILD, COPIES, CORPUS, ROOT_DIRS, TEST_ROOT_ERROR

# Two folders: unit/ (the fast tier, `make test-unit`: modules that start no target process,
# use no ptrace and need no root or test root, seconds in all) and system/ (real targets,
# services, roots).  A unit module's test gets the `unit` marker here, except one marked
# `system` in the module (a real traced target among offline checks: requests' services,
# summary's real traces, the C-library refusals) or `slow` (timed fuzzing runs).  `make test`
# runs both folders; the markers stay for selection (`-m unit`, `-m "not slow"`).


# Tests that make gdb call into a target: every one with "gdb" in its id (the method as a
# parameter, or in its name), and these, which use gdb among other methods inside one test.
GDB_CALLING = {"test_inject.py::test_inject_idle_target",
               "test_security_userns.py::test_hostile_tmp_and_racer_cannot_touch_host_files"}


def _calls_gdb(item):
    base = "%s::%s" % (item.path.name, item.originalname)
    return base in GDB_CALLING or ("gdb" in item.name and
                                   not item.originalname.startswith("test_gdb_refuses_"))


def pytest_collection_modifyitems(config, items):
    gdb_skip = None
    for item in items:
        if (item.path.parent.name == "unit" and item.get_closest_marker("system") is None and
                item.get_closest_marker("slow") is None):
            item.add_marker(pytest.mark.unit)
        elif _calls_gdb(item):
            if gdb_skip is None:
                gdb_skip = gdb_probe.skip_reason() or ""
            if gdb_skip:
                item.add_marker(pytest.mark.skip(reason=gdb_skip))


@pytest.fixture
def corpus_dir():
    if not os.path.isdir(CORPUS):
        pytest.skip("../shared/corpus is absent (a user's clone): corpus tests need it")
    return CORPUS


@pytest.fixture
def start_target():
    """start_target(TargetClass, *args, **kw) starts a support.targets.Target that is closed
    (resumed if stopped, killed, reaped) at the end of the test, whatever happened."""
    started = []

    def start(cls, *args, **kw):
        t = cls(*args, **kw)
        started.append(t)
        return t
    yield start
    for t in started:
        t.close()


@pytest.fixture
def chroot_service(tmp_path):
    """chroot_service(python, wrap=()) starts a support.chroot.ChrootService that is closed at
    the end of the test."""
    started = []

    def start(python, wrap=()):
        s = ChrootService(python, tmp_path, wrap)
        started.append(s)
        return s
    yield start
    for s in started:
        s.close()


def pytest_sessionfinish(session, exitstatus):
    for d in ROOT_DIRS:
        shutil.rmtree(d, ignore_errors=True)
    if COPIES["root"] is not None:
        shutil.rmtree(COPIES["root"], ignore_errors=True)


def pytest_report_header(config):
    lines = ["vcattach build: %s" % BUILD, "interpreters: " + ", ".join(
        "%s=%s" % (p["id"], p["path"]) for p in ALL_PYTHONS)]
    if gdb_probe.skip_reason():
        lines.append("the gdb method refuses on this host: its tests are skipped (%s)"
                     % gdb_probe.skip_reason())
    if TEST_ROOT_ERROR:
        lines.append("NO 3.14/3.15: no sid test root (%s); their tests are skipped"
                     % TEST_ROOT_ERROR)
    if not os.path.isdir(CORPUS):
        lines.append("../shared/corpus absent: corpus tests will be skipped")
    return lines

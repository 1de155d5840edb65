"""Fixtures and pytest hooks for the whole suite, nothing else: the helpers every test module
shares (paths, the interpreter matrix, process and trace helpers) are in support/, which test
modules import directly."""
import os
import shutil

import pytest

from support import gdb_probe
from support.chroot import ChrootService
from support.paths import ALL_PYTHONS, BUILD, COPIES, CORPUS, ROOT_DIRS, TEST_ROOT_ERROR

# The fast tier (`make test-unit`, i.e. `pytest -m unit`): modules that start no target process,
# use no ptrace and need no root or test root, seconds in all.  Their tests get the `unit`
# marker here, except those marked `system` in the module (a real traced target among offline
# checks).  Everything else is a system test (real targets); `make test` runs both tiers.
UNIT_MODULES = {
    "test_codec_unit.py",        # the C unit programs of tests/unit/ (plain and ASan+UBSan)
    "test_codec_generated.py",   # codec round trips through `vcattach convert`, both readers
    "test_codec_corpus.py",      # codec against VizTracer's files (../shared/corpus)
    "test_codec_corrupt.py",     # malformed input: drivers, CLI (plain and ASan), Python reader
    "test_cli.py",               # option parsing, help, exit codes; the pid a `sleep` (whose
                                 # preflight probes PTRACE_SEIZE on a child of vcattach's own)
    "test_safepoint_rules.py",   # both judges of injector/safepoint_rules.def, on recorded stacks
    "test_export.py",            # convert --format speedscope|collapsed
    "test_summary.py",           # summary on written traces (its test_real_* are `system`)
    "test_requests.py",          # requests, convert --requests on written traces (its real
                                 # services, gunicorn/uvicorn/Celery, are `system`)
    "test_security_offline.py",  # hostile files given to summary, convert, the ELF reader
}


# Tests that make gdb call into a target: every one with "gdb" in its id (the method as a
# parameter, or in its name), and these, which use gdb among other methods inside one test.
GDB_CALLING = {"test_inject.py::test_inject_idle_target",
               "test_security_userns.py::test_hostile_tmp_and_racer_cannot_touch_host_files"}


def _calls_gdb(item):
    base = "%s::%s" % (item.path.name, item.originalname)
    return base in GDB_CALLING or ("gdb" in item.name and
                                   item.originalname != "test_gdb_refuses_when_it_cannot_"
                                                       "write_registers")


def pytest_collection_modifyitems(config, items):
    gdb_skip = None
    for item in items:
        if item.path.name in UNIT_MODULES and item.get_closest_marker("system") is None:
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
    if gdb_probe.gdb_register_problem():
        lines.append("gdb cannot write registers on this host: its tests are skipped (%s)"
                     % gdb_probe.gdb_register_problem())
    if TEST_ROOT_ERROR:
        lines.append("NO 3.14/3.15: no sid test root (%s); their tests are skipped"
                     % TEST_ROOT_ERROR)
    if not os.path.isdir(CORPUS):
        lines.append("../shared/corpus absent: corpus tests will be skipped")
    return lines

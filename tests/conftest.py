"""Fixtures and pytest hooks for the whole suite, nothing else: the helpers every test module
shares (paths, the interpreter matrix, process and trace helpers) are in support/, which test
modules import directly."""
import os
import shutil

import pytest

from support.paths import ALL_PYTHONS, BUILD, COPIES, CORPUS, ROOT_DIRS, TEST_ROOT_ERROR


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


def pytest_sessionfinish(session, exitstatus):
    for d in ROOT_DIRS:
        shutil.rmtree(d, ignore_errors=True)
    if COPIES["root"] is not None:
        shutil.rmtree(COPIES["root"], ignore_errors=True)


def pytest_report_header(config):
    lines = ["vcattach build: %s" % BUILD, "interpreters: " + ", ".join(
        "%s=%s" % (p["id"], p["path"]) for p in ALL_PYTHONS)]
    if TEST_ROOT_ERROR:
        lines.append("NO 3.14/3.15: the sid test root cannot be created (%s); their tests "
                     "are skipped" % TEST_ROOT_ERROR)
    if not os.path.isdir(CORPUS):
        lines.append("../shared/corpus absent: corpus tests will be skipped")
    return lines

"""End to end: what the agent of a `vcattach start` session does with its output file (issue
16, "one atomic .cvf writer": the agent writes through common/atomic_file.c like the CLI).

The operator's OUT is checked absent when the session starts, but the agent writes only when
the session ends; a file created at that name in between is the operator's and must survive:
the agent keeps its trace in OUT.tmp, says so on the target's stderr and in END (which
`vcattach stop` prints), and writes no fallback (the trace is safe already).  With --force the
agent replaces it, as the CLI does."""
import os
import time

import pytest

from support.paths import PYTHONS, agent_path
from support.proc import assert_untouched, run_vcattach
from support.service import assert_unharmed, thread_names
from support.targets import Service

from vcattach import cvf

# One interpreter is enough (the writer is in common/, the same in every agent build): the
# first >= 3.12 of the matrix.
START_PYTHONS = [p for p in PYTHONS if p["minor"] >= 312][:1]
OPERATOR = b"the operator's own file\n"


@pytest.fixture
def service(tmp_path, start_target):
    def start(python, name="svc"):
        assert os.path.exists(agent_path(python["minor"])), "agent build missing: run make"
        return start_target(Service, python, tmp_path / name)
    return start


def wait_idle(pid, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if run_vcattach("status", "--pid", pid, "-q").returncode != 0:
            return
        time.sleep(0.05)
    raise AssertionError("session in %d did not end" % pid)


def wait_for(path, timeout=20):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.path.exists(path), "%s never appeared" % path


def assert_kept(svc, out):
    """OUT is still the operator's, the whole trace is in OUT.tmp, no fallback was written,
    and the agent's stderr line named OUT.tmp."""
    tmp = str(out) + ".tmp"
    assert out.read_bytes() == OPERATOR
    assert "MainThread" in thread_names(cvf.load(tmp)).values()
    assert not os.path.exists(str(out)[:-len(".cvf")] + ".partial.cvf")
    log = svc.output()
    assert "vcattach agent (pid %d): " % svc.pid in log, log
    assert tmp in log and "already exists" in log, log
    os.unlink(tmp)


@pytest.mark.parametrize("python", [pytest.param(p, id=p["id"]) for p in START_PYTHONS])
def test_start_keeps_a_file_created_meanwhile(python, service, tmp_path):
    svc = service(python)

    # Stopped by `vcattach stop`: its line names OUT.tmp, and it fails.
    out = tmp_path / "started.cvf"
    r = run_vcattach("start", "--pid", svc.pid, "-t", "2s", "-o", out)
    assert r.returncode == 0, r.stderr
    out.write_bytes(OPERATOR)
    stop = run_vcattach("stop", "--pid", svc.pid)
    assert stop.returncode == 1, (stop.stdout, stop.stderr)
    assert "the agent in pid %d" % svc.pid in stop.stderr, stop.stderr
    assert str(out) + ".tmp" in stop.stderr and "already exists" in stop.stderr, stop.stderr
    assert "--force" in stop.stderr, stop.stderr
    wait_idle(svc.pid)
    assert_kept(svc, out)

    # Ended by its deadline, nobody listening: the same, said on the target's stderr only.
    out2 = tmp_path / "deadline.cvf"
    r = run_vcattach("start", "--pid", svc.pid, "-t", "1s", "-o", out2)
    assert r.returncode == 0, r.stderr
    out2.write_bytes(OPERATOR)
    wait_for(str(out2) + ".tmp")
    wait_idle(svc.pid)
    assert_kept(svc, out2)

    assert_untouched(svc.pid)
    assert_unharmed(svc, svc.finish())


@pytest.mark.parametrize("python", [pytest.param(p, id=p["id"]) for p in START_PYTHONS])
def test_start_force_replaces(python, service, tmp_path):
    svc = service(python)
    out = tmp_path / "forced.cvf"
    out.write_bytes(OPERATOR)  # --force: an existing OUT is accepted at start, and replaced
    r = run_vcattach("start", "--force", "--pid", svc.pid, "-t", "30s", "-o", out)
    assert r.returncode == 0, r.stderr
    out.write_bytes(OPERATOR)  # and one created meanwhile too
    stop = run_vcattach("stop", "--pid", svc.pid)
    assert stop.returncode == 0, stop.stderr
    assert str(out) in stop.stdout
    assert "MainThread" in thread_names(cvf.load(str(out))).values()
    assert not os.path.exists(str(out) + ".tmp")
    assert "vcattach agent" not in svc.output()
    assert oct(os.stat(out).st_mode & 0o777) == oct(0o644)
    assert_untouched(svc.pid)
    assert_unharmed(svc, svc.finish())

"""End to end: `vcattach` against targets/busy_service.py running in the sid test root
(scripts/test-root) under CPython 3.14 and 3.15: a process whose libc, /usr/lib and /tmp are
not ours, as a service in a container image is.

Each target runs as `chroot ROOT /usr/bin/python3.X` (same mount namespace, another root), or
container-like inside `unshare --mount --pid --fork` as well.  Both injection methods must load
the agent with the target's own libc (ptrace: dlopen found in the libc the target maps; gdb:
the root as sysroot), the agent file is copied into the target's /tmp, and the service must be
unharmed: the computation equals an untraced run, no early sleep return, the blocked accept()
and lock wait complete, nothing left stopped or traced.  Skipped, with the reason, only when
the root cannot be created on this machine."""
import os

import pytest

from support.paths import CHROOT_PYTHONS, TEST_ROOT, TEST_ROOT_ERROR, agent_path
from support.proc import proc_state, run_vcattach, tracer_pid
from support.service import (assert_unharmed, check_service_threads, check_summary,
                             trace_with_late_thread)
from support.targets import CONTAINER
from vcattach import cvf

pytestmark = pytest.mark.skipif(
    TEST_ROOT is None, reason="no sid test root (CPython 3.14/3.15): %s" % TEST_ROOT_ERROR)

def params():
    if TEST_ROOT and not CHROOT_PYTHONS:
        raise AssertionError("scripts/test-root made %s but find-pythons lists no interpreter "
                             "in it" % TEST_ROOT)
    return [pytest.param(p, m, w, id="%s-%s%s" % (p["id"], m, "-container" if w else ""))
            for p in CHROOT_PYTHONS for m in ("ptrace", "gdb") for w in ((), CONTAINER)]


def assert_alive_and_running(pid):
    assert proc_state(pid) in ("R", "S", "D"), "target state %r" % proc_state(pid)
    assert tracer_pid(pid) == 0


@pytest.mark.parametrize("python,method,wrap", params())
def test_trace_chrooted_service(python, method, wrap, chroot_service, tmp_path):
    assert os.path.exists(agent_path(python["minor"])), "agent for %s not built: run make" % (
        python["id"])
    svc = chroot_service(python, wrap)
    assert os.readlink("/proc/%d/root" % svc.pid) == python["root"]
    out = tmp_path / "trace.cvf"
    r = trace_with_late_thread(svc, out, "--method", method, "-v")
    events, threads, drops = check_summary(r, out)
    assert "agent copied into the target's mount namespace as /tmp/.vcattach-" in r.stderr
    assert_alive_and_running(svc.pid)
    # the agent the target mapped is the copy in its own /tmp, with its own libc next to it;
    # the copy's name is removed once it is loaded (" (deleted)")
    with open("/proc/%d/maps" % svc.pid) as f:
        mapped = {line.split(None, 5)[-1].strip().replace(" (deleted)", "") for line in f
                  if "libvcagent" in line or "libc.so" in line}
    assert any(m.endswith("/libvcagent-py%d.so" % python["minor"]) and "/tmp/.vcattach-" in m
               for m in mapped), mapped
    assert all("/tmp/.vcattach-" in m or "libc.so" in m for m in mapped), mapped

    check_service_threads(cvf.load(str(out)), events)

    out2 = tmp_path / "again.cvf"
    check_summary(run_vcattach("--pid", svc.pid, "-t", "300ms", "-o", out2, "--method", method),
                  out2)
    assert_alive_and_running(svc.pid)
    assert_unharmed(svc, svc.finish())

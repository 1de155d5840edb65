"""The in-process agent on the sid test root's CPython 3.14 and 3.15 (scripts/test-root), for
what test_agent.py does not cover there: a fork while tracing (the child must be left
untraced: 3.14 changed fork and thread-state handling), and a trace started deep inside a
recursion (frames in progress at start are seeded from the 3.14 frame layout through the
public API, and close with the right names).  The python/ package and the agent are copied
into a fresh directory under ROOT/tmp (conftest.root_workdir)."""
import json
import os
import subprocess
import textwrap

import pytest

from support.paths import (CHROOT_PYTHONS, TEST_ROOT, TEST_ROOT_ERROR, agent_path,
                      copy_vcattach_into, root_workdir)
from support.agent_scripts import FORK_CHILD, PRELUDE, check_fork_child_untraced
from support.traces import check_nesting, decode, named

pytestmark = pytest.mark.skipif(
    TEST_ROOT is None, reason="no sid test root (CPython 3.14/3.15): %s" % TEST_ROOT_ERROR)


@pytest.fixture(params=[pytest.param(p, id=p["id"]) for p in CHROOT_PYTHONS])
def chroot_py(request, tmp_path):
    py = request.param
    assert os.path.exists(agent_path(py["minor"])), "agent for %s not built: run make" % py["id"]
    outside, inside = root_workdir(py, tmp_path, "vc-agent")
    copy_vcattach_into(outside, py["minor"])

    def run(body, timeout=120):
        env = dict(os.environ, PYTHONPATH=os.path.join(inside, "python"))
        env.pop("VCATTACH_AGENT", None)
        p = subprocess.run(py["argv"] + ["-c", PRELUDE + textwrap.dedent(body),
                                         os.path.join(inside, "out.cvf")],
                           capture_output=True, text=True, timeout=timeout, env=env)
        assert p.returncode == 0, "target failed (rc %s):\n%s\n%s" % (p.returncode, p.stdout,
                                                                      p.stderr)
        return p, json.loads(p.stdout.strip().splitlines()[-1])
    return run, os.path.join(outside, "out.cvf")


def test_fork_child_is_left_untraced(chroot_py):
    run, out = chroot_py
    _, rep = run(FORK_CHILD)
    check_fork_child_untraced(rep, decode(out))


def test_trace_started_deep_in_recursion(chroot_py):
    """Started at depth 50 of down(): the 50 frames in progress are seeded, and each closes
    as one down() event when the recursion unwinds (none lost, none unnamed)."""
    run, out = chroot_py
    p, rep = run(r'''
        def down(n):
            if n == 0:
                vcattach.start(sys.argv[1])
                for _ in range(5):
                    leaf()
                return 0
            return down(n - 1) + 1
        depth = down(50)
        res = vcattach.stop()
        print(json.dumps({"depth": depth, "status": res.status}))
    ''')
    assert rep == {"depth": 50, "status": 0}
    ev = decode(out)
    check_nesting(ev)
    assert len(named(ev, "leaf")) == 5
    assert len(named(ev, "down")) == 51


def test_resumes_attach_marks_and_c_method_names(chroot_py):
    """Issue 10 on 3.14/3.15: a coroutine's resumes are marked slices (PY_RESUME), a frame
    running when the trace starts is marked at_attach with the thread's kernel state, and a C
    method called on a subclass is named after the type that defines it."""
    run, out = chroot_py
    run(r'''
        import asyncio, sqlite3
        async def lookup():
            await asyncio.sleep(0.001)
            await asyncio.sleep(0.001)
        class Items(list):
            pass
        ev = threading.Event()
        def idle():
            ev.wait()
        t = threading.Thread(target=idle, name="idle")
        t.start()
        time.sleep(0.1)
        items = Items()
        vcattach.start(sys.argv[1])
        loop = asyncio.new_event_loop()
        for _ in range(3):
            loop.run_until_complete(lookup())
        loop.close()
        items.append(1)
        ev.set()
        t.join()
        res = vcattach.stop()
        print(json.dumps({"status": res.status}))
    ''')
    ev = decode(out)
    slices = [e for e in ev if e["ph"] == "X" and e["name"].startswith("lookup (")]
    assert len(slices) == 9, slices
    assert sum(1 for e in slices if e.get("args", {}).get("vcattach") == "resume") == 6
    marked = [e for e in ev if e["ph"] == "X" and e.get("args", {}).get("vcattach") == "at_attach"]
    assert any(e["name"].startswith("idle (") for e in marked), marked
    if os.path.exists(os.path.join(TEST_ROOT, "proc", "self", "stat")):
        # the kernel state comes from /proc/self/task/TID, absent from a root without /proc
        assert any(e["args"].get("blocked", "").startswith("S") for e in marked), marked
    names = {e["name"] for e in ev if e["ph"] == "X"}
    assert "list.append" in names and "Items.append" not in names

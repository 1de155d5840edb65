"""Python source run inside in-process agent targets (test_agent_control, test_agent_chroot):
a prelude that loads the in-tree vcattach package and the helpers those scripts use; and the
one-shot run of a target script that test_agent and test_filters read their report from."""
import json
import os
import subprocess
import textwrap

from .paths import PYTHON_SRC, agent_path, copy_vcattach_into, python_env, root_workdir

PRELUDE = textwrap.dedent(r'''
    import ctypes, json, os, sys, threading, time
    import vcattach
    from vcattach import _agent
    def leaf():
        return 1
    def hooks_state():
        st = {"getprofile": repr(sys.getprofile()),
              "threading_profile_hook": repr(threading._profile_hook)}
        if hasattr(sys, "monitoring"):
            st["tools"] = [sys.monitoring.get_tool(i) for i in range(6)]
        return st
    def wait_inactive(lib, limit=30):
        t0 = time.time()
        while lib.vc_agent_active() and time.time() - t0 < limit:
            leaf()
            time.sleep(0.001)
''')


def run_script_once(py, host_dir, files):
    """Runs `target.py` of files ({name: source}) with py as `target.py OUT_BASE`, where py can
    see it: on the host in host_dir, for a chroot interpreter in a fresh directory under its
    root with the python/ package and the agent copied beside (a chroot sees only its root).
    (the host path of OUT_BASE, the report: the JSON object the script printed last)."""
    if not os.path.exists(agent_path(py["minor"])):
        raise AssertionError("agent not built for %s: run make" % py["id"])
    outside, inside = root_workdir(py, host_dir)
    pypath = PYTHON_SRC
    if py["root"]:
        copy_vcattach_into(outside, py["minor"])
        pypath = os.path.join(inside, "python")
    for name, source in files.items():
        with open(os.path.join(outside, name), "w") as f:
            f.write(source)
    p = subprocess.run(py["argv"] + [os.path.join(inside, "target.py"),
                                     os.path.join(inside, "trace")],
                       capture_output=True, text=True, timeout=300,
                       env=python_env(PYTHONPATH=pypath), cwd=outside)
    assert p.returncode == 0, "target failed on %s:\n%s\n%s" % (py["id"], p.stdout, p.stderr)
    return os.path.join(outside, "trace"), json.loads(p.stdout.strip().splitlines()[-1])


# A fork while tracing: the child calls leaf() 100 times and reports its hooks, the parent calls
# it 10 more times and stops.  check_fork_child_untraced judges the report and the trace.
FORK_CHILD = r'''
    import warnings
    warnings.simplefilter("ignore", DeprecationWarning)
    vcattach.start(sys.argv[1])
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        for _ in range(100):
            leaf()
        os.write(w, json.dumps(hooks_state()).encode())
        os._exit(0)
    os.close(w)
    child = json.loads(os.read(r, 65536).decode())
    os.waitpid(pid, 0)
    for _ in range(10):
        leaf()
    res = vcattach.stop()
    print(json.dumps({"child": child, "status": res.status, "pid": os.getpid()}))
'''


def check_fork_child_untraced(rep, events):
    """The child left with no hook of ours (profile, threading's hook, sys.monitoring tools),
    the parent's session intact, and only the parent's calls in its trace."""
    from .traces import named
    assert rep["child"]["getprofile"] == "None"
    assert rep["child"]["threading_profile_hook"] == "None"
    assert all(x is None for x in rep["child"].get("tools", []))
    assert rep["status"] == 0
    assert len(named(events, "leaf")) >= 10
    assert {e["pid"] for e in events if e["ph"] == "X"} == {rep["pid"]}

"""A process that starts during a `--subprocesses` trace is held at its system calls until its
agent has its hooks in (issue 31; injector/hold.c).

Injected within tens of ms of its exec, a new interpreter's agent still has to connect, wait
for vcattach's CONFIG and for the GIL; a busy vcattach or a loaded machine made that 20–110
ms, in which a spawned worker ran its first tasks untraced.  Here vcattach is made slow on
purpose (the CONFIG_DELAY_MS seam: CONFIG to a process born during the trace leaves 800 ms
late), and the child calls f() as soon as it sees the agent mapped in itself: held, every call
is in the trace; with the hold off (the HOLD_OFF seam) none is, which shows the test tells the
two apart.  Killing vcattach (and its injecting helper) while the child is held lets the child
run on unharmed.

Before its injection, the same child is caught at its exec (injector/catch.c): with vcattach
600 ms late to inject it (the INJECT_DELAY_MS seam), a child that starts with its imports and
calls runs every one of them hooked; with the catch off (CATCH_OFF), none; killing vcattach
while it is caught lets it run on unharmed.

Caught, it is injected by the very process that holds it (tree_catch.c, inject_request.caught):
it runs nothing between its catch and its agent's load.  With an injecting helper 600 ms slow
to start (the HELPER_DELAY_MS seam), the caught child still has every call traced; let go for
such a helper instead (HANDOFF_OFF), none.  Killing vcattach alone (not its process group)
while the child is caught lets it go too: the watcher and the catcher die with it.
"""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from support.paths import PYTHONS, SEAMS_VCATTACH, seams_env
from support.pools import read_trace
from support.proc import assert_running_untraced

# Imports what it needs, as a spawned worker does, then makes its calls: caught at its exec,
# none of them runs before its agent is in.
CHILD_AT_ONCE = r'''
import decimal, email.message, json, logging
def f(i):
    return i * 2
with open("/proc/self/maps") as m:
    mapped = "libvcagent" in m.read()
print(sum([f(i) for i in range(5)]), mapped, flush=True)
'''

CHILD = r'''
import sys, time
def f(i):
    return i * 2
def agent_mapped():
    with open("/proc/self/maps") as m:
        return "libvcagent" in m.read()
deadline = time.monotonic() + 30
while not agent_mapped() and time.monotonic() < deadline:
    time.sleep(0.005)
print(sum([f(i) for i in range(5)]), agent_mapped(), flush=True)
'''

PARENT = r'''
import os, subprocess, sys, time
out = sys.argv[1]
print("ready", flush=True)
while not os.path.exists(out + ".go"):
    time.sleep(0.01)
p = subprocess.Popen([sys.executable, "-c", sys.argv[2]], stdout=subprocess.PIPE, text=True)
with open(out + ".child", "w") as f:
    f.write(str(p.pid))
text, _ = p.communicate()
with open(out + ".result", "w") as f:
    f.write("%d %s" % (p.returncode, text.strip()))
time.sleep(60)
'''


def interpreters():
    seen, out = set(), []
    for p in PYTHONS:
        if p["minor"] in (311, 312) and p["kind"] != "static" and p["minor"] not in seen:
            seen.add(p["minor"])
            out.append(pytest.param(p, id=p["id"]))
    return out


class Run:
    """The parent under `vcattach --subprocesses`, the child started once vcattach attached."""

    def __init__(self, py, tmp_path, child=CHILD, **seams):
        self.out = str(tmp_path / "hold")
        self.parent = subprocess.Popen([py["path"], "-c", PARENT, self.out, child],
                                       stdout=subprocess.PIPE, text=True)
        assert self.parent.stdout.readline().strip() == "ready"
        if "VCATTACH_TEST_INJECT_DELAY_MS" not in seams:
            seams["VCATTACH_TEST_CONFIG_DELAY_MS"] = "800"
        env = seams_env(**seams)
        self.vc = subprocess.Popen([SEAMS_VCATTACH, "--pid", str(self.parent.pid),
                                    "--subprocesses", "-t", "6s", "-v", "-o",
                                    self.out + ".cvf"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env=env, start_new_session=True)
        self.err = []
        attached = threading.Event()

        def read_err():
            for line in self.vc.stderr:
                self.err.append(line)
                if "processes attached in" in line:
                    attached.set()
            attached.set()

        self.reader = threading.Thread(target=read_err, daemon=True)
        self.reader.start()
        assert attached.wait(30), "".join(self.err)
        open(self.out + ".go", "w").close()

    def written(self, suffix, what):
        """The text the parent wrote to OUT+suffix (waited for)."""
        for _ in range(3000):
            if os.path.exists(self.out + suffix):
                with open(self.out + suffix) as f:
                    text = f.read()
                if text:
                    return text
            time.sleep(0.01)
        raise AssertionError(what + "".join(self.err))

    def child_pid(self):
        return int(self.written(".child", "the parent started no child: "))

    def result(self):
        return self.written(".result", "the child did not finish: ")

    def finish(self):
        stdout, _ = self.vc.communicate(timeout=60)
        self.reader.join(10)
        return self.vc.returncode, stdout, "".join(self.err)

    def close(self):
        for p in (self.vc, self.parent):
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait(10)


def child_calls(events, pid):
    return sum(1 for e in events
               if e.get("ph") == "X" and e["pid"] == pid and e["name"].startswith("f "))


def all_calls_traced(run, said, what):
    """The child's work intact with the agent in before it, vcattach saying `said` of it, and
    its 5 calls of f in the trace."""
    try:
        child = run.child_pid()
        result = run.result()
        assert result == "0 20 True", result + "".join(run.err)
        rc, stdout, stderr = run.finish()
        assert rc == 0, stderr + stdout
        assert said % child in stderr, stderr
        calls = child_calls(read_trace(run.out + ".cvf"), child)
        print("%s child: %d of its 5 calls of f in the trace" % (what, calls))
        assert calls == 5, stderr + stdout
        assert_running_untraced(run.parent.pid)
    finally:
        run.close()


def no_call_traced(run, absent, what):
    """The other side: the child's work intact, none of its calls in the trace."""
    try:
        child = run.child_pid()
        assert run.result() == "0 20 %s" % (absent == "then held")
        rc, stdout, stderr = run.finish()
        assert absent not in stderr, stderr
        events = read_trace(run.out + ".cvf") if os.path.exists(run.out + ".cvf") else []
        calls = child_calls(events, child)
        print("child not %s: %d of its 5 calls of f in the trace" % (what, calls))
        assert calls == 0, stderr + stdout
    finally:
        run.close()


def killed_while_traced(run, mapped, result, group=True):
    """Once the child is traced by vcattach's holder (with the agent mapped, if `mapped`),
    vcattach and its helpers are killed (vcattach alone unless `group`: its children end
    with it): the child runs on, its work intact."""
    try:
        child = run.child_pid()
        for _ in range(3000):
            try:
                with open("/proc/%d/status" % child) as f:
                    tracer = [l for l in f if l.startswith("TracerPid:")][0].split()[1]
                with open("/proc/%d/maps" % child) as f:
                    agent = "libvcagent" in f.read()
            except (FileNotFoundError, ProcessLookupError):
                raise AssertionError("the child ended before it was held: %s" % run.err)
            if tracer != "0" and agent == mapped:
                break
            time.sleep(0.002)
        else:
            raise AssertionError("the child was never held: %s" % "".join(run.err))
        time.sleep(0.1)
        if group:
            os.killpg(run.vc.pid, signal.SIGKILL)  # vcattach and its injecting or catching child
        else:
            os.kill(run.vc.pid, signal.SIGKILL)
        run.vc.wait(10)
        assert run.result() == result  # it ran on, its work intact
        assert run.parent.poll() is None
        assert_running_untraced(run.parent.pid)
    finally:
        run.close()


@pytest.mark.parametrize("py", interpreters())
def test_child_runs_nothing_before_its_hooks_are_in(py, tmp_path):
    all_calls_traced(Run(py, tmp_path), "pid %d injected", "held")


@pytest.mark.parametrize("py", interpreters()[:1])
def test_without_the_hold_the_same_child_runs_untraced(py, tmp_path):
    """The other side of the test above: it sees the difference the hold makes."""
    no_call_traced(Run(py, tmp_path, VCATTACH_TEST_HOLD_OFF="1"), "then held", "held")


@pytest.mark.parametrize("py", interpreters()[:1])
def test_killing_vcattach_while_a_child_is_held_leaves_it_unharmed(py, tmp_path):
    # held: traced with the agent mapped, waiting for the delayed CONFIG
    killed_while_traced(Run(py, tmp_path), True, "0 20 True")


@pytest.mark.parametrize("py", interpreters())
def test_child_is_caught_at_its_exec_until_it_is_injected(py, tmp_path):
    """vcattach 600 ms late to inject (the INJECT_DELAY_MS seam): a child that starts with its
    imports and calls is held at its interpreter's start (injector/catch.c), and runs them
    hooked."""
    all_calls_traced(Run(py, tmp_path, child=CHILD_AT_ONCE, VCATTACH_TEST_INJECT_DELAY_MS="600"),
                     "pid %d caught at its interpreter's start", "caught")


@pytest.mark.parametrize("py", interpreters()[:1])
def test_without_the_catch_the_same_child_runs_untraced(py, tmp_path):
    no_call_traced(Run(py, tmp_path, child=CHILD_AT_ONCE, VCATTACH_TEST_INJECT_DELAY_MS="600",
                       VCATTACH_TEST_CATCH_OFF="1"), "caught at", "caught")


@pytest.mark.parametrize("py", interpreters()[:1])
def test_killing_vcattach_while_a_child_is_caught_leaves_it_unharmed(py, tmp_path):
    # caught: traced before any agent, vcattach 3 s from injecting it
    killed_while_traced(Run(py, tmp_path, child=CHILD_AT_ONCE,
                            VCATTACH_TEST_INJECT_DELAY_MS="3000"), False, "0 20 False")


@pytest.mark.parametrize("py", interpreters())
def test_caught_child_is_injected_where_it_is_held(py, tmp_path):
    """An injecting helper 600 ms slow to start (HELPER_DELAY_MS): the caught child is injected
    by its catcher, where it holds it, and runs every call hooked."""
    all_calls_traced(Run(py, tmp_path, child=CHILD_AT_ONCE, VCATTACH_TEST_INJECT_DELAY_MS="0",
                         VCATTACH_TEST_HELPER_DELAY_MS="600"),
                     "pid %d is handed to its catcher", "handed over")


@pytest.mark.parametrize("py", interpreters()[:1])
def test_let_go_for_a_slow_helper_the_same_child_runs_untraced(py, tmp_path):
    """The other side: let go by its catcher for the (slow) helper, it runs untraced."""
    no_call_traced(Run(py, tmp_path, child=CHILD_AT_ONCE, VCATTACH_TEST_INJECT_DELAY_MS="0",
                       VCATTACH_TEST_HELPER_DELAY_MS="600", VCATTACH_TEST_HANDOFF_OFF="1"),
                   "is handed to its catcher", "handed over")


@pytest.mark.parametrize("py", interpreters()[:1])
def test_killing_vcattach_alone_while_a_child_is_caught_leaves_it_unharmed(py, tmp_path):
    # its watcher and catcher end with it (PDEATHSIG): the kernel lets the child go
    killed_while_traced(Run(py, tmp_path, child=CHILD_AT_ONCE,
                            VCATTACH_TEST_INJECT_DELAY_MS="3000"), False, "0 20 False",
                        group=False)

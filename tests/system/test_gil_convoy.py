"""The agent thread gets the GIL from a thread that keeps it (agent/gilwait.h).

targets/gil_convoy.py runs a thread that computes and makes a short system call every
millisecond: each call lets the GIL go for microseconds and takes it back before a waiting
thread runs, so a waiter never reaches the 5 ms after which CPython asks the holder to switch.
Before gilwait.c the agent thread waited seconds for its start, for each visit and for the
stop: `-t 1s` sessions here traced 4-15 s (the deadline is checked between visits), and in CI
a start that took over 15 s failed an attach.  Each session here must start, stop at its deadline (its
trace spans the duration, not several times it) and leave the target's computation exact.

`main`: the main thread is the busy one (3.9+: CPython's pending calls reach it; not 3.8).
`thread`: another thread is, while the main thread waits in join() (3.12+, where a pending
call runs on whichever thread holds the GIL; before 3.12 only the main thread runs them)."""
import json
import os
import shutil
import subprocess
import time

import pytest

from support.paths import ALL_PYTHONS, TESTS, root_workdir
from support.proc import assert_untouched, run_vcattach
from support.service import x_events
from vcattach import cvf

CONVOY = os.path.join(TESTS, "targets", "gil_convoy.py")
SESSIONS = 3
DURATION_S = 1.0
# The deadline is checked every visit (100 ms) and the stop takes the GIL once more: a span
# this far past the duration means a visit or the stop waited behind the busy thread.
SLACK_S = 1.5


def params():
    out = []
    for p in ALL_PYTHONS:
        skip = [pytest.mark.skip(reason="3.8: the agent queues no pending call there (its "
                                 "Py_AddPendingCall crashes a process that has begun to exit)")
                ] if p["minor"] < 309 else []
        out.append(pytest.param(p, "main", id="%s-main" % p["id"], marks=skip))
        if p["minor"] >= 312:
            out.append(pytest.param(p, "thread", id="%s-thread" % p["id"]))
    return out


class Convoy:
    def __init__(self, python, tmp_path, mode):
        self.python = python
        self.outside, self.inside = root_workdir(python, tmp_path / "convoy", "vc-convoy")
        os.makedirs(self.outside, exist_ok=True)
        shutil.copy2(CONVOY, os.path.join(self.outside, "gil_convoy.py"))
        self.script = os.path.join(self.inside, "gil_convoy.py")
        self.proc = subprocess.Popen(python["argv"] + [self.script, self.inside, mode], cwd="/",
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(self.outside, "ready")):
            assert self.proc.poll() is None, "convoy target died: %s" % (self.proc.stderr.read(),)
            assert time.monotonic() < deadline, "convoy target not ready"
            time.sleep(0.02)
        self.pid = self.proc.pid

    def finish(self):
        open(os.path.join(self.outside, "finish"), "w").close()
        _, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err
        with open(os.path.join(self.outside, "report.json")) as f:
            report = json.load(f)
        check = subprocess.run(self.python["argv"] + [self.script, "--check", str(report["rounds"])],
                               capture_output=True, text=True, timeout=300, check=True)
        return report, int(check.stdout)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


@pytest.mark.parametrize("python,mode", params())
def test_sessions_start_and_stop_on_time_beside_a_gil_convoy(python, mode, tmp_path):
    target = Convoy(python, tmp_path, mode)
    try:
        for i in range(SESSIONS):
            out = tmp_path / ("s%d.cvf" % i)
            r = run_vcattach("--pid", target.pid, "-t", "%gs" % DURATION_S, "-o", out,
                             timeout=90)
            assert r.returncode == 0, "session %d: %s" % (i, r.stderr)
            xs = x_events(cvf.load(str(out)))
            work = [e for e in xs if e["name"].startswith("work (")]
            assert work, "session %d: no work() call traced" % i
            # ts and dur are in microseconds
            span = (max(e["ts"] + e["dur"] for e in xs) - min(e["ts"] for e in xs)) / 1e6
            assert span <= DURATION_S + SLACK_S, (
                "session %d of -t %gs traced %.2f s: the agent waited for the GIL behind the "
                "busy thread" % (i, DURATION_S, span))
            assert_untouched(target.pid)
        report, expected = target.finish()
        assert report["rounds"] > 0 and report["checksum"] == expected
    finally:
        target.close()

"""Short-lived pool workers in a `--subprocesses` trace (issue 31).

The most common process a Python service makes is a multiprocessing pool's worker, and the
shortest one is what a trace must not lose: `with ctx.Pool(2) as pool: pool.map(f, ...)`, whose
workers each run a few ms of tasks and are then terminated (SIGTERM) — a fork worker lives a
few tens of ms in all.  The target (targets/pool_churn.py) counts, in process, the calls of its
pool function each worker made; for fork, forkserver and spawn, on 3.8, 3.11, 3.12 and 3.14
(the sid root), every worker of every pool that began and ended during the trace must have
exactly that many calls in the merged trace, and its line in vcattach's account must carry its
own numbers.  Before this, not one call of any worker reached the trace.
"""
import re
import subprocess
import time

import pytest

from support.paths import CHROOT_PYTHONS, PYTHONS, TEST_ROOT_ERROR, VCATTACH
from support.pools import (Pools, account_lines, check_pools, instant, read_trace,
                           trace_pools, traced_from, traced_until)
from support.proc import assert_running_untraced

METHODS = ["fork", "forkserver", "spawn"]


def interpreters():
    rows = [p for p in PYTHONS if p["minor"] in (308, 311, 312) and p["kind"] != "static"]
    seen, out = set(), []
    for p in rows:
        if p["minor"] not in seen:
            seen.add(p["minor"])
            out.append(pytest.param(p, id=p["id"]))
    chroot = [p for p in CHROOT_PYTHONS if p["minor"] == 314]
    if chroot:
        out.append(pytest.param(chroot[0], id=chroot[0]["id"]))
    else:
        out.append(pytest.param(None, id="py3.14-chroot",
                                marks=pytest.mark.skip(reason="no 3.14 test root: %s"
                                                       % TEST_ROOT_ERROR)))
    return out


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("py", interpreters())
def test_every_short_pool_worker_has_its_calls(py, method, tmp_path):
    tree = Pools(py, method, tmp_path)
    try:
        whole = {}
        r, (born, with_calls, expected, found) = trace_pools(
            tree, str(tmp_path / "pools.cvf"), late_ok=method == "spawn", totals=whole)
        lost = sum(" lost: " in line for line in account_lines(r.stdout).values())
        print("%s %s: %d workers born during the trace, %d with calls in the trace, calls "
              "expected %d, found %d; %d processes accounted for as lost; of all: %d workers "
              "made calls, %d have every one in the trace, %d of their %d calls are" % (
                  py["id"], method, born, with_calls, expected, found, lost, whole["tasked"],
                  whole["complete"], whole["found"], whole["made"]))
        assert born >= 2 and expected > 0, (tree.rounds(), r.stdout)
        assert "ignoring a connection" not in r.stderr, r.stderr
        # a young worker stopped in glibc's unnamed malloc internals (3.14's sid glibc tail-
        # calls them from malloc) once had dlopen run inside the allocator, which aborted
        assert "injected call crashed" not in r.stdout, r.stdout
        assert_running_untraced(tree.pid)
    finally:
        tree.close()


def test_wide_pool_is_served_by_the_reserve(tmp_path):
    """Six workers alive at once (each task ~10 ms), under the default budget: newcomers took
    1/8 of the budget each (32 MiB) from the reserve, which ran dry after a few of them; the
    next ones were traced with no share at all ("0 MiB buffer": windows outside the budget) or
    refused.  In quarters of what the reserve holds, each has a share of its own."""
    py = [p for p in PYTHONS if p["minor"] == 312 and p["kind"] != "static"] or PYTHONS
    tree = Pools(py[0], "fork", tmp_path, workers=6, work=400000)
    try:
        out = str(tmp_path / "wide.cvf")
        # six workers a pool, a pool every ~0.5 s: more than the default 32 processes in 3 s
        r = subprocess.run([VCATTACH, "--pid", str(tree.pid), "--subprocesses", "-t", "3s",
                            "--max-processes", "200", "-o", out, "-f"], capture_output=True,
                           text=True, timeout=180)
        assert r.returncode == 0, r.stderr + r.stdout
        assert "budget was spent" not in r.stdout, r.stdout
        shares = [int(s) for s in re.findall(r" (\d+) MiB buffer", r.stdout)]
        assert shares and min(shares) >= 2, r.stdout
        events = read_trace(out)
        rounds = tree.rounds()
        window = (traced_from(events, rounds), traced_until(events, rounds))
        born, with_calls, expected, found = check_pools(events, rounds, r.stdout, window)
        print("Pool(6) fork: %d workers born during the trace, %d with calls in the trace, "
              "calls expected %d, found %d; shares %s MiB" % (born, with_calls, expected, found,
                                                              sorted(shares)))
        assert born >= 6 and expected > 0, (rounds, window, r.stdout)
        assert_running_untraced(tree.pid)
    finally:
        tree.close()


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_pool_under_last(method, tmp_path):
    """--last 2s on a tree: the workers of the pools in the final 2 s have all their calls;
    those of earlier pools none (cut, not half kept)."""
    py = [p for p in PYTHONS if p["minor"] == 312 and p["kind"] != "static"] or PYTHONS
    tree = Pools(py[0], method, tmp_path)
    try:
        out = str(tmp_path / "last.cvf")
        r = subprocess.run([VCATTACH, "--pid", str(tree.pid), "--subprocesses", "-t", "3.5s",
                            "--last", "2s", "--max-processes", "200", "-o", out, "-f"], capture_output=True, text=True,
                           timeout=180)
        assert r.returncode == 0, r.stderr + r.stdout
        events = read_trace(out)
        cut = instant(events, "vcattach last", tree.pid)
        assert cut, "no \"vcattach last\" instant"
        detach = traced_until(events, tree.rounds())
        newest = max(e["ts"] + e["dur"] for e in events if e.get("ph") == "X")
        assert 1.99e6 <= newest - cut[0] <= 2.01e6, (cut, newest)  # the final 2 s of the tree
        born, with_calls, expected, found = check_pools(events, tree.rounds(), r.stdout,
                                                        (cut[0], detach))
        print("--last 2s %s: %d workers in the window, %d with calls, calls expected %d, "
              "found %d" % (method, born, with_calls, expected, found))
        assert expected > 0, (tree.rounds(), cut, detach)
        early = [w for t0, t1, ws in tree.rounds() if t1 < cut[0] for w in ws]
        assert early and not [e for e in events if e.get("ph") == "X" and e["pid"] in early]
    finally:
        tree.close()


def test_start_tree_under_last(tmp_path):
    """`start --subprocesses --last 1s` (refused before: --last was for `trace` of one process):
    each process's agent keeps its own final second, and `stop --subprocesses` merges them."""
    py = [p for p in PYTHONS if p["minor"] == 312 and p["kind"] != "static"] or PYTHONS
    tree = Pools(py[0], "forkserver", tmp_path)  # the root and its forkserver: two processes
    try:
        out = str(tmp_path / "started.cvf")
        r = subprocess.run([VCATTACH, "start", "--pid", str(tree.pid), "--subprocesses", "-t",
                            "60s", "--last", "1s", "-o", out], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        time.sleep(2.5)
        r = subprocess.run([VCATTACH, "stop", "--pid", str(tree.pid), "--subprocesses"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr + r.stdout
        events = read_trace(out)
        pids = {e["pid"] for e in events if e.get("ph") == "X"}
        assert tree.pid in pids and len(pids) >= 2, (pids, r.stdout)
        for pid in pids:  # each part: the calls of its final second, marked where it begins
            cut = instant(events, "vcattach last", pid)
            ends = [e["ts"] + e["dur"] for e in events if e.get("ph") == "X" and e["pid"] == pid]
            assert cut and min(ends) >= cut[0] - 1, (pid, cut, min(ends))
            assert 0.99e6 <= max(ends) - cut[0] <= 1.01e6, (pid, cut, max(ends))
    finally:
        tree.close()

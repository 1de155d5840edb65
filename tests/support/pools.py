"""Short-lived multiprocessing pools as `--subprocesses` targets (tests/system/test_tree_pools.py,
test_musl.py): targets/pool_churn.py started, its own account of each worker's calls read back,
and a merged trace checked against it, worker by worker."""
import collections
import os
import re
import shutil
import signal
import subprocess
import time

from .paths import TESTS, VCATTACH, root_workdir
from .traces import convert, load_json

TARGET = os.path.join(TESTS, "targets", "pool_churn.py")


class Pools:
    """targets/pool_churn.py under py, in a directory py can see (the test root's /tmp for a
    chroot interpreter), in its own session, killed as a group at the end.  wrap: a command
    that execs the argv it is given (the interpreter stays the process Popen started)."""

    def __init__(self, py, method, tmp_path, workers=2, work=20000, wrap=()):
        outside, inside = root_workdir(py, tmp_path, "vc-pools")
        shutil.copy2(TARGET, os.path.join(outside, "pool_churn.py"))
        self.report = os.path.join(outside, "report.txt")
        argv = list(wrap) + list(py.get("argv") or [py["path"]])
        self.p = subprocess.Popen(argv + [os.path.join(inside, "pool_churn.py"), method,
                                          os.path.join(inside, "report.txt"), str(workers),
                                          str(work)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True)
        line = self.p.stdout.readline()
        if line.strip() != "ready":
            self.close()
            raise AssertionError("target did not start: %s" % self.p.stderr.read())
        self.pid = python_pid(self.p.pid)
        time.sleep(0.3)

    def rounds(self):
        """[(t0_us, t1_us, {worker pid: [(begin_us, end_us) of each of its calls]})] of the
        pools the target finished."""
        out = []
        with open(self.report) as f:
            for line in f:
                fields = line.split()
                calls = {}
                for worker in fields[3:]:
                    pid, n, spans = worker.split(":")
                    calls[int(pid)] = [tuple(int(t) / 1000.0 for t in span.split("-"))
                                       for span in spans.split(",") if span]
                    assert len(calls[int(pid)]) == int(n), worker
                out.append((int(fields[1]) / 1000.0, int(fields[2]) / 1000.0, calls))
        return out

    def close(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait(10)


def read_trace(path):
    """The events of a .cvf, through the C decoder (the Python reader agreeing with it is
    test_tree.py's business; here it would double the time of each test)."""
    convert(path, path + ".json")
    return load_json(path + ".json")["traceEvents"]


def python_pid(pid):
    """The interpreter's pid: `chroot` execs it, so it is pid itself."""
    return pid


def instant(events, name, pid):
    return [e["ts"] for e in events if e.get("name") == name and e.get("pid") == pid]


def traced_from(events, rounds):
    """When every process that makes workers was traced: the latest attach of the processes
    that are not workers (the root, a forkserver, a resource tracker).  A forkserver's worker
    forked before the forkserver's own agent arrived is a process of an untraced parent that
    lives a few ms; vcattach may not reach it, and says so in its account."""
    workers = {pid for _, _, ws in rounds for pid in ws}
    return max(e["ts"] for e in events
               if e.get("name") == "vcattach attach" and e.get("pid") not in workers)


def traced_until(events, rounds):
    """... and until when: the earliest detach of those processes.  A worker that joined as
    the tree was stopping (forked before its parent took the STOP) is stopped after every one
    of them, so its calls until then are all in the trace."""
    workers = {pid for _, _, ws in rounds for pid in ws}
    return min(e["ts"] for e in events
               if e.get("name") == "vcattach detach" and e.get("pid") not in workers)


def account_lines(stdout):
    """{pid: its line} of vcattach's per-process account."""
    lines = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[0] == "pid" and parts[1].isdigit():
            lines[int(parts[1])] = line
    return lines


def hooked_at(x_events):
    """When a process's hooks were surely in place: the start of its first recorded call (the
    frames on its stacks at attach, marked "at_attach", began before and do not tell)."""
    starts = [e["ts"] for e in x_events
              if (e.get("args") or {}).get("vcattach") != "at_attach"]
    return min(starts) if starts else float("inf")


def check_pools(events, rounds, stdout, window, late_ok=False, totals=None):
    """Every worker of every pool that began and ended inside window (us) has exactly the
    calls it reported, and its account line; returns (workers, with calls, expected, found).
    late_ok (spawn): a spawned worker is injected after its exec, and its first tasks may be
    done before its agent is in (a few ms on a loaded machine): such a worker may be accounted
    for as lost with nothing of it in the trace (never a part of it), or, gone before vcattach
    could even read its executable, be one of the summary's "N ended unseen"; a traced one must
    have every call it began once its hooks were in place, and no more calls than it made.
    totals (a dict, if given) receives what the workers did whatever late_ok allows: "tasked"
    (workers that made calls), "complete" (of those, with every call in the trace), "made"
    and "found" (their calls, and those of them in the trace)."""
    x = [e for e in events if e.get("ph") == "X"]
    calls = collections.Counter(e["pid"] for e in x if e["name"].startswith("pool_fn "))
    per_pid = collections.Counter(e["pid"] for e in x)
    lines = account_lines(stdout)
    m = re.search(r", (\d+) ended unseen", stdout.splitlines()[0] if stdout else "")
    unseen, missing = int(m.group(1)) if m else 0, []
    born = with_calls = expected = found = 0
    whole = collections.Counter()
    for t0, t1, workers in rounds:
        if t0 < window[0] or t1 > window[1]:
            continue
        for pid, spans in workers.items():
            born += 1
            n = len(spans)
            if n:
                whole.update(tasked=1, complete=calls.get(pid, 0) == n, made=n,
                             found=calls.get(pid, 0))
            if late_ok and pid not in lines and pid not in per_pid:
                missing.append(pid)  # gone before vcattach could read what it ran: counted
                continue
            assert pid in lines, "pid %d has no line\n%s" % (pid, stdout)  # every one has
            if late_ok and " lost: " in lines[pid] and pid not in per_pid:
                continue  # accounted for as lost, nothing of it in the trace
            must = n
            if late_ok:
                hooked = hooked_at([e for e in x if e["pid"] == pid])
                must = sum(1 for begin, _ in spans if begin >= hooked)
            expected += must
            found += calls.get(pid, 0)
            with_calls += n > 0 and calls.get(pid, 0) == n
            assert must <= calls.get(pid, 0) <= n, (
                "pid %d made %d calls, %d of them once hooked, %d in the trace; its events: "
                "%s; its line: %s\n%s" % (
                    pid, n, must, calls.get(pid, 0),
                    dict(collections.Counter(e["name"] for e in x if e["pid"] == pid)),
                    lines[pid], stdout))
            if " traced: " in lines[pid] and " not traced: " not in lines[pid]:
                # with its own numbers, not another's
                assert " — %d events," % per_pid[pid] in lines[pid], "%d events in the trace\n%s" % (
                    per_pid[pid], stdout)
            else:
                assert n == 0 and per_pid[pid] == 0, "%d calls, %d events\n%s" % (
                    n, per_pid[pid], stdout)
    assert len(missing) <= unseen, "workers %s have no line\n%s" % (missing, stdout)
    if totals is not None:
        totals.update({k: whole[k] for k in ("tasked", "complete", "made", "found")})
    return born, with_calls, expected, found


def trace_pools(tree, out, late_ok=False, totals=None):
    """`vcattach --pid ROOT --subprocesses -t 3s` (every worker under the bound) on tree (a Pools) into out, checked with
    check_pools over the pools that began and ended while every pool-making process was traced.
    Returns (vcattach's CompletedProcess, (born, with calls, expected, found))."""
    r = subprocess.run([VCATTACH, "--pid", str(tree.pid), "--subprocesses", "-t", "3s",
                        "--max-processes", "200", "-o", out, "-f"], capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0, r.stderr + r.stdout
    events = read_trace(out)
    rounds = tree.rounds()
    window = (traced_from(events, rounds), traced_until(events, rounds))
    return r, check_pools(events, rounds, r.stdout, window, late_ok=late_ok, totals=totals)

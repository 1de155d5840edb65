"""What the end-to-end tests know about tests/targets/busy_service.py and the CLI's summary line:
the thread names it runs, the summary line's shape, small readers of its Chrome trace, a trace
taken while a thread is born, and what "unharmed" means for it."""
import re
import subprocess
import time

from .paths import VCATTACH
from .proc import run_vcattach

THREADS = {"MainThread", "sleeper", "acceptor", "locker", "late-starter"}
SUMMARY = re.compile(r"^vcattach: pid (\d+) in [\d.]+s: (\d+) events, (\d+) threads, "
                     r"(\d+) dropped.*, .* -> (.+)$")

def thread_names(trace):
    return {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
            if e.get("ph") == "M" and e.get("name") == "thread_name"}


def x_events(trace):
    return [e for e in trace["traceEvents"] if e.get("ph") == "X"]


def check_summary(r, out):
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    m = SUMMARY.match(r.stdout.strip())
    assert m, r.stdout
    assert m.group(5) == str(out)
    return int(m.group(2)), int(m.group(3)), int(m.group(4))


def trace_with_late_thread(svc, out, *options, duration="1.5s", command=None):
    """`vcattach --pid SVC -t DURATION -o OUT OPTIONS...`, with the service's late-starter
    thread started once the session runs (a thread born while the hooks are installed).
    command replaces `vcattach --pid SVC` (another vcattach, run in another namespace).  The
    finished run, as a CompletedProcess with text output."""
    command = command or [VCATTACH, "--pid", str(svc.pid)]
    proc = subprocess.Popen(list(command) + ["-t", duration, "-o", str(out),
                                             *[str(o) for o in options]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:
            if run_vcattach("status", "--pid", svc.pid, "-q").returncode == 0:
                break
            time.sleep(0.05)
        svc.start_late_thread()
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def check_service_threads(trace, events):
    """Every thread of the service named, `events` complete events, and each thread's own work
    on its own thread (the main loop, the late thread's fib, the sleeper's sleep)."""
    names = thread_names(trace)
    assert THREADS <= set(names.values()), names
    xs = x_events(trace)
    assert len(xs) == events and events > 0
    by_name = {}
    for e in xs:
        by_name.setdefault(names.get(e["tid"]), []).append(e["name"])
    for t in ("MainThread", "sleeper", "late-starter"):
        assert by_name.get(t), "no events on thread %s" % t
    assert any("one_round" in n for n in by_name["MainThread"])
    assert any("fib" in n for n in by_name["late-starter"])
    assert any("sleep" in n for n in by_name["sleeper"])


def assert_unharmed(svc, report):
    """The service's own report at the end: no exception, no sleep that ended early, every kind
    of blocking call completed, and its computation identical to an untraced run's."""
    assert report["exceptions"] == [], report["exceptions"]
    assert report["early_sleeps"] == 0, report
    assert report["sleeps"] > 0 and report["accepted"] and report["locked"], report
    assert report["checksum"] == svc.expected_checksum(report["rounds"]), \
        "computation differs from an untraced run"

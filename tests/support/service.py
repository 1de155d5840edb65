"""What the end-to-end tests know about tests/targets/busy_service.py and the CLI's summary line:
the thread names it runs, the summary line's shape, and small readers of its Chrome trace."""
import re

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

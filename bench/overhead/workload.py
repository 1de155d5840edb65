"""Child of bench/overhead/run: times the four workloads in this interpreter, untraced and under
the agent (normal and null hook), and under cProfile, and prints one JSON line.

argv: OUTDIR REPS
"""
import cProfile
import json
import os
import sys
import threading
import time

import vcattach

OUT = sys.argv[1]
REPS = int(sys.argv[2])


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def trivial():
    return None


def calls_1m():
    for _ in range(1000000):
        trivial()


def len_str():
    for i in range(300000):
        len(str(i))


def threads4():
    ts = [threading.Thread(target=calls_1m) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


WORKLOADS = [("fib(25)", lambda: fib(25)), ("1M calls", calls_1m),
             ("len(str(i)) x300k", len_str), ("4 threads x 1M", threads4)]


def timed(fn):
    # CPU time of the whole process: the machine is shared, and wall time measures the
    # neighbours as much as the tracer.  (The agent thread sleeps while tracing.)
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def best(mode, fn, name, hook):
    times, last = [], None
    for r in range(REPS):
        if mode == "untraced":
            times.append(timed(fn))
        elif mode == "cprofile":
            pr = cProfile.Profile()
            pr.enable()
            times.append(timed(fn))
            pr.disable()
        else:
            path = os.path.join(OUT, "bench.cvf")
            vcattach.start(path, hook=hook, null_hook=(mode == "null"))
            times.append(timed(fn))
            last = vcattach.stop()
    return min(times), last


def main():
    hooks = ["auto"] + (["profile"] if sys.version_info >= (3, 12) else [])
    rows = []
    for name, fn in WORKLOADS:
        fn()  # warm up
        base, _ = best("untraced", fn, name, None)
        row = {"workload": name, "untraced": base}
        row["cprofile"] = best("cprofile", fn, name, None)[0] / base
        for hook in hooks:
            traced, res = best("traced", fn, name, hook)
            null, _ = best("null", fn, name, hook)
            row[hook] = {"traced": traced / base, "null": null / base,
                         "bytes_per_call": res.records_bytes / max(res.events, 1),
                         "gil_hold_us": res.gil_hold_us, "events": res.events,
                         "dropped": res.dropped}
        rows.append(row)
    print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3], "rows": rows}))


main()

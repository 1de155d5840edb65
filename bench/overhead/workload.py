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


def run_once(mode, fn, hook):
    """One timed run; for traced modes also the session's Result."""
    if mode == "untraced":
        return timed(fn), None
    if mode == "cprofile":
        pr = cProfile.Profile()
        pr.enable()
        t = timed(fn)
        pr.disable()
        return t, None
    vcattach.start(os.path.join(OUT, "bench.cvf"), hook=hook, null_hook=(mode == "null"))
    t = timed(fn)
    return t, vcattach.stop()


def main():
    hooks = ["auto"] + (["profile"] if sys.version_info >= (3, 12) else [])
    modes = [("untraced", None), ("cprofile", None)]
    for hook in hooks:
        modes += [("traced", hook), ("null", hook)]
    rows = []
    for name, fn in WORKLOADS:
        fn()  # warm up
        best, results = {}, {}
        # Modes interleaved within each repetition, best of REPS: drift on a shared machine
        # hits every mode alike.
        for _ in range(REPS):
            for mode, hook in modes:
                t, res = run_once(mode, fn, hook)
                key = (mode, hook)
                if key not in best or t < best[key]:
                    best[key] = t
                if res is not None and mode == "traced":
                    results[hook] = res
        base = best[("untraced", None)]
        row = {"workload": name, "untraced": base, "cprofile": best[("cprofile", None)] / base}
        for hook in hooks:
            res = results[hook]
            row[hook] = {"traced": best[("traced", hook)] / base,
                         "null": best[("null", hook)] / base,
                         "bytes_per_call": res.records_bytes / max(res.events, 1),
                         "gil_hold_us": res.gil_hold_us, "events": res.events,
                         "dropped": res.dropped}
        rows.append(row)
    print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3], "rows": rows}))


main()

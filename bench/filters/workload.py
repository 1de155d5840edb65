"""bench/filters/workload.py — runs inside one interpreter: the filters benchmark's workloads
under each configuration, CPU time best of REPS (see bench/filters/run).  Prints one JSON line.

Workloads:
  lib    app code calling heavylib.work() (3 Python + 1 C call per item, all in heavylib)
  loop   a call-free loop (what 3.10/3.11's per-bytecode tracing slows down)
  calls  1,000,000 calls of a trivial function (the per-call cost)
Configurations: untraced; traced (auto); --exclude '*heavylib*'; --no-c-calls (auto: the
frame evaluator on 3.9-3.11, sys.monitoring without C events on 3.12+); the legacy profile
hook with --no-c-calls (3.9-3.11); the null floor (same mechanism, records nothing).
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import heavylib  # noqa: E402
import vcattach  # noqa: E402

OUT = sys.argv[1]
REPS = int(sys.argv[2])
N_LIB = 100000
N_LOOP = 2000000
N_CALLS = 1000000


def lib():
    for _ in range(10):
        heavylib.work(N_LIB // 10)


def loop():
    x = 0
    for i in range(N_LOOP):
        x += i * 2
    return x


def f():
    return None


def calls():
    for _ in range(N_CALLS):
        f()


WORKLOADS = {"lib": lib, "loop": loop, "calls": calls}


def best(fn):
    b = float("inf")
    for _ in range(REPS):
        t0 = time.process_time()
        fn()
        b = min(b, time.process_time() - t0)
    return b


def configs():
    c = [("untraced", None), ("traced", {}), ("exclude", {"exclude": "*heavylib*"}),
         ("no_c", {"no_c_calls": True}), ("null", {"null_hook": True})]
    if (3, 9) <= sys.version_info < (3, 12):
        c += [("profile_no_c", {"hook": "profile", "no_c_calls": True}),
              ("null_profile", {"hook": "profile", "null_hook": True})]
        if sys.version_info < (3, 11) or sys.version_info >= (3, 11, 4):
            c += [("null_eval", {"hook": "eval", "no_c_calls": True, "null_hook": True})]
    return c


def main():
    res = {"version": sys.version.split()[0], "rows": {}}
    for wname, fn in WORKLOADS.items():
        row = {}
        for cname, kw in configs():
            if kw is None:
                row[cname] = best(fn)
                continue
            # One session per repetition set: the hooks stay in place while timing.
            vcattach.start(os.path.join(OUT, "%s-%s.cvf" % (wname, cname)), buffer_mb=512, **kw)
            try:
                row[cname] = best(fn)
            finally:
                r = vcattach.stop()
            if cname == "traced":
                row["events"] = r.events
        res["rows"][wname] = row
    print(json.dumps(res))


main()

"""Child of bench/viztracer/run: times three workloads in this interpreter untraced, under the
vcattach agent (in-process API) and under VizTracer, interleaved rounds in one process, and
prints one JSON line.

argv: OUTDIR ROUNDS   (sys.path must reach python/vcattach and a built viztracer package)
"""
import gc
import json
import operator
import os
import re
import sys
import threading
import time

import vcattach
import viztracer

OUT = sys.argv[1]
ROUNDS = int(sys.argv[2])


# --- workloads ---------------------------------------------------------------------------

class Rec:
    __slots__ = ("name", "size", "tags")

    def __init__(self, name, size, tags):
        self.name = name
        self.size = size
        self.tags = tags


WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
RX_NUM = re.compile(r"(\d+)-(\w+)")
RX_SUB = re.compile(r"[aeiou]")
BY_SIZE = operator.attrgetter("size")


def c_mix():
    """C-call heavy: most calls are builtins / C methods (each one a CALL and a C_RETURN
    callback for a tracer), a few Python ones (constructors, key lambdas)."""
    acc = 0
    for block in range(600):
        recs = []
        for i in range(100):
            w = WORDS[(i * 7 + block) % len(WORDS)]
            s = "%d-%s" % (i * 31 % 97, w)
            recs.append(Rec(s.upper(), len(s), [w.capitalize(), str(i)]))
        recs.sort(key=BY_SIZE)
        names = sorted(recs, key=lambda r: r.name)
        acc += len(names)
        for r in recs:
            m = RX_NUM.search(r.name.lower())
            if m is not None:
                acc += int(m.group(1))
            acc += len(RX_SUB.sub("_", r.tags[0]))
            acc += r.name.count("A") + len(r.name.split("-"))
            acc += len(",".join(r.tags).replace(",", ";").strip())
        blob = json.dumps([{"n": r.name, "s": r.size, "t": r.tags} for r in recs[:40]])
        back = json.loads(blob)
        acc += sum(len(d["t"]) for d in back) + len(blob)
        d = {}
        for r in recs:
            d.setdefault(r.size, []).append(r.name)
        acc += max(d.keys()) + min(d.keys()) + len(list(d.items()))
    return acc


def trivial():
    return None


def calls_1m():
    for _ in range(1000000):
        trivial()


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


WORKLOADS = [("C-call mix", c_mix), ("1M py calls", calls_1m), ("fib(25)", lambda: fib(25))]


# --- measurement -------------------------------------------------------------------------

def count_calls(fn):
    """Python + C calls of one run (a setprofile pass, untimed): sizes VizTracer's buffer."""
    n = [0]

    def prof(frame, event, arg):
        if event == "call" or event == "c_call":
            n[0] += 1

    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return n[0]


def timed(fn):
    # CPU time of the whole process (the machine is shared; the agent's thread sleeps while
    # tracing, VizTracer has none): only fn() is inside, start / stop / saving are outside.
    gc.collect()
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def run_mode(mode, fn, tracer, info):
    if mode == "untraced":
        return timed(fn)
    if mode == "vcattach":
        vcattach.start(os.path.join(OUT, "bench.cvf"))
        try:
            t = timed(fn)
        finally:
            res = vcattach.stop()
        info["vc_events"] = res.events
        info["vc_dropped"] = max(info.get("vc_dropped", 0), res.dropped)
        return t
    tracer.start()
    try:
        t = timed(fn)
    finally:
        tracer.stop()
    tracer.clear()
    return t


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def main():
    counts = {name: count_calls(fn) for name, fn in WORKLOADS}
    # Room for every entry (a call is one entry; + slack) so that VizTracer never wraps.
    entries = int(max(counts.values()) * 1.25) + 100000
    tracer = viztracer.VizTracer(tracer_entries=entries, max_stack_depth=-1, verbose=0,
                                 output_file=os.path.join(OUT, "viz.json"))
    # Before 3.12 constructing the tracer installs its profile function (PyEval_SetProfile,
    # threading.setprofile) until the first stop: it would tax the untraced runs and make
    # vcattach refuse to start next to another profiler.
    tracer.start()
    tracer.stop()
    tracer.clear()
    threading.setprofile(None)
    assert sys.getprofile() is None
    modes = ["untraced", "vcattach", "viztracer"]
    rows = []
    for name, fn in WORKLOADS:
        info = {}
        for mode in modes:  # warm-up: caches, VizTracer's buffer pages, the agent's load
            run_mode(mode, fn, tracer, info)
        times = {m: [] for m in modes}
        for r in range(ROUNDS):
            # Interleaved, the order rotated each round: drift on a shared machine and
            # order effects hit every mode alike.
            for k in range(len(modes)):
                mode = modes[(r + k) % len(modes)]
                times[mode].append(run_mode(mode, fn, tracer, info))
        rows.append({"workload": name, "calls": counts[name], "entries": entries,
                     "times": times, "median": {m: median(times[m]) for m in modes},
                     "min": {m: min(times[m]) for m in modes}, **info})
    print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3], "rounds": ROUNDS,
                      "viztracer": getattr(viztracer, "__version__", "?"), "rows": rows}))


main()

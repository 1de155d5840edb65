"""Child of bench/subinterp/run: in this interpreter (3.12+), times 1M calls of a trivial
function on the main thread (its own CPU clock, time.thread_time) untraced and under the
in-process agent: alone, beside an idle sub-interpreter with its own GIL (the session is then
"parallel": every hook takes the lock among GILs, agent/hooklock.h), and beside one that is
busy making calls on another thread (the lock contended).  Also the busy one's calls per
second, untraced and traced.  Modes interleaved within each repetition; the best of REPS.
Prints one JSON line.

argv: OUTDIR REPS
"""
import json
import os
import sys
import threading
import time

import vcattach

try:
    import _interpreters as interpreters  # 3.13+
except ImportError:
    import _xxsubinterpreters as interpreters  # 3.12

OUT = sys.argv[1]
REPS = int(sys.argv[2])
N = 1000000
BUSY_S = 1.5  # how long the busy sub-interpreter calls (longer than any timed run)

BUSY = """
import time
def trivial():
    return None
n = 0
deadline = time.monotonic() + %f
t0 = time.monotonic()
while time.monotonic() < deadline:
    for _ in range(1000):
        trivial()
    n += 1000
with open(%r, "w") as f:
    f.write(str(n / (time.monotonic() - t0)))
"""


def trivial():
    return None


def calls():
    t0 = time.thread_time()
    for _ in range(N):
        trivial()
    return time.thread_time() - t0


def busy_interp(rate_file):
    interp = interpreters.create()  # the default config: its own GIL
    th = threading.Thread(target=interpreters.run_string,
                          args=(interp, BUSY % (BUSY_S, rate_file)))
    th.start()
    return interp, th


def one(mode):
    """(main thread's CPU seconds for N calls, the busy sub-interpreter's calls/s or None)."""
    rate_file = os.path.join(OUT, "rate")
    idle = interpreters.create() if mode == "idle" else None
    busy = busy_interp(rate_file) if mode in ("busy", "busy-untraced") else None
    traced = mode != "untraced" and mode != "busy-untraced"
    if traced:
        vcattach.start(os.path.join(OUT, "bench.cvf"), hook="auto")
        time.sleep(0.25)  # two of the agent's visits: the sub-interpreters are seen (and asked)
    t = calls()
    if traced:
        vcattach.stop()
    rate = None
    if busy is not None:
        busy[1].join()
        interpreters.destroy(busy[0])
        with open(rate_file) as f:
            rate = float(f.read())
    if idle is not None:
        interpreters.destroy(idle)
    return t, rate


def main():
    modes = ["untraced", "traced", "idle", "busy", "busy-untraced"]
    best, rates = {}, {}
    calls()  # warm up
    for _ in range(REPS):
        for mode in modes:
            t, rate = one(mode)
            best[mode] = min(best.get(mode, t), t)
            if rate is not None:
                rates[mode] = max(rates.get(mode, rate), rate)
    print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3], "best": best,
                      "rates": rates}))


main()

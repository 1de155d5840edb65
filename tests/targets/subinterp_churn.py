"""A target for tests/system/test_subinterp.py (3.12+): 4 threads create, use and destroy
sub-interpreters (the default config: each with its own GIL) as fast as they can for
argv[1] seconds (from "ready"), while the agent (holding the main GIL) reads the runtime's interpreter list
under the runtime's lock; one more, made first with the "legacy" config (the main GIL
shared, as Py_NewInterpreter and mod_wsgi make them), lives until the end and runs tick() in it
from a fifth thread meanwhile (so it is traced: agent/interps.c).  Prints "ready" once they
run, then, at the end, one JSON line: {"made": per-thread counts, "ok": every run's result was
right, "legacy": its id, "ticks": tick() calls made in it}."""
import json
import sys
import threading
import time

try:
    import _interpreters as interpreters  # 3.13+
except ImportError:
    import _xxsubinterpreters as interpreters  # 3.12

SECONDS = float(sys.argv[1])
made = [0] * 4
bad = []


def churn(k, stop):
    while time.monotonic() < stop[0]:
        i = interpreters.create()
        try:
            r = interpreters.run_string(i, "x = sum(range(1000))\nassert x == 499500\n")
            if r is not None:  # 3.13+: the error is returned, not raised
                bad.append(str(r))
        finally:
            interpreters.destroy(i)
        made[k] += 1


def legacy():
    """A sub-interpreter under the main GIL: _interpreters.create('legacy') on 3.13+,
    _xxsubinterpreters.create(isolated=False) on 3.12."""
    try:
        return interpreters.create("legacy")
    except TypeError:
        return interpreters.create(isolated=False)


def ticker(shared, stop, ticks):
    while time.monotonic() < stop[0]:
        interpreters.run_string(shared, "tick()\n")
        ticks[0] += 1
        time.sleep(0.001)


def main():
    shared = legacy()
    interpreters.run_string(shared, "def tick():\n    return sum(range(10))\n")
    ticks = [0]
    # the SECONDS count from "ready": making the first interpreters may take seconds on a
    # loaded machine, and the trace must not outlast the target
    stop = [float("inf")]
    threads = [threading.Thread(target=churn, args=(k, stop)) for k in range(4)]
    threads.append(threading.Thread(target=ticker, args=(shared, stop, ticks)))
    for t in threads:
        t.start()
    while sum(made) < 8:
        time.sleep(0.01)
    stop[0] = time.monotonic() + SECONDS
    print("ready", flush=True)
    for t in threads:
        t.join()
    interpreters.destroy(shared)
    print(json.dumps({"made": made, "ok": not bad, "legacy": int(shared), "ticks": ticks[0]}),
          flush=True)


main()

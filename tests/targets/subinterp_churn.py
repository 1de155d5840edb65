"""A target for tests/test_subinterp.py (3.12+): 4 threads create, use and destroy
sub-interpreters (the default config: each with its own GIL) as fast as they can for
argv[1] seconds, while the agent (holding the main GIL) reads the runtime's interpreter list
under the runtime's lock.  Prints "ready" once they run, then, at the end, one JSON line:
{"made": per-thread counts, "ok": every run's result was right}."""
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
    while time.monotonic() < stop:
        i = interpreters.create()
        try:
            r = interpreters.run_string(i, "x = sum(range(1000))\nassert x == 499500\n")
            if r is not None:  # 3.13+: the error is returned, not raised
                bad.append(str(r))
        finally:
            interpreters.destroy(i)
        made[k] += 1


def main():
    stop = time.monotonic() + SECONDS
    threads = [threading.Thread(target=churn, args=(k, stop)) for k in range(4)]
    for t in threads:
        t.start()
    while sum(made) < 8:
        time.sleep(0.01)
    print("ready", flush=True)
    for t in threads:
        t.join()
    print(json.dumps({"made": made, "ok": not bad}), flush=True)


main()

"""A target for tests/system/test_subinterp.py (3.12+): the main thread and two sub-interpreters with
their own GIL, each on its own thread, call work() until stdin closes (at most argv[1]
seconds from "ready"), in parallel: what a session goes parallel for (agent/hooklock.h); 50 calls, then a 1 ms
sleep (so that a trace stays small enough for the test's Python reader).  Every result is checked
against its expected value as it comes.  Prints "ready" once all three run, then one JSON line:
{"calls": [main's, each sub-interpreter's], "ok": every result right, "ids": [their ids]}."""
import json
import sys
import threading
import time

try:
    import _interpreters as interpreters  # 3.13+
except ImportError:
    import _xxsubinterpreters as interpreters  # 3.12

SECONDS = float(sys.argv[1])

LOOP = """
import os, time
def work(x):
    return (x * 7 + 3) %% 1009
calls, bad = 0, 0
while time.monotonic() < %r and not os.path.exists(%r):
    for i in range(50):
        if work(i) != (i * 7 + 3) %% 1009:
            bad += 1
    calls += 50
    time.sleep(0.001)
with open(%r, "w") as f:
    f.write("%%d %%d" %% (calls, bad))
"""


def work(x):
    return (x * 7 + 3) % 1009


def main():
    import os
    import tempfile
    tmp = tempfile.mkdtemp(prefix="vc-parallel-")
    # the SECONDS count from "ready"; the sub-interpreters learn the end through a file
    interps = [interpreters.create() for _ in range(2)]  # the default config: own GIL
    start = time.monotonic() + 2.0  # their loops end at start + SECONDS; "ready" at start
    end = start + SECONDS
    outs = [os.path.join(tmp, "out-%d" % k) for k in range(2)]
    stop = os.path.join(tmp, "stop")  # made when stdin closes: every loop ends
    threads = [threading.Thread(target=interpreters.run_string,
                                args=(i, LOOP % (end, stop, out)))
               for i, out in zip(interps, outs)]
    for t in threads:
        t.start()
    while time.monotonic() < start:
        time.sleep(0.01)
    print("ready", flush=True)

    def stop_at_eof():
        sys.stdin.read()
        open(stop, "w").close()
    threading.Thread(target=stop_at_eof, daemon=True).start()
    calls, bad = 0, 0
    while time.monotonic() < end and not os.path.exists(stop):
        for i in range(50):
            if work(i) != (i * 7 + 3) % 1009:
                bad += 1
        calls += 50
        time.sleep(0.001)
    for t in threads:
        t.join()
    counts = [calls]
    for out in outs:
        with open(out) as f:
            c, b = map(int, f.read().split())
        counts.append(c)
        bad += b
    ids = [int(i) for i in interps]
    for i in interps:
        interpreters.destroy(i)
    print(json.dumps({"calls": counts, "ok": bad == 0, "ids": ids}), flush=True)


main()

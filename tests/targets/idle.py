"""An idle CPython process for preflight tests: prints "ready" once the interpreter is up,
then sleeps in short steps until killed (or until argv[1] seconds have passed)."""
import sys
import time

limit = float(sys.argv[1]) if len(sys.argv) > 1 else 120.0
print("ready", flush=True)
end = time.monotonic() + limit
while time.monotonic() < end:
    time.sleep(0.05)

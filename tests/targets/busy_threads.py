"""A busy target: 4 threads calling a one-line function in a loop (about 7 M calls/s traced on
this machine), until killed.  Prints "ready" once they run.  Used by tests/system/test_stream.py and
bench/stream/run."""
import threading
import time


def one(x):
    return x + 1


def loop():
    while True:
        for i in range(1000):
            one(i)


for _ in range(4):
    threading.Thread(target=loop, daemon=True).start()
print("ready", flush=True)
while True:
    time.sleep(3600)

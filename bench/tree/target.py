"""bench/tree/target.py N — a tree of N Python processes for bench/tree/run: the parent and
N-1 forked children, each calling a small function in a loop with short sleeps (a busy-ish
service).  Prints "ready" once every child is forked; runs until killed (at most 10 min)."""
import os
import sys
import time


def leaf(i):
    return i + 1


def loop():
    end = time.time() + 600
    while time.time() < end:
        for i in range(200):
            leaf(i)
        time.sleep(0.01)


n = int(sys.argv[1])
for _ in range(n - 1):
    if os.fork() == 0:
        loop()
        os._exit(0)
print("ready", flush=True)
loop()

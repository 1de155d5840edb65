"""workload.py — the target of bench/sched/run: a busy loop of tiny calls on the main
thread, and a thread that sleeps 1 ms in a loop (~2000 context switches a second for the
scheduler's events to record).  Prints "ready", then on each line read from stdin the calls
made since the previous line and the seconds that took: "CALLS SECONDS"."""
import sys
import threading
import time

count = 0


def tiny(x):
    return x + 1


def sleeper():
    while True:
        time.sleep(0.001)


def reporter():
    last_n, last_t = 0, time.perf_counter()
    for _ in sys.stdin:
        n, t = count, time.perf_counter()
        print(n - last_n, t - last_t, flush=True)
        last_n, last_t = n, t


threading.Thread(target=sleeper, daemon=True).start()
threading.Thread(target=reporter, daemon=True).start()
print("ready", flush=True)
while True:
    for _ in range(1000):
        tiny(1)
    count += 1000

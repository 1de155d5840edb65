"""sched_mix.py — threads whose time goes to the CPU, to a lock, or to waiting for a core.

    PYTHON tests/targets/sched_mix.py lock|starved [N]

lock:     thread "worker" alternates compute() (~1 ms of pure Python, no calls inside) with
          blocking ~3 ms in lock.acquire on a lock that thread "holder" keeps for ~3 ms
          (time.sleep while holding it), then lets go of for ~1 ms.
starved:  N threads (default 4) "spin-K" call spin() (sha256 of 1 MiB: C code without the
          GIL, ~1-3 ms) in a loop, the whole process pinned to one core
          (os.sched_setaffinity, before the threads start: they inherit it): at any moment
          one runs and the others are runnable, waiting for the core, rarely blocked.
flip:     thread "flip" sleeps 20 µs in a loop: tens of thousands of switches a second.
Prints "ready" once every thread runs; runs until killed (or a line on stdin).
"""
import os
import sys
import threading
import time

mode = sys.argv[1]
stop = threading.Event()


def loops_for(seconds):
    """How many iterations of the pure-Python loop take `seconds` here (measured untraced;
    the fastest of a few runs: the cores are shared)."""
    n = 20000
    best = min(timed(n) for _ in range(5))
    return max(1, int(n * seconds / best))


def timed(n):
    t0 = time.perf_counter()
    work(n)
    return time.perf_counter() - t0


def work(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def lock_mode():
    lock = threading.Lock()
    n = loops_for(0.001)

    def compute():
        return work(n)

    def holder():  # keeps the lock ~3 ms, lets it go ~1 ms: the worker's compute
        while not stop.is_set():
            with lock:
                time.sleep(0.003)
            time.sleep(0.001)

    def worker():
        while not stop.is_set():
            lock.acquire()
            lock.release()
            compute()

    for name, fn in (("holder", holder), ("worker", worker)):
        threading.Thread(target=fn, name=name, daemon=True).start()


def starved_mode(count):
    # hashing a large buffer releases the GIL: the threads compete for the core, not the GIL
    import hashlib
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    buf = b"x" * (1 << 20)

    def spin():
        return hashlib.sha256(buf).digest()

    def loop():
        while not stop.is_set():
            spin()

    for k in range(count):
        threading.Thread(target=loop, name="spin-%d" % k, daemon=True).start()


def flip_mode():
    def flip():  # two context switches every ~60 µs: more than a tiny ring holds
        while not stop.is_set():
            time.sleep(0.00002)

    threading.Thread(target=flip, name="flip", daemon=True).start()


if mode == "lock":
    lock_mode()
elif mode == "flip":
    flip_mode()
else:
    starved_mode(int(sys.argv[2]) if len(sys.argv) > 2 else 4)
time.sleep(0.2)
print("ready", flush=True)
sys.stdin.readline()
stop.set()

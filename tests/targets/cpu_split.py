"""cpu_split.py — threads that spend their calls on a CPU or off it, each measuring itself.

    PYTHON tests/targets/cpu_split.py

Four workers, each calling one function of its own in a loop (every call 60–300 ms):
  sleep_call   time.sleep(0.2)                                   off-CPU (listed in waits.def)
  hash_call    hashlib.sha256 over 4 MiB slices for 100 ms         on-CPU (C code, GIL released)
  pipe_call    a buffered read of a pipe that a writer feeds      off-CPU
               every 150 ms (_io.BufferedReader.read, not listed)
  poll_call    libc poll(NULL, 0, 120) through ctypes             off-CPU (no list names it)
  mixed_call   ~70 ms of hashing then 70 ms asleep                about half on-CPU
Around every call each worker reads time.monotonic() (CLOCK_MONOTONIC, the trace's clock)
and time.thread_time() (its own CPU clock).  Prints "ready" once every worker has made a
call; on a line on stdin (or EOF) stops and prints one JSON object:
  {"calls": [[func, start_s, end_s, cpu_s], ...]}
"""
import ctypes
import hashlib
import json
import os
import sys
import threading
import time

stop = threading.Event()
calls = []
calls_lock = threading.Lock()
started = threading.Barrier(6)
BUF = b"x" * (24 << 20)
libc = ctypes.CDLL(None, use_errno=True)
libc.poll.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int]


def sleep_call():
    time.sleep(0.2)


def hash_call():
    # a time, not a size: one sha256 of 24 MiB takes 17 ms on an idle core with SHA
    # extensions and 130 ms on a loaded one, and a call must last 50 ms to be checked
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.1:
        hashlib.sha256(BUF[: 4 << 20]).digest()


def poll_call():
    libc.poll(None, 0, 120)


def mixed_call():
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.07:
        hashlib.sha256(BUF[: 2 << 20]).digest()
    time.sleep(0.07)


def worker(fn, arg=None):
    first = True
    while not stop.is_set():
        t0, c0 = time.monotonic(), time.thread_time()
        fn(arg) if arg is not None else fn()
        t1, c1 = time.monotonic(), time.thread_time()
        with calls_lock:
            calls.append([fn.__name__, t0, t1, c1 - c0])
        if first:
            first = False
            started.wait(30)


def pipe_call(f):
    f.read(1)


def feeder(w):
    while not stop.is_set():
        time.sleep(0.15)
        os.write(w, b"y")
    os.write(w, b"y")


def main():
    r, w = os.pipe()
    reader = os.fdopen(r, "rb")
    threads = [threading.Thread(target=worker, args=(f,), name=f.__name__.replace("_call", ""))
               for f in (sleep_call, hash_call, poll_call, mixed_call)]
    threads.append(threading.Thread(target=worker, args=(pipe_call, reader), name="pipe"))
    threads.append(threading.Thread(target=feeder, args=(w,), name="feeder"))
    for t in threads:
        t.start()
    started.wait(30)
    print("ready", flush=True)
    sys.stdin.readline()
    stop.set()
    for t in threads:
        t.join(30)
    with calls_lock:
        print(json.dumps({"calls": calls}), flush=True)


main()

"""A target process for the injector tests (tests/test_inject*.py); runs on CPython 3.8-3.13.

  python target.py --reference     print the result of one work() round and exit
  python target.py [--idle] [--sleep S]
      prints "READY <pid> <acceptor port>" once every thread is in place, then runs:
        main thread   work() rounds back to back (busy), or blocked on stdin with --idle
        sleeper       one time.sleep(S) (default 5), measured from inside
        csleeper      one raw libc nanosleep(S) through ctypes: unlike time.sleep it does not
                      retry on EINTR, so an interrupted syscall that is not restarted shows
        ticker        time.sleep(0.001) in a loop, recording the longest gap between ticks
        acceptor      blocked in socket.accept()
        locker        blocked in threading.Lock.acquire() (the lock is held by main)
        reader        blocked reading stdin; a line "report" ends the run (busy mode)
        churner       with --churn: starts and joins short-lived threads back to back
      --csleep-first starts csleeper before sleeper (lowest tid among the idle threads).
      SIGUSR1 is counted (a signal that arrives mid-injection must still be delivered).
      and on "report" prints one JSON line with what every thread saw, then exits.
Any exception in any thread is recorded and reported, never printed and ignored.
"""
import json
import math
import os
import signal
import socket
import sys
import threading
import time

errors = []


def work():
    acc = 0.0
    for i in range(1, 20001):
        acc += math.sin(i) * math.sqrt(i) / (1 + (i % 7))
    return repr(acc)


def guarded(fn):
    def run():
        try:
            fn()
        except BaseException as e:  # recorded for the report
            errors.append("%s: %r" % (fn.__name__, e))
    return run


def main():
    if "--reference" in sys.argv:
        print(work())
        return
    idle = "--idle" in sys.argv
    sleep_s = float(sys.argv[sys.argv.index("--sleep") + 1]) if "--sleep" in sys.argv else 5.0
    state = {"sleep_measured": None, "max_gap_ms": 0.0, "ticks": 0, "accept_ok": False,
             "lock_ok": False, "results": [], "rounds": 0}
    stop = threading.Event()
    state["usr1"] = 0
    state["churned"] = 0

    def on_usr1(signum, frame):
        state["usr1"] += 1
    signal.signal(signal.SIGUSR1, on_usr1)

    def sleeper():
        t = time.monotonic()
        time.sleep(sleep_s)
        state["sleep_measured"] = time.monotonic() - t

    def csleeper():
        import ctypes

        class timespec(ctypes.Structure):
            _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]
        libc = ctypes.CDLL(None, use_errno=True)
        req = timespec(int(sleep_s), int((sleep_s % 1) * 1e9))
        t = time.monotonic()
        rc = libc.nanosleep(ctypes.byref(req), None)
        state["csleep"] = [rc, ctypes.get_errno() if rc else 0, time.monotonic() - t]

    def ticker():
        last = time.monotonic()
        while not stop.is_set():
            time.sleep(0.001)
            now = time.monotonic()
            state["max_gap_ms"] = max(state["max_gap_ms"], (now - last) * 1000.0)
            state["ticks"] += 1
            last = now

    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def acceptor():
        conn, _ = srv.accept()
        state["accept_ok"] = conn.recv(16) == b"ping"
        conn.close()

    lock = threading.Lock()
    lock.acquire()

    def churner():
        while not stop.is_set():
            t = threading.Thread(target=lambda: None)
            t.start()
            t.join()
            state["churned"] += 1

    def locker():
        state["lock_ok"] = lock.acquire(timeout=120)

    def reader():
        for line in sys.stdin:
            if line.strip() == "report":
                break
        stop.set()

    threads = [threading.Thread(target=guarded(f), name=f.__name__)
               for f in (sleeper, csleeper, ticker, acceptor, locker)]
    if "--csleep-first" in sys.argv:  # lowest tid: the thread the injector borrows first
        threads.insert(0, threads.pop(1))
    if "--churn" in sys.argv:
        threads.append(threading.Thread(target=guarded(churner), name="churner"))
    for t in threads:
        t.start()
    time.sleep(0.05)
    print("READY %d %d" % (os.getpid(), srv.getsockname()[1]), flush=True)
    if idle:
        guarded(reader)()
    else:
        rt = threading.Thread(target=guarded(reader), name="reader", daemon=True)
        rt.start()
        seen = set()
        while not stop.is_set():
            seen.add(work())
            state["rounds"] += 1
        state["results"] = sorted(seen)
    lock.release()
    c = socket.create_connection(("127.0.0.1", srv.getsockname()[1]), timeout=10)
    c.sendall(b"ping")
    for t in threads:
        t.join(30)
    c.close()
    state["errors"] = errors
    state["alive_threads"] = [t.name for t in threads if t.is_alive()]
    print(json.dumps(state), flush=True)


main()

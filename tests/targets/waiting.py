"""waiting.py — a program that mostly waits, and works in one place; traced in-process.

    PYTHON tests/targets/waiting.py OUT.cvf [SECONDS]

Threads blocked in every usual way (time.sleep, a lock with a timeout, queue.Queue.get, a
socket recv, a select) and one thread doing CPU work in `crunch`; an idle
ThreadPoolExecutor whose worker is blocked in SimpleQueue.get before the trace begins (a
call in progress at attach).  Traces SECONDS (default 1) with vcattach.trace(OUT).  Used by
tests/unit/test_summary.py: `vcattach summary` must rank `crunch` first among working functions.
"""
import concurrent.futures
import os
import queue
import select
import socket
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import vcattach  # noqa: E402

stop = threading.Event()
AT_ATTACH_POOL = os.environ.get("WAITING_POOL") == "1"


def crunch(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def cruncher():
    while not stop.is_set():
        crunch(20000)
        time.sleep(0.001)


def sleeper():
    while not stop.is_set():
        time.sleep(0.02)


def locker(lock):
    while not stop.is_set():
        if lock.acquire(timeout=0.02):
            lock.release()


def getter(q):
    while not stop.is_set():
        try:
            q.get(timeout=0.02)
        except queue.Empty:
            pass


def receiver(sock):
    sock.settimeout(0.02)
    while not stop.is_set():
        try:
            sock.recv(10)
        except socket.timeout:
            pass


def selecter(sock):
    while not stop.is_set():
        select.select([sock], [], [], 0.02)


def main():
    out = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    held = threading.Lock()
    held.acquire()
    a, b = socket.socketpair()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1) if AT_ATTACH_POOL else None
    if pool:
        pool.submit(lambda: None).result()  # the worker now waits in SimpleQueue.get
    threads = [threading.Thread(target=cruncher, name="cruncher"),
               threading.Thread(target=sleeper, name="sleeper"),
               threading.Thread(target=locker, args=(held,), name="locker"),
               threading.Thread(target=getter, args=(queue.Queue(),), name="getter"),
               threading.Thread(target=receiver, args=(a,), name="receiver"),
               threading.Thread(target=selecter, args=(b,), name="selecter")]
    for t in threads:
        t.start()
    time.sleep(0.1)
    try:
        with vcattach.trace(out):
            time.sleep(seconds)
    finally:
        stop.set()
        for t in threads:
            t.join()
        if pool:
            pool.shutdown()
        a.close()
        b.close()


if __name__ == "__main__":
    main()

"""A small "production service" for end-to-end attach tests (runs on CPython 3.8 to 3.13).

    python busy_service.py DIR          run until DIR/finish exists, then report
    python busy_service.py --check N    print the checksum of N rounds, untraced (the oracle)

Threads, each in a state an injector must survive:
  MainThread    computes rounds of a known checksum (Python calls, C calls, recursion)
  sleeper       time.sleep(0.02) in a loop, counting sleeps that returned early
  acceptor      blocked in socket.accept() until the main thread connects at the end
  locker        blocked acquiring a threading.Lock the main thread holds until the end
  late-starter  started only when DIR/start_late appears (after the attach)

Files in DIR: "ready" (all threads in position; content = pid), then at the end "report.json":
{"rounds", "checksum", "early_sleeps", "sleeps", "exceptions", "accepted", "locked",
 "late_ran"}.  Every thread catches and records any exception, so a test can assert that the
attach raised nothing anywhere.
"""
import json
import os
import socket
import sys
import threading
import time

MOD = (1 << 61) - 1


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def one_round(i):
    """Deterministic work mixing Python frames (fib) and C calls (sorted, sum, str); a round
    costs ~0.2 ms for ~30 profiled calls, so traces stay small enough to check quickly."""
    values = sorted([(k * 7919 + i) % 1009 for k in range(1500)])
    return (sum(values) + fib(6) + len(str(i * i))) % MOD


# Round r works on one_round(r % PERIOD): the target recomputes every round in full (so any
# corruption shows), while the oracle can tabulate PERIOD values once and fold N rounds fast.
PERIOD = 257


def checksum_of(rounds):
    table = [one_round(j) for j in range(min(rounds, PERIOD))]
    acc = 0
    for r in range(rounds):
        acc = (acc * 31 + table[r % PERIOD]) % MOD
    return acc


exceptions = []
exceptions_lock = threading.Lock()


def record_exception(where, exc):
    with exceptions_lock:
        exceptions.append("%s: %r" % (where, exc))


def guarded(name, body):
    def run():
        try:
            body()
        except BaseException as exc:  # noqa: BLE001 - the test wants to see anything at all
            record_exception(name, exc)
    return run


def main(directory):
    stop = threading.Event()
    stats = {"early_sleeps": 0, "sleeps": 0, "accepted": False, "locked": False,
             "late_ran": False}

    def sleeper():
        while not stop.is_set():
            t0 = time.monotonic()
            time.sleep(0.02)
            if time.monotonic() - t0 < 0.02:
                stats["early_sleeps"] += 1
            stats["sleeps"] += 1

    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]

    def acceptor():
        conn, _ = server.accept()
        stats["accepted"] = True
        conn.close()

    held = threading.Lock()
    held.acquire()

    def locker():
        with held:
            stats["locked"] = True

    def late_starter():
        fib(15)
        stats["late_ran"] = True

    threads = [threading.Thread(target=guarded(n, f), name=n)
               for n, f in (("sleeper", sleeper), ("acceptor", acceptor), ("locker", locker))]
    for t in threads:
        t.start()
    time.sleep(0.1)  # let them reach their blocking calls
    with open(os.path.join(directory, "ready.tmp"), "w") as f:
        f.write(str(os.getpid()))
    os.rename(os.path.join(directory, "ready.tmp"), os.path.join(directory, "ready"))

    rounds = 0
    acc = 0
    late = None
    start_late = os.path.join(directory, "start_late")
    finish = os.path.join(directory, "finish")
    try:
        while True:
            acc = (acc * 31 + one_round(rounds % PERIOD)) % MOD
            rounds += 1
            if rounds % 10 == 0:
                if late is None and os.path.exists(start_late):
                    late = threading.Thread(target=guarded("late-starter", late_starter),
                                            name="late-starter")
                    late.start()
                if os.path.exists(finish):
                    break
    except BaseException as exc:  # noqa: BLE001
        record_exception("MainThread", exc)
    stop.set()
    held.release()
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.recv(1)
    for t in threads + ([late] if late else []):
        t.join(10)
    server.close()
    report = dict(stats, rounds=rounds, checksum=acc, exceptions=exceptions)
    with open(os.path.join(directory, "report.tmp"), "w") as f:
        json.dump(report, f)
    os.rename(os.path.join(directory, "report.tmp"), os.path.join(directory, "report.json"))


if __name__ == "__main__":
    if sys.argv[1] == "--check":
        print(checksum_of(int(sys.argv[2])))
    else:
        threading.excepthook = lambda args: record_exception(
            args.thread.name if args.thread else "?", args.exc_value)
        main(sys.argv[1])

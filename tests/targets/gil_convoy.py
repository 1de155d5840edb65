"""gil_convoy.py — a thread that keeps the GIL by handing it back and forth with the kernel.

    python gil_convoy.py DIR main|thread

The busy thread computes for about 1 ms and then makes one short system call (a stat of
DIR/finish), over and over.  Each stat lets the GIL go for microseconds: a thread waiting for
the GIL is woken, but the busy thread has taken the GIL back before the waiter runs, and the
waiter's 5 ms before it may ask for a switch start over.  Waiters starve (CPython's "convoy").
With `main` the main thread is the busy one; with `thread` a second thread is, and the main
thread waits in join() (only 3.12+ lets the agent reach a thread other than the main one).

Files in DIR: "ready" (content: the pid) once the busy thread runs; the run ends when
DIR/finish exists and then writes "report.json": {"rounds", "checksum"}, the checksum of
`rounds` rounds, which `--check N` prints computed untraced (the oracle).
"""
import json
import os
import sys
import threading

MOD = (1 << 61) - 1


def work(i):
    acc = 0
    for k in range(12000):  # no call inside: one traced call per round, ~1 ms
        acc += (k * 7919 + i) % 1009
    return acc % MOD


def checksum(rounds):
    table = [work(j) for j in range(min(rounds, 97))]  # round r works on r % 97
    acc = 0
    for r in range(rounds):
        acc = (acc * 31 + table[r % 97]) % MOD
    return acc


def busy(directory, result):
    finish = os.path.join(directory, "finish")
    ready = os.path.join(directory, "ready")
    with open(ready + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(ready + ".tmp", ready)
    rounds = acc = 0
    while not os.path.exists(finish):
        acc = (acc * 31 + work(rounds % 97)) % MOD
        rounds += 1
    result.update(rounds=rounds, checksum=acc)


def main(directory, mode):
    result = {}
    if mode == "main":
        busy(directory, result)
    else:
        t = threading.Thread(target=busy, args=(directory, result), name="convoy")
        t.start()
        t.join()
    with open(os.path.join(directory, "report.tmp"), "w") as f:
        json.dump(result, f)
    os.rename(os.path.join(directory, "report.tmp"), os.path.join(directory, "report.json"))


if __name__ == "__main__":
    if sys.argv[1] == "--check":
        print(checksum(int(sys.argv[2])))
    else:
        main(sys.argv[1], sys.argv[2])

"""A target for `vcattach top` (tests/system/test_top.py): one thread spends its time in a known hot
function, `hot_spin_for_top`, another sleeps in short naps (a wait of waits.def), and the main
thread answers each line on stdin with "pong LINE" (so a test can tell it still works).
Prints "ready" once they run."""
import sys
import threading
import time


def hot_spin_for_top(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def worker():
    while True:
        hot_spin_for_top(2000)


def napper():
    while True:
        time.sleep(0.01)


threading.Thread(target=worker, daemon=True).start()
threading.Thread(target=napper, daemon=True).start()
print("ready", flush=True)
for line in sys.stdin:
    print("pong " + line.strip(), flush=True)

"""A busy two-thread target that counts its own calls, for exact call counts from a trace
(tests/system/test_musl.py: a musl CPython in a container of its own).

  counted_threads.py DIR [CALLS]

Two threads ("worker-0", "worker-1") spin from the start, calling spin() without pause.  Once
DIR/go exists, each calls counted() exactly CALLS times (default 20000), counting them itself,
then spins again; when both are done it writes DIR/counts.json ({thread name: calls}).  DIR/ready
is made once both threads spin; DIR/finish ends the process (exit 0) after writing
DIR/report.json with the spins each thread made (they never stopped: the tracer took nothing
away).  A trace taken while the counted phase runs holds exactly CALLS counted() calls per
worker, which is what the test compares against counts.json."""
import json
import os
import sys
import threading

DIR = sys.argv[1]
CALLS = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
counts = {}
spins = {}
done = threading.Barrier(3)


def spin(x):
    return x + 1


def counted(x):
    return x * 2


def exists(name):
    return os.path.exists(os.path.join(DIR, name))


def write(name, obj):
    tmp = os.path.join(DIR, name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.rename(tmp, os.path.join(DIR, name))


def worker(name):
    n = 0
    while not exists("go"):
        for i in range(1000):
            spin(i)
        n += 1
    calls = 0
    for i in range(CALLS):
        counted(i)
        calls += 1
    counts[name] = calls
    done.wait()
    while not exists("finish"):
        for i in range(1000):
            spin(i)
        n += 1
    spins[name] = n


threads = [threading.Thread(target=worker, args=("worker-%d" % i,), name="worker-%d" % i)
           for i in range(2)]
for t in threads:
    t.start()
open(os.path.join(DIR, "ready"), "w").close()
done.wait()
write("counts.json", counts)
for t in threads:
    t.join()
write("report.json", spins)

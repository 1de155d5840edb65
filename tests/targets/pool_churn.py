"""A multiprocessing pool made again and again, the way services use one: `with ctx.Pool(2) as
pool: pool.map(pool_fn, [20000] * 8)`, then 0.2 s of sleep (tests/system/test_tree_pools.py).

    pool_churn.py METHOD REPORT [WORKERS [N]]   METHOD: fork, forkserver or spawn;
                                                WORKERS: 2; N: each task's loop, 20000

Each worker's tasks take a few ms; `with` ends the pool by terminating its workers (SIGTERM),
so a worker lives from its start to the end of the map and no more.  The target records the
calls of pool_fn each worker made (their results carry the worker's pid and when the call
began and ended) and appends one line per pool to REPORT: its number, when it began and ended
(CLOCK_MONOTONIC ns), and pid:calls for every worker of the pool (0 for one that got no task),
each followed by its calls' begin-end times ("pid:2:B-E,B-E"; a spawned worker's agent may
arrive after some of its calls, and the test needs to know which).  Prints "ready" before the first pool;
runs until killed (at most 120 s).
"""
import os
import sys
import time


def pool_fn(n):
    t0 = time.monotonic_ns()
    x = 0
    for i in range(n):
        x += i
    return os.getpid(), t0, time.monotonic_ns()


def pool_round(ctx, workers, n):
    with ctx.Pool(workers) as pool:
        results = pool.map(pool_fn, [n] * 8)
        workers = [p.pid for p in pool._pool]
    return results, workers


def main():
    import multiprocessing as mp
    ctx = mp.get_context(sys.argv[1])
    end = time.time() + 120
    with open(sys.argv[2], "a") as report:
        print("ready", flush=True)
        n = 0
        while time.time() < end:
            t0 = time.monotonic_ns()
            results, workers = pool_round(ctx, int(sys.argv[3]) if len(sys.argv) > 3 else 2,
                                      int(sys.argv[4]) if len(sys.argv) > 4 else 20000)
            t1 = time.monotonic_ns()
            calls = {w: [] for w in workers}
            for pid, b, e in results:
                calls.setdefault(pid, []).append("%d-%d" % (b, e))
            report.write("%d %d %d %s\n" % (n, t0, t1, " ".join(
                "%d:%d:%s" % (pid, len(c), ",".join(c)) for pid, c in sorted(calls.items()))))
            report.flush()
            n += 1
            time.sleep(0.2)


if __name__ == "__main__":
    main()

"""A multiprocessing pool made again and again, the way services use one: `with ctx.Pool(2) as
pool: pool.map(pool_fn, [20000] * 8)`, then 0.2 s of sleep (tests/system/test_tree_pools.py).

    pool_churn.py METHOD REPORT [WORKERS [N]]   METHOD: fork, forkserver or spawn;
                                                WORKERS: 2; N: each task's loop, 20000

Each worker's tasks take a few ms; `with` ends the pool by terminating its workers (SIGTERM),
so a worker lives from its start to the end of the map and no more.  The target counts the
calls of pool_fn each worker made (their results carry the worker's pid) and appends one line
per pool to REPORT: its number, when it began and ended (CLOCK_MONOTONIC ns), and pid:calls for
every worker of the pool, 0 for one that got no task.  Prints "ready" before the first pool;
runs until killed (at most 120 s).
"""
import os
import sys
import time


def pool_fn(n):
    x = 0
    for i in range(n):
        x += i
    return os.getpid()


def pool_round(ctx, workers, n):
    with ctx.Pool(workers) as pool:
        pids = pool.map(pool_fn, [n] * 8)
        workers = [p.pid for p in pool._pool]
    return pids, workers


def main():
    import multiprocessing as mp
    ctx = mp.get_context(sys.argv[1])
    end = time.time() + 120
    with open(sys.argv[2], "a") as report:
        print("ready", flush=True)
        n = 0
        while time.time() < end:
            t0 = time.monotonic_ns()
            pids, workers = pool_round(ctx, int(sys.argv[3]) if len(sys.argv) > 3 else 2,
                                      int(sys.argv[4]) if len(sys.argv) > 4 else 20000)
            t1 = time.monotonic_ns()
            calls = dict.fromkeys(workers, 0)
            for p in pids:
                calls[p] = calls.get(p, 0) + 1
            report.write("%d %d %d %s\n" % (n, t0, t1, " ".join(
                "%d:%d" % kv for kv in sorted(calls.items()))))
            report.flush()
            n += 1
            time.sleep(0.2)


if __name__ == "__main__":
    main()

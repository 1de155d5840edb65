"""bench/attach/target.py — the process that bench/attach/run attaches vcattach to.

Runs on any interpreter of the matrix (3.8-3.13, stdlib only).  Two shapes:
  busy (default)  --threads worker threads call a trivial function in loops, as fast as they
                  can; its body is sized at startup (a short pure-Python loop, no C calls) so
                  that one thread alone makes about --rate calls/s (default 1M/s).  After every
                  BATCH calls a worker reads perf_counter and adds BATCH to its count of the
                  current 10 ms window (window number = int(perf_counter * 100)); finished
                  windows go to its own list.
  --idle          the same number of threads, all blocked in Event.wait().
Both shapes run a ticker thread: time.sleep(0.001) in a loop, appending time.perf_counter()
at every tick.  perf_counter is CLOCK_MONOTONIC on Linux, the same clock the runner reads, so
the runner can cut both logs into any time window: the gap between consecutive ticks is how
long the ticker was kept from running (a stall), the window counts give the workers' call
rate with 10 ms resolution.

Every worker (after each batch) and the ticker (after each tick) also probe whether a profile
hook is installed on their own thread: sys.getprofile() is not None (the agent passes its
hook object as the profile arg), or on 3.12+ sys.monitoring.get_tool(PROFILER_ID) is set.
Each change of that answer is logged as (time, thread slot, hooked); the ticker is slot -1.

Protocol (line based): prints "ready PID WORK" on stdout once running; then on stdin
  dump  -> one JSON line {"t": [tick times], "w": [[window, calls], ...], "h": [[time, slot,
           hooked], ...], "ran": {slot: [windows]}} with what was logged since the previous
           dump (window calls summed over the workers; "ran": the windows each worker made
           calls in)
  quit  -> exits
Reading stdin happens in the main thread (blocked in read), so the target has
threads + ticker + main threads.
"""
import json
import sys
import threading
import time

BATCH = 100


def make_leaf(work):
    def leaf():
        i = 0
        while i < work:
            i += 1
        return i
    return leaf


def calibrate(rate):
    """Picks the loop length of leaf() so that one thread makes about `rate` calls/s."""
    def calls_per_s(work, seconds=0.15):
        leaf = make_leaf(work)
        n = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(BATCH):
                leaf()
            n += BATCH
        return n / (time.perf_counter() - t0)
    calls_per_s(0, 0.05)  # warm up (3.11+ specialises the loop)
    fixed = 1.0 / calls_per_s(0)
    per_iter = (1.0 / calls_per_s(40) - fixed) / 40
    if per_iter <= 0:
        return 0
    return max(0, int(round((1.0 / rate - fixed) / per_iter)))


def make_probe():
    """A function telling whether the calling thread runs under a profile hook."""
    getprofile = sys.getprofile
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        return lambda: getprofile() is not None
    get_tool, tool = monitoring.get_tool, monitoring.PROFILER_ID
    return lambda: getprofile() is not None or get_tool(tool) is not None


def main():
    idle = "--idle" in sys.argv
    nthreads = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 4
    rate = float(sys.argv[sys.argv.index("--rate") + 1]) if "--rate" in sys.argv else 1e6
    work = 0 if idle else calibrate(rate)

    windows = [[] for _ in range(nthreads)]   # per worker: finished (window, calls)
    stop = threading.Event()
    hook_log = [[]]                             # [(time, slot, hooked)], swapped on dump
    probe = make_probe()

    def worker(slot):
        leaf = make_leaf(work)
        clock = time.perf_counter
        current, calls = int(clock() * 100), 0
        hooked = False
        while not stop.is_set():
            for _ in range(BATCH):
                leaf()
            now = clock()
            if probe() != hooked:
                hooked = not hooked
                hook_log[0].append((now, slot, hooked))
            w = int(now * 100)
            if w == current:
                calls += BATCH
            else:
                windows[slot].append((current, calls))
                current, calls = w, BATCH

    def sleeper(slot):
        stop.wait()

    lock = threading.Lock()
    ticks = []

    def ticker():
        clock = time.perf_counter
        sleep = time.sleep
        hooked = False
        while not stop.is_set():
            sleep(0.001)
            now = clock()
            if probe() != hooked:
                hooked = not hooked
                hook_log[0].append((now, -1, hooked))
            with lock:
                ticks.append(now)

    threads = [threading.Thread(target=sleeper if idle else worker, args=(i,), daemon=True)
               for i in range(nthreads)]
    threads.append(threading.Thread(target=ticker, daemon=True))
    for t in threads:
        t.start()
    import os
    sys.stdout.write("ready %d %d\n" % (os.getpid(), work))
    sys.stdout.flush()
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "dump":
            with lock:
                t = ticks[:]
                del ticks[:-1]  # the next dump starts with this one's last tick: no lost gap
            per_window = {}
            ran = {}
            for slot in range(nthreads):
                # a worker may still append to the old list for a moment: that loses at most
                # its newest window, which lies after every window the runner looks at
                done, windows[slot] = windows[slot], []
                for w, n in done:
                    per_window[w] = per_window.get(w, 0) + n
                ran[slot] = [w for w, _ in done]
            hooks, hook_log[0] = hook_log[0], []
            sys.stdout.write(json.dumps({"t": t, "w": sorted(per_window.items()),
                                         "h": hooks, "ran": ran}) + "\n")
            sys.stdout.flush()
        elif cmd == "quit":
            break
    stop.set()


if __name__ == "__main__":
    main()

"""A target with sub-interpreters (tests/system/test_subinterp.py): the main interpreter and
_xxsubinterpreters ones (3.8-3.11) each call their own work(), which counts its calls in its
own interpreter.  Driven by lines on stdin, answering one line on stdout:

  (start)  creates interpreter A (it exists at attach) and prints "ready"
  go N [eval]  waits until the trace's hook is on in main and A, then: main calls work() N times;
           A runs work() N/5 times in each of 1000 run_string calls (the main OS thread
           switches interpreters 2000 times); interpreter B is created now (during the trace), waits for
           the hook, calls work() 2*N times and is destroyed; 30 interpreters are created,
           call work() 3 times and are destroyed in a tight loop (hook or no hook); one
           interpreter fails to start (a failing run_string) and is destroyed.  Prints
           {"counts": {interp id: work() calls}, "checksum": ..., "ids": {...}}
  check    after detach: whether any hook is left in main and A; prints {"hooks": [...]}, exits
           (3.14+: also 5 concurrent.interpreters calling work() N/10 times each, and an
           InterpreterPoolExecutor of 2 mapping work() over 200 numbers: its workers load
           this file's functions, so main() runs only as __main__)
  --check N  (argv) prints the checksum of the same work untraced, and exits.
  --legacy   (argv, 3.12+) A, B and the short-lived ones are made with the "legacy" config:
             under the main GIL, as Py_NewInterpreter (mod_wsgi) makes them.  The hook
             looked for is then sys.monitoring's tool, in each interpreter.
"""
import json
import os
import sys
import tempfile
import time

from subinterp_work import WORK  # beside this file

try:
    import _xxsubinterpreters as interpreters  # 3.8-3.12
    RunFailed = interpreters.RunFailedError
except ImportError:
    import _interpreters as interpreters  # 3.13+: run_string returns the error instead
    RunFailed = None


# A and B import atexit, as mod_wsgi's interpreters do (the agent registers its end there
# without importing anything); the short-lived ones do not.
WORK_ATEXIT = "import atexit\n" + WORK

# Until the trace's hook is on (and, in an interpreter that imported atexit, the agent's end
# callback is registered: an interpreter adopted before it imported atexit gets it at the
# agent's next visit).  The hook: the legacy profiler, or (3.12+) our sys.monitoring tool.
HOOKED = """
import sys, time
def hooked():
    mon = getattr(sys, "monitoring", None)
    if sys.getprofile() is None and (mon is None or mon.get_tool(2) != "vcattach"):
        return False
    atexit = sys.modules.get("atexit")
    return atexit is None or atexit._ncallbacks() > 0
deadline = time.monotonic() + 20
while not hooked() and time.monotonic() < deadline:
    time.sleep(0.01)
if not hooked():
    raise SystemExit("never hooked")
"""

LEGACY = "--legacy" in sys.argv


def create():
    """A new sub-interpreter: the default config, or under the main GIL with --legacy."""
    if not LEGACY:
        return interpreters.create()
    try:
        return interpreters.create("legacy")  # 3.13+
    except TypeError:
        return interpreters.create(isolated=False)  # 3.12


def main_hooked():
    mon = getattr(sys, "monitoring", None)
    return sys.getprofile() is not None or (mon is not None and mon.get_tool(2) == "vcattach")


PEP734 = {}  # 3.14+: the work() calls of the PEP 734 interpreters (pep734), for the report
A_RUNS = 1000  # run_string calls into A: the main OS thread switches interpreters 2000 times
COUNT = 0


def work(x):
    global COUNT
    COUNT += 1
    return (x * 7 + 3) % 1009


def run_work(interp, n, out, append=True):
    """Runs work(0..n-1) in interp; its results' sum is appended to out (a file)."""
    interpreters.run_string(interp, "s = sum(work(i) for i in range(%d))\n"
                                    "with open(%r, 'a') as f: f.write('%%d\\n' %% s)\n"
                            % (n, out))


def read_count(interp, tmp):
    path = os.path.join(tmp, "count-%d" % int(interp))
    interpreters.run_string(interp, "with open(%r, 'w') as f: f.write(str(COUNT))\n" % path)
    with open(path) as f:
        return int(f.read())


def sums(path):
    with open(path) as f:
        return sum(int(line) for line in f if line.strip())


def scenario(n, tmp, a, hooked):
    """The work; returns ({interp id: count}, checksum).  hooked: "profile" (B waits until
    sys.getprofile() shows the trace's hook), "eval" (B waits 0.5 s: the frame evaluator is
    not visible from Python), "none" (B does not wait: 3.12+, where only the main interpreter
    is traced), "" (untraced)."""
    out = os.path.join(tmp, "sums")
    open(out, "w").close()
    counts = {}
    if hooked == "profile":
        interpreters.run_string(a, HOOKED)
    total = sum(work(i) for i in range(n))
    counts[0] = COUNT
    for _ in range(A_RUNS):
        run_work(a, n // 5, out)
    counts[int(a)] = read_count(a, tmp)
    b = create()
    interpreters.run_string(b, WORK_ATEXIT)
    if hooked == "profile":
        interpreters.run_string(b, HOOKED)
    elif hooked == "eval":
        time.sleep(0.5)
    run_work(b, 2 * n, out)
    counts[int(b)] = read_count(b, tmp)
    interpreters.destroy(b)
    for _ in range(30):
        c = create()
        interpreters.run_string(c, WORK)
        run_work(c, 3, out)
        interpreters.destroy(c)
    bad = create()
    try:
        failed = interpreters.run_string(bad, "raise ImportError('fails to start')")
    except RunFailed or ():
        failed = True
    assert failed
    interpreters.destroy(bad)
    pep_total, pep_counts = pep734(n, tmp, hooked)
    PEP734.update(pep_counts)
    return counts, total + sums(out) + pep_total, int(b)


def pool_init(hooked):
    """An InterpreterPoolExecutor worker's start (in its interpreter): waits for the hook."""
    if hooked == "profile":
        exec(HOOKED, {})


def count_here(_):
    """In a pool worker: (its interpreter's id, its work() calls so far)."""
    from concurrent import interpreters as ci
    return ci.get_current().id, COUNT


def pep734(n, tmp, hooked):
    """3.14+: concurrent.interpreters and InterpreterPoolExecutor make and end interpreters
    (own GIL) during the trace, and call work() there.  Returns their results' sum and
    {"ci": {interp id: work() calls}, "pool": {worker interp id: work() calls}} (0 and {}
    before 3.14)."""
    try:
        from concurrent import interpreters as ci
        from concurrent.futures import InterpreterPoolExecutor
    except ImportError:
        return 0, {}
    total, made = 0, {}
    for _ in range(5):
        interp = ci.create()
        interp.exec(WORK_ATEXIT + (HOOKED if hooked == "profile" else ""))
        interp.exec("for i in range(%d): work(i)\n" % (n // 10))
        path = os.path.join(tmp, "count-%d" % interp.id)
        interp.exec("with open(%r, 'w') as f: f.write(str(COUNT))\n" % path)
        with open(path) as f:
            made[interp.id] = int(f.read())
        total += interp.call(pow, 7, 3)
        interp.close()
    pool = {}
    with InterpreterPoolExecutor(2, initializer=pool_init, initargs=(hooked,)) as ex:
        total += sum(ex.map(pow, range(200), [2] * 200))
        total += sum(ex.map(work, range(200)))
        # which worker answers is not ours to choose: ask until both have (or 200 times)
        for k in range(200):
            for wid, c in ex.map(count_here, range(2)):
                pool[wid] = c
            if sum(pool.values()) == 200:
                break
    return total, {"ci": made, "pool": pool}


def new_a():
    a = create()
    interpreters.run_string(a, WORK_ATEXIT)
    return a


def main():
    if "--check" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            a = new_a()
            print(scenario(int(sys.argv[sys.argv.index("--check") + 1]), tmp, a, "")[1])
            interpreters.destroy(a)
        return
    tmp = tempfile.mkdtemp(prefix="vc-subinterp-")
    a = new_a()
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[:1] == ["go"]:
            mode = cmd[2] if len(cmd) > 2 else "profile"
            deadline = time.monotonic() + 20
            while mode == "profile" and not main_hooked() and time.monotonic() < deadline:
                time.sleep(0.01)
            counts, checksum, b = scenario(int(cmd[1]), tmp, a, mode)
            print(json.dumps({"counts": counts, "checksum": checksum, "pep734": PEP734,
                              "ids": {"main": 0, "A": int(a), "B": b}}), flush=True)
        elif cmd[:1] == ["check"]:
            left = os.path.join(tmp, "left")
            interpreters.run_string(a, "import sys\nmon = getattr(sys, 'monitoring', None)\n"
                                       "with open(%r, 'w') as f: f.write(repr(["
                                       "repr(sys.getprofile())] + ([repr(mon.get_tool(i)) "
                                       "for i in range(6)] if mon else [])))\n" % left)
            with open(left) as f:
                hooks = [repr(sys.getprofile())] + eval(f.read())
            mon = getattr(sys, "monitoring", None)  # 3.12+: no tool left either
            if mon is not None:
                hooks += [repr(mon.get_tool(i)) for i in range(6)]
            interpreters.destroy(a)
            print(json.dumps({"hooks": hooks}), flush=True)
            return


if __name__ == "__main__":  # not when a pool worker loads this file (pep734)
    main()

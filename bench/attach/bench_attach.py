#!/usr/bin/python3
"""bench/attach — how long an injection stops a target, measured side by side in one run.

For each interpreter (default: Debian's static python3.11 and the newest pyenv one; --all for
the whole matrix) and each target shape (busy: main thread computing; idle: every thread
blocked), it runs tests/inject_fixture/target.py twice for the same duration:
  baseline   no injection: the ticker thread's longest gap between 1 ms sleeps
  injected   N ptrace injections of the fixture agent (build/inject-test), 100 ms apart
and prints the injection time (seize -> detach, as measured by inject-test) and the ticker's
longest gap in both runs.  A gdb injection is timed once per target for comparison.
Prints measurements only; asserts nothing.  Needs `make` (build/inject-test, the fixture .so).
With --against DIR (another build directory, e.g. one of an earlier commit made with
`make BUILD=DIR build/inject-test build/inject_fixture/libvcfixture.so`), each target is also
injected by DIR's inject-test right after, in the same run, and the ratio of the medians printed.

  /usr/bin/python3 bench/attach/bench_attach.py [--all] [-n N] [--against DIR]
"""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("VC_BUILD", os.path.join(ROOT, "build"))
TARGET = os.path.join(ROOT, "tests", "inject_fixture", "target.py")


def pythons(all_):
    out = subprocess.run([os.path.join(ROOT, "scripts", "find-pythons"), "--json"],
                         capture_output=True, text=True, check=True).stdout
    rows = [r for r in json.loads(out) if not r.get("root")]  # chroot ones: not yet
    for r in rows:
        r["id"] = "py%s%s" % (r["version"], "-static" if r["kind"] == "static" else "")
    if all_:
        return rows
    static = [r for r in rows if r["kind"] == "static"]
    shared = sorted((r for r in rows if r["kind"] == "shared"), key=lambda r: r["minor"])
    return static[:1] + shared[-1:]


def run_target(py, idle, seconds, inject_n, method="ptrace", build=BUILD):
    driver = os.path.join(build, "inject-test")
    fixture = os.path.join(build, "inject_fixture", "libvcfixture.so")
    args = [py["path"], TARGET, "--sleep", "1"] + (["--idle"] if idle else [])
    p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(p.stdout.readline().split()[1])
        time.sleep(0.3)
        times = []
        end = time.monotonic() + seconds
        for _ in range(inject_n):
            out = subprocess.run([driver, method, str(pid), fixture, "file:/dev/null",
                                  "--timeout-ms", "20000"], capture_output=True, text=True).stdout
            st, el = out.split()[0:2]
            if st == "status=0":
                times.append(int(el.split("=")[1]) / 1000.0)
            time.sleep(0.1)
        while time.monotonic() < end:
            time.sleep(0.05)
        p.stdin.write("report\n")
        p.stdin.flush()
        rep = json.loads(p.stdout.readline())
        return times, rep["max_gap_ms"]
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()


def row(label, times, gtimes, base_gap, gap, n):
    if not times:
        print("%-24s no injection succeeded (%d tried)" % (label, n))
        return float("nan")
    times.sort()
    print("%-24s %8.2f %8.2f %8.2f %8.1f | %12.2f %12.2f   (%d/%d ok)" % (
        label, statistics.median(times), times[int(len(times) * 0.9)], times[-1],
        gtimes[0] if gtimes else float("nan"), base_gap, gap, len(times), n))
    return statistics.median(times)


def main():
    n = int(sys.argv[sys.argv.index("-n") + 1]) if "-n" in sys.argv else 20
    against = sys.argv[sys.argv.index("--against") + 1] if "--against" in sys.argv else None
    for build in [BUILD] + ([against] if against else []):
        for f in ("inject-test", os.path.join("inject_fixture", "libvcfixture.so")):
            if not os.path.exists(os.path.join(build, f)):
                sys.exit("bench_attach: %s is missing: run `make` (or `make BUILD=%s "
                         "build/inject-test ...` for --against)" % (os.path.join(build, f), build))
    print("%-24s %8s %8s %8s %8s | %12s %12s" % (
        "interpreter shape", "med ms", "p90 ms", "max ms", "gdb ms", "gap base ms",
        "gap inj ms"))
    for py in pythons("--all" in sys.argv):
        for idle in (False, True):
            label = "%s %s" % (py["id"], "idle" if idle else "busy")
            secs = 0.3 + n * 0.13
            _, base_gap = run_target(py, idle, secs, 0)
            times, gap = run_target(py, idle, secs, n)
            gtimes, _ = run_target(py, idle, 0, 1, method="gdb")
            med = row(label, times, gtimes, base_gap, gap, n)
            if against:
                times, gap = run_target(py, idle, secs, n, build=against)
                other = row("  against", times, [], base_gap, gap, n)
                print("  ratio of medians, this / against: %.2f" % (med / other))


main()

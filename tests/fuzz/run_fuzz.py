#!/usr/bin/env python3
"""Runs the libFuzzer harnesses of tests/fuzz/ (fuzz.mk builds them): `make fuzz` calls it, and
tests/unit/test_fuzz.py uses its functions.

  run_fuzz.py [--build DIR] [--seconds N] [--replay] [NAME...]

Fuzzing (the default): each harness NAME (all when none is named) runs for N seconds under
`nice -n 10`, on its seeds (tests/fuzz/corpus/NAME, in the repo, only read) and what earlier
runs found (DIR/fuzz/corpus/NAME, where new inputs go).  A crash, leak, timeout or undefined
behaviour stops that harness; libFuzzer saves the input in tests/fuzz/regressions/NAME/ (which
`make test` replays: commit it with the fix).  At the end, a table: executions per second,
coverage (libFuzzer's cov: edges and ft: features), the corpus, the result.  Exit status 1 if
a harness failed or was not built.

--replay: no fuzzing, each harness runs every seed and regression input once (what `make
test` does).
"""
import argparse
import base64
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def names():
    """Every harness: tests/fuzz/fuzz_NAME.c but the shared code."""
    return sorted(f[5:-2] for f in os.listdir(HERE)
                  if f.startswith("fuzz_") and f.endswith(".c") and f != "fuzz_util.c")


def exe(build, name):
    return os.path.join(build, "fuzz", "fuzz_" + name)


def seed_dir(name):
    return os.path.join(HERE, "corpus", name)


def regression_dir(name):
    return os.path.join(HERE, "regressions", name)


def inputs(name):
    """The seeds and regression inputs of a harness, as paths."""
    out = []
    for d in (seed_dir(name), regression_dir(name)):
        if os.path.isdir(d):
            out += sorted(os.path.join(d, f) for f in os.listdir(d) if not f.startswith("."))
    return out


# libFuzzer's own limits: one input at most 25 s (a hang, not a slow input on a loaded machine:
# a NAMES id near the spool's 2^22 bound with --last rotating at every CHUNK takes seconds under
# ASan) and 2 GiB.
LIMITS = ["-timeout=25", "-rss_limit_mb=2048"]

# libFuzzer measures its memory as the peak RSS (getrusage's ru_maxrss), and Linux carries a
# process's peak across fork and execve: a harness started straight from a pytest that once
# held 3 GB "used" 2.9 GB before its first input and failed its 2 GiB limit (CI, 8 harnesses at
# once).  Run through /bin/sh, which forks (the command is not its last): the fork's peak is what
# the small shell holds.  Own session, so that a timeout kills the harness, not only the shell.
FRESH_PEAK = ["/bin/sh", "-c", '"$0" "$@"; exit $?']


def run_fresh(cmd, timeout):
    """subprocess.run(cmd) with the output captured, `cmd` started with a fresh peak RSS."""
    p = subprocess.Popen(FRESH_PEAK + list(cmd), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, errors="replace",
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, err = p.communicate()
        err += "\n(killed after %d s)" % timeout
        return subprocess.CompletedProcess(cmd, -9, out, err)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def replay(build, name, timeout=600):
    """Runs every seed and regression input of `name` once.  Returns (ok, output tail)."""
    files = inputs(name)
    if not files:
        return False, "no seed or regression input in %s" % seed_dir(name)
    r = run_fresh([exe(build, name)] + LIMITS + files, timeout)
    return r.returncode == 0, "\n".join(r.stderr.splitlines()[-40:])


STATUS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+)"
                    r"(?: lim: \d+)? exec/s: (\d+)")


def fuzz(build, name, seconds, work=None, extra=()):
    """Fuzzes `name` for `seconds`.  Returns a dict: ok, runs, exec_s, cov, ft, corpus (inputs
    and size), seconds, crash (the path of the saved input, or None), tail (of its output)."""
    work = work or os.path.join(build, "fuzz", "corpus", name)
    regress = regression_dir(name)
    os.makedirs(work, exist_ok=True)
    os.makedirs(regress, exist_ok=True)
    before = set(os.listdir(regress))
    # the harness's stdout and stderr closed (the offline tools print a line per malformed
    # input); libFuzzer's and the sanitizers' reports are kept; a slow input is no failure
    # (libFuzzer would save it next to the crashes)
    cmd = (["nice", "-n", "10", exe(build, name), "-max_total_time=%d" % seconds,
            "-print_final_stats=1", "-close_fd_mask=3", "-report_slow_units=100000",
            "-artifact_prefix=" + regress + "/"]
           + LIMITS + list(extra) + [work, seed_dir(name)])
    t0 = time.monotonic()
    r = run_fresh(cmd, seconds + 600)
    took = time.monotonic() - t0
    res = {"ok": r.returncode == 0, "runs": 0, "exec_s": 0, "cov": 0, "ft": 0, "corpus": "?",
           "seconds": took, "crash": None, "tail": "\n".join(r.stderr.splitlines()[-60:])}
    for line in r.stderr.splitlines():
        m = STATUS.match(line)
        if m:
            res.update(runs=int(m.group(1)), cov=int(m.group(2)), ft=int(m.group(3)),
                       corpus="%s/%s" % (m.group(4), m.group(5)), exec_s=int(m.group(6)))
        m = re.match(r"stat::average_exec_per_sec:\s+(\d+)", line)
        if m:
            res["exec_s"] = int(m.group(1))
        m = re.match(r"stat::number_of_executed_units:\s+(\d+)", line)
        if m:
            res["runs"] = int(m.group(1))
    new = sorted(set(os.listdir(regress)) - before)
    if new:
        res["crash"] = os.path.join(regress, new[0])
        res["ok"] = False
    return res


def crash_note(path):
    """What a log needs to rebuild a crashing input elsewhere (CI): its path, and its base64
    when it is small enough to copy from a log."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) > 4096:
        return "%s (%d bytes)" % (path, len(data))
    return "%s (%d bytes, base64: %s)" % (path, len(data), base64.b64encode(data).decode())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--replay", action="store_true")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    todo = a.names or names()
    failed = 0
    rows = []
    for name in todo:
        if not os.path.exists(exe(a.build, name)):
            print("fuzz %s: %s was not built (clang's libFuzzer runtime, libclang-rt-14-dev, "
                  "missing?)" % (name, exe(a.build, name)), flush=True)
            failed += 1
            continue
        if a.replay:
            ok, tail = replay(a.build, name)
            print("fuzz %s: %d inputs replayed: %s" % (name, len(inputs(name)),
                                                        "ok" if ok else "FAILED\n" + tail),
                  flush=True)
            failed += not ok
            continue
        print("fuzz %s: %d s..." % (name, a.seconds), flush=True)
        res = fuzz(a.build, name, a.seconds)
        rows.append((name, res))
        if not res["ok"]:
            failed += 1
            print(res["tail"])
            if res["crash"]:
                print("fuzz %s: the input is saved: %s" % (name, crash_note(res["crash"])))
    if rows:
        print("\n%-14s %8s %10s %7s %7s %7s %14s  %s" % ("harness", "seconds", "runs", "exec/s",
                                                         "cov", "ft", "corpus", "result"))
        for name, r in rows:
            print("%-14s %8.0f %10d %7d %7d %7d %14s  %s" % (
                name, r["seconds"], r["runs"], r["exec_s"], r["cov"], r["ft"], r["corpus"],
                "ok" if r["ok"] else "FAILED" + (": " + r["crash"] if r["crash"] else "")))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

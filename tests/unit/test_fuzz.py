"""The libFuzzer harnesses of tests/fuzz/ (SECURITY.md, "Fuzzing"): one per decoder of bytes
another user controls, built with clang's ASan+UBSan by tests/fuzz/fuzz.mk.

- every seed (tests/fuzz/corpus/NAME) and every regression input (tests/fuzz/regressions/NAME:
  what a fuzzing run found, each kept once fixed) is run once by its harness: seconds in all;
- in the slow group (CI runs it once), each harness fuzzes for VC_FUZZ_SECONDS (30) under
  `nice`; a crash, leak or undefined behaviour it finds is saved in tests/fuzz/regressions/NAME/
  and the failure names it (and prints it in base64 when small, to take it from a CI log).

Skipped, saying why, only when clang's libFuzzer runtime could not build the harnesses."""
import os
import subprocess
import sys

import pytest

from support.paths import TESTS, BUILD

sys.path.insert(0, os.path.join(TESTS, "fuzz"))
import run_fuzz  # noqa: E402  (tests/fuzz/run_fuzz.py, which `make fuzz` runs)

FUZZ_SECONDS = int(os.environ.get("VC_FUZZ_SECONDS", "30"))
HARNESSES = run_fuzz.names()


def _exe(name):
    path = run_fuzz.exe(BUILD, name)
    if not os.path.exists(path):
        pytest.skip("%s was not built: clang or its libFuzzer runtime (libclang-rt-14-dev) is "
                    "missing" % path)
    return path


@pytest.mark.parametrize("name", HARNESSES)
def test_seeds_pass(name):
    """The seeds, all in one run: none may crash, leak or hit undefined behaviour."""
    exe = _exe(name)
    seeds = [p for p in run_fuzz.inputs(name) if p.startswith(run_fuzz.seed_dir(name))]
    assert seeds, "no seeds in %s" % run_fuzz.seed_dir(name)
    r = run_fuzz.run_fresh([exe] + run_fuzz.LIMITS + seeds, 600)
    assert r.returncode == 0, "\n".join(r.stderr.splitlines()[-40:])


@pytest.mark.parametrize("name", HARNESSES)
def test_regressions_pass(name):
    """Each regression input in a run of its own, so that every one that fails is named."""
    exe = _exe(name)
    d = run_fuzz.regression_dir(name)
    files = sorted(os.listdir(d)) if os.path.isdir(d) else []
    failed = []
    for f in files:
        if f.startswith("."):
            continue
        r = run_fuzz.run_fresh([exe] + run_fuzz.LIMITS + [os.path.join(d, f)], 300)
        if r.returncode != 0:
            why = [l for l in r.stderr.splitlines() if l.startswith(("fuzz:", "SUMMARY", "=="))]
            failed.append("%s: %s" % (f, " | ".join(why[:4])))
    assert not failed, "%d of %d regression inputs fail:\n%s" % (len(failed), len(files),
                                                                  "\n".join(failed))


@pytest.mark.slow
@pytest.mark.parametrize("name", HARNESSES)
def test_fuzz(name, tmp_path):
    """VC_FUZZ_SECONDS of fuzzing from the seeds (a fresh corpus, under nice)."""
    _exe(name)
    res = run_fuzz.fuzz(BUILD, name, FUZZ_SECONDS, work=str(tmp_path / "corpus"))
    print("fuzz %s: %d runs in %.0f s, %d exec/s, cov %d, ft %d, corpus %s" % (
        name, res["runs"], res["seconds"], res["exec_s"], res["cov"], res["ft"], res["corpus"]))
    note = "; the input: " + run_fuzz.crash_note(res["crash"]) if res["crash"] else ""
    assert res["ok"], "fuzzing %s failed%s\n%s" % (name, note, res["tail"])


def test_a_harness_is_not_charged_with_the_memory_of_what_started_it():
    """libFuzzer's RSS limit reads the peak RSS, which Linux carries across fork and execve: a
    harness started straight from a pytest that once held 3 GB failed its 2 GiB limit before
    its first input (CI's slow group, every harness; an "out-of-memory" regression input that
    used 100 MB).  run_fresh starts each with a fresh peak."""
    name = HARNESSES[0]
    exe = _exe(name)
    seed = [p for p in run_fuzz.inputs(name) if p.startswith(run_fuzz.seed_dir(name))][:1]
    script = ("import sys; sys.path.insert(0, %r); import run_fuzz\n"
              "big = bytearray(2600 << 20)\n"
              "for i in range(0, len(big), 4096): big[i] = 1\n"
              "del big\n"
              "r = run_fuzz.run_fresh([%r] + run_fuzz.LIMITS + %r, 300)\n"
              "print(r.returncode); print(r.stderr[-2000:])\n"
              % (os.path.join(TESTS, "fuzz"), exe, seed))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       errors="replace", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split("\n", 1)[0] == "0", r.stdout[-2000:]
    assert "out-of-memory" not in r.stdout

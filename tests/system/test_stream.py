"""Streaming (`vcattach trace` sends what it records while it traces; issue 17): the target
holds only its window, vcattach spools next to OUT and builds OUT at the end; --last keeps the
final part; a full disk ends the trace with what it has; a killed vcattach leaves a spool that
`vcattach recover` turns into a trace.  Real targets (tests/targets/busy_service.py), real
files."""
import os
import re
import subprocess
import time

import pytest

from support.paths import TESTS, PYTHONS, VCATTACH
from support.proc import run_vcattach
from support.service import check_summary
from test_e2e_attach import FAULT_PYTHONS, wait_session
from vcattach import cvf

BUSY = os.path.join(TESTS, "targets", "busy_threads.py")


class Busy:
    """4 threads calling a one-line function: millions of calls a second."""

    def __init__(self, python):
        self.p = subprocess.Popen([python["path"], BUSY], stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline().strip() == "ready"
        self.pid = self.p.pid
        time.sleep(0.3)

    def rss_kib(self):
        with open("/proc/%d/status" % self.pid) as f:
            return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))

    def close(self):
        self.p.kill()
        self.p.wait(10)
        self.p.stdout.close()


@pytest.fixture
def busy():
    made = []

    def make(python):
        b = Busy(python)
        made.append(b)
        return b
    yield make
    for b in made:
        b.close()


def newest(minor_at_least=0):
    rows = [p for p in PYTHONS if p["minor"] >= minor_at_least and p["kind"] != "static"]
    return rows[-1] if rows else PYTHONS[-1]


@pytest.mark.parametrize("python", [pytest.param(p, id=p["id"]) for p in FAULT_PYTHONS])
def test_target_memory_is_bounded_by_the_window(python, busy, tmp_path):
    """A busy target traced for 5 s with a 4 MiB window: many times more calls than the window
    holds reach the trace, and the target's RSS grows by about the window, not the trace."""
    b = busy(python)
    before, peak = b.rss_kib(), 0
    out = tmp_path / "long.cvf"
    p = subprocess.Popen([VCATTACH, "--pid", str(b.pid), "-t", "5s", "-o", str(out),
                          "--buffer-mb", "4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    while p.poll() is None:
        peak = max(peak, b.rss_kib())
        time.sleep(0.05)
    stdout, stderr = p.communicate()
    r = subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
    events, _, _ = check_summary(r, out)
    window_calls = (4 << 20) // 24
    assert events > 20 * window_calls, stdout
    # the window, the key table and the interpreter's own noise; never the trace (> 100 MiB)
    assert (peak - before) / 1024 < 4 + 24, (before, peak)
    assert not os.path.exists(str(out) + ".spool")
    # such a trace as Chrome JSON would be gigabytes: refused without --force, with the ways out
    if os.path.getsize(str(out)) * 50 > 1 << 30:
        js = tmp_path / "long.json"
        c = run_vcattach("convert", out, "-o", js)
        assert c.returncode == 2 and "more than a viewer opens" in c.stderr, c.stderr
        assert "--from" in c.stderr and "svg" in c.stderr and not js.exists()


def test_last_keeps_only_the_final_window(busy, tmp_path):
    """--last 1s on a 4 s trace: every call kept ends in the final second (a call open since
    the attach is kept: it ends there), a "vcattach last" instant marks the cut, and the spool
    generations are gone."""
    b = busy(newest())
    out = tmp_path / "last.cvf"
    r = run_vcattach("--pid", b.pid, "-t", "4s", "--last", "1s", "-o", out)
    check_summary(r, out)
    ev = cvf.load(str(out))["traceEvents"]
    cut = [e for e in ev if e.get("name") == "vcattach last"]
    detach = [e for e in ev if e.get("name") == "vcattach detach"][0]["ts"]
    assert len(cut) == 1, [e.get("name") for e in ev if e.get("ph") == "i"]
    assert detach - 1.2e6 < cut[0]["ts"] < detach - 0.8e6, (cut[0]["ts"], detach)
    x = [e for e in ev if e.get("ph") == "X"]
    assert x and min(e["ts"] + e["dur"] for e in x) >= cut[0]["ts"] - 1
    assert len(x) > 1000
    assert not [f for f in os.listdir(tmp_path) if ".spool" in f]


def test_last_needs_a_shorter_duration(tmp_path):
    for args, why in ((["-t", "1s", "--last", "2s"], "shorter than -t"),
                      (["--subprocesses", "-t", "1s", "--last", "2s"], "shorter than -t"),
                      (["--last", "nonsense"], "")):
        r = run_vcattach("--pid", os.getpid(), "-o", tmp_path / "x.cvf", *args)
        assert r.returncode == 2 and why in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    r = run_vcattach("start", "--pid", os.getpid(), "-o", tmp_path / "x.cvf", "-t", "1s",
                     "--last", "2s")
    assert r.returncode == 2 and "shorter than -t" in r.stderr, r.stderr


def test_start_keeps_the_last_part(busy, tmp_path):
    """`start --last 1s`: the agent's own spool keeps two generations; the file `stop` has it
    write holds the calls that ended in the final second, marked by a "vcattach last"
    instant (it used to be refused: --last was for `trace` only)."""
    b = busy(newest())
    out = tmp_path / "s.cvf"
    r = run_vcattach("start", "--pid", b.pid, "-t", "60s", "--last", "1s", "-o", out)
    assert r.returncode == 0, r.stderr
    time.sleep(3)
    r = run_vcattach("stop", "--pid", b.pid)
    assert r.returncode == 0, r.stderr
    events = cvf.load(str(out))["traceEvents"]
    cut = [e["ts"] for e in events if e.get("name") == "vcattach last"]
    x = [e for e in events if e.get("ph") == "X"]
    assert cut and x, events[:5]
    ends = [e["ts"] + e["dur"] for e in x]
    assert min(ends) >= cut[0] - 1 and 0.99e6 <= max(ends) - cut[0] <= 1.01e6
    assert not [f for f in os.listdir(tmp_path) if f.startswith("s.cvf.")], os.listdir(tmp_path)


@pytest.fixture
def small_disk(tmp_path):
    d = tmp_path / "small"
    d.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(d)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root, or no mount rights)")
    yield d
    subprocess.run(["umount", "-l", str(d)], capture_output=True)


def test_full_disk_ends_the_trace_with_what_it_has(busy, small_disk):
    """A 40 MiB filesystem under a busy target: the spool stops while there is still room for
    OUT, the trace ends with a one-line reason and exit 1, and OUT holds what came (a valid
    trace, no spool left)."""
    b = busy(newest())
    out = small_disk / "o.cvf"
    r = run_vcattach("--pid", b.pid, "-t", "60s", "-o", out, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "is nearly full" in r.stderr and "the trace up to then is in %s" % out in r.stderr
    events = sum(1 for e in cvf.load(str(out))["traceEvents"] if e.get("ph") == "X")
    assert events > 100000
    assert sorted(os.listdir(small_disk)) == ["o.cvf"]
    wait_session(b.pid, running=False)


def test_recover_refuses_what_is_not_a_spool(tmp_path):
    bad = tmp_path / "bad.spool"
    bad.write_bytes(b"not a spool at all")
    r = run_vcattach("recover", bad, "-o", tmp_path / "o.cvf")
    assert r.returncode == 1 and "is not a vcattach spool" in r.stderr, r.stderr
    assert not (tmp_path / "o.cvf").exists()
    r = run_vcattach("recover", "-o", tmp_path / "o.cvf")
    assert r.returncode == 2 and "needs SPOOL" in r.stderr
    r = run_vcattach("recover", "--help")
    assert r.returncode == 0 and "OUT.spool" in r.stdout


def test_stale_spool_is_refused_then_replaced_with_force(busy, tmp_path):
    """A spool left by a killed run is the only copy of that trace: a new run with the same OUT
    refuses to start (nothing touched), and --force replaces it, saying so."""
    b = busy(newest())
    out = tmp_path / "o.cvf"
    (tmp_path / "o.cvf.spool").write_bytes(b"VCSPOOL1" + bytes(8))
    r = run_vcattach("--pid", b.pid, "-t", "200ms", "-o", out)
    assert r.returncode == 2 and "o.cvf.spool exists" in r.stderr, r.stderr
    r = run_vcattach("--pid", b.pid, "-t", "200ms", "-o", out, "--force")
    check_summary(r, out)
    assert "removed the spool an earlier run left" in r.stderr

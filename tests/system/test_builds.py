"""Interpreter builds beside the release GIL builds of the matrix:
  - free-threaded (3.13t/3.14t): refused in one line, exit 2, the target untouched.  Nothing
    installable here ships one, so the tests give vcattach what its detection reads: the name
    (test_preflight's python3.11t copy) and, here, a 3.14+ process whose _Py_DebugOffsets say
    free_threaded (tests/targets/marked_free_threaded.py); see docs/free-threading.md;
  - Py_TRACE_REFS builds (another object header): refused in one line, untouched;
  - Debian's debug builds (python3.X-dbg, Py_DEBUG): traced with their own agent build
    (libvcagent-py3XXd.so, made when their headers are installed), else with the release agent
    (same object layout); the target's own assertions armed, its work unchanged
    (docs/embedded-hosts.md).
"""
import os
import shutil
import subprocess
import time

import pytest

from support.builds import debug_pythons
from support.chroot import ChrootService
from support.paths import BUILD, CHROOT_PYTHONS, PYTHONS, TESTS, VCATTACH, root_workdir
from support.proc import assert_untouched
from support.service import assert_unharmed, check_summary
from support.targets import Service

MARKED = os.path.join(TESTS, "targets", "marked_free_threaded.py")


@pytest.mark.skipif(not CHROOT_PYTHONS, reason="no CPython 3.14+ (the sid test root is not made)")
@pytest.mark.parametrize("method", ["auto", "remote-exec", "ptrace"])
def test_free_threaded_from_debug_offsets_refused(method, tmp_path):
    py = CHROOT_PYTHONS[0]
    outside, inside = root_workdir(py, tmp_path, "vc-ft")
    shutil.copy2(MARKED, os.path.join(outside, "marked.py"))
    with open(os.path.join(outside, "out.log"), "w") as log:
        proc = subprocess.Popen(py["argv"] + [inside + "/marked.py", inside], stdout=log,
                                stderr=subprocess.STDOUT, cwd="/")
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(outside, "ready")):
            assert proc.poll() is None and time.monotonic() < deadline, \
                open(os.path.join(outside, "out.log")).read()
            time.sleep(0.02)
        out = tmp_path / "ft.cvf"
        r = subprocess.run([VCATTACH, "--pid", str(proc.pid), "-t", "1s", "-o", str(out),
                            "--method", method], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
        assert r.stdout == ""
        assert r.stderr == (
            "vcattach: pid %d runs a free-threaded CPython (3.%dt), which vcattach does not "
            "support yet (GIL builds 3.8 to 3.15 only; see docs/free-threading.md)\n"
            % (proc.pid, py["minor"] % 100)), r.stderr
        assert not out.exists()
        assert_untouched(proc.pid)
        with open("/proc/%d/maps" % proc.pid) as f:
            assert "vcagent" not in f.read()  # no agent was loaded
        open(os.path.join(outside, "finish"), "w").close()
        assert proc.wait(30) == 0
        with open(os.path.join(outside, "out.log")) as f:
            assert f.read().startswith("ok "), "the target's own check failed"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


DEBUG = debug_pythons()


@pytest.mark.skipif(not DEBUG, reason="no Debian debug interpreter (python3.11-dbg: "
                    "scripts/install-deps.sh; python3.14-dbg: the sid root, scripts/test-root)")
@pytest.mark.parametrize("py", [pytest.param(p, id=p["id"]) for p in DEBUG])
def test_debug_build_traced_and_unharmed(py, tmp_path):
    """busy_service.py (threads, sleeps, sockets, locks, a checksum) under a Py_DEBUG
    interpreter: traced, then it finishes with every check passed and the same result as an
    untraced run of the same debug interpreter."""
    svc = ChrootService(py, tmp_path) if py["root"] else Service(py, tmp_path / "svc")
    try:
        out = tmp_path / "dbg.cvf"
        r = subprocess.run([VCATTACH, "--pid", str(svc.pid), "-t", "1.5s", "-o", str(out)],
                           capture_output=True, text=True, timeout=120)
        events, threads, _ = check_summary(r, out)
        assert events > 0 and threads >= 4, r.stdout
        # the debug build's own agent when make built one (include/python3.Xd found), else
        # the release agent of the minor
        with open("/proc/%d/maps" % svc.pid) as f:
            maps = f.read()
        own = "libvcagent-py%dd.so" % py["minor"]
        expected = own if os.path.exists(os.path.join(BUILD, own)) else \
            "libvcagent-py%d.so" % py["minor"]
        assert "/" + expected in maps, expected
        report = svc.finish()
        assert svc.proc.returncode == 0, svc.output() if hasattr(svc, "output") else ""
        assert_unharmed(svc, report)
    finally:
        svc.close()


STATIC = [p for p in PYTHONS if p["kind"] == "static"]
# What a Py_TRACE_REFS build's libpython exports and a release one does not (target_python.c
# reads the ELF's .dynsym), with the Py_Version of the interpreter it stands beside.
TRACE_REFS_LIB = r"""
const unsigned long Py_Version = %#x;
void _Py_PrintReferences(void *interp, void *fp) { (void)interp; (void)fp; }
"""


@pytest.mark.skipif(not STATIC or not shutil.which("cc"),
                    reason="Debian's python3.11 or a C compiler is missing")
def test_trace_refs_build_refused(tmp_path):
    """A Python process whose C-API library exports Py_TRACE_REFS's _Py_PrintReferences (a
    libpython3.11.so made here and loaded with ctypes stands in for a --with-trace-refs build):
    one line, exit 2, nothing touched."""
    src = tmp_path / "trace_refs.c"
    src.write_text(TRACE_REFS_LIB % 0x030B02F0)
    lib = tmp_path / "libpython3.11.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, timeout=60)
    proc = subprocess.Popen([STATIC[0]["path"], "-c",
                             "import ctypes, sys, time; ctypes.CDLL(sys.argv[1]); "
                             "print('ready', flush=True); time.sleep(60)", str(lib)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        out = tmp_path / "t.cvf"
        r = subprocess.run([VCATTACH, "--pid", str(proc.pid), "-t", "1s", "-o", str(out)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
        assert r.stderr == (
            "vcattach: pid %d runs a CPython 3.11 built with Py_TRACE_REFS (--with-trace-refs), "
            "whose object header vcattach's agents do not share: trace a build without it "
            "(Py_DEBUG alone is fine)\n" % proc.pid), r.stderr
        assert not out.exists()
        assert_untouched(proc.pid)
        with open("/proc/%d/maps" % proc.pid) as f:
            assert "vcagent" not in f.read()
    finally:
        proc.kill()
        proc.wait(10)
        proc.stdout.close()

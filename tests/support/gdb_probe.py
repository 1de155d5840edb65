"""Whether this host's gdb can write a stopped thread's registers back, which every gdb call
into a target needs.

gdb before 14 reads and writes the XSAVE area with a size of its own (2696 bytes); a kernel
whose area is larger (AMX's tile configuration on Xeon Sapphire Rapids and later: 2816)
refuses the write with EFAULT, "Couldn't write extended state status: Bad address", and a
call made anyway leaves the thread broken.  vcattach's gdb method then refuses before calling
anything (injector/gdb_inject.py, VC_REGSFAIL); on such a host the tests that need gdb to call
into a target are skipped (conftest.py, with this reason), and
test_inject.py::test_gdb_refuses_when_it_cannot_write_registers checks the refusal instead.

The probe is gdb itself on a `sleep` of ours: xmm0's lowest bit flipped and flipped back, as
the injector's own check does.

gdb before 14 also reads and writes that area at Intel's offsets: on a CPU that keeps a
component elsewhere (AMD with AVX-512: the opmask at byte 832, not 1088) its calls do not bring
the thread's k0-7 home, and the gdb method refuses there too (VC_LAYOUT); the layout comes from
`inject-test old-gdb-layout` (CPUID, as the injector reads it), the version from gdb."""
import os
import re
import shutil
import subprocess

from support.paths import BUILD

_CACHE = {}


def gdb_register_problem():
    """None when gdb (if installed) writes registers here; else gdb's message."""
    if "why" in _CACHE:
        return _CACHE["why"]
    why = None
    if shutil.which("gdb"):
        sleeper = subprocess.Popen(["sleep", "60"])
        try:
            out = subprocess.run(
                ["gdb", "-nx", "-batch", "-p", str(sleeper.pid),
                 "-ex", "set var $xmm0.v2_int64[0] = $xmm0.v2_int64[0] ^ 1",
                 "-ex", "set var $xmm0.v2_int64[0] = $xmm0.v2_int64[0] ^ 1"],
                capture_output=True, text=True, timeout=60)
            text = out.stdout + out.stderr
            for line in text.splitlines():
                if "Couldn't write" in line or "Couldn't get" in line:
                    why = line.strip()
                    break
        finally:
            sleeper.kill()
            sleeper.wait()
    _CACHE["why"] = why
    return why


def gdb_layout_problem():
    """None unless this host's gdb is older than 14 and the CPU keeps an XSAVE component
    where such a gdb does not look; else what it misplaces."""
    if "layout" in _CACHE:
        return _CACHE["layout"]
    why = None
    driver = os.path.join(BUILD, "inject-test")
    if shutil.which("gdb") and os.path.exists(driver):
        version = subprocess.run(["gdb", "-nx", "-batch", "-ex", "python print(gdb.VERSION)"],
                                 capture_output=True, text=True, timeout=60).stdout.strip()
        m = re.match(r"(\d+)\.", version)
        if m and int(m.group(1)) < 14:
            out = subprocess.run([driver, "old-gdb-layout"], capture_output=True, text=True,
                                 timeout=60)
            if out.returncode == 1:
                why = "gdb %s: %s" % (version, out.stdout.strip())
    _CACHE["layout"] = why
    return why


def skip_reason():
    why = gdb_register_problem()
    if why is not None:
        return ("this host's gdb cannot write a thread's registers (%s: gdb < 14 on an AMX "
                "CPU); the gdb method refuses here, see "
                "test_gdb_refuses_when_it_cannot_write_registers" % why)
    why = gdb_layout_problem()
    return None if why is None else (
        "this host's gdb does not know the CPU's XSAVE layout (%s); the gdb method refuses "
        "here, see test_gdb_refuses_a_cpu_layout_it_does_not_know" % why)

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
the injector's own check does."""
import shutil
import subprocess

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


def skip_reason():
    why = gdb_register_problem()
    return None if why is None else (
        "this host's gdb cannot write a thread's registers (%s: gdb < 14 on an AMX CPU); "
        "the gdb method refuses here, see test_gdb_refuses_when_it_cannot_write_registers"
        % why)

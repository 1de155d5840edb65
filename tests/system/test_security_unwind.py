"""Issue 9 #4: a FIFO named like a maps entry.

A thread of the target is parked inside a library whose file is then deleted and replaced by
a FIFO named "libpark.so (deleted)", which is the path /proc/PID/maps shows for it.  Whoever
opens that path to unwind the thread blocks until someone writes to the FIFO: before the fix,
libunwind-ptrace did, with every thread of the target stopped and vcattach's termination
signals blocked (only SIGKILL ended it).  Now no file of the target is opened by path except
inside its root with O_NOFOLLOW|O_NONBLOCK, and only regular files; libunwind reads the unwind
tables from memory.  vcattach must finish within its bounds and the target go on unharmed.
"""
import os
import subprocess

import pytest

from support.paths import PYTHONS, VCATTACH

PARK_C = r"""
#include <poll.h>
void park(void) { for (;;) poll(0, 0, -1); }
"""

TARGET = r"""
import ctypes, sys, threading
lib = ctypes.CDLL(sys.argv[1])
threading.Thread(target=lib.park, name="parked", daemon=True).start()
print("ready", flush=True)
n = 0
while True:            # the main thread keeps running: the parked one is unwound first
    n += sum(range(100))
    if n % 1000 == 0 and sys.stdin in __import__("select").select([sys.stdin], [], [], 0)[0]:
        sys.stdin.readline()
        print("alive", threading.active_count(), flush=True)
"""


def proc_status(pid):
    with open("/proc/%d/status" % pid) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


@pytest.mark.parametrize("method", ["ptrace", "gdb"])
def test_fifo_in_place_of_a_mapped_library(tmp_path, method):
    python = PYTHONS[-1]
    so = tmp_path / "libpark.so"
    src = tmp_path / "park.c"
    src.write_text(PARK_C)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(so), str(src)], check=True)
    target = subprocess.Popen(python["argv"] + ["-c", TARGET, str(so)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    fifo = str(so) + " (deleted)"
    try:
        assert target.stdout.readline().strip() == "ready"
        os.unlink(so)
        os.mkfifo(fifo)
        with open("/proc/%d/maps" % target.pid) as f:
            assert fifo in f.read()
        out = tmp_path / "t.cvf"
        p = subprocess.Popen([VCATTACH, "--pid", str(target.pid), "-t", "500ms", "-o", str(out),
                              "--method", method, "-v"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, err = p.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            pytest.fail("vcattach blocked on the FIFO")
        if method == "ptrace":
            assert p.returncode == 0, err
            assert out.exists()
        else:  # gdb may refuse the module; it must still end within its bound
            assert p.returncode in (0, 1), err
        # nobody holds the FIFO open for reading (a blocked reader would be vcattach or gdb)
        with pytest.raises(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        st = proc_status(target.pid)
        assert target.poll() is None
        assert st["TracerPid"].strip() == "0" and st["State"][0] in "RS", st
        target.stdin.write("check\n")
        target.stdin.flush()
        line = target.stdout.readline().split()
        assert line[0] == "alive" and int(line[1]) >= 2, line  # main + parked (+ agent)
    finally:
        target.kill()
        target.wait()

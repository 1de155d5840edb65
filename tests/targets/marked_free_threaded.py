"""A CPython 3.14+ GIL build that says it is free-threaded where vcattach reads it: the
free_threaded field of the _Py_DebugOffsets at the start of _PyRuntime (the header remote
debuggers and PEP 768 rely on; the interpreter itself never reads it).  vcattach must refuse it
from that alone (its files are not named "…t").  Then it works, and checks its own work, until
the file DIR/finish appears; it prints "ok CHECKSUM" and exits 0, or fails loudly.
  marked_free_threaded.py DIR"""
import ctypes
import os
import sys
import time

work = sys.argv[1]
runtime = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
assert ctypes.string_at(runtime, 8) == b"xdebugpy", "no _Py_DebugOffsets at _PyRuntime"
flag = ctypes.c_uint64.from_address(runtime + 16)
assert flag.value == 0, "already a free-threaded build"
flag.value = 1


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


open(os.path.join(work, "ready"), "w").close()
rounds = 0
deadline = time.monotonic() + 120
while not os.path.exists(os.path.join(work, "finish")) and time.monotonic() < deadline:
    assert fib(15) == 610
    rounds += 1
    time.sleep(0.01)
flag.value = 0
print("ok", rounds, flush=True)

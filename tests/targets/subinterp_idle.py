"""A target for tests/system/test_subinterp.py (3.12+): one sub-interpreter under the main GIL (the
"legacy" config, as mod_wsgi's Py_NewInterpreter makes them; with --own, its own GIL, the
default config) that runs nothing while a trace stops, so it cannot unhook itself then
(agent/interps.c: its request waits until it next runs Python).  Driven by lines on stdin,
answering one JSON line each:

  (start)  creates A and prints "ready"
  work N   waits (at most 20 s) until A is hooked (our sys.monitoring tool in it), then calls
           work() N times in A; prints {"hooked": ..., "count": A's calls, "sum": ...}
  check    runs one statement in A, then prints {"tools": A's and main's sys.monitoring tool
           names, "count": A's calls, "sum": ...}, destroys A and exits
"""
import json
import sys

from subinterp_work import WORK, legacy_interpreters  # beside this file

interpreters, create = legacy_interpreters()
if "--own" in sys.argv:
    create = interpreters.create  # noqa: F811 (the default config: its own GIL)

WORK += """
import sys, time
def hooked():
    deadline = time.monotonic() + 20
    while sys.monitoring.get_tool(2) != "vcattach" and time.monotonic() < deadline:
        time.sleep(0.01)
    return sys.monitoring.get_tool(2) == "vcattach"
"""


def run(a, code):
    r = interpreters.run_string(a, code)
    if r is not None:  # 3.13+: the error is returned, not raised
        raise SystemExit(str(r))


def read(a, expr):
    """A value of A, through a pipe (run_string returns nothing)."""
    import os
    rd, wr = os.pipe()
    run(a, "import os, json\nos.write(%d, json.dumps(%s).encode())\n" % (wr, expr))
    os.close(wr)
    data = os.read(rd, 65536)
    os.close(rd)
    return json.loads(data)


def main():
    a = create()
    run(a, WORK)
    print("ready", flush=True)
    total = 0
    for line in sys.stdin:
        cmd = line.split()
        if cmd[:1] == ["work"]:
            run(a, "OK = hooked()\nS = sum(work(i) for i in range(%d))\n" % int(cmd[1]))
            total += read(a, "S")
            print(json.dumps({"hooked": read(a, "OK"), "count": read(a, "COUNT"),
                              "sum": total}), flush=True)
        elif cmd[:1] == ["check"]:
            run(a, "pass\n")  # A runs Python: our request left queued in it runs first
            tools = [read(a, "[sys.monitoring.get_tool(i) for i in range(6)]"),
                     [sys.monitoring.get_tool(i) for i in range(6)]]
            print(json.dumps({"tools": tools, "count": read(a, "COUNT"), "sum": total}),
                  flush=True)
            interpreters.destroy(a)
            return


main()

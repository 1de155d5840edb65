"""A target for tests/system/test_subinterp.py (3.12+): sub-interpreters under the main GIL (the
"legacy" config) made, run and destroyed back to back for SECONDS, so that the agent's visits
catch some while they are being made or ended.  Prints "ready", then {"made": N} at the end."""
import json
import sys
import time

from subinterp_work import legacy_interpreters  # beside this file

interpreters, create = legacy_interpreters()

CODE = "def work(x):\n    return x * 2\ns = sum(work(i) for i in range(2000))\n"


def main():
    print("ready", flush=True)
    made = 0
    deadline = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < deadline:
        a = create()
        interpreters.run_string(a, CODE)
        interpreters.destroy(a)
        made += 1
    print(json.dumps({"made": made}), flush=True)


main()

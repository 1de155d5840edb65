"""trace_demo.py — traces examples/demo_service.py in-process with the vcattach Python API.

    PYTHON tests/viewer/trace_demo.py OUT.cvf [SECONDS]

Starts the demo service (server, load generator, asyncio task) in this process, lets it warm
up, traces every thread for SECONDS (default 1) with `with vcattach.trace(OUT)`, stops the
service and prints the trace's Result as JSON.  Used by tests/system/test_viewer.py to get a real
trace of a real multi-threaded program; run by any interpreter of the matrix.
"""
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import demo_service  # noqa: E402
import vcattach  # noqa: E402


def main():
    out = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    # a request every 50 ms: each request is a thread of its own, keep their number small
    service = demo_service.DemoService(load_seconds=60, request_interval=0.05)
    service.start()
    try:
        time.sleep(0.3)
        with vcattach.trace(out) as session:
            time.sleep(seconds)
    finally:
        service.stop()
    result = getattr(session, "result", None)
    print(json.dumps({"requests": service.stats.requests,
                      "result": result._asdict() if result is not None else None}))


if __name__ == "__main__":
    main()

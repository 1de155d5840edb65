"""async_lookups.py — coroutines that suspend: each `lookup` awaits twice.

    PYTHON tests/targets/async_lookups.py OUT.cvf N [HOOK]

Runs N `lookup` coroutines one after another under vcattach.trace(OUT, hook=HOOK), each
awaiting asyncio.sleep(0.002) twice, and a generator `numbers` consumed to the end.  Used by
tests/unit/test_summary.py: `lookup` must count N calls (its resumes are slices, not calls).
"""
import asyncio
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import vcattach  # noqa: E402


async def lookup(i):
    await asyncio.sleep(0.002)
    await asyncio.sleep(0.002)
    return i


def numbers(n):
    for i in range(n):
        yield i


async def main(n):
    for i in range(n):
        await lookup(i)


def run():
    out, n = sys.argv[1], int(sys.argv[2])
    hook = sys.argv[3] if len(sys.argv) > 3 else "auto"
    loop = asyncio.new_event_loop()
    try:
        with vcattach.trace(out, hook=hook):
            loop.run_until_complete(main(n))
            sum(numbers(5))
    finally:
        loop.close()


if __name__ == "__main__":
    run()

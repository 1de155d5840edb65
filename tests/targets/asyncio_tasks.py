"""asyncio target for test_tasks.py: rounds of three concurrent "requests" (tasks named
req-N), each awaiting three sleeps and then gathering two child coroutines (tasks named
Task-N by asyncio), so that steps of different tasks interleave on the loop's thread.
A task's steps are known: handler runs 5 (its start, a resume after each sleep, one after
the gather), child 2 (its start, a resume after its sleep).  Prints "ready" once the loop
runs; runs until killed."""
import asyncio
import sys


async def child(i):
    await asyncio.sleep(0.002)
    return i


async def handler(i):
    for _ in range(3):
        await asyncio.sleep(0.001)
    await asyncio.gather(child(i), child(-i))


async def main():
    print("ready", flush=True)
    i = 1
    while True:
        await asyncio.gather(*(asyncio.create_task(handler(i + k), name="req-%d" % (i + k))
                               for k in range(3)))
        i += 3


if __name__ == "__main__":
    sys.setswitchinterval(0.001)
    asyncio.run(main())

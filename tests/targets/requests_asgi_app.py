"""The FastAPI app of tests/unit/test_requests.py under uvicorn: GET /item/N awaits a slow lookup
(asyncio.sleep 100 ms, a coroutine suspended between slices) when asked for (?slow=1)."""
import asyncio

from fastapi import FastAPI

app = FastAPI()


def fast_lookup(n):
    return sum(i * i for i in range(n))


async def slow_lookup(n):
    await asyncio.sleep(0.1)
    return fast_lookup(n)


@app.get("/item/{n}")
async def item(n: int, slow: int = 0):
    value = await slow_lookup(n) if slow else fast_lookup(n)
    return {"item": n, "value": value}

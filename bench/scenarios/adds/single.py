"""One timer a call, as a producer writes it first: sequential, and 64 callers at once.

Each row adds `n` timers (a payload of one small dict, due an hour ahead, string ids made
beforehand) to a fresh store on the private server; the floor adds as many members with plain
redis-py `ZADD` calls, one per timer, the same two ways, in the same run.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import redis.asyncio as aredis
from harness.machine import own_cpu_s

from tickwheel.model import Timer
from tickwheel.stores.redis import RedisStore
from tickwheel.stores.sqlite import SqliteStore

CONCURRENCY = 64


@dataclass
class Rate:
    label: str
    per_s: float
    client_us: float


async def each(
    call: Callable[[object], Awaitable[object]], items: Sequence[object], concurrency: int
) -> float:
    """Run `call(item)` for every item, one at a time or `concurrency` at once; return the
    seconds it took."""
    t0 = time.perf_counter()
    if concurrency == 1:
        for item in items:
            await call(item)
        return time.perf_counter() - t0
    gate = asyncio.Semaphore(concurrency)

    async def one(item: object) -> None:
        async with gate:
            await call(item)

    await asyncio.gather(*map(one, items))
    return time.perf_counter() - t0


async def raw_row(url: str, n: int, concurrency: int, how: str) -> Rate:
    client = aredis.Redis.from_url(url)
    members = [f"order-{uuid.uuid4().hex}" for _ in range(n)]

    async def zadd(member: object) -> object:
        return await client.zadd("raw", {str(member): 1_900_000_000_000})

    cpu0 = own_cpu_s()
    seconds = await each(zadd, members, concurrency)
    rate = Rate(f"raw redis-py ZADD, {how}", n / seconds, (own_cpu_s() - cpu0) / n * 1e6)
    await client.aclose()
    return rate


async def store_row(url: str, n: int, concurrency: int, how: str) -> Rate:
    store = RedisStore.from_url(url)
    await store.sync_clock()
    due = store.now_ms() + 3_600_000
    timers = [Timer(id=f"order-{uuid.uuid4().hex}", due_ms=due, payload={"n": i}) for i in range(n)]

    async def add(timer: object) -> object:
        assert isinstance(timer, Timer)
        return await store.add(timer)

    cpu0 = own_cpu_s()
    seconds = await each(add, timers, concurrency)
    rate = Rate(f"RedisStore.add, {how}", n / seconds, (own_cpu_s() - cpu0) / n * 1e6)
    await store.close()
    return rate


async def rates(url: str, n: int) -> list[Rate]:
    """The four rows: raw ZADD and `RedisStore.add`, sequential and 64 at once."""
    rows = []
    admin = aredis.Redis.from_url(url)
    try:
        for concurrency in (1, CONCURRENCY):
            how = "sequential" if concurrency == 1 else f"{concurrency} at once"
            await admin.flushall()
            rows.append(await raw_row(url, n, concurrency, how))
            await admin.flushall()
            rows.append(await store_row(url, n, concurrency, how))
    finally:
        await admin.aclose()
    return rows


async def sqlite_rates(directory: Path, n: int) -> list[Rate]:
    """`SqliteStore.add_many` (1,000 a call, the floor), then `add` sequential and 64 at once,
    each on a fresh file."""
    rows = []
    for label, concurrency in (("add_many of 1,000", 0), ("sequential", 1), ("64 at once", 64)):
        path = directory / f"{uuid.uuid4().hex}.db"
        store = SqliteStore(path)
        due = store.now_ms() + 3_600_000
        timers = [
            Timer(id=f"order-{uuid.uuid4().hex}", due_ms=due, payload={"n": i}) for i in range(n)
        ]
        cpu0, t0 = own_cpu_s(), time.perf_counter()
        if concurrency == 0:
            for start in range(0, n, 1000):
                await store.add_many(timers[start : start + 1000])
            seconds = time.perf_counter() - t0
        else:

            async def add(timer: object, store: SqliteStore = store) -> object:
                assert isinstance(timer, Timer)
                return await store.add(timer)

            seconds = await each(add, timers, concurrency)
        name = f"SqliteStore.{label}" if concurrency == 0 else f"SqliteStore.add, {label}"
        rows.append(Rate(name, n / seconds, (own_cpu_s() - cpu0) / n * 1e6))
        await store.close()
    return rows

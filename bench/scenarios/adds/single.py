"""One timer a call, as a producer writes it first: sequential, and 64 callers at once.

Each row adds `n` timers (a payload of one small dict, due an hour ahead, string ids made
beforehand) to a fresh store on the private server; the floor adds as many members with plain
redis-py `ZADD` calls, one per timer, the same two ways, in the same run, the two alternating
in rounds.
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


async def by_callers(
    call: Callable[[object], Awaitable[object]], items: Sequence[object], callers: int
) -> float:
    """Run `call(item)` for every item from `callers` tasks that each take the next item once
    their last call returned (producers that each add in turn, no task or semaphore per item);
    return the seconds it took."""
    t0 = time.perf_counter()
    left = iter(items)

    async def caller() -> None:
        for item in left:
            await call(item)

    await asyncio.gather(*(caller() for _ in range(callers)))
    return time.perf_counter() - t0


ROUNDS = 10  # raw and store calls alternate in this many rounds: load that comes and goes
# on a shared host falls on both alike


class Tally:
    """Seconds and CPU seconds one row has spent over its rounds."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.seconds = 0.0
        self.cpu_s = 0.0

    async def time(
        self,
        call: Callable[[object], Awaitable[object]],
        items: Sequence[object],
        concurrency: int,
        *,
        callers: bool = False,
    ) -> None:
        cpu0 = own_cpu_s()
        run = by_callers if callers else each
        self.seconds += await run(call, items, concurrency)
        self.cpu_s += own_cpu_s() - cpu0

    def rate(self, n: int) -> Rate:
        return Rate(self.label, n / self.seconds, self.cpu_s / n * 1e6)


async def rates(url: str, n: int) -> list[Rate]:
    """The four rows: raw ZADD and `RedisStore.add`, sequential and 64 at once, each pair's
    calls alternating in `ROUNDS` rounds."""
    rows = []
    admin = aredis.Redis.from_url(url)
    client = aredis.Redis.from_url(url)
    try:
        for concurrency in (1, CONCURRENCY):
            how = "sequential" if concurrency == 1 else f"{concurrency} at once"
            await admin.flushall()
            store = RedisStore.from_url(url)
            await store.sync_clock()
            due = store.now_ms() + 3_600_000
            ids = [f"order-{uuid.uuid4().hex}" for _ in range(n)]
            timers = [Timer(id=f"{i}-t", due_ms=due, payload={"n": k}) for k, i in enumerate(ids)]

            async def zadd(member: object) -> object:
                return await client.zadd("raw", {str(member): 1_900_000_000_000})

            async def add(timer: object, store: RedisStore = store) -> object:
                assert isinstance(timer, Timer)
                return await store.add(timer)

            raw = Tally(f"raw redis-py ZADD, {how}")
            ours = Tally(f"RedisStore.add, {how}")
            step = -(-n // ROUNDS)
            for start in range(0, n, step):
                await raw.time(zadd, ids[start : start + step], concurrency)
                await ours.time(add, timers[start : start + step], concurrency)
            await store.close()
            rows += [raw.rate(n), ours.rate(n)]
    finally:
        await admin.aclose()
        await client.aclose()
    return rows


async def sqlite_rates(directory: Path, n: int) -> list[Rate]:
    """`SqliteStore.add_many` (1,000 a call, the floor), then `add` sequential, 64 at once (a
    task per add, 64 at a time) and from 64 callers (tasks that each add in turn), each on a
    fresh file, the four alternating a thousand timers at a time."""
    hows = (
        ("add_many of 1,000", 0),
        ("add, sequential", 1),
        ("add, 64 at once", CONCURRENCY),
        (f"add, {CONCURRENCY} callers", -CONCURRENCY),
    )
    stores = [SqliteStore(directory / f"{uuid.uuid4().hex}.db") for _ in hows]
    tallies = [Tally(f"SqliteStore.{label}") for label, _ in hows]
    due = stores[0].now_ms() + 3_600_000
    timers = [
        [Timer(id=f"order-{uuid.uuid4().hex}", due_ms=due, payload={"n": i}) for i in range(n)]
        for _ in hows
    ]
    try:
        for start in range(0, n, 1000):
            for (_, concurrency), store, tally, mine in zip(
                hows, stores, tallies, timers, strict=True
            ):
                chunk = mine[start : start + 1000]

                async def add(timer: object, store: SqliteStore = store) -> object:
                    assert isinstance(timer, Timer)
                    return await store.add(timer)

                async def add_many(chunk: object, store: SqliteStore = store) -> object:
                    assert isinstance(chunk, list)
                    return await store.add_many(chunk)

                if concurrency == 0:
                    await tally.time(add_many, [chunk], 1)
                elif concurrency < 0:
                    await tally.time(add, chunk, -concurrency, callers=True)
                else:
                    await tally.time(add, chunk, concurrency)
    finally:
        for store in stores:
            await store.close()
    return [tally.rate(n) for tally in tallies]

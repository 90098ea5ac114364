"""What every engine part shares: the server, the sizes and settings, a fresh store per run."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import cast

import redis.asyncio as aredis
from harness.redis_server import OwnRedis
from harness.report import progress

from scenarios.engine.runs import Run, Sizes
from tickwheel.engine import Delivery, Metrics, WorkerSettings, consume
from tickwheel.errors import LeaseLost
from tickwheel.model import State, Timer
from tickwheel.stores.redis import RedisStore

PREFIX = "bench"
QUEUE = "default"
FLOOR_LIMIT = 1_000  # the floor's claim limit: WorkerSettings.batch's default
FLOOR_PIPELINE = 1_000  # ZADDs per round trip when the floor loads its timers
RAW_LEASES = "raw:leases"
BUSY_ADDS = 128  # single adds in flight at once where a run loads timers that way


class EngineBench:
    """The run's server, sizes and worker settings, and the helpers every part uses."""

    def __init__(self, server: OwnRedis, sizes: Sizes, settings: WorkerSettings) -> None:
        self.server = server
        self.sizes = sizes
        self.settings = settings
        self.admin = aredis.Redis.from_url(server.url)

    async def close(self) -> None:
        """Close the admin client."""
        await self.admin.aclose()

    @contextlib.asynccontextmanager
    async def store(self, synced: bool = True) -> AsyncIterator[RedisStore]:
        """A fresh store on an empty server, its clock synced unless not `synced` (then its
        first call syncs it)."""
        await self.admin.flushall()
        store = RedisStore.from_url(self.server.url, prefix=PREFIX)
        try:
            if synced:
                await store.sync_clock()
            yield store
        finally:
            await store.close()

    async def load(
        self, store: RedisStore, timers: list[Timer], what: str, singles: int = 0
    ) -> None:
        """Add the timers (the first `singles` by `BUSY_ADDS` concurrent single adds, the rest
        10,000 per add_many), then freeze them out of the collector's view."""
        t0 = time.perf_counter()
        for start in range(0, singles, BUSY_ADDS):
            await asyncio.gather(*map(store.add, timers[start : min(start + BUSY_ADDS, singles)]))
        for start in range(singles, len(timers), 10_000):
            await store.add_many(timers[start : start + 10_000])
        progress(f"  {what}: added {len(timers):,} in {time.perf_counter() - t0:.2f} s")
        gc.freeze()  # the producer's side: a worker process does not hold these timers

    async def done_count(self, store: RedisStore) -> int:
        """Return how many timers the store counts as done."""
        return (await store.stats()).counts[State.DONE]


async def ack_counted(run: Run, delivery: Delivery) -> None:
    """Ack a delivery, counting it in `run` unless its lease was lost."""
    try:
        await delivery.ack()
    except LeaseLost:
        return
    run.acked += 1


def acked_total(metrics: Metrics) -> int:
    """Return how many timers a Worker acked, from its metrics."""
    got = metrics.registry.get_sample_value("tickwheel_acked_total", {"queue": QUEUE})
    return int(got or 0)


def deliveries_of(store: RedisStore, settings: WorkerSettings) -> AsyncGenerator[Delivery, None]:
    """`consume(store, QUEUE)`, typed as the async generator it is (for `aclosing`)."""
    return cast(AsyncGenerator[Delivery, None], consume(store, QUEUE, settings=settings))

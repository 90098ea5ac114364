"""tickwheel's rows, run by the project's Python: the path a user writes first, a
``RedisStore`` with ``store.add`` per job and a ``consume`` loop acking each delivery; and the
in-process ``Scheduler``, the like-for-like of APScheduler's scheduler in memory."""

from __future__ import annotations

import asyncio
import contextlib

from peer_base import Peer
from run_log import record

from tickwheel.engine import consume
from tickwheel.model import Timer
from tickwheel.runtime import Scheduler
from tickwheel.stores.redis import RedisStore

BULK = 1000


class Tickwheel(Peer):
    package = "tickwheel"
    settings = "RedisStore.from_url(url); `async for d in consume(store): await d.ack()`"
    timing = "due_ms; consume claims ahead (lookahead 250 ms) and hands each over on its ms"

    def __init__(self, name: str, redis_url: str, postgres_url: str) -> None:
        super().__init__(name, redis_url, postgres_url)
        self.store = RedisStore.from_url(redis_url)
        self.worker: asyncio.Task[None] | None = None
        if name == "tickwheel-add_many":
            self.settings = f"store.add_many of {BULK:,} timers a call (enqueue column only)"

    async def open(self) -> None:
        await self.store.sync_clock()

    async def close(self) -> None:
        await self.stop()
        await self.store.close()

    def _timer(self, i: int, when_s: float | None) -> Timer:
        due_ms = self.store.now_ms() if when_s is None else round(when_s * 1000)
        return Timer(due_ms=due_ms, payload={"i": i})

    async def enqueue(self, i: int, when_s: float | None) -> None:
        await self.store.add(self._timer(i, when_s))

    async def enqueue_all(self, n: int, when_s: float | None) -> None:
        if self.name != "tickwheel-add_many":
            await super().enqueue_all(n, when_s)
            return
        for start in range(0, n, BULK):
            await self.store.add_many([self._timer(i, when_s) for i in range(start, start + BULK)])

    async def _consume(self) -> None:
        async with contextlib.aclosing(consume(self.store)) as deliveries:
            async for delivery in deliveries:
                record(delivery.timer.payload["i"])
                await delivery.ack()

    async def start(self) -> None:
        self.worker = asyncio.create_task(self._consume())

    async def stop(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker


class TickwheelScheduler(Peer):
    package = "tickwheel"
    settings = "Scheduler() defaults: in memory, in this process, worker threads cpu_count + 4"
    timing = "call_at(epoch s); its driver thread sleeps until the next due ms"
    enqueue_ahead = True

    async def open(self) -> None:
        self.scheduler: Scheduler | None = None

    async def reset(self) -> None:
        await self.stop()  # its timers are in memory: a new scheduler is an empty one

    async def enqueue(self, i: int, when_s: float | None) -> None:
        assert self.scheduler is not None, "enqueued with no scheduler started"
        if when_s is None:
            self.scheduler.call_later(0, record, i)
        else:
            self.scheduler.call_at(when_s, record, i)

    async def start(self) -> None:
        if self.scheduler is None:
            self.scheduler = Scheduler()

    async def stop(self) -> None:
        scheduler, self.scheduler = self.scheduler, None
        if scheduler is not None:
            scheduler.close()

    async def close(self) -> None:
        await self.stop()


def make(name: str, redis_url: str, postgres_url: str) -> Peer:
    if name == "tickwheel-scheduler":
        return TickwheelScheduler(name, redis_url, postgres_url)
    return Tickwheel(name, redis_url, postgres_url)

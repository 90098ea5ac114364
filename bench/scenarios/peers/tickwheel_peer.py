"""tickwheel's rows, run by the project's Python: the path a user writes first, a
``RedisStore`` with ``store.add`` per job and a ``consume`` loop acking each delivery."""

from __future__ import annotations

import asyncio
import contextlib

from peer_base import Peer
from run_log import record

from tickwheel.engine import consume
from tickwheel.model import Timer
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


def make(name: str, redis_url: str, postgres_url: str) -> Peer:
    return Tickwheel(name, redis_url, postgres_url)

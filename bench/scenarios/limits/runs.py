"""Firing a batch of timers through a `Worker` to the receiver, and what it cost."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.machine import HZ, own_cpu_s, pid_ticks

from scenarios.engine.receivers import ReceiverProcess
from tickwheel.callbacks import HttpTarget
from tickwheel.callbacks.settings import HttpSettings
from tickwheel.engine import Outcome, Target, Worker, WorkerSettings
from tickwheel.engine.limiter import host_key
from tickwheel.model import Callback, Timer
from tickwheel.stores import MemoryStore, Store
from tickwheel.stores.base import Limit
from tickwheel.stores.redis import RedisStore

ADD_CHUNK = 1000


class Timed:
    """A target that notes when each callback starts (epoch ms), after its grant, and fires it
    through `target`: a window of starts shows what the limiter let go, without the delivery's
    own jitter that a window of arrivals adds."""

    def __init__(self, target: Target, started: list[float]) -> None:
        self._target = target
        self._started = started

    async def fire(self, timer: Timer, attempt: int) -> Outcome:
        self._started.append(time.time_ns() / 1e6)
        return await self._target.fire(timer, attempt)

    async def close(self) -> None:
        await self._target.close()


@dataclass
class Fired:
    """What one run delivered: arrival and start times (epoch ms), CPU of this process and of
    Redis."""

    count: int
    arrivals: list[float] = field(default_factory=list)
    started: list[float] = field(default_factory=list)
    early: int = 0
    cpu_s: float = 0.0
    redis_cpu_s: float = 0.0
    deferred: int = 0
    first_due_ms: int = 0


def store_maker(backend: str, redis_url: str) -> Callable[[], Store]:
    """Return a function opening a fresh store of `backend` (Redis: a new key prefix)."""
    if backend == "memory":
        return MemoryStore
    return lambda: RedisStore.from_url(redis_url, prefix=f"bl{uuid.uuid4().hex[:8]}")


async def fire(
    stores: list[Store],
    receiver: ReceiverProcess,
    *,
    count: int,
    spread_s: float,
    limit: Limit | None,
    redis_pid: int | None,
    settle_s: float = 60.0,
    timed: bool = False,
) -> Fired:
    """Add `count` timers due evenly over `spread_s` (from 1 s ahead), run one `Worker` per
    store (the stores share their data: one per worker, as separate processes would) until
    the receiver has them all, and return what that cost; `timed` notes each start too."""
    first = stores[0]
    url = receiver.url
    host = host_key(url)
    assert host is not None
    if limit is not None:
        await first.set_limit(host, limit)
    start_ms = first.now_ms() + 1000
    step = spread_s * 1000 / count
    timers = [
        Timer(due_ms=start_ms + int(n * step), callback=Callback(url=f"{url}/t"))
        for n in range(count)
    ]
    for offset in range(0, count, ADD_CHUNK):
        await first.add_many(timers[offset : offset + ADD_CHUNK])
    await receiver.report()  # forget what earlier runs left
    fired = Fired(count, first_due_ms=start_ms)
    targets: list[Target] = [HttpTarget(HttpSettings(allow_private_targets=True)) for _ in stores]
    if timed:
        targets = [Timed(target, fired.started) for target in targets]
    workers = [
        Worker(store, target, WorkerSettings())
        for store, target in zip(stores, targets, strict=True)
    ]
    cpu_before, redis_before = own_cpu_s(), pid_ticks(redis_pid)
    tasks = [asyncio.create_task(worker.run()) for worker in workers]
    loop = asyncio.get_running_loop()
    give_up = loop.time() + spread_s + settle_s
    while len(fired.arrivals) < count and loop.time() < give_up:
        await asyncio.sleep(0.25)
        report = await receiver.report()
        fired.arrivals += report["at"]
        fired.early += report["early"]
    fired.cpu_s = own_cpu_s() - cpu_before
    fired.redis_cpu_s = (pid_ticks(redis_pid) - redis_before) / HZ
    for worker in workers:
        worker.stop()
    await asyncio.gather(*tasks)
    for worker in workers:
        fired.deferred += sum(worker.metrics.limit_deferred.values())
    for target in targets:
        await target.close()
    if limit is not None:
        await first.delete_limit(host)
    return fired

"""Schedules firing through a `Worker` and `HttpTarget`, beside one-shot timers at the same rate.

Each phase fires `count` callbacks evenly over one period of `every_s` at a receiver in another
process, and measures the period itself: arrivals, lateness at the receiver (arrival minus
``Tickwheel-Due``), and the CPU the bench process (the worker) and redis-server used for it.

- one-shot: `count` timers due over the period, added beforehand with ``add_many``;
- schedules: `count` schedules ``every: every_s``, their starts spread over a period; the
  worker runs while they are created and fires their first occurrences, and the second period,
  where every occurrence is a successor the worker's claims created, is the one measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import redis.asyncio as aredis
from harness.machine import HZ, own_cpu_s, pid_ticks
from harness.redis_server import OwnRedis
from harness.report import pct, progress

from scenarios.engine.receivers import ReceiverProcess
from scenarios.engine.timing import sleep_until, wall_ms
from tickwheel.callbacks.http import HttpTarget
from tickwheel.callbacks.settings import HttpSettings
from tickwheel.engine import Worker, WorkerSettings
from tickwheel.model import Callback, Timer
from tickwheel.schedule import Schedule
from tickwheel.stores.redis import RedisStore

PREFIX = "bench"
BODY = '{"report": "hourly", "tenant": 4711}'
CREATE_CONCURRENCY = 64
"""Schedules created at once: `add_schedule` one by one, as an API server's requests do."""
DRAIN_S = 5.0  # after a period, how long its last callbacks get to arrive


@dataclass
class Period:
    """What one measured period delivered and cost."""

    label: str
    count: int
    arrived: int = 0
    duplicates: int = 0
    late_ms: list[float] = field(default_factory=list)
    worker_cpu_s: float = 0.0
    redis_cpu_s: float = 0.0
    seconds: float = 0.0
    setup: str = ""
    add_us: float = 0.0  # CPU (client and Redis) to add each one beforehand, when it was added

    @property
    def cost_us(self) -> float:
        """CPU (worker and Redis) per arrival, in µs."""
        return (self.worker_cpu_s + self.redis_cpu_s) / max(self.arrived, 1) * 1e6

    @property
    def p99(self) -> float:
        return pct(self.late_ms, 0.99) if self.late_ms else float("nan")

    @property
    def p50(self) -> float:
        return pct(self.late_ms, 0.5) if self.late_ms else float("nan")


class ScheduleBench:
    """The private server, the receiver and a fresh store per phase."""

    def __init__(self, server: OwnRedis, receiver: ReceiverProcess) -> None:
        self.server = server
        self.receiver = receiver
        self.admin = aredis.Redis.from_url(server.url)
        self.callback = Callback(url=receiver.url + "/tick", body=BODY)

    async def close(self) -> None:
        await self.admin.aclose()

    @contextlib.asynccontextmanager
    async def store(self) -> AsyncIterator[RedisStore]:
        await self.admin.flushall()
        store = RedisStore.from_url(self.server.url, prefix=PREFIX)
        try:
            await store.sync_clock()
            yield store
        finally:
            await store.close()

    async def used_memory(self) -> int:
        info = await self.admin.info("memory")
        return int(info["used_memory"])

    def schedules(self, count: int, every_s: float, first_ms: int) -> list[Schedule]:
        period_ms = int(every_s * 1000)
        return [
            Schedule(
                id=f"report-{n:07d}",
                every_s=every_s,
                start_ms=first_ms + n * period_ms // count,
                callback=self.callback,
            )
            for n in range(count)
        ]

    async def create(self, store: RedisStore, schedules: list[Schedule]) -> float:
        """Create the schedules, `CREATE_CONCURRENCY` at a time; return the seconds it took."""
        t0 = time.perf_counter()
        slots = asyncio.Semaphore(CREATE_CONCURRENCY)

        async def one(schedule: Schedule) -> None:
            async with slots:
                await store.add_schedule(schedule)

        await asyncio.gather(*map(one, schedules))
        return time.perf_counter() - t0

    async def memory(self, count: int, every_s: float) -> tuple[float, float]:
        """Redis bytes per pending one-shot timer and per schedule (with its pending
        occurrence), each with the same callback, nothing firing."""
        far = int(wall_ms()) + 3_600_000
        async with self.store() as store:
            before = await self.used_memory()
            timers = [
                Timer(due_ms=far + n * int(every_s * 1000) // count, callback=self.callback)
                for n in range(count)
            ]
            for start in range(0, count, 10_000):
                await store.add_many(timers[start : start + 10_000])
            one_shot = (await self.used_memory() - before) / count
        async with self.store() as store:
            before = await self.used_memory()
            await self.create(store, self.schedules(count, every_s, far))
            scheduled = (await self.used_memory() - before) / count
        return one_shot, scheduled

    async def one_shot(self, count: int, every_s: float) -> Period:
        """`count` timers due evenly over one period, added beforehand, fired and measured."""
        period = Period("one-shot timers", count)
        async with self.store() as store:
            first = int(wall_ms()) + 3_000 + count // 20
            period_ms = int(every_s * 1000)
            timers = [
                Timer(due_ms=first + n * period_ms // count, callback=self.callback)
                for n in range(count)
            ]
            cpu0, ticks0, t0 = own_cpu_s(), pid_ticks(self.server.pid), time.perf_counter()
            for start in range(0, count, 10_000):
                await store.add_many(timers[start : start + 10_000])
            add_cpu = own_cpu_s() - cpu0 + (pid_ticks(self.server.pid) - ticks0) / HZ
            period.setup = (
                f"added with add_many in {time.perf_counter() - t0:.1f} s, "
                f"{add_cpu / count * 1e6:.0f} µs CPU each"
            )
            period.add_us = add_cpu / count * 1e6
            async with self.working(store):
                await self.measure(period, first, period_ms)
        return period

    async def scheduled(self, count: int, every_s: float) -> Period:
        """`count` schedules every period; the second period is measured."""
        period = Period("schedules (2nd period)", count)
        period_ms = int(every_s * 1000)
        async with self.store() as store, self.working(store):
            first = int(wall_ms()) + 5_000
            took = await self.create(store, self.schedules(count, every_s, first))
            period.setup = (
                f"created one by one ({CREATE_CONCURRENCY} at a time) in {took:.1f} s "
                f"while the worker fired"
            )
            if wall_ms() > first + period_ms:
                progress("  creating took longer than a period: the measured one overlaps it")
            await self.measure(period, first + period_ms, period_ms)
        return period

    @contextlib.asynccontextmanager
    async def working(self, store: RedisStore) -> AsyncIterator[None]:
        """A worker with default settings firing HTTP callbacks for the block."""
        target = HttpTarget(HttpSettings(allow_private_targets=True))
        worker = Worker(store, target, WorkerSettings())
        running = asyncio.create_task(worker.run())
        try:
            yield
        finally:
            worker.stop()
            await running
            await target.close()

    async def measure(self, period: Period, start_ms: int, period_ms: int) -> None:
        """Count what arrives for the period from `start_ms` and what it cost."""
        await sleep_until(start_ms - 200)
        await self.receiver.report()  # the receiver counts afresh from here
        cpu0, ticks0, t0 = own_cpu_s(), pid_ticks(self.server.pid), time.perf_counter()
        progress(f"  {period.label}: measuring {period_ms / 1000:g} s")
        await sleep_until(start_ms + period_ms - 200)
        period.worker_cpu_s = own_cpu_s() - cpu0
        period.redis_cpu_s = (pid_ticks(self.server.pid) - ticks0) / HZ
        period.seconds = time.perf_counter() - t0
        report = await self.receiver.report()
        period.arrived = report["unique"]
        period.duplicates = report["dups"]
        period.late_ms = report["late"]
        await asyncio.sleep(DRAIN_S)

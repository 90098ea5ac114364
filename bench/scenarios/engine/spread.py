"""Part (b): N timers due evenly over a span; lateness by the store clock, early firings."""

from __future__ import annotations

import asyncio
import contextlib

import redis.asyncio as aredis
from harness.raw_floor import RAW_CLAIM_LUA, RAW_DUE

from scenarios.engine.context import (
    BUSY_ADDS,
    FLOOR_LIMIT,
    FLOOR_PIPELINE,
    RAW_LEASES,
    EngineBench,
    ack_counted,
    acked_total,
    deliveries_of,
)
from scenarios.engine.instrument import instrument
from scenarios.engine.progress_bar import tracking
from scenarios.engine.runs import Late, Run
from scenarios.engine.timing import sleep_until, wall_ms
from tickwheel.engine import ACKED, Metrics, Outcome, Worker
from tickwheel.model import Callback, Timer
from tickwheel.stores.redis import RedisStore


def spread_timers(bench: EngineBench, now_ms: int, payload: bool) -> list[Timer]:
    """Return the spread's timers, due evenly over the span: payloads (for consume) or a callback."""
    n, span_ms = bench.sizes.spread, int(bench.sizes.spread_s * 1000)
    first = now_ms + 1_500 + n // 10
    callback = None if payload else Callback(url="http://127.0.0.1:9/unused")
    return [
        Timer(
            due_ms=first + i * span_ms // n,
            payload={"n": i} if payload else None,
            callback=callback,
        )
        for i in range(n)
    ]


async def floor_spread(bench: EngineBench) -> Run:
    """The floor: a Lua claim of what is due, polled every ms, lateness by this host's clock."""
    n, span_ms = bench.sizes.spread, int(bench.sizes.spread_s * 1000)
    run = Run("raw floor: Lua claim of what is due, polled every ms", n, late=Late())
    assert run.late is not None
    await bench.admin.flushall()
    client = aredis.Redis.from_url(bench.server.url)
    try:
        claim = client.register_script(RAW_CLAIM_LUA)
        first = int(wall_ms()) + 1_000 + n // 20
        dues = [first + i * span_ms // n for i in range(n)]
        members = [f"{due}:{i}" for i, due in enumerate(dues)]
        for start in range(0, n, FLOOR_PIPELINE):
            pipe = client.pipeline(transaction=False)
            for n_ in range(start, min(start + FLOOR_PIPELINE, n)):
                pipe.zadd(RAW_DUE, {members[n_]: dues[n_]})
            await pipe.execute()
        await claim(keys=[RAW_DUE, RAW_LEASES], args=[0, 1, 0])
        run.due_ms = first
        async with tracking("spread: raw floor", n, lambda: run.acked) as bar:
            run.bars.append(bar)
            await sleep_until(first)
            while run.acked < n:
                now = int(wall_ms())
                got = await claim(keys=[RAW_DUE, RAW_LEASES], args=[now, FLOOR_LIMIT, now + 30_000])
                if got:
                    at = int(wall_ms())
                    for member in got:
                        run.late.add(at, int(member.split(b":", 1)[0]))
                    run.acked += await client.zrem(RAW_LEASES, *got)
                else:
                    await asyncio.sleep(0.001)
        run.seconds = wall_ms() / 1000 - dues[-1] / 1000
        run.done = run.acked
    finally:
        await client.aclose()
    return run


async def worker_spread(bench: EngineBench) -> Run:
    """A Worker firing the spread through a recording in-process Target."""
    n = bench.sizes.spread
    run = Run("Worker, recording in-process Target", n, late=Late())
    async with bench.store() as store:
        timers = spread_timers(bench, store.now_ms(), payload=False)
        await bench.load(store, timers, "spread: Worker")
        target = Recorder(store, run)
        metrics = Metrics()
        worker = Worker(store, target, bench.settings, metrics=metrics)
        run.calls = calls = instrument(store, n)
        running = asyncio.create_task(worker.run())

        try:
            async with (
                asyncio.timeout(bench.sizes.spread_s + 120),
                tracking("spread: Worker", n, lambda: calls.acked) as bar,
            ):
                run.bars.append(bar)
                await calls.all_acked.wait()
        finally:
            worker.stop()
            await running
        run.acked = acked_total(metrics)
        run.seconds = wall_ms() / 1000 - timers[-1].due_ms / 1000
        run.done = await bench.done_count(store)
        run.duplicates = target.duplicates
    return run


async def consume_spread(bench: EngineBench, busy_sync: bool = False) -> Run:
    """consume() the spread in the loop a user writes first: each ack awaited.

    With `busy_sync` the store's clock is first synced by one of `BUSY_ADDS` single adds in
    flight (a process that adds as it starts), not on an idle connection.
    """
    n = bench.sizes.spread
    label = "consume(): await d.ack() each"
    if busy_sync:
        label += f", clock first synced under {BUSY_ADDS} adds in flight"
    run = Run(label, n, late=Late())
    assert run.late is not None
    async with bench.store(synced=not busy_sync) as store:
        timers = spread_timers(bench, store.now_ms(), payload=True)
        singles = min(n, 10 * BUSY_ADDS) if busy_sync else 0
        await bench.load(store, timers, "spread: consume", singles)
        run.calls = instrument(store, n)
        seen: set[str] = set()

        async with (
            asyncio.timeout(bench.sizes.spread_s + 120),
            tracking("spread: consume", n, lambda: len(seen)) as bar,
            contextlib.aclosing(deliveries_of(store, bench.settings)) as deliveries,
        ):
            run.bars.append(bar)
            async for delivery in deliveries:
                run.late.add(store.now_ms(), delivery.timer.due_ms)
                run.duplicates += delivery.timer.id in seen
                seen.add(delivery.timer.id)
                await ack_counted(run, delivery)
                if len(seen) == n:
                    break
        run.seconds = wall_ms() / 1000 - timers[-1].due_ms / 1000
        run.done = await bench.done_count(store)
    return run


class Recorder:
    """A Target that records lateness by the store clock and acks at once (no I/O)."""

    def __init__(self, store: RedisStore, run: Run) -> None:
        self._store = store
        self._run = run
        self._seen: set[str] = set()
        self.duplicates = 0

    async def fire(self, timer: Timer, attempt: int) -> Outcome:
        """Record the lateness and any duplicate, then ack."""
        assert self._run.late is not None
        self._run.late.add(self._store.now_ms(), timer.due_ms)
        self.duplicates += timer.id in self._seen
        self._seen.add(timer.id)
        return ACKED

    async def close(self) -> None:
        """Nothing to release."""

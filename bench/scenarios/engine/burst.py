"""Part (a): N timers due at one instant, from that instant until all are acked."""

from __future__ import annotations

import asyncio
import contextlib
import cProfile

import redis.asyncio as aredis
from harness.raw_floor import RAW_CLAIM_LUA, RAW_DUE
from harness.report import progress

from scenarios.engine.context import (
    FLOOR_LIMIT,
    FLOOR_PIPELINE,
    RAW_LEASES,
    EngineBench,
    ack_counted,
    deliveries_of,
)
from scenarios.engine.instrument import instrument
from scenarios.engine.progress_bar import tracking
from scenarios.engine.runs import Run
from scenarios.engine.timing import CpuSnapshot, sleep_until, wall_ms
from tickwheel.model import Timer

WARM_UP = 1_000
"""Timers due now a warm consumer handles before the burst: its pace is known by then."""


def burst_lead_ms(bench: EngineBench) -> int:
    """Return how far ahead the burst is due: time to build and add the timers, then a
    lookahead's idle before the claims start."""
    return 1_500 + bench.settings.lookahead_ms + bench.sizes.burst // 10


async def floor_burst(bench: EngineBench, variadic: bool) -> Run:
    """The floor: pipelined ZADDs beforehand, then Lua claims and ZREM acks from the due instant."""
    n = bench.sizes.burst
    label = "raw floor: Lua claim + pipelined ZREM per id" + (
        "" if not variadic else " (info: one variadic ZREM per claim)"
    )
    run = Run(label, n)
    await bench.admin.flushall()
    client = aredis.Redis.from_url(bench.server.url)
    try:
        claim = client.register_script(RAW_CLAIM_LUA)
        due = int(wall_ms()) + 1_000 + n // 20
        ids = [f"t{i:07d}" for i in range(n)]
        for start in range(0, n, FLOOR_PIPELINE):
            pipe = client.pipeline(transaction=False)
            for member in ids[start : start + FLOOR_PIPELINE]:
                pipe.zadd(RAW_DUE, {member: due})
            await pipe.execute()
        await claim(keys=[RAW_DUE, RAW_LEASES], args=[0, 1, 0])  # loads the script
        run.due_ms = due
        at_due = CpuSnapshot.at(due, bench.server.pid)
        await sleep_until(due)
        while run.acked < n:
            now = int(wall_ms())
            got = await claim(keys=[RAW_DUE, RAW_LEASES], args=[now, FLOOR_LIMIT, now + 30_000])
            if run.first_ms is None:
                run.first_ms = wall_ms()
            pipe = client.pipeline(transaction=False)
            if variadic:
                pipe.zrem(RAW_LEASES, *got)
            else:
                for member in got:
                    pipe.zrem(RAW_LEASES, member)
            run.acked += sum(await pipe.execute())
        run.last_ms = wall_ms()
        run.seconds = wall_ms() / 1000 - due / 1000
        run.cpu = at_due.used()
        run.done = run.acked
    finally:
        await client.aclose()
    return run


async def consume_burst(
    bench: EngineBench,
    batched: bool,
    profiler: cProfile.Profile | None = None,
    *,
    warm: bool = False,
) -> Run:
    """consume() the burst, each ack awaited or started as a task (`batched`); `warm`: by a
    consumer that has handled `WARM_UP` timers due now first, as one that has run before."""
    n = bench.sizes.burst
    label = "consume(): ack tasks, acks batch" if batched else "consume(): await d.ack() each"
    if warm:
        label += f", after {WARM_UP:,} handled"
    run = Run(label, n)
    async with bench.store() as store:
        due = store.now_ms() + burst_lead_ms(bench)
        callback = None  # a Python consumer's queue: timers carry a payload, no callback
        timers = [Timer(due_ms=due, payload={"n": i}, callback=callback) for i in range(n)]
        await bench.load(store, timers, label)
        warming = WARM_UP if warm else 0
        if warming:  # its claims are counted with the burst's (`run.calls`)
            run.extra["warm_up"] = warming
            now = store.now_ms()
            await store.add_many([Timer(due_ms=now, payload={"warm": i}) for i in range(warming)])
        if store.now_ms() > due - bench.settings.lookahead_ms:
            progress("  warning: timers added too late for the lookahead: increase the lead")
        run.due_ms = due
        run.calls = instrument(store, n)
        seen: set[str] = set()
        tasks: list[asyncio.Task[None]] = []
        at_due = CpuSnapshot.at(due, bench.server.pid)

        if profiler is not None:
            profiler.enable()
        async with (
            asyncio.timeout(due / 1000 - wall_ms() / 1000 + 120),
            tracking(f"burst: {label}", n, lambda: run.acked) as bar,
            contextlib.aclosing(deliveries_of(store, bench.settings)) as deliveries,
        ):
            run.bars.append(bar)
            async for delivery in deliveries:
                if warming:
                    warming -= 1
                    await delivery.ack()
                    continue
                if run.first_ms is None:
                    run.first_ms = wall_ms()
                timer_id = delivery.timer.id
                run.duplicates += timer_id in seen
                seen.add(timer_id)
                if batched:
                    tasks.append(asyncio.create_task(ack_counted(run, delivery)))
                else:
                    await ack_counted(run, delivery)
                if len(seen) == n:
                    run.last_ms = wall_ms()
                    # settle before leaving the loop: leaving hands back what is unsettled
                    await asyncio.gather(*tasks)
                    break
        run.seconds = wall_ms() / 1000 - due / 1000
        if profiler is not None:
            profiler.disable()
        run.cpu = at_due.used()
        run.done = await bench.done_count(store) - int(run.extra.get("warm_up", 0))
    return run

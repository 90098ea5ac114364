"""Part (c): a Worker with HttpTarget calling a receiver in another process."""

from __future__ import annotations

import asyncio
import cProfile
import math
import time

from harness.machine import HZ, OtherLoad, own_cpu_s, pid_ticks
from harness.report import pct, progress

from scenarios.engine.context import EngineBench, acked_total
from scenarios.engine.instrument import instrument
from scenarios.engine.progress_bar import tracking
from scenarios.engine.receivers import (
    LEAN_RECEIVER_SOURCE,
    TICKWHEEL_RECEIVER_SOURCE,
    ReceiverProcess,
    receiving,
)
from scenarios.engine.runs import Run, Sizes
from scenarios.engine.timing import sleep_until
from tickwheel.callbacks.http import HttpTarget
from tickwheel.callbacks.settings import HttpSettings
from tickwheel.engine import Metrics, Worker
from tickwheel.model import Callback, Timer

URL_PATH = "/callback"
BODY = '{"order_id": 123456, "action": "expire"}'


async def http_run(
    bench: EngineBench,
    receiver: ReceiverProcess,
    count: int,
    span_s: float,
    label: str,
    profiler: cProfile.Profile | None = None,
) -> Run:
    """Fire `count` timers due evenly over `span_s` (at once when 0) through HttpTarget."""
    run = Run(label, count)
    async with bench.store() as store:
        callback = Callback(url=receiver.url + URL_PATH, body=BODY)
        first = store.now_ms() + 1_500 + count // 10
        span_ms = int(span_s * 1000)
        timers = [
            Timer(due_ms=first + i * span_ms // count, callback=callback) for i in range(count)
        ]
        await bench.load(store, timers, label)
        await receiver.report()  # start counting from here
        metrics = Metrics()
        target = HttpTarget(HttpSettings(allow_private_targets=True))
        worker = Worker(store, target, bench.settings, metrics=metrics)
        run.calls = calls = instrument(store, count)

        await sleep_until(first - 1_100)  # the worker idles until its lookahead anyway
        ticks0 = {"receiver": pid_ticks(receiver.pid), "redis": pid_ticks(bench.server.pid)}
        cpu0, t0 = own_cpu_s(), time.perf_counter()
        if profiler is not None:
            profiler.enable()
        running = asyncio.create_task(worker.run())
        try:
            async with (
                asyncio.timeout(span_s + 120),
                tracking(f"http: {label}", count, lambda: calls.acked) as bar,
            ):
                run.bars.append(bar)
                await calls.all_acked.wait()
        finally:
            if profiler is not None:
                profiler.disable()
            wall_s = time.perf_counter() - t0
            run.cpu["bench"] = (own_cpu_s() - cpu0) / wall_s
            run.extra["cpu_us"] = (own_cpu_s() - cpu0) / count * 1e6
            for name, pid in (("receiver", receiver.pid), ("redis", bench.server.pid)):
                run.cpu[name] = (pid_ticks(pid) - ticks0[name]) / HZ / wall_s
            worker.stop()
            await running
            await target.close()
        run.acked = acked_total(metrics)
        run.done = await bench.done_count(store)
        report = await receiver.report()
        late = report["late"]
        run.extra |= {
            "arrived": report["unique"],
            "p50": pct(late, 0.5) if late else math.nan,
            "p99": pct(late, 0.99) if late else math.nan,
            "max": max(late) if late else math.nan,
            "early": sum(1 for x in late if x < 0),
            "offered": count / span_s if span_s else math.inf,
        }
        run.duplicates = report["dups"]
        run.due_ms = first
        if report["last"] is not None:
            # sustained: what arrived over the time from the first due instant to the last
            # arrival (at least the span the timers were due over)
            run.seconds = max(report["last"] - first, span_ms) / 1000
    return run


async def http_part(
    bench: EngineBench, sizes: Sizes, meter: OtherLoad, whole: OtherLoad
) -> list[Run]:
    """Part (c): the target rate and the issue's rate on the lean receiver, everything due at
    once (capacity), then the target rate again on tickwheel's own Receiver (info)."""
    n, span = sizes.http, sizes.http_s
    slower = n * 5 // 6  # the rate exactly (5,000/s in a full run)
    runs = []
    with receiving(LEAN_RECEIVER_SOURCE, meter, whole) as receiver:
        progress(f"(c) HTTP: {n:,} due over {span:g} s, receiver {receiver.pid}")
        runs.append(await http_run(bench, receiver, n, span, f"{n:,} over {span:g} s"))
        progress(f"(c) HTTP: {slower:,} due over {span:g} s ({slower / span:,.0f}/s, info)")
        runs.append(await http_run(bench, receiver, slower, span, f"{slower:,} over {span:g} s"))
        progress(f"(c) HTTP: {n:,} due at once (capacity, info)")
        runs.append(await http_run(bench, receiver, n, 0.0, f"{n:,} at once"))
    with receiving(TICKWHEEL_RECEIVER_SOURCE, meter, whole) as receiver:
        label = f"{n:,} over {span:g} s → tickwheel Receiver"
        progress(f"(c) HTTP: {label} (aiohttp, info)")
        runs.append(await http_run(bench, receiver, n, span, label))
    return runs

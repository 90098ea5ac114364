"""Engine benchmark (issue 4): `consume` and `Worker` on RedisStore beside a raw Redis floor.

Run ``python bench/engine.py`` (``--quick`` for a smoke run under 30 s, ``--markdown`` to also
print the tables as Markdown, ``--markdown PATH`` to write them to a file, ``--profile`` to add
cProfile tables of a burst and of the HTTP phase, ``--loop asyncio`` to leave uvloop out).
``tickwheel bench`` runs this script with the same arguments.

It starts its own ``redis-server`` on a free loopback port in a temp dir (no persistence),
FLUSHALLs only that server between phases and stops it by pid at the end. Parts:

a. burst: N timers due at one instant, added beforehand, consumed by ``consume()`` (acks
   awaited one by one, as a natural consumer writes it, and acks left to batch), against the
   floor (pipelined ZADD, a Lua claim loop, pipelined ZREM acks) from the due instant on;
b. spread: N timers spread evenly over a span, fired by a `Worker` through a recording
   in-process Target, and through ``consume()``: lateness by the store clock, early firings;
c. HTTP: a `Worker` with `HttpTarget` calling a lean httptools receiver in a separate process
   (uvloop; tickwheel's own aiohttp Receiver for one info row), which
   measures lateness (arrival minus ``Tickwheel-Due``) and reports it back over a pipe.

The event loop is uvloop's, as in ``tickwheel serve`` and ``tickwheel worker``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Coroutine,
    Iterator,
    Sequence,
)
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, cast

import redis.asyncio as aredis
from inproc import (
    Table,
    cpu_ticks,
    emit,
    fmt,
    machine_table,
    progress,
    render_markdown,
    sample_other_load,
)
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from stores import RAW_CLAIM_LUA, RAW_DUE, OwnRedis, pct, pid_ticks, profile_table

from tickwheel.engine import ACKED, Delivery, Metrics, Outcome, Worker, WorkerSettings, consume
from tickwheel.engine.http import HttpTarget
from tickwheel.errors import LeaseLost
from tickwheel.model import Callback, State, Timer
from tickwheel.runtime import steady_gc
from tickwheel.stores import Lease
from tickwheel.stores.redis import RedisStore

PREFIX = "bench"
QUEUE = "default"
LEASE_MS = 60_000
FLOOR_LIMIT = 1_000  # the floor's claim limit: WorkerSettings.batch's default
FLOOR_PIPELINE = 1_000  # ZADDs per round trip when the floor loads its timers
URL_PATH = "/callback"
BODY = '{"order_id": 123456, "action": "expire"}'
HZ = os.sysconf("SC_CLK_TCK")

TARGET_BURST_S = 0.15
TARGET_BURST_FLOOR = 3.0
TARGET_SPREAD_P99_MS = 3.0
TARGET_HTTP_RATE = 5_000
TARGET_HTTP_P99_MS = 50.0

RAW_LEASES = "raw:leases"

# the far ends of part (c), each in its own process on uvloop: it prints its URL, then answers
# "report" lines on stdin with one JSON line of what arrived since the last report
RECEIVER_COMMON = r"""
import asyncio, json, os, sys, time
import uvloop

late, ids = [], set()
seen = {"first": None, "last": None, "dups": 0}

def record(at_ms, timer_id, due_ms):
    if due_ms is not None:
        late.append(at_ms - due_ms)
    if timer_id in ids:
        seen["dups"] += 1
    ids.add(timer_id)
    if seen["first"] is None:
        seen["first"] = at_ms
    seen["last"] = at_ms

async def report_until_eof(url):
    global late, ids
    print(url, flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while (line := await reader.readline()).strip() == b"report":
        times = os.times()
        print(json.dumps({"late": late, "unique": len(ids), **seen,
                          "cpu_s": times.user + times.system}), flush=True)
        late, ids = [], set()
        seen.update(first=None, last=None, dups=0)
"""

# the default far end: a minimal keep-alive HTTP/1.1 server on httptools, so that it takes
# little of the 2 cores the worker and Redis share (a real endpoint runs on its own machine)
LEAN_RECEIVER_SOURCE = (
    RECEIVER_COMMON
    + r"""
import httptools

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"

class Callbacks(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        self.parser = httptools.HttpRequestParser(self)
        self.timer_id = self.due_ms = None

    def data_received(self, data):
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()

    def on_header(self, name, value):
        name = name.lower()
        if name == b"tickwheel-timer-id":
            self.timer_id = value
        elif name == b"tickwheel-due":
            self.due_ms = int(value)

    def on_message_complete(self):
        record(time.time_ns() / 1e6, self.timer_id, self.due_ms)
        self.timer_id = self.due_ms = None
        self.transport.write(OK)
        if not self.parser.should_keep_alive():
            self.transport.close()

async def main():
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Callbacks, "127.0.0.1", 0, backlog=1024)
    await report_until_eof(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")

uvloop.run(main())
"""
)

# tickwheel's own Receiver (aiohttp), for one info row: it verifies and records what a test needs
TICKWHEEL_RECEIVER_SOURCE = (
    RECEIVER_COMMON
    + r"""
from tickwheel.service.receiver import Receiver, Reply

OK = Reply()

def respond(received):
    record(received.at_ms, received.timer_id, received.due_ms)
    return OK

async def main():
    async with Receiver(keep=False, respond=respond) as receiver:
        await report_until_eof(receiver.url)

uvloop.run(main())
"""
)


# ---------------------------------------------------------------------------------------------
# clocks, progress


def wall_ms() -> float:
    """Epoch ms with µs precision: Redis's ``TIME`` on this host reads the same clock."""
    return time.time_ns() / 1e6


def own_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


async def sleep_until(epoch_ms: float) -> None:
    """Sleep to within a ms of `epoch_ms`, then yield to the loop until it has passed."""
    ahead_s = (epoch_ms - wall_ms()) / 1000 - 0.002
    if ahead_s > 0:
        await asyncio.sleep(ahead_s)
    # the last ms: poll each loop turn, as AsyncScheduler does (a sleep rounds up to whole ms)
    while wall_ms() < epoch_ms:  # noqa: ASYNC110
        await asyncio.sleep(0)


class Bar:
    """Progress of one long phase on stderr: a rich bar on a terminal, else "[done/total]" lines.

    Refreshed by hand from the event loop (no refresh thread competing for the GIL while
    lateness is measured), at most `every_s`; the time spent refreshing is kept for the notes.
    """

    def __init__(self, description: str, total: int, every_s: float = 0.5) -> None:
        self.description = description
        self.total = total
        self.every_s = every_s
        self.refresh_s = 0.0
        self.refreshes = 0
        self._last = 0.0
        console = Console(stderr=True)
        self._progress: Progress | None = None
        if console.is_terminal:
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                auto_refresh=False,
                transient=True,
            )
            self._task = self._progress.add_task(description, total=total)
            self._progress.start()
        else:
            self.every_s = max(every_s, 1.0)

    def update(self, done: int, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.every_s:
            return
        self._last = now
        t0 = time.perf_counter()
        if self._progress is not None:
            self._progress.update(self._task, completed=done)
            self._progress.refresh()
        else:
            print(f"[{done}/{self.total}] {self.description}", file=sys.stderr, flush=True)
        self.refresh_s += time.perf_counter() - t0
        self.refreshes += 1

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()


@contextlib.asynccontextmanager
async def tracking(description: str, total: int, done: Callable[[], int]) -> AsyncIterator[Bar]:
    """Show a `Bar` following `done()` while the block runs."""
    bar = Bar(description, total)

    async def follow() -> None:
        while True:
            bar.update(done())
            await asyncio.sleep(bar.every_s)

    ticker = asyncio.create_task(follow())
    try:
        yield bar
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
        bar.update(done(), force=True)
        bar.close()


class OtherLoad:
    """CPUs kept busy by processes other than this one and the ones it tracks (its redis-server,
    its receiver), from its creation on."""

    def __init__(self, *pids: int | None) -> None:
        self._pids = {pid: pid_ticks(pid) for pid in pids if pid is not None}
        self._ended: dict[int, int] = {}
        self._machine, self._own = cpu_ticks()
        self._start = time.monotonic()

    def track(self, pid: int) -> None:
        """Count `pid` as ours from now on."""
        self._pids[pid] = pid_ticks(pid)

    def untrack(self, pid: int) -> None:
        """Keep what `pid` used so far as ours; call before it exits."""
        self._ended[pid] = pid_ticks(pid) - self._pids.pop(pid, 0)

    def other(self) -> float:
        machine, own = cpu_ticks()
        ours = sum(pid_ticks(pid) - start for pid, start in self._pids.items())
        ours += sum(self._ended.values())
        seconds = time.monotonic() - self._start
        ticks = (machine - self._machine) - (own - self._own) - ours
        return max(0.0, ticks / HZ / seconds) if seconds > 0 else 0.0


class CpuSnapshot:
    """CPU seconds this process and redis-server use from an instant on (read by the loop)."""

    def __init__(self, redis_pid: int | None) -> None:
        self._redis_pid = redis_pid
        self._start: tuple[float, int] | None = None

    @classmethod
    def at(cls, epoch_ms: float, redis_pid: int | None) -> CpuSnapshot:
        snapshot = cls(redis_pid)
        delay_s = max(0.0, (epoch_ms - wall_ms()) / 1000)
        asyncio.get_running_loop().call_later(delay_s, snapshot.take)
        return snapshot

    def take(self) -> None:
        self._start = (own_cpu_s(), pid_ticks(self._redis_pid))

    def used(self) -> dict[str, float]:
        """CPU seconds since the snapshot: {"bench": ..., "redis": ...}."""
        if self._start is None:
            return {}
        cpu, ticks = self._start
        return {"bench": own_cpu_s() - cpu, "redis": (pid_ticks(self._redis_pid) - ticks) / HZ}


# ---------------------------------------------------------------------------------------------
# instrumentation of the store (wrapping instance attributes; the store's code is not touched)


@dataclass
class Calls:
    """(start ms, end ms, items) of each claim and each ack_many a store made."""

    expect: int = 0
    claims: list[tuple[float, float, int]] = field(default_factory=list)
    acks: list[tuple[float, float, int]] = field(default_factory=list)
    acked: int = 0
    all_acked: asyncio.Event = field(default_factory=asyncio.Event)

    def claimed_by(self, at_ms: float) -> int:
        return sum(n for _, end, n in self.claims if end <= at_ms)

    def last_claim_end(self) -> float | None:
        ends = [end for _, end, n in self.claims if n]
        return max(ends) if ends else None

    def busy_ms(self, kind: str) -> float:
        calls = self.claims if kind == "claim" else self.acks
        return sum(end - start for start, end, n in calls if n)


def instrument(store: RedisStore, expect: int) -> Calls:
    """Time the store's claims and acks; `all_acked` is set once `expect` acks have landed."""
    calls = Calls(expect)
    claim, ack_many = store.claim, store.ack_many

    async def timed_claim(queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        t0 = wall_ms()
        leases = await claim(queue, horizon_ms, limit, lease_ms)
        calls.claims.append((t0, wall_ms(), len(leases)))
        return leases

    async def timed_ack_many(leases: Sequence[Lease]) -> list[bool]:
        t0 = wall_ms()
        acked = await ack_many(leases)
        calls.acks.append((t0, wall_ms(), len(leases)))
        calls.acked += sum(acked)
        if calls.acked >= calls.expect:
            calls.all_acked.set()
        return acked

    store.claim = timed_claim  # type: ignore[method-assign]
    store.ack_many = timed_ack_many  # type: ignore[method-assign]
    return calls


# ---------------------------------------------------------------------------------------------
# results


@dataclass
class Late:
    """Lateness samples in store-clock ms (integers) and wall-clock ms (µs precision)."""

    store_ms: array[int] = field(default_factory=lambda: array("q"))
    wall_ms: array[float] = field(default_factory=lambda: array("d"))

    def add(self, store_now_ms: int, due_ms: int) -> None:
        self.store_ms.append(store_now_ms - due_ms)
        self.wall_ms.append(wall_ms() - due_ms)

    def cells(self) -> list[str]:
        if not self.store_ms:
            return ["—"] * 5
        s, w = list(self.store_ms), list(self.wall_ms)
        early = sum(1 for x in s if x < 0)
        return [
            fmt(pct(s, 0.50)),
            fmt(pct(s, 0.99)),
            fmt(max(s)),
            f"{pct(w, 0.99):.2f}",
            f"{early:,}",
        ]


@dataclass
class Run:
    """One measured run of a part."""

    label: str
    count: int
    seconds: float = math.nan  # due instant (or first due) → last ack / arrival
    acked: int = 0
    done: int | None = None  # DONE in the store's stats afterwards
    duplicates: int = 0
    late: Late | None = None
    calls: Calls | None = None
    due_ms: float = 0.0
    first_ms: float | None = None  # first delivery, wall
    last_ms: float | None = None  # last delivery, wall
    cpu: dict[str, float] = field(default_factory=dict)  # cores: bench, receiver, redis
    extra: dict[str, Any] = field(default_factory=dict)
    bars: list[Bar] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return self.count - self.acked


@dataclass
class Sizes:
    burst: int
    spread: int
    spread_s: float
    http: int
    http_s: float


FULL = Sizes(burst=20_000, spread=20_000, spread_s=20.0, http=30_000, http_s=5.0)
QUICK = Sizes(burst=2_000, spread=1_000, spread_s=1.0, http=2_000, http_s=1.0)


# ---------------------------------------------------------------------------------------------
# the bench


class Bench:
    def __init__(self, server: OwnRedis, sizes: Sizes, settings: WorkerSettings) -> None:
        self.server = server
        self.sizes = sizes
        self.settings = settings
        self.admin = aredis.Redis.from_url(server.url)
        self.callback: Callback | None = None

    async def close(self) -> None:
        await self.admin.aclose()

    @contextlib.asynccontextmanager
    async def store(self) -> AsyncIterator[RedisStore]:
        """A fresh store on an empty server, its clock synced."""
        await self.admin.flushall()
        store = RedisStore.from_url(self.server.url, prefix=PREFIX)
        try:
            await store.sync_clock()
            yield store
        finally:
            await store.close()

    async def load(self, store: RedisStore, timers: list[Timer], what: str) -> None:
        t0 = time.perf_counter()
        for start in range(0, len(timers), 10_000):
            await store.add_many(timers[start : start + 10_000])
        progress(f"  {what}: added {len(timers):,} in {time.perf_counter() - t0:.2f} s")
        gc.freeze()  # the producer's side: a worker process does not hold these timers

    async def done_count(self, store: RedisStore) -> int:
        return (await store.stats()).counts[State.DONE]

    # -- (a) burst --------------------------------------------------------------------------

    def burst_lead_ms(self) -> int:
        # time to build and add the timers, then a lookahead's idle before the claims start
        return 1_500 + self.settings.lookahead_ms + self.sizes.burst // 10

    async def floor_burst(self, variadic: bool) -> Run:
        n = self.sizes.burst
        label = "raw floor: Lua claim + pipelined ZREM per id" + (
            "" if not variadic else " (info: one variadic ZREM per claim)"
        )
        run = Run(label, n)
        await self.admin.flushall()
        client = aredis.Redis.from_url(self.server.url)
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
            at_due = CpuSnapshot.at(due, self.server.pid)
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

    async def consume_burst(self, batched: bool, profiler: cProfile.Profile | None = None) -> Run:
        n = self.sizes.burst
        label = "consume(): ack tasks, acks batch" if batched else "consume(): await d.ack() each"
        run = Run(label, n)
        async with self.store() as store:
            due = store.now_ms() + self.burst_lead_ms()
            callback = None  # a Python consumer's queue: timers carry a payload, no callback
            timers = [Timer(due_ms=due, payload={"n": i}, callback=callback) for i in range(n)]
            await self.load(store, timers, label)
            if store.now_ms() > due - self.settings.lookahead_ms:
                progress("  warning: timers added too late for the lookahead: increase the lead")
            run.due_ms = due
            run.calls = instrument(store, n)
            seen: set[str] = set()
            tasks: list[asyncio.Task[None]] = []
            at_due = CpuSnapshot.at(due, self.server.pid)

            async def ack(delivery: Any) -> None:
                with contextlib.suppress(LeaseLost):
                    await delivery.ack()
                    run.acked += 1

            if profiler is not None:
                profiler.enable()
            async with (
                asyncio.timeout(due / 1000 - wall_ms() / 1000 + 120),
                tracking(f"burst: {label}", n, lambda: run.acked) as bar,
                contextlib.aclosing(deliveries_of(store, self.settings)) as deliveries,
            ):
                run.bars.append(bar)
                async for delivery in deliveries:
                    if run.first_ms is None:
                        run.first_ms = wall_ms()
                    timer_id = delivery.timer.id
                    run.duplicates += timer_id in seen
                    seen.add(timer_id)
                    if batched:
                        tasks.append(asyncio.create_task(ack(delivery)))
                    else:
                        await ack(delivery)
                    if len(seen) == n:
                        run.last_ms = wall_ms()
                        # settle before leaving the loop: leaving hands back what is unsettled
                        await asyncio.gather(*tasks)
                        break
            run.seconds = wall_ms() / 1000 - due / 1000
            if profiler is not None:
                profiler.disable()
            run.cpu = at_due.used()
            run.done = await self.done_count(store)
        return run

    # -- (b) spread -------------------------------------------------------------------------

    def spread_timers(self, now_ms: int, payload: bool) -> list[Timer]:
        n, span_ms = self.sizes.spread, int(self.sizes.spread_s * 1000)
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

    async def floor_spread(self) -> Run:
        n, span_ms = self.sizes.spread, int(self.sizes.spread_s * 1000)
        run = Run("raw floor: Lua claim of what is due, polled every ms", n, late=Late())
        assert run.late is not None
        await self.admin.flushall()
        client = aredis.Redis.from_url(self.server.url)
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
                    got = await claim(
                        keys=[RAW_DUE, RAW_LEASES], args=[now, FLOOR_LIMIT, now + 30_000]
                    )
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

    async def worker_spread(self) -> Run:
        n = self.sizes.spread
        run = Run("Worker, recording in-process Target", n, late=Late())
        async with self.store() as store:
            timers = self.spread_timers(store.now_ms(), payload=False)
            await self.load(store, timers, "spread: Worker")
            target = Recorder(store, run)
            metrics = Metrics()
            worker = Worker(store, target, self.settings, metrics=metrics)
            run.calls = calls = instrument(store, n)
            running = asyncio.create_task(worker.run())

            def acked() -> int:
                got = metrics.registry.get_sample_value("tickwheel_acked_total", {"queue": QUEUE})
                return int(got or 0)

            try:
                async with (
                    asyncio.timeout(self.sizes.spread_s + 120),
                    tracking("spread: Worker", n, lambda: calls.acked) as bar,
                ):
                    run.bars.append(bar)
                    await calls.all_acked.wait()
            finally:
                worker.stop()
                await running
            run.acked = acked()
            run.seconds = wall_ms() / 1000 - timers[-1].due_ms / 1000
            run.done = await self.done_count(store)
            run.duplicates = target.duplicates
        return run

    async def consume_spread(self) -> Run:
        n = self.sizes.spread
        run = Run("consume(): ack tasks", n, late=Late())
        assert run.late is not None
        async with self.store() as store:
            timers = self.spread_timers(store.now_ms(), payload=True)
            await self.load(store, timers, "spread: consume")
            run.calls = instrument(store, n)
            seen: set[str] = set()
            tasks: list[asyncio.Task[None]] = []

            async def ack(delivery: Any) -> None:
                with contextlib.suppress(LeaseLost):
                    await delivery.ack()
                    run.acked += 1

            async with (
                asyncio.timeout(self.sizes.spread_s + 120),
                tracking("spread: consume", n, lambda: len(seen)) as bar,
                contextlib.aclosing(deliveries_of(store, self.settings)) as deliveries,
            ):
                run.bars.append(bar)
                async for delivery in deliveries:
                    run.late.add(store.now_ms(), delivery.timer.due_ms)
                    run.duplicates += delivery.timer.id in seen
                    seen.add(delivery.timer.id)
                    tasks.append(asyncio.create_task(ack(delivery)))
                    if len(seen) == n:
                        await asyncio.gather(*tasks)
                        break
            run.seconds = wall_ms() / 1000 - timers[-1].due_ms / 1000
            run.done = await self.done_count(store)
        return run

    # -- (c) HTTP ---------------------------------------------------------------------------

    async def http(
        self, receiver: ReceiverProcess, count: int, span_s: float, label: str,
        profiler: cProfile.Profile | None = None,
    ) -> Run:  # fmt: skip
        run = Run(label, count)
        async with self.store() as store:
            callback = Callback(url=receiver.url + URL_PATH, body=BODY)
            first = store.now_ms() + 1_500 + count // 10
            span_ms = int(span_s * 1000)
            timers = [
                Timer(due_ms=first + i * span_ms // count, callback=callback) for i in range(count)
            ]
            await self.load(store, timers, label)
            await receiver.report()  # start counting from here
            metrics = Metrics()
            target = HttpTarget(allow_private_targets=True)
            worker = Worker(store, target, self.settings, metrics=metrics)
            run.calls = calls = instrument(store, count)

            def acked() -> int:
                got = metrics.registry.get_sample_value("tickwheel_acked_total", {"queue": QUEUE})
                return int(got or 0)

            await sleep_until(first - 1_100)  # the worker idles until its lookahead anyway
            ticks0 = {"receiver": pid_ticks(receiver.pid), "redis": pid_ticks(self.server.pid)}
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
                for name, pid in (("receiver", receiver.pid), ("redis", self.server.pid)):
                    run.cpu[name] = (pid_ticks(pid) - ticks0[name]) / HZ / wall_s
                worker.stop()
                await running
                await target.close()
            run.acked = acked()
            run.done = await self.done_count(store)
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


def deliveries_of(store: RedisStore, settings: WorkerSettings) -> AsyncGenerator[Delivery, None]:
    """`consume(store, QUEUE)`, typed as the async generator it is (for `aclosing`)."""
    return cast(AsyncGenerator[Delivery, None], consume(store, QUEUE, settings=settings))


class Recorder:
    """A Target that records lateness by the store clock and acks at once (no I/O)."""

    def __init__(self, store: RedisStore, run: Run) -> None:
        self._store = store
        self._run = run
        self._seen: set[str] = set()
        self.duplicates = 0

    async def fire(self, timer: Timer, attempt: int) -> Outcome:
        assert self._run.late is not None
        self._run.late.add(self._store.now_ms(), timer.due_ms)
        self.duplicates += timer.id in self._seen
        self._seen.add(timer.id)
        return ACKED

    async def close(self) -> None:
        """Nothing to release."""


class ReceiverProcess:
    """A receiver (`source`, one of the *_RECEIVER_SOURCE) in a child process, stopped by pid."""

    def __init__(self, source: str) -> None:
        self.child = subprocess.Popen(
            [sys.executable, "-c", source],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        assert self.child.stdout is not None
        self.url = self.child.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.stop()
            raise RuntimeError(f"receiver did not start: {self.url!r}")

    @property
    def pid(self) -> int:
        return self.child.pid

    async def report(self) -> dict[str, Any]:
        """What arrived since the last report (the child starts counting afresh)."""
        assert self.child.stdin is not None
        assert self.child.stdout is not None
        self.child.stdin.write("report\n")
        self.child.stdin.flush()
        line = await asyncio.to_thread(self.child.stdout.readline)
        result: dict[str, Any] = json.loads(line)
        return result

    def stop(self) -> None:
        if self.child.poll() is None:
            os.kill(self.child.pid, signal.SIGTERM)
            try:
                self.child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.child.pid, signal.SIGKILL)
                self.child.wait(timeout=5)


# ---------------------------------------------------------------------------------------------
# tables


def met(ok: bool) -> str:
    return "met" if ok else "missed"


def store_note(run: Run) -> str | None:
    calls = run.calls
    if calls is None:
        return None
    claims = [c for c in calls.claims if c[2]]
    acks = calls.acks
    parts = [
        f"{run.label}: {len(claims)} claims returned timers "
        f"({calls.busy_ms('claim') / max(len(claims), 1):.1f} ms each on average)"
    ]
    if run.due_ms and claims:
        before = calls.claimed_by(run.due_ms)
        last = calls.last_claim_end()
        parts.append(
            f"{before:,} of {run.count:,} claimed before the due instant, the last claim "
            f"returned {fmt(None if last is None else last - run.due_ms, 0)} ms after it"
        )
    if acks:
        sizes = [n for _, _, n in acks]
        parts.append(
            f"{len(acks):,} ack_many calls of {min(sizes)} to {max(sizes)} leases "
            f"(mean {sum(sizes) / len(sizes):.0f}), {calls.busy_ms('ack') / len(acks):.1f} ms each"
        )
    return "; ".join(parts)


def burst_table(runs: list[Run], floor: Run, load: float) -> Table:
    table = Table(
        f"(a) Burst: {floor.count:,} timers due at one instant, from that instant until all acked",
        [
            "consumer",
            "first delivery ms",
            "last delivery ms",
            "all acked s",
            "timers/s",
            "vs floor",
            "client CPU s",
            "redis CPU s",
            "acked",
            "done in stats",
            "duplicates",
            "target",
            "result",
        ],
    )
    for run in [floor, *runs]:
        first = None if run.first_ms is None else run.first_ms - run.due_ms
        last = None if run.last_ms is None else run.last_ms - run.due_ms
        ratio = run.seconds / floor.seconds
        is_consume = run.label.startswith("consume")
        ok = (
            run.seconds <= TARGET_BURST_S
            and ratio <= TARGET_BURST_FLOOR
            and run.acked == run.count == run.done
        )
        result = "floor"
        if is_consume:
            result = met(ok) if run.label.startswith("consume(): ack tasks") else "info"
        table.rows.append(
            [
                run.label,
                fmt(first, 1),
                fmt(last, 1),
                f"{run.seconds:.3f}",
                fmt(run.count / run.seconds),
                f"{ratio:.2f}x",
                f"{run.cpu.get('bench', math.nan):.2f}",
                f"{run.cpu.get('redis', math.nan):.2f}",
                f"{run.acked:,}",
                fmt(run.done),
                f"{run.duplicates:,}",
                f"≤ {TARGET_BURST_S} s, ≤ {TARGET_BURST_FLOOR:g}x floor, none lost"
                if is_consume
                else "—",
                result,
            ]
        )
    table.notes = [
        "timers added beforehand with add_many (payload {'n': i}, one queue, 60 s leases); "
        "the consumer starts right after, idles until the lookahead, claims ahead and "
        "hands each over on the due ms; clocks: epoch ms of this host (Redis TIME reads it too)",
        "'await d.ack() each' is the loop a user writes first: each ack waits for its own "
        "ack.lua round trip; 'ack tasks' starts each ack as a task, so acks queued while one "
        "ack_many is in flight go out together",
        f"the floor: pipelined single-member ZADD into one zset beforehand; from the due instant "
        f"a Lua claim of {FLOOR_LIMIT:,} (ZRANGEBYSCORE ≤ now LIMIT, ZREM, ZADD to a lease zset), "
        "then a pipeline of one ZREM per id, until all are acked (redis-py with hiredis); the "
        "'variadic' row sends one ZREM of all the claimed ids instead",
        "client and redis CPU: seconds used from the due instant to the last ack by this "
        "process and by redis-server (/proc, 10 ms ticks)",
        *[note for note in map(store_note, runs) if note],
        f"CPUs other processes (not this one nor its redis-server) kept busy: {load:.2f}",
    ]
    return table


def spread_table(runs: list[Run], sizes: Sizes, load: float) -> Table:
    table = Table(
        f"(b) Spread: {sizes.spread:,} timers due evenly over {sizes.spread_s:g} s, "
        "lateness by the store clock (ms)",
        [
            "firing",
            "fired",
            "p50 ms",
            "p99 ms",
            "max ms",
            "p99 wall ms",
            "early",
            "acked",
            "done in stats",
            "duplicates",
            "target",
            "result",
        ],
    )
    for run in runs:
        assert run.late is not None
        late = run.late
        p99 = pct(list(late.store_ms), 0.99) if late.store_ms else math.inf
        early = sum(1 for x in late.store_ms if x < 0)
        ok = p99 <= TARGET_SPREAD_P99_MS and early == 0 and run.acked == run.count
        floor = run.label.startswith("raw")
        table.rows.append(
            [
                run.label,
                f"{len(late.store_ms):,}",
                *late.cells()[:3],
                late.cells()[3],
                late.cells()[4],
                f"{run.acked:,}",
                fmt(run.done),
                f"{run.duplicates:,}",
                "—" if floor else f"p99 ≤ {TARGET_SPREAD_P99_MS:g} ms, 0 early",
                "floor" if floor else met(ok),
            ]
        )
    refresh = [bar for run in runs for bar in run.bars if bar.refreshes]
    table.notes = [
        "lateness = the store's clock (RedisStore.now_ms(), integer ms, follows Redis TIME) when "
        "the Target's fire() runs or consume() yields, minus due_ms; 'p99 wall' is the same "
        "from this host's clock with µs precision (a timer fires once its store ms has come)",
        "WorkerSettings defaults: " + settings_text(runs),
        *[note for note in map(store_note, runs) if note],
        "progress bar: "
        + ", ".join(
            f"{bar.refreshes} refreshes of {bar.refresh_s / bar.refreshes * 1000:.1f} ms"
            for bar in refresh
        )
        + " on the event loop",
        f"CPUs other processes (not this one nor its redis-server) kept busy: {load:.2f}",
    ]
    return table


def settings_text(_: object) -> str:
    s = WorkerSettings()
    return (
        f"batch {s.batch}, lookahead_ms {s.lookahead_ms}, lease_ms {s.lease_ms}, "
        f"max_in_flight {s.max_in_flight}, concurrency {s.concurrency}"
    )


def http_table(runs: list[Run], load: float) -> Table:
    table = Table(
        "(c) HTTP callbacks: Worker + HttpTarget → a receiver in another process",
        [
            "load",
            "timers",
            "offered /s",
            "callbacks/s",
            "p50 ms",
            "p99 ms",
            "max ms",
            "early",
            "acked",
            "done",
            "dup",
            "worker CPUs",
            "worker µs/callback",
            "receiver CPUs",
            "redis CPUs",
            "target",
            "result",
        ],
    )
    for n, run in enumerate(runs):
        e = run.extra
        rate = e.get("arrived", 0) / run.seconds if run.seconds > 0 else math.nan
        ok = (
            rate >= TARGET_HTTP_RATE
            and e.get("p99", math.inf) <= TARGET_HTTP_P99_MS
            and run.acked == run.count
        )
        table.rows.append(
            [
                run.label,
                f"{run.count:,}",
                fmt(e.get("offered"))
                if math.isfinite(e.get("offered", math.inf))
                else "all at once",
                fmt(rate),
                fmt(e.get("p50"), 1),
                fmt(e.get("p99"), 1),
                fmt(e.get("max"), 1),
                f"{e.get('early', 0):,}",
                f"{run.acked:,}",
                fmt(run.done),
                f"{run.duplicates:,}",
                f"{run.cpu.get('bench', math.nan):.2f}",
                fmt(run.extra.get("cpu_us")),
                f"{run.cpu.get('receiver', math.nan):.2f}",
                f"{run.cpu.get('redis', math.nan):.2f}",
                f"≥ {TARGET_HTTP_RATE:,}/s, p99 ≤ {TARGET_HTTP_P99_MS:g} ms" if n == 0 else "—",
                met(ok) if n == 0 else "info",
            ]
        )
    table.notes = [
        "lateness = the receiver's arrival time (its wall clock, µs precision) minus the "
        "Tickwheel-Due header, computed in the receiver process and reported back over a pipe",
        "callbacks/s = callbacks that arrived ÷ (last arrival - first due instant), at least the "
        "span the timers were due over; a worker that keeps up shows the offered rate",
        "CPUs = CPU seconds ÷ wall seconds from the worker's start to its last ack: 'worker' is "
        "this process (the Worker, HttpTarget on tickwheel's HTTP/1.1 client, the Redis "
        "client), 'receiver' the child process, 'redis' our redis-server",
        "receiver: a minimal keep-alive HTTP/1.1 server on httptools + uvloop (this script), "
        "so that the far end takes little of the 2 cores; the last row calls tickwheel's own "
        "Receiver (aiohttp, `tickwheel receiver`) instead",
        "this process runs steady_gc() as `tickwheel worker` does (decisions 25); the "
        "producer's input timers are gc.freeze()d once added",
        f"HttpTarget defaults: max_connections 256, max_per_host 64; POST with a {len(BODY)} B "
        "body; no signing",
        *[note for note in map(store_note, runs) if note],
        f"CPUs other processes (not ours, the receiver nor redis-server) kept busy: {load:.2f}",
    ]
    return table


def targets_table(burst: Run, spread: list[Run], http: Run) -> Table:
    table = Table("Targets (issue 4)", ["target", "measured", "limit", "result"])
    worker = next(r for r in spread if r.label.startswith("Worker"))
    via_consume = next(r for r in spread if r.label.startswith("consume"))
    floor_ratio = burst.extra.get("ratio", math.nan)
    burst_ok = burst.seconds <= TARGET_BURST_S and burst.acked == burst.count == burst.done
    table.rows = [
        [
            f"burst of {burst.count:,}: due instant → all acked (consume, ack tasks)",
            f"{burst.seconds:.3f} s ({floor_ratio:.1f}x floor)",
            f"≤ {TARGET_BURST_S} s and ≤ {TARGET_BURST_FLOOR:g}x floor",
            met(burst_ok and floor_ratio <= TARGET_BURST_FLOOR),
        ],
        [
            "burst: none lost",
            f"acked {burst.acked:,}, done {fmt(burst.done)}, dup {burst.duplicates}",
            f"{burst.count:,}",
            met(burst.acked == burst.count == burst.done and not burst.duplicates),
        ],
    ]
    for run in (worker, via_consume):
        assert run.late is not None
        s = list(run.late.store_ms)
        p99 = pct(s, 0.99) if s else math.inf
        early = sum(1 for x in s if x < 0)
        table.rows.append(
            [
                f"spread: p99 lateness, {run.label}",
                f"{fmt(p99)} ms, {early} early",
                f"≤ {TARGET_SPREAD_P99_MS:g} ms, 0 early",
                met(p99 <= TARGET_SPREAD_P99_MS and early == 0 and run.acked == run.count),
            ]
        )
    e = http.extra
    rate = e.get("arrived", 0) / http.seconds if http.seconds > 0 else math.nan
    table.rows += [
        [
            "HTTP: sustained callbacks/s",
            f"{fmt(rate)}/s (offered {fmt(e.get('offered'))}/s)",
            f"≥ {TARGET_HTTP_RATE:,}/s",
            met(rate >= TARGET_HTTP_RATE),
        ],
        [
            "HTTP: p99 lateness at the receiver",
            f"{fmt(e.get('p99'), 1)} ms",
            f"≤ {TARGET_HTTP_P99_MS:g} ms",
            met(e.get("p99", math.inf) <= TARGET_HTTP_P99_MS),
        ],
    ]
    return table


# ---------------------------------------------------------------------------------------------
# main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run (< 30 s)")
    parser.add_argument(
        "--markdown", nargs="?", const="-", metavar="PATH",
        help="also print the tables as Markdown (to PATH when given)",
    )  # fmt: skip
    parser.add_argument(
        "--profile", action="store_true",
        help="add cProfile tables of a burst (ack tasks) and of the HTTP phase",
    )  # fmt: skip
    parser.add_argument(
        "--loop", choices=("uvloop", "asyncio"), default="uvloop",
        help="event loop of this process (default uvloop, as tickwheel serve/worker use)",
    )  # fmt: skip
    parser.add_argument(
        "--parts", default="abc", help="which parts to run (default abc; targets need all three)"
    )
    return parser.parse_args(argv)


def versions_rows(server: OwnRedis, loop: str) -> list[list[str]]:
    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "not installed"

    return [
        ["redis-server", f"{server.version()} on 127.0.0.1:{server.port} (own, no persistence)"],
        ["redis-py / hiredis", f"{version('redis')} / {version('hiredis')}"],
        ["aiohttp / uvloop", f"{version('aiohttp')} / {version('uvloop')}"],
        ["event loop", loop],
    ]


async def run(
    args: argparse.Namespace, server: OwnRedis, tables: list[Table], whole: OtherLoad
) -> None:
    sizes = QUICK if args.quick else FULL
    settings = WorkerSettings()
    bench = Bench(server, sizes, settings)
    burst_main: Run | None = None
    spread: list[Run] = []
    http_runs: list[Run] = []
    profiles: list[Table] = []
    try:
        if "a" in args.parts:
            meter = OtherLoad(server.pid)
            progress(f"(a) burst of {sizes.burst:,}: raw floor")
            floor = await bench.floor_burst(variadic=False)
            floor_variadic = await bench.floor_burst(variadic=True)
            progress("(a) burst: consume(), ack tasks")
            batched = await bench.consume_burst(batched=True)
            progress("(a) burst: consume(), await each ack")
            natural = await bench.consume_burst(batched=False)
            batched.extra["ratio"] = batched.seconds / floor.seconds
            burst_main = batched
            table = burst_table([floor_variadic, batched, natural], floor, meter.other())
            emit(table, tables)
            if args.profile:
                progress("(a) burst, profiled")
                profiler = cProfile.Profile()
                await bench.consume_burst(batched=True, profiler=profiler)
                profiles.append(
                    profile_table("Profile: burst, consume() with ack tasks", profiler, 18)
                )
        if "b" in args.parts:
            meter = OtherLoad(server.pid)
            progress(f"(b) spread of {sizes.spread:,} over {sizes.spread_s:g} s: raw floor")
            spread.append(await bench.floor_spread())
            progress("(b) spread: Worker")
            spread.append(await bench.worker_spread())
            progress("(b) spread: consume()")
            spread.append(await bench.consume_spread())
            emit(spread_table(spread, sizes, meter.other()), tables)
        if "c" in args.parts:
            meter = OtherLoad(server.pid)
            http_runs = await http_part(bench, sizes, meter, whole)
            emit(http_table(http_runs, meter.other()), tables)
            if args.profile:
                progress("(c) HTTP, profiled")
                profiler = cProfile.Profile()
                with receiving(LEAN_RECEIVER_SOURCE, meter, whole) as receiver:
                    await bench.http(
                        receiver, sizes.http, sizes.http_s, "profiled", profiler=profiler
                    )
                profiles.append(profile_table("Profile: HTTP, Worker + HttpTarget", profiler, 18))
        for table in profiles:
            emit(table, tables)
        if burst_main is not None and spread and http_runs:
            targets = targets_table(burst_main, spread, http_runs[0])
            if args.quick:
                targets.notes.append(
                    "--quick: smoke-run counts (HTTP offered 2,000/s); the limits are set for a "
                    "full run"
                )
            emit(targets, tables)
    finally:
        await bench.close()


@contextlib.contextmanager
def receiving(source: str, meter: OtherLoad, whole: OtherLoad) -> Iterator[ReceiverProcess]:
    """A receiver process whose CPU the load meters leave out while it runs."""
    receiver = ReceiverProcess(source)
    meter.track(receiver.pid)
    whole.track(receiver.pid)
    try:
        yield receiver
    finally:
        meter.untrack(receiver.pid)
        whole.untrack(receiver.pid)
        receiver.stop()


async def http_part(bench: Bench, sizes: Sizes, meter: OtherLoad, whole: OtherLoad) -> list[Run]:
    """Part (c): the target rate and the issue's rate on the lean receiver, everything due at
    once (capacity), then the target rate again on tickwheel's own Receiver (info)."""
    n, span = sizes.http, sizes.http_s
    slower = n * 5 // 6  # the rate exactly (5,000/s in a full run)
    runs = []
    with receiving(LEAN_RECEIVER_SOURCE, meter, whole) as receiver:
        progress(f"(c) HTTP: {n:,} due over {span:g} s, receiver {receiver.pid}")
        runs.append(await bench.http(receiver, n, span, f"{n:,} over {span:g} s"))
        progress(f"(c) HTTP: {slower:,} due over {span:g} s ({slower / span:,.0f}/s, info)")
        runs.append(await bench.http(receiver, slower, span, f"{slower:,} over {span:g} s"))
        progress(f"(c) HTTP: {n:,} due at once (capacity, info)")
        runs.append(await bench.http(receiver, n, 0.0, f"{n:,} at once"))
    with receiving(TICKWHEEL_RECEIVER_SOURCE, meter, whole) as receiver:
        label = f"{n:,} over {span:g} s → tickwheel Receiver"
        progress(f"(c) HTTP: {label} (aiohttp, info)")
        runs.append(await bench.http(receiver, n, span, label))
    return runs


def run_loop(main: Coroutine[Any, Any, None], loop: str) -> None:
    factory = None
    if loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    tables: list[Table] = []
    start_s = time.monotonic()

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    directory = Path(tempfile.mkdtemp(prefix="tickwheel-bench-engine-"))
    server = OwnRedis(directory)
    try:
        server.start()
        progress(f"redis-server pid {server.pid} on port {server.port}, dir {directory}")
        whole = OtherLoad(server.pid)
        steady_gc()  # as `tickwheel serve` and `tickwheel worker` do
        machine = machine_table(sample_other_load())
        machine.rows += versions_rows(server, args.loop)
        emit(machine, tables)
        run_loop(run(args, server, tables, whole), args.loop)
        busy = whole.other()
    except KeyboardInterrupt:
        busy = math.nan
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)
    if math.isnan(busy):
        progress("interrupted; our redis-server is stopped and its temp dir removed")
        raise SystemExit(130)
    elapsed = time.monotonic() - start_s
    summary = (
        f"run took {elapsed:.0f} s; other processes (not this one, its redis-server nor, in "
        f"part c, its receiver) kept {busy:.2f} of {os.cpu_count()} CPUs busy on average; "
        f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(summary, flush=True)
    tables[-1].notes.append(summary)
    progress("done")
    if args.markdown:
        text = "\n\n".join(render_markdown(t) for t in tables) + "\n"
        if args.markdown == "-":
            print("\n<!-- markdown for docs/benchmarks.md -->\n\n" + text, flush=True)
        else:
            with open(args.markdown, "w", encoding="utf-8") as f:
                f.write("# tickwheel engine benchmark\n\n" + text)


if __name__ == "__main__":
    main()

"""Timing one run against a store: wall and CPU time, and on Redis the server's own view."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aredis
from harness.machine import own_cpu_s
from harness.report import progress

from scenarios.stores.inputs import CLAIM_LIMIT, LEASE_MS, PRODUCER_BATCH, QUEUE
from tickwheel.model import Timer
from tickwheel.stores.redis import RedisStore

ADMIN_COMMANDS = ("config", "info", "hello", "client", "ping", "flushall", "time")
Call = Callable[[], Awaitable[Any]]


@dataclass
class Measured:
    """One timed run: wall and CPU seconds, and on Redis the server's view."""

    label: str
    count: int
    seconds: float
    client_cpu_s: float
    server_cpu_s: float | None = None
    commands: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (calls, usec)
    claim_s: float = 0.0
    ack_s: float = 0.0
    batches: int = 0

    @property
    def rate(self) -> float:
        """Timers per second."""
        return self.count / self.seconds if self.seconds > 0 else math.nan


async def server_cpu(admin: aredis.Redis) -> float:
    """Return the CPU seconds (user + sys) the Redis server has used."""
    info = await admin.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def commandstats(admin: aredis.Redis) -> dict[str, tuple[int, int]]:
    """Return INFO commandstats as command name -> (calls, usec)."""
    stats = await admin.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
        for name, v in stats.items()
    }


class Probe:
    """Times a block; with an admin client, also Redis CPU and commandstats (reset first)."""

    def __init__(
        self, label: str, count: int, admin: aredis.Redis | None, sink: list[Measured]
    ) -> None:
        self.label = label
        self.count = count
        self.admin = admin
        self.sink = sink
        self.result: Measured | None = None
        self.claim_s = self.ack_s = 0.0
        self.batches = 0

    @property
    def measured(self) -> Measured:
        assert self.result is not None, "read after the block"
        return self.result

    async def __aenter__(self) -> Probe:
        self._server = 0.0
        if self.admin is not None:
            await self.admin.config_resetstat()
            self._server = await server_cpu(self.admin)
        self._cpu = own_cpu_s()
        self._t0 = time.perf_counter()
        return self

    async def __aexit__(self, kind: object, error: object, trace: object) -> None:
        seconds = time.perf_counter() - self._t0
        cpu = own_cpu_s() - self._cpu
        if kind is not None:
            return
        result = Measured(self.label, self.count, seconds, cpu)
        result.claim_s, result.ack_s, result.batches = self.claim_s, self.ack_s, self.batches
        if self.admin is not None:
            result.server_cpu_s = await server_cpu(self.admin) - self._server
            stats = await commandstats(self.admin)
            result.commands = {
                name: calls_usec
                for name, calls_usec in stats.items()
                if not name.startswith(ADMIN_COMMANDS)
            }
        self.result = result
        self.sink.append(result)


async def sample_interleaved(
    calls: dict[int, Call], rounds: int, expect: int
) -> dict[int, list[float]]:
    """Time `rounds` awaits of each call in ms, alternating between them (so a change in the
    machine's load hits every one alike); warn when a call did not return `expect` items."""
    samples: dict[int, list[float]] = {key: [] for key in calls}
    short = 0
    order = list(calls)
    for n in range(rounds):
        for key in order if n % 2 == 0 else reversed(order):
            t0 = time.perf_counter_ns()
            got = await calls[key]()
            samples[key].append((time.perf_counter_ns() - t0) / 1e6)
            short += len(got) != expect
    if short:
        progress(f"  warning: {short} calls did not return {expect}")
    return samples


async def claim_ack(store: Any, probe: Probe) -> int:
    """Claim CLAIM_LIMIT at a time and ack each batch with one `ack_many` until none is due."""
    done = 0
    while True:
        t0 = time.perf_counter()
        leases = await store.claim(QUEUE, store.now_ms(), CLAIM_LIMIT, LEASE_MS)
        t1 = time.perf_counter()
        probe.claim_s += t1 - t0
        if not leases:
            return done
        done += sum(await store.ack_many(leases))
        probe.ack_s += time.perf_counter() - t1
        probe.batches += 1


async def add_each(store: Any, timers: Sequence[Timer], concurrency: int) -> None:
    """`store.add` every timer: one at a time, or `concurrency` at once."""
    if concurrency == 1:
        for timer in timers:
            await store.add(timer)
        return
    gate = asyncio.Semaphore(concurrency)

    async def one(timer: Timer) -> None:
        async with gate:
            await store.add(timer)

    await asyncio.gather(*map(one, timers))


async def add_batched(store: RedisStore, timers: Sequence[Timer]) -> None:
    """`store.add_many` the timers, PRODUCER_BATCH per call."""
    for start in range(0, len(timers), PRODUCER_BATCH):
        await store.add_many(timers[start : start + PRODUCER_BATCH])

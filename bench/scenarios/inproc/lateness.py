"""Phase 4: how late the drivers fire (Scheduler, AsyncScheduler), asyncio's call_at beside."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import os
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.machine import OtherLoad
from harness.report import Table, fmt, pct, progress, verdict

from scenarios.inproc.workload import NS, SEED, fresh
from tickwheel import AsyncScheduler, Scheduler, SystemClock, TimerHandle

LATE_SPREAD_MS = 2_000


@dataclass
class Lateness:
    """Lateness of N firings against each handle's due time."""

    n: int
    schedule_s: float
    gap_ms: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    early: int
    rounded: int
    missing: int

    @property
    def ok(self) -> bool:
        """Whether the lateness target holds."""
        return self.early == 0 and self.p99_ms <= 1.5 and self.missing == 0


@dataclass
class LateRun:
    """The inputs and raw outputs of one lateness run."""

    clock: SystemClock
    n: int
    lead_ms: int
    fired: list[int] = field(default_factory=list)
    handles: list[Any] = field(default_factory=list)
    dues: list[int] = field(default_factory=list)
    schedule_s: float = 0.0
    scheduled_at_ns: int = 0

    def plan(self) -> None:
        """Choose N due epoch ms uniform over 2 s starting `lead_ms` from now."""
        rng = random.Random(SEED)
        start_ms = self.clock.now_ns() // 1_000_000 + self.lead_ms
        self.dues = [start_ms + rng.randrange(LATE_SPREAD_MS) for _ in range(self.n)]
        self.fired = [0] * self.n
        self.handles = [None] * self.n

    def recorder(self, done: Callable[[], None]) -> Callable[[int], None]:
        """Return a callback storing clock.now_ns() at index i, calling `done` after N calls."""
        now, fired, n = self.clock.now_ns, self.fired, self.n
        count = itertools.count(1).__next__

        def record(i: int) -> None:
            fired[i] = now()
            if count() == n:
                done()

        return record

    def schedule(self, call_at: Callable[..., Any], record: Callable[[int], None]) -> None:
        """Call `call_at(when_s, record, i)` for every planned due time, timing it."""
        t0 = NS()
        for i, due in enumerate(self.dues):
            self.handles[i] = call_at(due / 1000, record, i)
        self.schedule_s = (NS() - t0) / 1e9
        self.scheduled_at_ns = self.clock.now_ns()

    def summary(self, due_of: Callable[[Any], int]) -> Lateness:
        """Compute lateness percentiles against each handle's due ms."""
        late: list[float] = []
        rounded = missing = 0
        for due, handle, at in zip(self.dues, self.handles, self.fired, strict=True):
            handle_ms = due_of(handle)
            rounded += handle_ms != due
            if at == 0:
                missing += 1
                continue
            late.append(at - handle_ms * 1_000_000)
        late.sort()
        if not late:
            late = [math.inf]

        gap_ms = (min(self.dues) * 1_000_000 - self.scheduled_at_ns) / 1e6
        early = sum(1 for x in late if x < 0)
        return Lateness(
            self.n,
            self.schedule_s,
            gap_ms,
            pct(late, 0.5) / 1e6,
            pct(late, 0.99) / 1e6,
            late[-1] / 1e6,
            early,
            rounded,
            missing,
        )


def handle_due_ms(handle: TimerHandle) -> int:
    """Return a tickwheel handle's due epoch ms."""
    return round(handle.when * 1000)


def lateness_threads(run: LateRun) -> Lateness:
    """Measure the thread Scheduler's lateness."""
    done = threading.Event()
    fresh()
    with Scheduler(clock=run.clock) as sched:
        run.plan()
        run.schedule(sched.call_at, run.recorder(done.set))
        done.wait(timeout=(run.lead_ms + LATE_SPREAD_MS) / 1000 + 10)
    return run.summary(handle_due_ms)


async def _lateness_async(run: LateRun) -> Lateness:
    """Measure AsyncScheduler's lateness on the running loop."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    fresh()
    async with AsyncScheduler(clock=run.clock) as sched:
        run.plan()
        run.schedule(sched.call_at, run.recorder(lambda: done.set_result(None)))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done, timeout=(run.lead_ms + LATE_SPREAD_MS) / 1000 + 10)
    return run.summary(handle_due_ms)


async def _lateness_asyncio(run: LateRun) -> Lateness:
    """Measure asyncio's own loop.call_at lateness, epoch due times mapped onto loop.time()."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    offset_s = loop.time() - run.clock.now_ns() / 1e9  # loop.time() and the clock: both monotonic
    dues: dict[int, int] = {}

    def call_at(when_s: float, fn: Callable[[int], None], i: int) -> asyncio.TimerHandle:
        dues[i] = round(when_s * 1000)
        return loop.call_at(when_s + offset_s, fn, i)

    fresh()
    run.plan()
    run.schedule(call_at, run.recorder(lambda: done.set_result(None)))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done, timeout=(run.lead_ms + LATE_SPREAD_MS) / 1000 + 10)
    index = {id(h): i for i, h in enumerate(run.handles)}
    return run.summary(lambda h: dues[index[id(h)]])


def phase_lateness(n: int) -> tuple[Table, dict[str, Lateness]]:
    """Measure the drivers' lateness, with asyncio's own call_at as a reference."""
    lead_ms = 500 + n // 200  # ~0.5 s after scheduling ends (scheduling takes ~5 us/timer here)
    runners: list[tuple[str, Callable[[LateRun], Lateness]]] = [
        ("Scheduler (threads)", lateness_threads),
        ("AsyncScheduler", lambda r: asyncio.run(_lateness_async(r))),
        ("asyncio loop.call_at (reference)", lambda r: asyncio.run(_lateness_asyncio(r))),
    ]
    results: dict[str, Lateness] = {}
    loads: dict[str, float] = {}
    for name, runner in runners:
        progress(f"lateness: {name} N={n:,}")
        meter = OtherLoad()
        results[name] = runner(LateRun(SystemClock(), n, lead_ms))
        loads[name] = meter.other()
        fresh()
    headers = ["driver", "N", "schedule s", "gap ms", "p50 ms", "p99 ms", "max ms", "early"]
    headers += ["missing", "other CPUs", "target"]
    table = Table(f"4. Lateness (fired - due), call_at over {LATE_SPREAD_MS / 1000:g} s", headers)
    for name, r in results.items():
        reference = "reference" in name
        table.rows.append(
            [
                name,
                f"{r.n:,}",
                fmt(r.schedule_s, 3),
                fmt(r.gap_ms),
                fmt(r.p50_ms, 3),
                fmt(r.p99_ms, 3),
                fmt(r.max_ms, 3),
                str(r.early),
                str(r.missing),
                f"{loads[name]:.2f}",
                "(none)" if reference else verdict(r.ok),
            ]
        )
    rounded = ", ".join(f"{name}: {r.rounded}" for name, r in results.items())
    table.notes = [
        f"due times: exact epoch ms uniform over {LATE_SPREAD_MS / 1000:g} s starting "
        f"{lead_ms} ms after the plan; call_at(due_ms / 1000) in random order; lateness = "
        "clock.now_ns() in the callback (the SystemClock passed as clock=) - handle due "
        "(round(handle.when * 1000) ms); gap = first due - end of scheduling",
        f"handles whose due differed from the intended ms (call_at rounding): {rounded}",
        "asyncio reference: loop.call_at at the same instants mapped onto loop.time(); its "
        "selector rounds timeouts up to whole ms, which bounds what AsyncScheduler can do",
        "target (tickwheel drivers): zero early, p99 <= 1.5 ms, every timer fired",
        "other CPUs: CPUs other processes kept busy during that run (of "
        f"{os.cpu_count()}); lateness means little when it is not ~0",
    ]
    return table, results

"""Phase 2: the cost of a tick with N timers held and nothing due."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

from harness.report import Table, fmt, progress

from scenarios.inproc.workload import (
    FAR_MS,
    NS,
    Callback,
    Workload,
    aligned_base_ms,
    fresh,
    make_counter,
    make_workload,
)
from tickwheel import DelayHeap, TimingWheel

IDLE_TICKS = 100_000


FILING_NS: dict[int, float] = {}
"""The wheel's filing of its queued adds, ns a timer, by N (least of the runs)."""


def idle_wheel(w: Workload) -> float:
    """Time advance(now + 1) with N timers an hour out and nothing due, ns per tick."""
    cb, _ = make_counter()
    wheel: TimingWheel[int, Callback] = TimingWheel(w.base_ms)
    for key, due in zip(w.keys, w.dues, strict=True):
        wheel.add(key, due, cb)
    advance, base = wheel.advance, w.base_ms
    fresh()
    filing = NS()
    wheel.next_due_ms()  # files what `add` queued, as a scheduler's driver does while it waits
    FILING_NS[w.n] = min(FILING_NS.get(w.n, math.inf), (NS() - filing) / w.n)
    t0 = NS()
    for now in range(base + 1, base + IDLE_TICKS + 1):
        if advance(now):
            raise AssertionError("a timer fired during the idle run")
    t1 = NS()
    assert len(wheel) == w.n
    return (t1 - t0) / IDLE_TICKS


def idle_heap(w: Workload) -> float:
    """Time pop_due(now + 1) with N timers an hour out and nothing due, ns per tick."""
    cb, _ = make_counter()
    dheap: DelayHeap[int, Callback] = DelayHeap()
    for key, due in zip(w.keys, w.dues, strict=True):
        dheap.push(key, due, cb)
    pop_due, base = dheap.pop_due, w.base_ms
    fresh()
    t0 = NS()
    for now in range(base + 1, base + IDLE_TICKS + 1):
        if pop_due(now):
            raise AssertionError("a timer fired during the idle run")
    t1 = NS()
    assert len(dheap) == w.n
    return (t1 - t0) / IDLE_TICKS


def idle_asyncio(w: Workload) -> float:
    """Time asyncio's per-iteration timer check (is heap[0] due?), ns per tick."""
    cb, _ = make_counter()
    loop = asyncio.new_event_loop()
    try:
        handles = [loop.call_later(off / 1000, cb) for off in w.offsets]
        start = loop.time()
        ends = [start + i / 1000 for i in range(1, IDLE_TICKS + 1)]
        sched = loop._scheduled  # type: ignore[attr-defined]
        fresh()
        t0 = NS()
        for end in ends:
            if sched and sched[0]._when < end:
                raise AssertionError("a timer would fire during the idle run")
        t1 = NS()
        del handles
    finally:
        loop.close()
    return (t1 - t0) / IDLE_TICKS


def phase_idle(sizes: list[int]) -> tuple[Table, float]:
    """Measure idle tick cost against N held timers; return the table and the wheel's growth."""
    base = aligned_base_ms()
    kinds: list[tuple[str, Callable[[Workload], float]]] = [
        ("TimingWheel.advance", idle_wheel),
        ("DelayHeap.pop_due", idle_heap),
        ("asyncio heap[0] check (proxy)", idle_asyncio),
    ]
    rows: dict[str, list[float]] = {name: [] for name, _ in kinds}
    for n in sizes:
        w = make_workload(n, base, lead_ms=FAR_MS)
        for name, fn in kinds:
            progress(f"idle ticks: {name} N={n:,}")
            rows[name].append(min(fn(w) for _ in range(2)))
            fresh()
        del w
        fresh()
    headers = ["operation", *[f"N={n:,}" for n in sizes], "largest/smallest"]
    table = Table(f"2. Idle tick, ns/tick ({IDLE_TICKS:,} ticks of 1 ms, none due)", headers)
    for name, values in rows.items():
        table.rows.append([name, *[fmt(v, 1) for v in values], f"{values[-1] / values[0]:.2f}"])
    filing = ", ".join(f"N={n:,}: {FILING_NS[n]:.0f}" for n in sizes)
    table.notes = [
        "N timers held one hour (+ up to 60 s) ahead; base aligned so no cascade falls in the "
        "run; best of 2 runs",
        "TimingWheel: its queued adds are filed (`next_due_ms()`) before the ticks are timed, as "
        f"the schedulers' drivers file them while they wait; filing took ns a timer {filing}",
        "asyncio proxy: the per-iteration 'is heap[0] due?' compare against a precomputed end "
        "time; a real _run_once also reads the clock and polls the selector (not included)",
    ]
    wheel = rows["TimingWheel.advance"]
    return table, wheel[-1] / wheel[0]

"""A burst of timers added ahead of their due times fires on its ms: the drivers file what was
added while they wait (`TimingWheel.add` only queues), not all of it at the first due time."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable

import pytest

from tickwheel.runtime import AsyncScheduler, Scheduler

pytestmark = pytest.mark.latency  # tight bounds on real time: `make test` runs these alone

TIMERS = 100_000
AHEAD_S = 0.8  # from the end of the adds to the first due time
SPREAD_MS = 1_000
P99_MS = 5.0  # filed at the first due time, the burst's p99 was 20-25 ms


def plan() -> list[int]:
    """Due epoch ms, in random order, spread over `SPREAD_MS` from `AHEAD_S` on."""
    first_ms = time.time_ns() // 1_000_000 + int(AHEAD_S * 1000) + TIMERS // 500
    dues = [first_ms + n * SPREAD_MS // TIMERS for n in range(TIMERS)]
    random.Random(7).shuffle(dues)
    return dues


def p99_late_ms(late_ns: list[int]) -> float:
    assert len(late_ns) == TIMERS
    assert min(late_ns) >= 0, "fired early"
    return sorted(late_ns)[int(0.99 * TIMERS)] / 1e6


class Burst:
    """Each timer's lateness in ns as it fires; `done` is called once the last has fired."""

    def __init__(self, done: Callable[[], None]) -> None:
        self.late_ns: list[int] = []
        self._done = done

    def fired(self, due_ms: int) -> None:
        self.late_ns.append(time.time_ns() - due_ms * 1_000_000)
        if len(self.late_ns) == TIMERS:
            self._done()


def test_the_thread_scheduler_fires_a_burst_added_ahead_on_its_ms() -> None:
    done = threading.Event()
    burst = Burst(done.set)
    with Scheduler() as scheduler:
        for due_ms in plan():
            scheduler.call_at_ms(due_ms, burst.fired, due_ms)
        assert done.wait(AHEAD_S + SPREAD_MS / 1000 + 10)
    assert p99_late_ms(burst.late_ns) <= P99_MS


async def test_the_async_scheduler_fires_a_burst_added_ahead_on_its_ms() -> None:
    done = asyncio.Event()
    burst = Burst(done.set)
    async with AsyncScheduler() as scheduler:
        for due_ms in plan():
            scheduler.call_at_ms(due_ms, burst.fired, due_ms)
        await asyncio.wait_for(done.wait(), AHEAD_S + SPREAD_MS / 1000 + 10)
    assert p99_late_ms(burst.late_ns) <= P99_MS

"""`every` and `cron` on both schedulers: occurrences from the rule, never early, never drifting,
keys, cancel, overlapping runs and missed runs, on a `FakeClock`."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from tickwheel.errors import Closed, InvalidArgument
from tickwheel.runtime import AsyncScheduler, FakeClock, Scheduler

START_MS = 1_700_000_000_000  # FakeClock's default start
WAIT_S = 2.0
MakeScheduler = Callable[..., Scheduler]


def advance_to(clock: FakeClock, ms: int) -> None:
    clock.advance_ms(ms - clock.now_ms())


def settle(scheduler: Scheduler) -> None:
    """Return once every call due by now has run (``max_workers=1``): a barrier due now runs
    after them, and a second barrier after anything the first one's advance released."""
    for _ in range(2):
        done = threading.Event()
        scheduler.call_later(0, done.set)
        assert done.wait(WAIT_S), "the scheduler did not run a timer due now"


async def settle_loop() -> None:
    """Let the loop run what a clock jump queued, and the coroutines that started."""
    for _ in range(10):
        await asyncio.sleep(0)


def test_every_fires_at_start_plus_k_intervals_never_a_ms_early(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    runs: list[int] = []
    scheduler = make_scheduler(clock=clock, max_workers=1)
    series = scheduler.every(2, lambda: runs.append(clock.now_ms()))
    assert series.next_run == (START_MS + 2000) / 1000
    for k in range(1, 4):
        advance_to(clock, START_MS + 2000 * k - 1)
        settle(scheduler)
        assert len(runs) == k - 1
        advance_to(clock, START_MS + 2000 * k)
        settle(scheduler)
        assert runs[-1] == START_MS + 2000 * k
    assert series.next_run == (START_MS + 8000) / 1000


def test_a_slow_callback_does_not_hold_the_series_up(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    release = threading.Event()
    started: list[int] = []
    scheduler = make_scheduler(clock=clock, max_workers=4)

    def slow() -> None:
        started.append(clock.now_ms())
        release.wait(5)

    scheduler.every(1, slow)
    for k in range(1, 4):
        advance_to(clock, START_MS + 1000 * k)
        for _ in range(200):  # earlier runs are still blocked; the new one starts all the same
            if len(started) == k:
                break
            time.sleep(0.01)
    release.set()
    assert started == [START_MS + 1000, START_MS + 2000, START_MS + 3000]


def test_missed_occurrences_fire_once_then_the_rule_resumes(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    runs: list[int] = []
    scheduler = make_scheduler(clock=clock, max_workers=1)
    series = scheduler.every(1, lambda: runs.append(clock.now_ms()))
    advance_to(clock, START_MS + 10_500)  # ten occurrences came while nothing ran
    settle(scheduler)
    assert runs == [START_MS + 10_500]
    assert series.next_run == (START_MS + 11_000) / 1000  # back on start + k * interval


def test_an_explicit_start_is_the_first_run_and_a_past_one_is_skipped_to_now(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler = make_scheduler(clock=clock, max_workers=1)
    future = scheduler.every(60, print, start=(START_MS + 5_000) / 1000)
    assert future.next_run == (START_MS + 5_000) / 1000
    past = scheduler.every(60, print, start=(START_MS - 90_000) / 1000)
    assert past.next_run == (START_MS + 30_000) / 1000  # -90 s + 2 x 60 s


def test_cancel_ends_the_series_and_a_key_replaces_it(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    runs: list[str] = []
    scheduler = make_scheduler(clock=clock, max_workers=1)
    first = scheduler.every(1, runs.append, "first", key="report")
    second = scheduler.every(1, runs.append, "second", key="report")
    assert first.next_run is None
    assert first.ended
    advance_to(clock, START_MS + 1000)
    settle(scheduler)
    assert runs == ["second"]
    assert second.cancel() is True
    assert second.cancel() is False
    assert second.next_run is None
    advance_to(clock, START_MS + 5000)
    settle(scheduler)
    assert runs == ["second"]
    assert len(scheduler) == 0


def test_a_plain_timer_or_cancel_under_the_key_ends_the_series(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    runs: list[str] = []
    scheduler = make_scheduler(clock=clock, max_workers=1)
    series = scheduler.every(1, runs.append, "series", key="k")
    scheduler.call_later(0.5, runs.append, "once", key="k")
    assert series.ended
    advance_to(clock, START_MS + 3000)
    settle(scheduler)
    assert runs == ["once"]
    again = scheduler.every(1, runs.append, "again", key="k")
    assert scheduler.cancel("k") is True
    assert again.ended


def test_cron_runs_on_local_wall_time(make_scheduler: MakeScheduler) -> None:
    berlin = ZoneInfo("Europe/Berlin")
    start = datetime(2025, 3, 29, 23, 0, tzinfo=berlin)
    clock = FakeClock(int(start.timestamp() * 1000))
    runs: list[int] = []
    scheduler = make_scheduler(clock=clock, max_workers=1)
    series = scheduler.cron("30 2 * * *", lambda: runs.append(clock.now_ms()), tz="Europe/Berlin")
    # 02:30 does not happen on 2025-03-30: the run comes when the gap ends, at 03:00
    gap_end = datetime(2025, 3, 30, 3, 0, tzinfo=berlin)
    assert series.next_run == gap_end.timestamp()
    advance_to(clock, int(gap_end.timestamp() * 1000))
    settle(scheduler)
    assert runs == [int(gap_end.timestamp() * 1000)]
    assert series.next_run == datetime(2025, 3, 31, 2, 30, tzinfo=berlin).timestamp()


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda s: s.every(0, print), "every"),
        (lambda s: s.every(float("nan"), print), "every"),
        (lambda s: s.every(1, "not callable"), "fn"),
        (lambda s: s.cron("70 * * * *", print), "cron"),
        (lambda s: s.cron("* * * * *", print, tz="Nowhere/Land"), "timezone"),
        (lambda s: s.cron("* * * * *", print, tz=UTC), "tz"),
        (lambda s: s.every(1, print, key=[1]), "key"),
    ],
)
def test_bad_arguments_are_named(
    make_scheduler: MakeScheduler, clock: FakeClock, call: object, argument: str
) -> None:
    scheduler = make_scheduler(clock=clock)
    with pytest.raises(InvalidArgument) as caught:
        call(scheduler)  # type: ignore[operator]
    assert caught.value.argument == argument


def test_a_closed_scheduler_refuses_a_series(clock: FakeClock) -> None:
    scheduler = Scheduler(clock=clock)
    scheduler.close()
    with pytest.raises(Closed):
        scheduler.every(1, print)


async def test_async_every_runs_coroutines_that_may_overlap(clock: FakeClock) -> None:
    started: list[int] = []
    release = asyncio.Event()

    async def slow() -> None:
        started.append(clock.now_ms())
        await release.wait()

    async with AsyncScheduler(clock=clock) as scheduler:
        series = scheduler.every(1, slow)
        for k in range(1, 4):
            clock.advance_ms(999)
            await settle_loop()
            assert len(started) == k - 1
            clock.advance_ms(1)
            await settle_loop()
            assert len(started) == k
        release.set()
        assert series.cancel()
    assert started == [START_MS + 1000, START_MS + 2000, START_MS + 3000]


async def test_async_cron_with_seconds(clock: FakeClock) -> None:
    runs: list[int] = []
    async with AsyncScheduler(clock=clock) as scheduler:
        scheduler.cron("*/15 * * * * *", lambda: runs.append(clock.now_ms()))
        for step_ms in (10_000, 15_000, 15_000, 15_000):
            clock.advance_ms(step_ms)
            await settle_loop()
    # FakeClock starts at 1_700_000_000_000 ms, 20 s past a quarter minute
    assert runs == [1_700_000_010_000, 1_700_000_025_000, 1_700_000_040_000, 1_700_000_055_000]

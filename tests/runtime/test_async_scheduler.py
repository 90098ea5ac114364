"""`AsyncScheduler`: coroutine and plain callbacks on the running loop, never early, lifecycle.

A `FakeClock` jump reaches the scheduler through ``call_soon_threadsafe``, so after each
advance the tests let the loop turn a few times (`settle`) before looking.
"""

from __future__ import annotations

import asyncio
import logging
import random
from datetime import UTC, datetime, timedelta

import pytest

from tickwheel.errors import Closed, InvalidArgument
from tickwheel.runtime import AsyncScheduler, FakeClock, SystemClock, TimerHandle

WAIT_S = 2.0


async def settle() -> None:
    """Let the loop run what a clock jump queued, and the coroutines that started."""
    for _ in range(10):
        await asyncio.sleep(0)


def due_ms(handle: TimerHandle) -> int:
    return round(handle.when * 1000)


async def test_plain_and_coroutine_callbacks_both_run(clock: FakeClock) -> None:
    ran: list[str] = []
    coro_done = asyncio.Event()

    async def coro(name: str) -> None:
        await asyncio.sleep(0)
        ran.append(name)
        coro_done.set()

    async with AsyncScheduler(clock=clock) as s:
        s.call_later(1, ran.append, "plain")
        s.call_later(1, coro, "coroutine")
        assert len(s) == 2
        clock.advance_ms(1000)
        await asyncio.wait_for(coro_done.wait(), WAIT_S)
        assert sorted(ran) == ["coroutine", "plain"]
        assert len(s) == 0


@pytest.mark.parametrize("delay", [0.001, 0.064, 2.5, 3600.0], ids=["1ms", "64ms", "2.5s", "1h"])
async def test_timer_fires_when_clock_reaches_due_and_not_a_ms_before(
    clock: FakeClock, delay: float
) -> None:
    plain, coro_ran = asyncio.Event(), asyncio.Event()

    async def coro() -> None:
        coro_ran.set()

    async with AsyncScheduler(clock=clock) as s:
        handle = s.call_later(delay, plain.set)
        s.call_later(delay, coro)
        clock.advance_ms(due_ms(handle) - clock.now_ms() - 1)
        await settle()
        assert not plain.is_set()
        assert not coro_ran.is_set()
        clock.advance_ms(1)
        await asyncio.wait_for(asyncio.gather(plain.wait(), coro_ran.wait()), WAIT_S)


async def test_many_timers_never_early_never_lost(clock: FakeClock) -> None:
    rng = random.Random(99)
    ran: dict[int, int] = {}

    async def record_async(n: int) -> None:
        ran[n] = clock.now_ms()

    def record(n: int) -> None:
        ran[n] = clock.now_ms()

    async with AsyncScheduler(clock=clock) as s:
        dues = {}
        for n in range(200):
            delay_ms = rng.choice([rng.randrange(100), rng.randrange(5000), rng.randrange(10**6)])
            fn = record_async if n % 2 else record
            dues[n] = due_ms(s.call_later(delay_ms / 1000, fn, n))
        while len(ran) < len(dues):
            clock.advance_ms(rng.choice([1, rng.randrange(1, 70), rng.randrange(1, 5000), 300_000]))
            await settle()
            now = clock.now_ms()
            for n, due in dues.items():
                if n in ran:
                    assert ran[n] >= due, f"timer {n} ran at {ran[n]}, before its due {due}"
                assert (n in ran) == (now >= due), (n, due, now)


async def test_equal_due_times_fire_in_insertion_order(clock: FakeClock) -> None:
    order: list[int] = []
    async with AsyncScheduler(clock=clock) as s:
        for n in range(30):
            s.call_later(1, order.append, n)
        clock.advance_ms(1000)
        await settle()
    assert order == list(range(30))


async def test_cancel_by_handle_and_key(clock: FakeClock) -> None:
    ran: list[str] = []
    async with AsyncScheduler(clock=clock) as s:
        by_handle = s.call_later(1, ran.append, "handle")
        s.call_later(1, ran.append, "key", key="k")
        s.call_later(1, ran.append, "kept")
        assert by_handle.cancel() is True
        assert by_handle.cancel() is False
        assert s.cancel("k") is True
        assert s.cancel("k") is False
        clock.advance_ms(1000)
        await settle()
        assert ran == ["kept"]


async def test_cancel_after_fire_returns_false(clock: FakeClock) -> None:
    fired = asyncio.Event()
    async with AsyncScheduler(clock=clock) as s:
        handle = s.call_later(0, fired.set)
        await asyncio.wait_for(fired.wait(), WAIT_S)
        assert handle.cancel() is False
        assert handle.reschedule(1) is False


async def test_key_replaces_the_timer_it_names(clock: FakeClock) -> None:
    ran: list[str] = []
    async with AsyncScheduler(clock=clock) as s:
        old = s.call_later(1, ran.append, "old", key="k")
        s.call_later(2, ran.append, "new", key="k")
        assert len(s) == 1
        assert old.cancel() is False
        clock.advance_ms(1000)
        await settle()
        assert ran == []
        clock.advance_ms(1000)
        await settle()
        assert ran == ["new"]


async def test_reschedule_earlier_and_later(clock: FakeClock) -> None:
    ran: list[str] = []
    async with AsyncScheduler(clock=clock) as s:
        start = clock.now_ms()
        earlier = s.call_later(10, ran.append, "earlier")
        later = s.call_later(1, ran.append, "later")
        assert earlier.reschedule(2) is True
        assert later.reschedule(3) is True
        assert (due_ms(earlier), due_ms(later)) == (start + 2000, start + 3000)
        clock.advance_ms(1999)
        await settle()
        assert ran == []
        clock.advance_ms(1)
        await settle()
        assert ran == ["earlier"]
        clock.advance_ms(999)
        await settle()
        assert ran == ["earlier"]
        clock.advance_ms(1)
        await settle()
        assert ran == ["earlier", "later"]


async def test_call_at_aware_datetime_and_naive_rejected(clock: FakeClock) -> None:
    fired = asyncio.Event()
    async with AsyncScheduler(clock=clock) as s:
        target_ms = clock.now_ms() + 1500
        s.call_at(datetime.fromtimestamp(target_ms / 1000, UTC), fired.set)
        clock.advance_ms(1499)
        await settle()
        assert not fired.is_set()
        clock.advance_ms(1)
        await asyncio.wait_for(fired.wait(), WAIT_S)
        with pytest.raises(InvalidArgument) as info:
            s.call_at(datetime(2030, 1, 1), print)
        assert info.value.argument == "when"


async def test_slow_coroutine_does_not_delay_another_timer(clock: FakeClock) -> None:
    started, release, fast = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def slow() -> None:
        started.set()
        await release.wait()

    async with AsyncScheduler(clock=clock) as s:
        s.call_later(1, slow)
        s.call_later(2, fast.set)
        clock.advance_ms(1000)
        await asyncio.wait_for(started.wait(), WAIT_S)
        clock.advance_ms(1000)
        await asyncio.wait_for(fast.wait(), WAIT_S)
        assert not release.is_set()
        release.set()


async def test_callback_errors_are_logged_and_firing_goes_on(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    after = asyncio.Event()

    def plain_boom() -> None:
        raise KeyError("plain")

    async def coro_boom() -> None:
        await asyncio.sleep(0)
        raise LookupError("coroutine")

    async with AsyncScheduler(clock=clock) as s:
        with caplog.at_level(logging.ERROR, logger="tickwheel"):
            s.call_later(1, plain_boom)
            s.call_later(1, coro_boom)
            s.call_later(1, after.set)
            clock.advance_ms(1000)
            await asyncio.wait_for(after.wait(), WAIT_S)
            await settle()
        errors = {
            r.exc_info[0]
            for r in caplog.records
            if r.name == "tickwheel" and r.levelno == logging.ERROR and r.exc_info
        }
        assert errors == {KeyError, LookupError}

        again = asyncio.Event()
        s.call_later(1, again.set)
        clock.advance_ms(1000)
        await asyncio.wait_for(again.wait(), WAIT_S)


async def test_earlier_call_later_rearms_the_alarm_real_clock() -> None:
    clock = SystemClock()
    ran_ns: list[int] = []
    fired = asyncio.Event()

    def record() -> None:
        ran_ns.append(clock.now_ns())
        fired.set()

    async with AsyncScheduler(clock=clock) as s:
        far = s.call_later(10, fired.set)
        await asyncio.sleep(0.02)
        handle = s.call_later(0.05, record)
        await asyncio.wait_for(fired.wait(), 1.0)
        assert far.cancel() is True
    [ran] = ran_ns
    assert ran >= due_ms(handle) * 1_000_000, "fired before its due time"
    assert ran - due_ms(handle) * 1_000_000 < 0.5e9


# ---- lifecycle ---------------------------------------------------------------------------------


async def test_aclose_cancels_running_coroutines(clock: FakeClock) -> None:
    started = asyncio.Event()
    outcome: list[str] = []

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise

    s = AsyncScheduler(clock=clock)
    s.call_later(0, forever)
    s.call_later(0, forever)
    await asyncio.wait_for(started.wait(), WAIT_S)
    await settle()
    await s.aclose()
    assert outcome == ["cancelled", "cancelled"], "aclose returned before the coroutines ended"
    with pytest.raises(Closed):
        s.call_later(0, forever)


async def test_async_with_closes_and_drops_pending_timers(clock: FakeClock) -> None:
    ran: list[str] = []

    async def coro() -> None:
        ran.append("coroutine")

    async with AsyncScheduler(clock=clock) as s:
        s.call_later(1, coro)  # never called, so no "coroutine was never awaited" either
        s.call_later(1, ran.append, "plain")
    clock.advance_ms(5000)
    await settle()
    assert ran == []
    with pytest.raises(Closed):
        s.call_later(0, print)
    with pytest.raises(Closed):
        s.call_at(0, print)


async def test_handles_are_spent_after_close(clock: FakeClock) -> None:
    s = AsyncScheduler(clock=clock)
    plain = s.call_later(1, print)
    keyed = s.call_later(1, print, key="k")
    assert len(s) == 2
    await s.aclose()
    assert len(s) == 0
    assert plain.cancel() is False
    assert keyed.cancel() is False
    assert plain.reschedule(1) is False
    assert len(s) == 0


async def test_many_handles_cancelled_rescheduled_or_left_fire_exactly_as_left(
    clock: FakeClock,
) -> None:
    # cancelled handles are tombstones in the wheel: enough of them to make it sweep
    rng = random.Random(7)
    ran: list[int] = []
    async with AsyncScheduler(clock=clock) as s:
        handles = [s.call_later(rng.randint(1, 5000) / 1000, ran.append, i) for i in range(9000)]
        expected = {}
        for i, handle in enumerate(handles):
            if i % 3 == 0:
                assert handle.cancel() is True
            elif i % 3 == 1:
                assert handle.reschedule(rng.randint(1, 5000) / 1000) is True
                expected[i] = due_ms(handle)
            else:
                expected[i] = due_ms(handle)
        assert len(s) == len(expected)
        for _ in range(5000):
            clock.advance_ms(1)
            await settle()
            now = clock.now_ms()
            assert all(expected[i] <= now for i in ran)
        assert sorted(ran) == sorted(expected)
        assert ran == sorted(ran, key=lambda i: expected[i])
        assert len(s) == 0
        assert all(handle.cancel() is False for handle in handles)


async def test_close_is_idempotent(clock: FakeClock) -> None:
    s = AsyncScheduler(clock=clock)
    s.close()
    s.close()
    await s.aclose()
    with pytest.raises(Closed):
        s.call_later(0, print)


async def test_close_stops_a_coroutine_mid_flight(clock: FakeClock) -> None:
    started = asyncio.Event()
    finished: list[bool] = []

    async def slow() -> None:
        started.set()
        await asyncio.sleep(30)
        finished.append(True)

    s = AsyncScheduler(clock=clock)
    s.call_later(0, slow)
    await asyncio.wait_for(started.wait(), WAIT_S)
    s.close()
    await settle()
    await s.aclose()
    assert finished == []


def test_needs_a_running_loop() -> None:
    with pytest.raises(RuntimeError):
        AsyncScheduler()


async def test_timedelta_delay(clock: FakeClock) -> None:
    fired = asyncio.Event()
    async with AsyncScheduler(clock=clock) as s:
        handle = s.call_later(timedelta(milliseconds=250), fired.set)
        assert due_ms(handle) == clock.now_ms() + 250
        clock.advance_ms(249)
        await settle()
        assert not fired.is_set()
        clock.advance_ms(1)
        await asyncio.wait_for(fired.wait(), WAIT_S)


@pytest.mark.parametrize("offset_ms", [0, 1, 123, 86_400_123])
async def test_call_at_ms_fires_on_exactly_that_ms(clock: FakeClock, offset_ms: int) -> None:
    # 1_700_000_000.123 s is not exact as a float; integer ms are
    fired = asyncio.Event()
    async with AsyncScheduler(clock=clock) as s:
        due = clock.now_ms() + offset_ms
        handle = s.call_at_ms(due, fired.set)
        assert due_ms(handle) == due
        if offset_ms:
            clock.advance_ms(offset_ms - 1)
            await settle()
            assert not fired.is_set()
            clock.advance_ms(1)
        await asyncio.wait_for(fired.wait(), WAIT_S)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1", 253_402_300_800_000])
async def test_call_at_ms_rejects_what_is_not_an_epoch_ms(clock: FakeClock, bad: object) -> None:
    async with AsyncScheduler(clock=clock) as s:
        with pytest.raises(InvalidArgument) as info:
            s.call_at_ms(bad, print)  # type: ignore[arg-type]
        assert info.value.argument == "due_ms"
        assert len(s) == 0

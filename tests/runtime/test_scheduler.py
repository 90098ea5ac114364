"""The thread `Scheduler`: due times on a `FakeClock`, order, keys, handles, errors, lifecycle.

Timing is checked on a `FakeClock`: a timer must not run before the clock reaches its due
millisecond and must run once it does. "Has not run" is made deterministic with `settle`, which
needs ``max_workers=1``. Only the tests named ``*_real_clock`` sleep, and they bound lateness
loosely.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from tickwheel.errors import Closed, InvalidArgument
from tickwheel.runtime import FakeClock, Scheduler, SystemClock, TimerHandle

# bound on "a worker thread gets round to it"; only reached when something is wrong
WAIT_S = 2.0
YEAR_S = 365 * 24 * 3600

MakeScheduler = Callable[..., Scheduler]


def settle(scheduler: Scheduler) -> None:
    """Return once every callback due by the clock's current time has run (``max_workers=1``).

    A barrier timer due now is handed to the single worker after anything the driver already
    released, and after anything released by the same advance (those sort by due time, the
    barrier's is now); a second barrier, added once the first ran, comes after all of them.
    """
    for _ in range(2):
        done = threading.Event()
        scheduler.call_later(0, done.set)
        assert done.wait(WAIT_S), "the scheduler did not run a timer due now"


def due_ms(handle: TimerHandle) -> int:
    return round(handle.when * 1000)


def advance_to(clock: FakeClock, ms: int) -> None:
    clock.advance_ms(ms - clock.now_ms())


# ---- due times ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "delay",
    [0.001, 0.063, 0.064, 1.5, 4.097, 3600.0, 400 * 24 * 3600.0],
    ids=["1ms", "63ms", "64ms", "1.5s", "4.097s", "1h", "400d"],
)
def test_timer_fires_when_clock_reaches_due_and_not_a_ms_before(
    clock: FakeClock, make_scheduler: MakeScheduler, delay: float
) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    fired = threading.Event()
    handle = s.call_later(delay, fired.set)
    # the float's exact value may be a hair over the ms (4.097 is 4.09700000000000042): round up
    assert 0 <= due_ms(handle) - (clock.now_ms() + round(delay * 1000)) <= 1

    advance_to(clock, due_ms(handle) - 1)
    settle(s)
    assert not fired.is_set()
    assert len(s) == 1

    clock.advance_ms(1)
    assert fired.wait(WAIT_S)
    assert len(s) == 0


def test_timer_fires_in_small_steps_only_at_due(
    clock: FakeClock, make_scheduler: MakeScheduler
) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    fired = threading.Event()
    handle = s.call_later(0.2, fired.set)
    while clock.now_ms() < due_ms(handle) - 1:
        clock.advance_ms(7 if due_ms(handle) - clock.now_ms() > 8 else 1)
        settle(s)
        assert not fired.is_set(), f"fired at {clock.now_ms()}, due {due_ms(handle)}"
    clock.advance_ms(1)
    assert fired.wait(WAIT_S)


@pytest.mark.parametrize("tick_ms", [1, 10])
def test_many_timers_never_early_never_lost(
    clock: FakeClock, make_scheduler: MakeScheduler, tick_ms: int
) -> None:
    """Random timers and random clock jumps: after each settle, exactly the due ones have run."""
    rng = random.Random(1234 + tick_ms)
    s = make_scheduler(clock=clock, max_workers=1, tick_ms=tick_ms)
    ran: dict[int, int] = {}  # timer -> clock time it ran at

    def record(n: int) -> None:
        ran[n] = clock.now_ms()

    dues: dict[int, int] = {}
    for n in range(300):
        delay_ms = rng.choice(
            [rng.randrange(0, 100), rng.randrange(0, 5000), rng.randrange(0, 10**6)]
        )
        dues[n] = due_ms(s.call_later(delay_ms / 1000, record, n))
    while len(ran) < len(dues):
        # whole ticks only: a barrier due now waits for the next tick boundary otherwise
        step = rng.choice([1, rng.randrange(1, 70), rng.randrange(1, 5000), 300_000])
        clock.advance_ms(step * tick_ms)
        settle(s)
        now = clock.now_ms()
        for n, due in dues.items():
            if n in ran:
                assert ran[n] >= due, f"timer {n} ran at {ran[n]}, before its due {due}"
            # with tick_ms > 1 a timer may wait for the next tick boundary
            assert (n in ran) == (now // tick_ms * tick_ms >= due), (n, due, now)
    assert len(s) == 0


def test_equal_due_times_fire_in_insertion_order(
    clock: FakeClock, make_scheduler: MakeScheduler
) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    order: list[int] = []
    for n in range(50):
        s.call_later(1.0, order.append, n, key=("k", n) if n % 3 == 0 else None)
    clock.advance_ms(1000)
    settle(s)
    assert order == list(range(50))


def test_one_jump_fires_everything_due_in_due_order(
    clock: FakeClock, make_scheduler: MakeScheduler
) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    order: list[tuple[int, int]] = []
    delays_ms = [5000, 1, 64, 4096, 63, 1, 262_144, 4095, 5000, 65]
    for n, delay in enumerate(delays_ms):
        s.call_later(delay / 1000, order.append, (delay, n))
    clock.advance_ms(300_000)
    settle(s)
    assert order == sorted(order)
    assert len(order) == len(delays_ms)


def test_callback_receives_its_arguments(clock: FakeClock, make_scheduler: MakeScheduler) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    got: list[tuple[Any, ...]] = []
    s.call_later(0, lambda *args: got.append(args), 1, "two", None)
    settle(s)
    assert got == [(1, "two", None)]


def test_a_callback_can_schedule_another(clock: FakeClock, make_scheduler: MakeScheduler) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    second = threading.Event()
    s.call_later(1, lambda: s.call_later(1, second.set))
    clock.advance_ms(1000)
    settle(s)
    assert not second.is_set()
    clock.advance_ms(1000)
    assert second.wait(WAIT_S)


# ---- keys and handles --------------------------------------------------------------------------


def test_key_replaces_the_timer_it_names(clock: FakeClock, make_scheduler: MakeScheduler) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    ran: list[str] = []
    old = s.call_later(1, ran.append, "old", key="k")
    new = s.call_later(2, ran.append, "new", key="k")
    assert len(s) == 1
    assert new.key == "k"
    assert old.cancel() is False
    assert old.reschedule(0) is False

    clock.advance_ms(1000)
    settle(s)
    assert ran == []
    clock.advance_ms(1000)
    settle(s)
    assert ran == ["new"]


def test_key_can_move_a_timer_earlier(clock: FakeClock, make_scheduler: MakeScheduler) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    ran: list[str] = []
    s.call_later(10, ran.append, "late", key="k")
    s.call_later(1, ran.append, "early", key="k")
    clock.advance_ms(1000)
    settle(s)
    assert ran == ["early"]
    clock.advance_ms(10_000)
    settle(s)
    assert ran == ["early"]


def test_scheduler_cancel_by_key(clock: FakeClock, make_scheduler: MakeScheduler) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    ran: list[str] = []
    s.call_later(1, ran.append, "a", key="a")
    s.call_later(1, ran.append, "b", key=("b", 2))
    assert s.cancel("a") is True
    assert s.cancel("a") is False
    assert s.cancel("never") is False
    assert len(s) == 1
    clock.advance_ms(1000)
    settle(s)
    assert ran == ["b"]
    assert s.cancel(("b", 2)) is False


def test_handle_cancel(clock: FakeClock, make_scheduler: MakeScheduler) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    ran: list[str] = []
    cancelled = s.call_later(1, ran.append, "cancelled")
    kept = s.call_later(1, ran.append, "kept")
    assert cancelled.cancel() is True
    assert cancelled.cancel() is False
    clock.advance_ms(1000)
    settle(s)
    assert ran == ["kept"]
    assert kept.cancel() is False, "cancel after the timer fired must return False"
    assert cancelled.reschedule(1) is False


def test_handle_reschedule_earlier_and_later(
    clock: FakeClock, make_scheduler: MakeScheduler
) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    ran: list[str] = []
    earlier = s.call_later(10, ran.append, "earlier")
    later = s.call_later(1, ran.append, "later", key="later")
    start = clock.now_ms()

    assert earlier.reschedule(2) is True
    assert due_ms(earlier) == start + 2000
    assert later.reschedule(timedelta(seconds=3)) is True
    assert due_ms(later) == start + 3000
    assert len(s) == 2

    advance_to(clock, start + 1999)
    settle(s)
    assert ran == []
    clock.advance_ms(1)
    settle(s)
    assert ran == ["earlier"]
    advance_to(clock, start + 2999)
    settle(s)
    assert ran == ["earlier"]
    clock.advance_ms(1)
    settle(s)
    assert ran == ["earlier", "later"]
    assert earlier.reschedule(1) is False, "reschedule after firing must return False"
    assert len(s) == 0


def test_reschedule_is_relative_to_now(clock: FakeClock, make_scheduler: MakeScheduler) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    fired = threading.Event()
    handle = s.call_later(5, fired.set)
    clock.advance_ms(4000)
    handle.reschedule(5)
    clock.advance_ms(1000)
    settle(s)
    assert not fired.is_set()
    advance_to(clock, due_ms(handle))
    assert fired.wait(WAIT_S)


def test_handle_repr_names_the_callback(clock: FakeClock, make_scheduler: MakeScheduler) -> None:
    s = make_scheduler(clock=clock, max_workers=1)

    def my_callback() -> None:
        pass

    assert "my_callback" in repr(s.call_later(1, my_callback, key="k"))


# ---- call_at -----------------------------------------------------------------------------------


@pytest.mark.parametrize("tz", [UTC, timezone(timedelta(hours=-7)), timezone(timedelta(hours=5.5))])
def test_call_at_aware_datetime(clock: FakeClock, make_scheduler: MakeScheduler, tz: Any) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    fired = threading.Event()
    target_ms = clock.now_ms() + 2500
    when = datetime.fromtimestamp(target_ms / 1000, tz)
    handle = s.call_at(when, fired.set)
    assert due_ms(handle) == target_ms

    advance_to(clock, target_ms - 1)
    settle(s)
    assert not fired.is_set()
    clock.advance_ms(1)
    assert fired.wait(WAIT_S)


def test_call_at_epoch_seconds(clock: FakeClock, make_scheduler: MakeScheduler) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    fired = threading.Event()
    target_ms = clock.now_ms() + 1234
    handle = s.call_at(target_ms / 1000, fired.set)
    assert due_ms(handle) == target_ms
    advance_to(clock, target_ms - 1)
    settle(s)
    assert not fired.is_set()
    clock.advance_ms(1)
    assert fired.wait(WAIT_S)


def test_call_at_in_the_past_fires_at_once(clock: FakeClock, make_scheduler: MakeScheduler) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    fired = threading.Event()
    s.call_at(datetime(2000, 1, 1, tzinfo=UTC), fired.set)
    assert fired.wait(WAIT_S)


def test_call_at_naive_datetime_is_rejected(
    clock: FakeClock, make_scheduler: MakeScheduler
) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    with pytest.raises(InvalidArgument) as info:
        s.call_at(datetime(2030, 1, 1), print)
    assert info.value.argument == "when"
    assert isinstance(info.value, ValueError)
    assert len(s) == 0


def test_delay_of_years_is_accepted_and_pending(
    clock: FakeClock, make_scheduler: MakeScheduler
) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    fired = threading.Event()
    handle = s.call_later(50 * YEAR_S, fired.set)
    by_timedelta = s.call_later(timedelta(days=3650), fired.set)
    assert due_ms(handle) == clock.now_ms() + 50 * YEAR_S * 1000
    assert due_ms(by_timedelta) == clock.now_ms() + 3650 * 86_400_000
    assert len(s) == 2
    clock.advance_ms(YEAR_S * 1000)
    settle(s)
    assert not fired.is_set()
    assert len(s) == 2
    assert handle.cancel() is True
    assert by_timedelta.cancel() is True


# ---- errors and concurrency --------------------------------------------------------------------


def test_callback_that_raises_is_logged_and_firing_goes_on(
    clock: FakeClock, make_scheduler: MakeScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    after = threading.Event()

    def boom() -> None:
        raise ZeroDivisionError("boom")

    s.call_later(1, boom, key="bad")
    s.call_later(1, after.set)
    with caplog.at_level(logging.ERROR, logger="tickwheel"):
        clock.advance_ms(1000)
        assert after.wait(WAIT_S)
    [record] = [r for r in caplog.records if r.name == "tickwheel"]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert record.exc_info[0] is ZeroDivisionError
    assert "boom" in record.getMessage()

    # the worker that ran the failing callback is still there
    again = threading.Event()
    s.call_later(1, again.set)
    clock.advance_ms(1000)
    assert again.wait(WAIT_S)


def test_slow_callback_does_not_delay_another_timer(
    clock: FakeClock, make_scheduler: MakeScheduler
) -> None:
    s = make_scheduler(clock=clock, max_workers=2)
    started, release, fast = threading.Event(), threading.Event(), threading.Event()

    def slow() -> None:
        started.set()
        release.wait(10)

    try:
        s.call_later(1, slow)
        s.call_later(2, fast.set)
        clock.advance_ms(1000)
        assert started.wait(WAIT_S)
        clock.advance_ms(1000)
        assert fast.wait(WAIT_S), "a blocked callback held up another worker's timer"
        assert not release.is_set()
    finally:
        release.set()


def test_earlier_call_later_wakes_a_sleeping_driver_real_clock(
    make_scheduler: MakeScheduler,
) -> None:
    clock = SystemClock()
    s = make_scheduler(clock=clock, max_workers=1)
    fired = threading.Event()
    ran_ns: list[int] = []
    far = s.call_later(10, fired.set)
    time.sleep(0.05)  # the driver is now asleep until the timer 10 s away

    def record() -> None:
        ran_ns.append(clock.now_ns())
        fired.set()

    handle = s.call_later(0.05, record)
    assert fired.wait(1.0), "the driver slept through an earlier timer"
    assert far.cancel() is True
    [ran] = ran_ns
    assert ran >= due_ms(handle) * 1_000_000, "fired before its due time"
    assert ran - due_ms(handle) * 1_000_000 < 0.5e9


def test_fake_clock_jump_wakes_a_driver_sleeping_on_a_far_timer(
    clock: FakeClock, make_scheduler: MakeScheduler
) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    fired = threading.Event()
    s.call_later(3600, fired.set)
    time.sleep(0.02)  # let the driver go to sleep for an hour of real time
    clock.advance_ms(3600 * 1000)
    assert fired.wait(WAIT_S)


# ---- lifecycle ---------------------------------------------------------------------------------


def test_close_is_idempotent_and_later_calls_raise_closed(
    clock: FakeClock, make_scheduler: MakeScheduler
) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    fired = threading.Event()
    s.call_later(1, fired.set)
    s.close()
    s.close()
    with pytest.raises(Closed):
        s.call_later(1, print)
    with pytest.raises(Closed):
        s.call_at(time.time() + 1, print)
    assert issubclass(Closed, RuntimeError)
    clock.advance_ms(5000)
    assert not [t for t in threading.enumerate() if t.name.startswith("tickwheel-")]
    assert not fired.is_set(), "a timer pending at close ran"


def test_handles_are_spent_after_close(clock: FakeClock, make_scheduler: MakeScheduler) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    plain = s.call_later(1, print)
    keyed = s.call_later(1, print, key="k")
    assert len(s) == 2
    s.close()
    assert len(s) == 0
    assert plain.cancel() is False
    assert keyed.cancel() is False
    assert plain.reschedule(1) is False
    assert len(s) == 0


def test_handles_cancelled_from_other_threads_never_run(
    clock: FakeClock, make_scheduler: MakeScheduler
) -> None:
    s = make_scheduler(clock=clock, max_workers=2)
    ran: list[int] = []
    handles = [s.call_later(1 + i % 50 / 1000, ran.append, i) for i in range(4000)]
    threads = [
        threading.Thread(target=lambda part=part: [h.cancel() for h in handles[part::4]])
        for part in (0, 2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(s) == 2000
    clock.advance_ms(1100)
    deadline = time.monotonic() + WAIT_S
    while len(ran) < 2000 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(ran) == [i for i in range(4000) if i % 4 in (1, 3)]


def test_context_manager_closes(clock: FakeClock) -> None:
    with Scheduler(clock=clock, max_workers=2) as s:
        fired = threading.Event()
        s.call_later(0, fired.set)
        assert fired.wait(WAIT_S)
    assert not [t for t in threading.enumerate() if t.name.startswith("tickwheel-")]
    with pytest.raises(Closed):
        s.call_later(0, print)


def test_context_manager_closes_on_error(clock: FakeClock) -> None:
    with pytest.raises(KeyError), Scheduler(clock=clock, max_workers=1) as s:
        raise KeyError("x")
    with pytest.raises(Closed):
        s.call_later(0, print)


def test_close_waits_for_a_running_callback(
    clock: FakeClock, make_scheduler: MakeScheduler, spawn: Callable[..., Any]
) -> None:
    s = make_scheduler(clock=clock, max_workers=1)
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def slow() -> None:
        started.set()
        release.wait(10)
        finished.set()

    s.call_later(0, slow)
    assert started.wait(WAIT_S)
    closer = spawn(s.close)
    try:
        assert not closer.wait(0.05), "close returned while a callback was still running"
    finally:
        release.set()
    assert closer.wait(WAIT_S)
    assert closer.error is None
    assert finished.is_set()


def test_close_from_inside_a_callback(clock: FakeClock, make_scheduler: MakeScheduler) -> None:
    s = make_scheduler(clock=clock, max_workers=2)
    closed = threading.Event()

    def close_it() -> None:
        s.close()
        closed.set()

    s.call_later(0, close_it)
    assert closed.wait(WAIT_S), "close() called from a callback deadlocked"
    with pytest.raises(Closed):
        s.call_later(0, print)

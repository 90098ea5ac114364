"""Bad arguments raise `InvalidArgument` naming the argument, and leave the driver unchanged.

`InvalidArgument` is a `ValueError` (and a `TickwheelError`) whose `argument` attribute is one of
"delay", "when", "timeout", "fn" or "key", and whose message starts with that name.
"""

from __future__ import annotations

import math
import queue
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tickwheel.errors import Closed, InvalidArgument, TickwheelError
from tickwheel.runtime import (
    AsyncDelayQueue,
    AsyncScheduler,
    DelayQueue,
    FakeClock,
    Scheduler,
    TimerHandle,
)

BAD_DELAYS = [
    pytest.param(-1, id="negative-int"),
    pytest.param(-0.001, id="negative-float"),
    pytest.param(timedelta(seconds=-1), id="negative-timedelta"),
    pytest.param(math.nan, id="nan"),
    pytest.param(math.inf, id="inf"),
    pytest.param(-math.inf, id="-inf"),
    pytest.param("1", id="str"),
    pytest.param(b"1", id="bytes"),
    pytest.param(True, id="True"),
    pytest.param(False, id="False"),
    pytest.param(1e20, id="after-year-9999"),
    pytest.param(10**400, id="int-too-big-for-float"),
    pytest.param(timedelta.max, id="timedelta.max"),
]
# finite floats so large that seconds * 1e9 overflows to inf inside the due-time arithmetic
OVERFLOWING_DELAYS = [1e300, sys.float_info.max]

NAIVE = datetime(2030, 1, 1)
BAD_WHENS = [
    pytest.param(NAIVE, id="naive-datetime"),
    pytest.param(math.nan, id="nan"),
    pytest.param(math.inf, id="inf"),
    pytest.param(-math.inf, id="-inf"),
    pytest.param("2030-01-01", id="str"),
    pytest.param(True, id="True"),
    pytest.param(timedelta(seconds=5), id="timedelta"),
    pytest.param(1e20, id="after-year-9999"),
    pytest.param(10**400, id="int-too-big-for-float"),
]
# finite floats so large that seconds * 1000 overflows to inf
OVERFLOWING_WHENS = [1e306, -1e306, -sys.float_info.max]

BAD_TIMEOUTS = [
    pytest.param(-1, id="negative-int"),
    pytest.param(-0.001, id="negative-float"),
    pytest.param(math.nan, id="nan"),
    pytest.param(math.inf, id="inf"),
    pytest.param("1", id="str"),
    pytest.param(True, id="True"),
    pytest.param(10**400, id="int-too-big-for-float"),
]

NOT_CALLABLE = [
    pytest.param(None, id="None"),
    pytest.param("print", id="str"),
    pytest.param(42, id="int"),
    pytest.param(object(), id="object"),
]

UNHASHABLE = [
    pytest.param([1], id="list"),
    pytest.param({}, id="dict"),
    pytest.param({1}, id="set"),
    pytest.param(bytearray(b"k"), id="bytearray"),
]


def noop() -> None:
    pass


def rejection(call: Callable[[], object], argument: str) -> str:
    """Return "" when `call` raises InvalidArgument naming `argument`, else what it did."""
    try:
        call()
    except InvalidArgument as err:
        return "" if err.argument == argument else repr(err)
    except Exception as err:
        return repr(err)
    return "accepted"


def check(info: pytest.ExceptionInfo[InvalidArgument], argument: str) -> None:
    err = info.value
    assert err.argument == argument
    assert isinstance(err, ValueError)
    assert isinstance(err, TickwheelError)
    assert str(err).startswith(f"{argument}:"), str(err)


@dataclass
class Targets:
    """A scheduler and a queue, each holding one entry, so a rejected call can be seen to change
    nothing."""

    clock: FakeClock
    scheduler: Scheduler | AsyncScheduler
    queue: DelayQueue[str] | AsyncDelayQueue[str]
    handle: TimerHandle
    key: object

    def unchanged(self) -> None:
        assert len(self.scheduler) == 1
        assert len(self.queue) == 1
        assert self.handle.when == (self.clock.now_ms() + 1000) / 1000
        self.clock.advance_ms(999)
        with pytest.raises(queue.Empty):
            self.queue.get_nowait()
        self.clock.advance_ms(1)
        assert self.queue.get_nowait() == "held"


@pytest.fixture
def sync_targets(
    clock: FakeClock,
    make_scheduler: Callable[..., Scheduler],
    make_queue: Callable[..., DelayQueue[Any]],
) -> Targets:
    scheduler = make_scheduler(clock=clock, max_workers=1)
    q = make_queue(clock=clock)
    return Targets(clock, scheduler, q, scheduler.call_later(1, noop), q.put("held", 1))


@pytest.fixture
async def async_targets(clock: FakeClock) -> AsyncIterator[Targets]:
    scheduler = AsyncScheduler(clock=clock)
    q: AsyncDelayQueue[str] = AsyncDelayQueue(clock=clock)
    try:
        yield Targets(clock, scheduler, q, scheduler.call_later(1, noop), q.put("held", 1))
    finally:
        q.close()
        await scheduler.aclose()


DELAY_CALLS: dict[str, Callable[[Targets, Any], object]] = {
    "call_later": lambda t, v: t.scheduler.call_later(v, noop),
    "handle.reschedule": lambda t, v: t.handle.reschedule(v),
    "put": lambda t, v: t.queue.put("x", v),
    "queue.reschedule": lambda t, v: t.queue.reschedule(t.key, v),
}
WHEN_CALLS: dict[str, Callable[[Targets, Any], object]] = {
    "call_at": lambda t, v: t.scheduler.call_at(v, noop),
    "put": lambda t, v: t.queue.put("x", when=v),
}
FN_CALLS: dict[str, Callable[[Targets, Any], object]] = {
    "call_later": lambda t, v: t.scheduler.call_later(1, v),
    "call_at": lambda t, v: t.scheduler.call_at(time.time() + 1, v),
}
KEY_CALLS: dict[str, Callable[[Targets, Any], object]] = {
    "call_later": lambda t, v: t.scheduler.call_later(1, noop, key=v),
    "call_at": lambda t, v: t.scheduler.call_at(time.time() + 1, noop, key=v),
    "put": lambda t, v: t.queue.put("x", 1, key=v),
}


# ---- thread scheduler and queue ----------------------------------------------------------------


@pytest.mark.parametrize("call", DELAY_CALLS)
@pytest.mark.parametrize("delay", BAD_DELAYS)
def test_bad_delay(sync_targets: Targets, call: str, delay: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        DELAY_CALLS[call](sync_targets, delay)
    check(info, "delay")
    sync_targets.unchanged()


def test_overflowing_delay(sync_targets: Targets) -> None:
    # a finite delay so large that seconds * 1e9 overflows is still InvalidArgument
    wrong = {
        f"{call}({delay!r})": outcome
        for call, do in DELAY_CALLS.items()
        for delay in OVERFLOWING_DELAYS
        if (outcome := rejection(lambda: do(sync_targets, delay), "delay"))  # noqa: B023
    }
    assert not wrong
    sync_targets.unchanged()


@pytest.mark.parametrize("call", WHEN_CALLS)
@pytest.mark.parametrize("when", BAD_WHENS)
def test_bad_when(sync_targets: Targets, call: str, when: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        WHEN_CALLS[call](sync_targets, when)
    check(info, "when")
    sync_targets.unchanged()


def test_overflowing_when(sync_targets: Targets) -> None:
    # a finite `when` whose milliseconds overflow a float is still InvalidArgument
    wrong = {
        f"{call}({when!r})": outcome
        for call, do in WHEN_CALLS.items()
        for when in OVERFLOWING_WHENS
        if (outcome := rejection(lambda: do(sync_targets, when), "when"))  # noqa: B023
    }
    assert not wrong
    sync_targets.unchanged()


def test_put_with_both_delay_and_when(sync_targets: Targets) -> None:
    with pytest.raises(InvalidArgument) as info:
        sync_targets.queue.put("x", 1, when=time.time() + 1)
    check(info, "when")
    sync_targets.unchanged()


def test_call_later_delay_none(sync_targets: Targets) -> None:
    with pytest.raises(InvalidArgument) as info:
        sync_targets.scheduler.call_later(None, noop)  # type: ignore[arg-type]
    check(info, "delay")


@pytest.mark.parametrize("call", FN_CALLS)
@pytest.mark.parametrize("fn", NOT_CALLABLE)
def test_not_callable(sync_targets: Targets, call: str, fn: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        FN_CALLS[call](sync_targets, fn)
    check(info, "fn")
    sync_targets.unchanged()


@pytest.mark.parametrize("call", KEY_CALLS)
@pytest.mark.parametrize("key", UNHASHABLE)
def test_unhashable_key(sync_targets: Targets, call: str, key: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        KEY_CALLS[call](sync_targets, key)
    check(info, "key")
    sync_targets.unchanged()


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS)
def test_bad_timeout(sync_targets: Targets, timeout: object) -> None:
    assert isinstance(sync_targets.queue, DelayQueue)
    with pytest.raises(InvalidArgument) as info:
        sync_targets.queue.get(timeout=timeout)  # type: ignore[arg-type]
    check(info, "timeout")
    sync_targets.unchanged()


def test_huge_timeout_on_an_empty_queue(
    clock: FakeClock, make_queue: Callable[..., DelayQueue[Any]], spawn: Callable[..., Any]
) -> None:
    # a timeout beyond the platform's limit is waited out in capped slices
    q = make_queue(clock=clock)
    getter = spawn(q.get, 1e10)
    blocked = not getter.wait(0.05)
    q.close()
    assert getter.wait(2.0)
    if not (isinstance(getter.error, InvalidArgument) and getter.error.argument == "timeout"):
        assert blocked, f"get(timeout=1e10) returned at once with {getter.error!r}"
        assert isinstance(getter.error, Closed)


def test_good_edge_values_are_accepted(sync_targets: Targets) -> None:
    s, q = sync_targets.scheduler, sync_targets.queue
    assert isinstance(q, DelayQueue)
    s.call_later(0, noop).cancel()
    s.call_later(0.0, noop).cancel()
    s.call_later(timedelta(0), noop).cancel()
    s.call_later(10**9, noop).cancel()  # about 31 years
    s.call_at(0, noop, key=("epoch", 0))  # in the past: due at once
    s.call_at(datetime(9999, 12, 31, tzinfo=UTC), noop).cancel()
    q.cancel(q.put("x", timedelta(0), key=frozenset({1})))
    q.cancel(q.put("x", when=datetime(9999, 12, 31, tzinfo=UTC)))
    with pytest.raises(queue.Empty):
        q.get(timeout=0)
    with pytest.raises(queue.Empty):
        q.get(timeout=0.0)


# ---- asyncio scheduler and queue ---------------------------------------------------------------


@pytest.mark.parametrize("call", DELAY_CALLS)
@pytest.mark.parametrize("delay", BAD_DELAYS)
async def test_async_bad_delay(async_targets: Targets, call: str, delay: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        DELAY_CALLS[call](async_targets, delay)
    check(info, "delay")
    async_targets.unchanged()


@pytest.mark.parametrize("call", WHEN_CALLS)
@pytest.mark.parametrize("when", BAD_WHENS)
async def test_async_bad_when(async_targets: Targets, call: str, when: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        WHEN_CALLS[call](async_targets, when)
    check(info, "when")
    async_targets.unchanged()


@pytest.mark.parametrize("call", FN_CALLS)
@pytest.mark.parametrize("fn", NOT_CALLABLE)
async def test_async_not_callable(async_targets: Targets, call: str, fn: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        FN_CALLS[call](async_targets, fn)
    check(info, "fn")
    async_targets.unchanged()


@pytest.mark.parametrize("call", KEY_CALLS)
@pytest.mark.parametrize("key", UNHASHABLE)
async def test_async_unhashable_key(async_targets: Targets, call: str, key: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        KEY_CALLS[call](async_targets, key)
    check(info, "key")
    async_targets.unchanged()

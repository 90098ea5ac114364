"""What the thread and asyncio schedulers share: handles, keys and the wheel under a lock."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from time import monotonic_ns
from typing import Any

from tickwheel.core import TimingWheel, WheelEntry
from tickwheel.errors import Closed, InvalidArgument
from tickwheel.recurrence import Cron, Recurrence, every_seconds
from tickwheel.runtime._args import (
    YEAR_S,
    check_callable,
    check_due_ms,
    check_key,
    check_tick,
    due_after,
    due_at,
)
from tickwheel.runtime.clock import NS_PER_MS, Clock, SystemClock
from tickwheel.runtime.series import Series


class TimerHandle(WheelEntry):
    """One scheduled call, returned by `call_later` and `call_at`; cancel or move it.

    Without a key the handle is itself the wheel's entry: its `cancel` (`WheelEntry.cancel`)
    flags it, one call and no lookup. `AsyncScheduler` makes these: the loop's thread owns
    its wheel. `Scheduler` makes `LockedHandle`, which takes the scheduler's lock around it.
    """

    __slots__ = ("_args", "_fn", "_owner")

    # the key and the recurring call the timer belongs to: slots of `KeyedHandle` and
    # `Occurrence` only, so that a plain call's handle is five slots (72 bytes) long
    key: Hashable | None = None
    series: Series | None = None

    def __init__(
        self, owner: WheelTimers, due_ms: int, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> None:
        self._owner = owner
        self._due = due_ms
        self._wheel = None  # not filed yet
        self._fn = fn
        self._args = args

    @property
    def when(self) -> float:
        """When the call is due, in epoch seconds."""
        return self.due_ms / 1000

    def reschedule(self, delay: float) -> bool:
        """Move the call to `delay` seconds from now; return whether it was still pending."""
        return self._owner.reschedule_handle(self, delay)

    def run(self) -> Any:
        """Make the call."""
        return self._fn(*self._args)

    def __repr__(self) -> str:
        name = getattr(self._fn, "__qualname__", repr(self._fn))
        return f"<TimerHandle {name} key={self.key!r} when={self.when:.3f}>"


class KeyedHandle(TimerHandle):
    """The handle of a call scheduled under a key, filed in the wheel under that key."""

    __slots__ = ("key",)

    def __init__(
        self,
        owner: WheelTimers,
        key: Hashable,
        due_ms: int,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
    ) -> None:
        super().__init__(owner, due_ms, fn, args)
        self.key = key

    def cancel(self) -> bool:
        """Stop the call; return whether it was still pending."""
        return self._owner.cancel_handle(self)


class Occurrence(TimerHandle):
    """The handle of one occurrence of a recurring call (`every`, `cron`)."""

    __slots__ = ("key", "series")

    def __init__(self, owner: WheelTimers, series: Series, due_ms: int) -> None:
        super().__init__(owner, due_ms, series.occur, (due_ms,))
        self.key = series.key
        self.series = series

    def cancel(self) -> bool:
        """Stop this occurrence; return whether it was still pending."""
        return self._owner.cancel_handle(self)


class LockedHandle(TimerHandle):
    """The handle of a plain call of `Scheduler`: cancelled under the scheduler's lock."""

    __slots__ = ()

    def cancel(self) -> bool:
        """Stop the call; return whether it was still pending."""
        # acquire and release by hand: half the cost of a `with` block on CPython 3.11
        lock = self._owner._lock
        lock.acquire()
        try:
            return WheelEntry.cancel(self)
        finally:
            lock.release()


# makes a handle without running `__init__`; the hot paths set its five slots themselves
new_handle: Callable[[type[TimerHandle]], TimerHandle] = object.__new__


class WheelTimers(ABC):
    """`call_later` / `call_at` / `cancel` over a `TimingWheel` guarded by one lock.

    Subclasses own the loop that advances the wheel; `_wake_before` tells them a timer was
    added earlier than their planned wake-up.
    """

    # the class of a plain call's handle: its `cancel` takes the lock, or not
    _handle_type: type[TimerHandle] = LockedHandle

    def __init__(self, clock: Clock | None, tick_ms: int) -> None:
        self._clock: Clock = clock or SystemClock()
        # a SystemClock is read here as its now_ns does, sparing `call_later` a method call
        self._system = type(self._clock) is SystemClock
        self._offset_ns = self._clock.offset_ns if isinstance(self._clock, SystemClock) else 0
        self._lock = threading.Lock()
        # waits and wake-ups go through the condition; plain `with self._lock` is cheaper
        self._cond = threading.Condition(self._lock)
        self._wheel: TimingWheel[Hashable, TimerHandle] = TimingWheel(
            self._clock.now_ns() // NS_PER_MS, check_tick(tick_ms)
        )
        self._wake_at: int | None = None
        self._closed = False
        # the series holding each key, so a later timer under its key ends it
        self._series: dict[Hashable, Series] = {}

    def __len__(self) -> int:
        return len(self._wheel)

    def call_later(
        self, delay: float, fn: Callable[..., Any], *args: Any, key: Hashable | None = None
    ) -> TimerHandle:
        """Call ``fn(*args)`` after `delay` seconds; a `key` replaces the timer it names."""
        if key is not None or not callable(fn):
            check_callable(fn)
            return self._add(due_after(delay, self._clock.now_ns()), fn, args, key)
        # a plain call, the common case: its handle is the wheel's entry, filed under the lock
        now_ns = monotonic_ns() + self._offset_ns if self._system else self._clock.now_ns()
        if (type(delay) is float or type(delay) is int) and 0.0 < delay <= YEAR_S:
            due_ms = (now_ns + round(delay * 1e9) + 999_999) // NS_PER_MS  # as due_after, up
        else:
            due_ms = due_after(delay, now_ns)
        # slots set here, not by __init__: a class call with a Python __init__ costs twice as much
        handle = new_handle(LockedHandle)
        handle._owner = self
        handle._due = due_ms
        handle._wheel = None
        handle._fn = fn
        handle._args = args
        # acquire and release by hand: half the cost of a `with` block on CPython 3.11
        lock = self._lock
        lock.acquire()
        try:
            if self._closed:
                raise Closed(f"{type(self).__name__} is closed")
            self._wheel.file(handle, due_ms)
            if self._wake_at is None or due_ms < self._wake_at:
                self._wake_before(due_ms)
        finally:
            lock.release()
        return handle

    def call_at(
        self, when: float, fn: Callable[..., Any], *args: Any, key: Hashable | None = None
    ) -> TimerHandle:
        """Call ``fn(*args)`` at `when` (epoch seconds or an aware datetime)."""
        check_callable(fn)
        return self._add(due_at(when), fn, args, key)

    def call_at_ms(
        self, due_ms: int, fn: Callable[..., Any], *args: Any, key: Hashable | None = None
    ) -> TimerHandle:
        """Call ``fn(*args)`` at integer epoch ms `due_ms`: exact, where float seconds may round."""
        check_callable(fn)
        return self._add(check_due_ms(due_ms), fn, args, key)

    def every(
        self,
        interval: float,
        fn: Callable[..., Any],
        *args: Any,
        key: Hashable | None = None,
        start: float | None = None,
    ) -> Series:
        """Call ``fn(*args)`` every `interval` seconds (at least 1), at `start` + k * `interval`.

        `start` is epoch seconds or an aware datetime, and is the first call unless it has
        passed (then the first call is the next occurrence from now); without it the series
        starts now and first calls one interval later. See `Series` for overlaps and misses.
        """
        check_callable(fn)
        now_ms = self._now_ms()
        if start is None:
            return self._start_series(every_seconds(interval, now_ms), fn, args, key, now_ms)
        rule = every_seconds(interval, due_at(start))
        return self._start_series(rule, fn, args, key, now_ms - 1)

    def cron(
        self,
        expression: str,
        fn: Callable[..., Any],
        *args: Any,
        tz: str | None = None,
        key: Hashable | None = None,
    ) -> Series:
        """Call ``fn(*args)`` by a cron rule: 5 fields, or 6 with seconds first, in IANA zone
        `tz` (UTC by default). A local time that happens twice runs once; one that a DST gap
        skips runs when the gap ends (`tickwheel.recurrence`). See `Series` for overlaps."""
        check_callable(fn)
        if tz is not None and not isinstance(tz, str):
            raise InvalidArgument("tz", f"must be an IANA time zone name, got {tz!r}")
        return self._start_series(Cron(expression, tz or "UTC"), fn, args, key, self._now_ms())

    def cancel(self, key: Hashable) -> bool:
        """Cancel the timer or series scheduled under `key`; return whether it was pending."""
        check_key(key)
        with self._lock:
            self._end_keyed(key)
            return self._wheel.cancel(key)

    def end_series(self, series: Series) -> bool:
        with self._lock:
            if series.ended:
                return False
            series.ended = True
            wheel_key = series if series.key is None else series.key
            pending = self._wheel.get(wheel_key)
            if pending is not None and pending.series is series:
                self._wheel.cancel(wheel_key)
            if series.key is not None and self._series.get(series.key) is series:
                del self._series[series.key]
            return True

    def rearm_series(self, series: Series, nominal_ms: int) -> None:
        """Arm the occurrence after `nominal_ms`, or after now if the driver fell behind."""
        due_ms = series.next_after(max(nominal_ms, self._now_ms() - 1))
        with self._lock:
            if series.ended or self._closed:
                return
            self._arm(series, due_ms)

    def _start_series(
        self,
        rule: Recurrence,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        key: Hashable | None,
        after_ms: int,
    ) -> Series:
        if key is not None:
            check_key(key)
        series = Series(self, rule, fn, args, key)
        due_ms = series.next_after(after_ms)
        with self._lock:
            if self._closed:
                raise Closed(f"{type(self).__name__} is closed")
            if key is not None:
                self._end_keyed(key)
                self._wheel.cancel(key)
                self._series[key] = series
            self._arm(series, due_ms)
        return series

    def _arm(self, series: Series, due_ms: int | None) -> None:
        """Put the series' next occurrence in the wheel; called with the lock held."""
        series.armed(due_ms)
        if due_ms is None:
            if series.key is not None and self._series.get(series.key) is series:
                del self._series[series.key]
            return
        handle = Occurrence(self, series, due_ms)
        self._wheel.add(series if series.key is None else series.key, due_ms, handle)
        self._wake_if_earlier(due_ms)

    def _end_keyed(self, key: Hashable) -> None:
        """End the series holding `key`, if any; called with the lock held."""
        if self._series:
            replaced = self._series.pop(key, None)
            if replaced is not None:
                replaced.ended = True

    def _now_ms(self) -> int:
        return self._clock.now_ns() // NS_PER_MS

    def cancel_handle(self, handle: TimerHandle) -> bool:
        key = handle.key
        lock = self._lock
        lock.acquire()
        try:
            if key is None:  # the handle is its own entry
                return self._wheel.discard(handle)
            return self._wheel.get(key) is handle and self._wheel.cancel(key)
        finally:
            lock.release()

    def reschedule_handle(self, handle: TimerHandle, delay: float) -> bool:
        due_ms = due_after(delay, self._clock.now_ns())
        key = handle.key
        with self._lock:
            if key is None:
                if not self._wheel.move(handle, due_ms):
                    return False
            elif self._wheel.get(key) is handle:
                handle._due = due_ms  # keyed handles are never filed: never pending themselves
                self._wheel.add(key, due_ms, handle)
            else:
                return False
            self._wake_if_earlier(due_ms)
        return True

    def _drop_pending(self) -> None:
        """Close, forgetting every pending timer; called with the lock held."""
        self._closed = True
        self._wheel.clear()

    def _add(
        self, due_ms: int, fn: Callable[..., Any], args: tuple[Any, ...], key: Hashable | None
    ) -> TimerHandle:
        if key is not None:
            check_key(key)
        handle = (
            self._handle_type(self, due_ms, fn, args)
            if key is None
            else KeyedHandle(self, key, due_ms, fn, args)
        )
        with self._lock:
            if self._closed:
                raise Closed(f"{type(self).__name__} is closed")
            if key is None:
                self._wheel.file(handle, due_ms)
            else:
                self._end_keyed(key)
                self._wheel.add(key, due_ms, handle)
            self._wake_if_earlier(due_ms)
        return handle

    def _wake_if_earlier(self, due_ms: int) -> None:
        if self._wake_at is None or due_ms < self._wake_at:
            self._wake_before(due_ms)

    @abstractmethod
    def _wake_before(self, due_ms: int) -> None:
        """Make the driver look at the wheel again by `due_ms`; called with the lock held."""

"""What the thread and asyncio schedulers share: handles, keys and the wheel under a lock."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from typing import Any

from tickwheel.core import TimingWheel
from tickwheel.errors import Closed
from tickwheel.runtime._args import (
    check_callable,
    check_due_ms,
    check_key,
    check_tick,
    due_after,
    due_at,
)
from tickwheel.runtime.clock import NS_PER_MS, Clock, SystemClock


class TimerHandle:
    """One scheduled call, returned by `call_later` and `call_at`; cancel or move it."""

    __slots__ = ("_args", "_due_ms", "_fn", "_owner", "key")

    def __init__(
        self,
        owner: WheelTimers,
        key: Hashable | None,
        due_ms: int,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
    ) -> None:
        self._owner = owner
        self.key = key
        self._due_ms = due_ms
        self._fn = fn
        self._args = args

    @property
    def when(self) -> float:
        """When the call is due, in epoch seconds."""
        return self._due_ms / 1000

    def cancel(self) -> bool:
        """Stop the call; return whether it was still pending."""
        return self._owner.cancel_handle(self)

    def reschedule(self, delay: float) -> bool:
        """Move the call to `delay` seconds from now; return whether it was still pending."""
        return self._owner.reschedule_handle(self, delay)

    def run(self) -> Any:
        """Make the call."""
        return self._fn(*self._args)

    def __repr__(self) -> str:
        name = getattr(self._fn, "__qualname__", repr(self._fn))
        return f"<TimerHandle {name} key={self.key!r} when={self.when:.3f}>"


class WheelTimers(ABC):
    """`call_later` / `call_at` / `cancel` over a `TimingWheel` guarded by one lock.

    Subclasses own the loop that advances the wheel; `_wake_before` tells them a timer was
    added earlier than their planned wake-up.
    """

    def __init__(self, clock: Clock | None, tick_ms: int) -> None:
        self._clock: Clock = clock or SystemClock()
        self._lock = threading.Lock()
        # waits and wake-ups go through the condition; plain `with self._lock` is cheaper
        self._cond = threading.Condition(self._lock)
        self._wheel: TimingWheel[Hashable, TimerHandle] = TimingWheel(
            self._clock.now_ns() // NS_PER_MS, check_tick(tick_ms)
        )
        self._wake_at: int | None = None
        self._closed = False

    def __len__(self) -> int:
        return len(self._wheel)

    def call_later(
        self, delay: float, fn: Callable[..., Any], *args: Any, key: Hashable | None = None
    ) -> TimerHandle:
        """Call ``fn(*args)`` after `delay` seconds; a `key` replaces the timer it names."""
        check_callable(fn)
        return self._add(due_after(delay, self._clock.now_ns()), fn, args, key)

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

    def cancel(self, key: Hashable) -> bool:
        """Cancel the timer scheduled under `key`; return whether it was pending."""
        check_key(key)
        with self._lock:
            return self._wheel.cancel(key)

    def cancel_handle(self, handle: TimerHandle) -> bool:
        wheel_key = handle if handle.key is None else handle.key
        with self._lock:
            return self._wheel.get(wheel_key) is handle and self._wheel.cancel(wheel_key)

    def reschedule_handle(self, handle: TimerHandle, delay: float) -> bool:
        due_ms = due_after(delay, self._clock.now_ns())
        wheel_key = handle if handle.key is None else handle.key
        with self._lock:
            if self._wheel.get(wheel_key) is not handle:
                return False
            handle._due_ms = due_ms
            self._wheel.add(wheel_key, due_ms, handle)
            self._wake_if_earlier(due_ms)
        return True

    def _drop_pending(self) -> None:
        """Close, forgetting every pending timer; called with the lock held."""
        self._closed = True
        self._wheel = TimingWheel(self._wheel.now_ms, 1)

    def _add(
        self, due_ms: int, fn: Callable[..., Any], args: tuple[Any, ...], key: Hashable | None
    ) -> TimerHandle:
        if key is not None:
            check_key(key)
        handle = TimerHandle(self, key, due_ms, fn, args)
        with self._lock:
            if self._closed:
                raise Closed(f"{type(self).__name__} is closed")
            self._wheel.add(handle if key is None else key, due_ms, handle)
            self._wake_if_earlier(due_ms)
        return handle

    def _wake_if_earlier(self, due_ms: int) -> None:
        if self._wake_at is None or due_ms < self._wake_at:
            self._wake_before(due_ms)

    @abstractmethod
    def _wake_before(self, due_ms: int) -> None:
        """Make the driver look at the wheel again by `due_ms`; called with the lock held."""

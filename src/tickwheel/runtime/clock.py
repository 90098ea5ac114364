"""Clocks the runtime drivers read: the real one and a fake one tests move by hand."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

NS_PER_MS = 1_000_000


class Clock(Protocol):
    """Epoch time in nanoseconds, plus a way to hear about jumps."""

    def now_ns(self) -> int:
        """Return the current time as nanoseconds since the Unix epoch."""
        ...

    def watch(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call `wake` after the clock jumps forward; return a function that stops it."""
        ...


class SystemClock:
    """Epoch time that never steps: the wall clock read once, advanced by the monotonic clock.

    A scheduler must not fire early when an administrator or NTP steps the wall clock, and
    `call_at` must still take epoch seconds; anchoring the monotonic clock to the epoch gives both.
    """

    __slots__ = ("offset_ns",)

    def __init__(self) -> None:
        self.offset_ns = time.time_ns() - time.monotonic_ns()
        """Epoch ns minus monotonic ns, fixed at creation: a hot path may add it itself."""

    def now_ns(self) -> int:
        return time.monotonic_ns() + self.offset_ns

    def watch(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Real time moves on its own; sleepers compute their own timeouts."""
        return unwatched


class FakeClock:
    """A clock that moves only when told, waking every watcher so sleepers re-check."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ns = start_ms * NS_PER_MS
        self._watchers: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def now_ns(self) -> int:
        return self._now_ns

    def now_ms(self) -> int:
        """Return the current time in epoch milliseconds."""
        return self._now_ns // NS_PER_MS

    def advance_ms(self, ms: int) -> None:
        """Move time forward by `ms` and wake the watchers."""
        if ms < 0:
            raise ValueError(f"ms: the clock only moves forward, got {ms!r}")
        with self._lock:
            self._now_ns += ms * NS_PER_MS
            watchers = list(self._watchers)
        for wake in watchers:
            wake()

    def watch(self, wake: Callable[[], None]) -> Callable[[], None]:
        with self._lock:
            self._watchers.append(wake)

        def unwatch() -> None:
            with self._lock:
                if wake in self._watchers:
                    self._watchers.remove(wake)

        return unwatch


def unwatched() -> None:
    """What `Clock.watch` returns for a clock that never calls back: there is nothing to stop."""

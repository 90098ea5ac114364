"""The scheduler on the running asyncio loop: one loop timer armed for the earliest bucket."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Hashable
from time import monotonic_ns
from types import TracebackType
from typing import Any

from tickwheel.runtime._args import FILE_AHEAD_S, FILE_EVERY_S, MAX_SLEEP_S, YEAR_S, due_after
from tickwheel.runtime.clock import NS_PER_MS, Clock
from tickwheel.runtime.timers import TimerHandle, WheelTimers, new_handle

logger = logging.getLogger("tickwheel")

# how long before a due time the scheduler stops sleeping and checks on every loop iteration
SPIN_S = 0.001


class AsyncScheduler(WheelTimers):
    """Run plain callables and coroutine functions at their due time on the running loop.

    Create it inside a coroutine and call it from the loop's thread, as with asyncio's own
    `call_later`. Coroutines run as tasks, so a slow one delays nobody; a plain callable runs
    on the loop and should be quick. Errors are logged and forgotten.
    """

    # the loop's thread owns the wheel: a plain call's handle is cancelled without the lock
    _handle_type = TimerHandle

    def __init__(self, *, clock: Clock | None = None, tick_ms: int = 1) -> None:
        super().__init__(clock, tick_ms)
        self._loop = asyncio.get_running_loop()
        self._alarm: asyncio.Handle | None = None
        self._tasks: set[asyncio.Future[Any]] = set()
        self._unwatch = self._clock.watch(self._wake)

    def call_later(
        self, delay: float, fn: Callable[..., Any], *args: Any, key: Hashable | None = None
    ) -> TimerHandle:
        """Call ``fn(*args)`` after `delay` seconds; a `key` replaces the timer it names."""
        # the loop's thread owns the wheel: a plain call needs no lock and no key bookkeeping
        if key is not None or self._closed or not callable(fn):
            return super().call_later(delay, fn, *args, key=key)
        now_ns = monotonic_ns() + self._offset_ns if self._system else self._clock.now_ns()
        if (type(delay) is float or type(delay) is int) and 0.0 < delay <= YEAR_S:
            due_ms = (now_ns + round(delay * 1e9) + 999_999) // NS_PER_MS  # as due_after, up
        else:
            due_ms = due_after(delay, now_ns)
        # slots set here, not by __init__: a class call with a Python __init__ costs twice as much
        handle = new_handle(TimerHandle)
        handle._owner = self
        handle._due = due_ms
        handle._wheel = None
        handle._fn = fn
        handle._args = args
        self._wheel.file(handle, due_ms)
        wake_at = self._wake_at
        if wake_at is None or due_ms < wake_at:
            self._wake_before(due_ms)
        return handle

    def cancel_handle(self, handle: TimerHandle) -> bool:
        key = handle.key
        if key is None:
            return self._wheel.discard(handle)
        return self._wheel.get(key) is handle and self._wheel.cancel(key)

    async def __aenter__(self) -> AsyncScheduler:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def close(self) -> None:
        """Stop firing and cancel running coroutines; pending timers are dropped. Idempotent."""
        with self._lock:
            self._drop_pending()
        self._unwatch()
        if self._alarm is not None:
            self._alarm.cancel()
            self._alarm = None
        for task in self._tasks:
            task.cancel()

    async def aclose(self) -> None:
        """Close, then wait for the cancelled coroutines to finish."""
        self.close()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _wake_before(self, due_ms: int) -> None:
        if self._alarm is not None:
            self._alarm.cancel()
        self._wake_at = due_ms
        sleep_s = (due_ms * NS_PER_MS - self._clock.now_ns()) / 1e9
        if sleep_s < SPIN_S:
            # the selector rounds sleeps up to whole ms: for the last stretch, poll each loop turn
            self._alarm = self._loop.call_soon(self._fire)
        else:
            if sleep_s < FILE_AHEAD_S:  # an early `_fire` files what was added (its advance)
                sleep_s = min(sleep_s, FILE_EVERY_S + SPIN_S)
            sleep_s = min(max(sleep_s - SPIN_S, SPIN_S), MAX_SLEEP_S)
            self._alarm = self._loop.call_later(sleep_s, self._fire)

    def _wake(self) -> None:
        self._loop.call_soon_threadsafe(self._fire)

    def _fire(self) -> None:
        with self._lock:
            if self._closed:
                return
            if self._alarm is not None:
                self._alarm.cancel()
                self._alarm = None
            self._wake_at = None
            expired = self._wheel.advance(self._clock.now_ns() // NS_PER_MS)
            next_due = self._wheel.next_due_ms()
            if next_due is not None:
                self._wake_before(next_due)
        for _, handle in expired:
            try:
                result = handle.run()
            except Exception:
                logger.exception("timer callback %r raised", handle)
                continue
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                self._tasks.add(task)
                task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("timer coroutine raised", exc_info=task.exception())

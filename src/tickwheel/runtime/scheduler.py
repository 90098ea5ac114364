"""A thread that sleeps until the next timer is due and hands due callbacks to worker threads."""

from __future__ import annotations

import os
import threading
from types import TracebackType

from tickwheel.runtime._args import FILE_AHEAD_S, FILE_EVERY_S, MAX_SLEEP_S, check_workers
from tickwheel.runtime.clock import NS_PER_MS, Clock
from tickwheel.runtime.timers import WheelTimers
from tickwheel.runtime.workers import CallbackPool


class Scheduler(WheelTimers):
    """Run callbacks at their due time on a pool of worker threads.

    One thread drives a `TimingWheel`: it sleeps until the earliest bucket is due (an earlier
    `call_later` wakes it), then passes due callbacks to `max_workers` threads, so a slow
    callback holds up only its own worker. A callback that raises is logged and forgotten.
    """

    def __init__(
        self, *, clock: Clock | None = None, tick_ms: int = 1, max_workers: int | None = None
    ) -> None:
        super().__init__(clock, tick_ms)
        if max_workers is None:
            max_workers = min(32, (os.cpu_count() or 1) + 4)
        self._pool = CallbackPool(check_workers(max_workers), "tickwheel-worker")
        self._driver = threading.Thread(target=self._drive, name="tickwheel-driver", daemon=True)
        self._unwatch = self._clock.watch(self._wake)
        self._driver.start()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop firing: pending timers are dropped, running callbacks finish. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._drop_pending()
            self._cond.notify()
        self._unwatch()
        if self._driver is not threading.current_thread():
            self._driver.join()
        self._pool.close()

    def _wake_before(self, due_ms: int) -> None:
        # the driver sets its own wake-up when it looks again; until then, later timers need
        # no second notify (each costs a microsecond)
        self._wake_at = due_ms
        self._cond.notify()

    def _wake(self) -> None:
        with self._lock:
            self._cond.notify()

    def _drive(self) -> None:
        clock = self._clock
        with self._lock:
            while not self._closed:
                if self._pool.backlogged():
                    self._pool.nudge()  # the last batch is still waiting: add a thread
                now_ms = clock.now_ns() // NS_PER_MS
                # nothing needs an advance before `_wake_at` (adds lower it); woken early (by an
                # earlier add, or to file ahead) the driver files the wheel's queue only when
                # its wake-up is near, so timers added far ahead are filed as rarely as can be
                wake_at = self._wake_at
                if wake_at is not None and now_ms >= wake_at:
                    due = self._wheel.advance(now_ms)
                    if due:
                        self._pool.submit(handle for _, handle in due)
                    self._wake_at = self._wheel.next_due_ms()
                elif wake_at is not None and wake_at - now_ms < FILE_AHEAD_S * 1000:
                    self._wake_at = self._wheel.next_due_ms()  # files what was added
                sleep_s = MAX_SLEEP_S
                if self._wake_at is not None:
                    sleep_s = min((self._wake_at * NS_PER_MS - clock.now_ns()) / 1e9, sleep_s)
                    if sleep_s < FILE_AHEAD_S:
                        sleep_s = min(sleep_s, FILE_EVERY_S)
                if self._pool.backlogged():
                    sleep_s = min(sleep_s, CallbackPool.NUDGE_S)
                if sleep_s > 0:
                    self._cond.wait(sleep_s)

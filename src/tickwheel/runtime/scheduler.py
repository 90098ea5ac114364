"""A thread that sleeps until the next timer is due and hands due callbacks to worker threads."""

from __future__ import annotations

import logging
import os
import threading
from queue import SimpleQueue
from types import TracebackType

from tickwheel.runtime._args import MAX_SLEEP_S
from tickwheel.runtime.clock import NS_PER_MS, Clock
from tickwheel.runtime.timers import TimerHandle, WheelTimers

logger = logging.getLogger("tickwheel")


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
        workers = max_workers or min(32, (os.cpu_count() or 1) + 4)
        self._ready: SimpleQueue[TimerHandle | None] = SimpleQueue()
        self._workers = [
            threading.Thread(target=self._work, name=f"tickwheel-worker-{n}", daemon=True)
            for n in range(workers)
        ]
        self._driver = threading.Thread(target=self._drive, name="tickwheel-driver", daemon=True)
        self._unwatch = self._clock.watch(self._wake)
        for thread in (*self._workers, self._driver):
            thread.start()

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
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify()
        self._unwatch()
        for _ in self._workers:
            self._ready.put(None)
        current = threading.current_thread()
        for thread in (self._driver, *self._workers):
            if thread is not current:
                thread.join()

    def _wake_before(self, due_ms: int) -> None:
        self._cond.notify()

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def _drive(self) -> None:
        clock = self._clock
        wheel = self._wheel
        ready = self._ready
        with self._cond:
            while not self._closed:
                for _, handle in wheel.advance(clock.now_ns() // NS_PER_MS):
                    ready.put(handle)
                self._wake_at = wheel.next_due_ms()
                if self._wake_at is None:
                    self._cond.wait()
                    continue
                sleep_s = (self._wake_at * NS_PER_MS - clock.now_ns()) / 1e9
                if sleep_s > 0:
                    self._cond.wait(min(sleep_s, MAX_SLEEP_S))

    def _work(self) -> None:
        get = self._ready.get
        while (handle := get()) is not None:
            try:
                handle.run()
            except Exception:
                logger.exception("timer callback %r raised", handle)

"""A fixed pool of threads that run due callbacks, woken once per batch rather than per call."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterable

from tickwheel.runtime.timers import TimerHandle

logger = logging.getLogger("tickwheel")


class CallbackPool:
    """Run handles on up to `size` threads; a slow callback holds up only its own thread.

    Waking a thread costs tens of microseconds, far more than a short callback, so handles go
    into one shared deque and a single thread is woken per batch. A thread that starts a
    callback while more are waiting wakes one helper first, so a callback that blocks leaves
    the rest of its batch to another thread.
    """

    def __init__(self, size: int, name: str) -> None:
        self._jobs: deque[TimerHandle] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._idle = 0
        self._waking = 0
        self._stopping = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{n}", daemon=True)
            for n in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, handles: Iterable[TimerHandle]) -> None:
        """Queue handles to run now, in order."""
        self._jobs.extend(handles)
        if self._jobs:
            self._wake_one()

    def close(self) -> None:
        """Let queued callbacks finish, then stop the threads (not joining the current one)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        current = threading.current_thread()
        for thread in self._threads:
            if thread is not current:
                thread.join()

    def _wake_one(self) -> None:
        with self._cond:
            if self._idle > self._waking:
                self._waking += 1
                self._cond.notify()

    def _work(self) -> None:
        jobs = self._jobs
        while True:
            try:
                handle = jobs.popleft()
            except IndexError:
                if not self._sleep():
                    return
                continue
            if jobs and self._idle > self._waking:
                self._wake_one()  # unlocked peek first: the common case takes no lock
            try:
                handle.run()
            except Exception:
                logger.exception("timer callback %r raised", handle)

    def _sleep(self) -> bool:
        """Wait for work; return False once the pool is stopping and drained."""
        with self._cond:
            while not self._jobs:
                if self._stopping:
                    return False
                self._idle += 1
                self._cond.wait()
                self._idle -= 1
                if self._waking:
                    self._waking -= 1
            return True

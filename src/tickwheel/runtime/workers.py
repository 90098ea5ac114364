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

    Waking a thread costs tens of microseconds, far more than a short callback, and every extra
    runnable thread makes the driver wait longer for the GIL. So handles go into one shared
    deque and one thread drains it; the driver calls `nudge` a few milliseconds later, which
    wakes one more thread only if work is still waiting (a callback blocked or the load grew).
    """

    NUDGE_S = 0.002

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
        """Queue handles to run now, in order; wake a thread if none is running."""
        self._jobs.extend(handles)
        if self._jobs and self._idle == len(self._threads):
            self._wake_one()

    def backlogged(self) -> bool:
        """Whether handles are waiting for a thread."""
        return bool(self._jobs)

    def nudge(self) -> None:
        """Wake one more thread if handles are still waiting."""
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

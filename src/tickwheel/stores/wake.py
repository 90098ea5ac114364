"""`Wakeups`: per-queue events that wake the tasks blocked in `Store.wait` (`ANY_QUEUE`: the
tasks watching for changes to queues that no task waits on)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from tickwheel.stores.base import ANY_QUEUE


class Wakeups:
    """Tasks waiting per queue, in one event loop; `notify` wakes those of a queue.

    Notifications are also counted, so a change that lands between a caller's look at a queue
    (`mark`, at the start of `next_due_ms` or `claim`) and its `wait` still wakes that wait.
    """

    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Event]] = {}
        self._changes: dict[str, int] = {}
        self._all_changes = 0
        self._marks: dict[str, tuple[int, int]] = {}

    def notify(self, queue: str) -> None:
        self._changes[queue] = self._changes.get(queue, 0) + 1
        waiters = self._waiting.get(queue)
        if waiters is None:
            # nobody serves this queue yet: tell those who watch for queues nobody serves
            queue = ANY_QUEUE
            self._changes[queue] = self._changes.get(queue, 0) + 1
            waiters = self._waiting.get(queue, set())
        for event in waiters:
            event.set()

    def notify_all(self) -> None:
        """Wake every waiter: the store cannot tell which queues changed."""
        self._all_changes += 1
        for events in self._waiting.values():
            for event in events:
                event.set()

    def mark(self, queue: str) -> None:
        """Note that a caller reads `queue` now: the next `waiting` on it sees later changes."""
        self._marks[queue] = self._count(queue)

    def _count(self, queue: str) -> tuple[int, int]:
        return self._changes.get(queue, 0), self._all_changes

    def __bool__(self) -> bool:
        return bool(self._waiting)

    @contextmanager
    def waiting(self, queue: str) -> Iterator[asyncio.Event]:
        """Register a waiter on `queue` for the duration of the block; yield its event."""
        event = asyncio.Event()
        if self._marks.pop(queue, self._count(queue)) != self._count(queue):
            event.set()  # changed since the caller last read the queue
        events = self._waiting.setdefault(queue, set())
        events.add(event)
        try:
            yield event
        finally:
            events.discard(event)
            if not events:
                del self._waiting[queue]

    async def wait(self, queue: str, timeout_s: float) -> bool:
        """Wait for a `notify` of `queue` (True) or `timeout_s` (False)."""
        with self.waiting(queue) as event:
            return await until(event, timeout_s)


async def until(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait for `event` at most `timeout_s`; return whether it was set."""
    if not event.is_set():
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for drops a cancellation that
        # arrives as the event is set, and a stopping worker's claim loop then never ends
        with suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await event.wait()
    return event.is_set()

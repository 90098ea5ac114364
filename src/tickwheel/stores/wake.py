"""`Wakeups`: per-queue events that wake the tasks blocked in `Store.wait`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class Wakeups:
    """Tasks waiting per queue, in one event loop; `notify` wakes those of a queue."""

    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Event]] = {}

    def notify(self, queue: str) -> None:
        for event in self._waiting.get(queue, ()):
            event.set()

    def notify_all(self) -> None:
        """Wake every waiter: the store cannot tell which queues changed."""
        for events in self._waiting.values():
            for event in events:
                event.set()

    def __bool__(self) -> bool:
        return bool(self._waiting)

    @contextmanager
    def waiting(self, queue: str) -> Iterator[asyncio.Event]:
        """Register a waiter on `queue` for the duration of the block; yield its event."""
        event = asyncio.Event()
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

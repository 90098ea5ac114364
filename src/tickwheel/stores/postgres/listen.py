"""`Listener`: the one ``LISTEN`` connection of a `PostgresStore`, waking its `wait` callers.

The ``lower_heads`` trigger sends ``NOTIFY <schema>_wake, '<queue>'`` when a commit schedules a
timer before its queue's head, so a worker asleep until its next claim hears of a timer due
sooner from any process, at commit, with no polling.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

import psycopg

from tickwheel.stores.wake import Wakeups

POLL_S = 1.0  # longest wait for a notification, so a closed store's task ends soon
RECONNECT_S = 0.5  # pause before listening again after a connection error

Connect = Callable[[], Coroutine[Any, Any, psycopg.AsyncConnection[Any]]]


class Listener:
    """Listen on first use; on each notification, wake the waiters of the queue it names."""

    def __init__(self, connect: Connect, channel: str) -> None:
        self.wakeups = Wakeups()
        self.subscribed = asyncio.Event()
        """Set while ``LISTEN`` holds: from then on every committed change is heard."""
        self._connect = connect
        self._channel = channel
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Listen in the background, unless it does already."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._listen(), name=f"tickwheel {self._channel}")

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _listen(self) -> None:
        while True:
            try:
                await self._listening()
            except (psycopg.Error, OSError):
                self.subscribed.clear()
                # a notification may have been lost: let every waiter look again
                self.wakeups.notify_all()
                await asyncio.sleep(RECONNECT_S)

    async def _listening(self) -> None:
        conn = await self._connect()
        try:
            await conn.execute(f'LISTEN "{self._channel}"')
            # changes committed before LISTEN took effect were not heard
            self.subscribed.set()
            self.wakeups.notify_all()
            while True:
                async for note in conn.notifies(timeout=POLL_S):
                    self.wakeups.notify(note.payload)
        finally:
            with contextlib.suppress(psycopg.Error, OSError):
                await conn.close()

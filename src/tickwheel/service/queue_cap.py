"""The store-wide cap on queues: a timer, schedule or setting for a new queue past it is 429.

A queue is a name, made by its first timer, and every queue costs each worker a little, so an
operator caps how many the store may hold (`ServiceSettings.max_queues`). Counting the store's
queues on every create would cost a read per request; instead this process keeps the names it
knows, read from the store (queues with pending timers, and queues with settings) when first
needed, at most every `REFRESH_S` while at the cap and every `MAX_AGE_S` otherwise, and adds
each new queue it admits. A name it knows costs a set lookup. Between reads a queue that
emptied still counts, so the cap refuses early rather than late; API processes sharing one
store may pass it by what each admits between two of its reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection

from tickwheel.stores.base import Store

REFRESH_S = 5.0
"""Least time between two reads of the store's queues while at the cap."""
MAX_AGE_S = 60.0
"""Longest a new queue is admitted on names read from the store this long ago."""


class QueueCap:
    """Admits new queues while the store holds fewer than `max_queues` (see the module)."""

    def __init__(self, max_queues: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_queues = max_queues
        self._clock = clock
        self._known: set[str] = set()
        self._read_at: float | None = None

    async def refused(self, store: Store, queues: Collection[str]) -> set[str]:
        """Admit the queues among `queues` that the cap lets in; return those it refuses."""
        known = self._known
        new = {queue for queue in queues if queue not in known}
        if not new:
            return new
        now = self._clock()
        read_at = self._read_at
        full = len(known) + len(new) > self.max_queues
        if read_at is None or now - read_at >= MAX_AGE_S or (full and now - read_at >= REFRESH_S):
            pending = await store.queues()
            settings = await store.queue_settings()
            known = self._known = {*pending, *settings}
            self._read_at = now
            new -= known
        refused: set[str] = set()
        for queue in sorted(new):
            if len(known) < self.max_queues:
                known.add(queue)
            else:
                refused.add(queue)
        return refused

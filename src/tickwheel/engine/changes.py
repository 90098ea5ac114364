"""Timer state changes of one process, in a ring the event stream (``GET /v1/events``) reads.

Publishing appends one entry to a fixed ring and wakes whoever waits: it never waits itself,
whatever the readers do, so firing is never slowed by a subscriber. Each reader keeps only its
place (a sequence number); one that falls a whole ring behind has missed changes and is told
so (`Lagged`), and a reader that resumes from a place still in the ring misses nothing.
"""

from __future__ import annotations

import asyncio
import os
import time

__all__ = ["KINDS", "WINDOW", "ChangeFeed", "Entry", "Lagged"]

KINDS = frozenset({"created", "fired", "acked", "retried", "dead", "cancelled", "paused"})
WINDOW = 20_000
"""Changes the ring keeps: 4 s at 5,000 changes/s, far longer at ordinary rates; about 7 MB."""

Entry = list[object]
"""One change: ``[seq, kind, timer id or None, queue, attempt, at_ms, encoded or None]``; the
last slot is filled by the first reader that encodes it, for the others to reuse."""


class Lagged(Exception):
    """A reader's place fell out of the ring: changes it never read were overwritten."""


class ChangeFeed:
    """The ring of the last `window` changes; `publish` from the event loop's thread only."""

    def __init__(self, window: int = WINDOW) -> None:
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        self.window = window
        # which run of the process the sequence numbers belong to: a place from another run
        # (an earlier process, before a restart) means nothing here
        self.epoch = os.urandom(4).hex()
        self.head = 0
        """The sequence number of the newest change (0: none yet)."""
        self.readers = 0
        """Subscribers reading now (the API counts them against its cap)."""
        self.dropped = 0
        """Subscribers dropped for reading too slowly."""
        self.closed = False
        self._ring: list[Entry | None] = [None] * window
        self._wake: asyncio.Future[None] | None = None

    def publish(self, kind: str, timer_id: str | None, queue: str, attempt: int = 0) -> None:
        """Record a change of `timer_id` (None for a whole queue) in `queue`, now; never
        waits."""
        self.head = seq = self.head + 1
        at_ms = time.time_ns() // 1_000_000
        self._ring[seq % self.window] = [seq, kind, timer_id, queue, attempt, at_ms, None]
        if self._wake is not None:
            self._wake_all()

    def _wake_all(self) -> None:
        wake, self._wake = self._wake, None
        if wake is not None and not wake.done():
            wake.set_result(None)

    def close(self) -> None:
        """End every reader's stream (the process is stopping)."""
        self.closed = True
        self._wake_all()

    def oldest(self) -> int:
        """The sequence number of the oldest change still in the ring."""
        return max(1, self.head - self.window + 1)

    def read(self, after: int, limit: int) -> list[Entry]:
        """Up to `limit` changes after sequence number `after`, oldest first.

        Raises:
            Lagged: some change after `after` is no longer in the ring.
        """
        if after < self.oldest() - 1:
            raise Lagged(f"{self.oldest() - 1 - after} changes were overwritten unread")
        last = min(self.head, after + limit)
        ring, window = self._ring, self.window
        return [ring[seq % window] for seq in range(after + 1, last + 1)]  # type: ignore[misc]

    async def wait(self, after: int, timeout_s: float) -> bool:
        """Wait until a change after `after` is published, at most `timeout_s`; whether one was
        (or the feed closed)."""
        if self.head > after or self.closed:
            return True
        if self._wake is None:
            self._wake = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._wake), timeout_s)
        except TimeoutError:
            return self.head > after
        return True

"""The store's clock: the Redis server's, so every worker agrees on what is due."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable


def _local_ms() -> float:
    return time.monotonic_ns() / 1_000_000


class ServerClock:
    """Epoch ms that follow the Redis server clock.

    `sync` reads the server's ``TIME`` and keeps its offset from the local monotonic clock,
    assuming the server read its clock at the very end of the round trip: this clock may run
    behind the server's by up to one round trip, never ahead, so nothing fires early (the
    midpoint, half a round trip either way, fired callbacks 0.2 ms early in tests). Between syncs
    the local monotonic clock advances the time; it never steps back, even when a later sync
    finds the server behind what this clock already returned.

    Before the first sync it answers with the local wall clock: a guess, which no later
    reading is held to (a host running ahead of the server would otherwise pin this clock at
    its lead, and timers would fire early by it). Whatever fires timers syncs first.
    """

    def __init__(self, refresh_s: float = 60.0) -> None:
        self.refresh_s = refresh_s
        self._offset_ms: float | None = None
        self._synced_at = 0.0
        self._last_ms = 0

    def __call__(self) -> int:
        if self._offset_ms is None:
            return time.time_ns() // 1_000_000
        now = int(_local_ms() + self._offset_ms)
        if now > self._last_ms:
            self._last_ms = now
        return self._last_ms

    @property
    def offset_ms(self) -> float | None:
        """Server minus local monotonic ms at the last sync, or None before the first."""
        return self._offset_ms

    def stale(self) -> bool:
        return self._offset_ms is None or _local_ms() - self._synced_at >= self.refresh_s * 1000

    async def sync(self, server_time: Callable[[], Awaitable[tuple[int, int]]]) -> None:
        """Measure the offset with `server_time`, which returns ``TIME``'s (seconds, µs)."""
        seconds, micros = await server_time()
        after = _local_ms()
        self._offset_ms = seconds * 1000 + micros / 1000 - after
        self._synced_at = after

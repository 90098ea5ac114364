"""The store's clock: the Redis server's, so every worker agrees on what is due."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

# a sample this quick puts the clock within the ms it counts in: no need to sync before `refresh_s`
GOOD_RTT_MS = 1.0
# while the kept sample is slower, sync again after this long, then twice as long each time
RETRY_S = 1.0


def _local_ms() -> float:
    return time.monotonic_ns() / 1_000_000


class ServerClock:
    """Epoch ms that follow the Redis server clock.

    `sync` reads the server's ``TIME`` between two readings of the local monotonic clock: the
    server read its clock somewhere in that round trip, so server minus the local time at its
    end is an offset this clock can run on without ever running ahead of the server, and it
    runs behind by at most the round trip (the midpoint, half a round trip either way, fired
    callbacks 0.2 ms early in tests). As NTP does, the clock keeps the sample with the smallest
    round trip: a sync taken while other commands were in flight (a slow round trip) does not
    replace a better one, and while the kept sample is slower than `GOOD_RTT_MS`, `stale` asks
    for another sync after `RETRY_S`, then after twice as long each time, until a quiet moment
    gives a good one (a link that is never that quick costs a few `TIME` calls a minute).
    A sample is kept for at most `refresh_s`, so the offset follows a server clock that drifts
    or steps; a sample that proves the kept one ahead of the server replaces it at once.
    Between syncs the local monotonic clock advances the time; it never steps back, even when
    a later sync finds the server behind what this clock already returned.

    Before the first sync it answers with the local wall clock: a guess, which no later
    reading is held to (a host running ahead of the server would otherwise pin this clock at
    its lead, and timers would fire early by it). Whatever fires timers syncs first.
    """

    def __init__(self, refresh_s: float = 60.0) -> None:
        self.refresh_s = refresh_s
        self._offset_ms: float | None = None
        # the kept sample: its round trip and when it was taken (local monotonic ms)
        self._rtt_ms = 0.0
        self._synced_at = 0.0
        # when the last sync was taken, and how long after it a poor sample is retried
        self._tried_at = 0.0
        self._retry_s = RETRY_S
        self._syncing = False
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
        """Server minus local monotonic ms by the kept sample, or None before the first sync."""
        return self._offset_ms

    @property
    def round_trip_ms(self) -> float | None:
        """The round trip of the kept sample: how far behind the server this clock may run."""
        return None if self._offset_ms is None else self._rtt_ms

    def stale(self) -> bool:
        """Whether to sync now: never synced, the kept sample too old, or a poor one to retry.

        Once synced, not while another sync is in flight: concurrent callers go on with the
        kept sample rather than send a `TIME` each.
        """
        if self._offset_ms is None:
            return True
        if self._syncing:
            return False
        now = _local_ms()
        if now - self._synced_at >= self.refresh_s * 1000:
            return True
        return self._rtt_ms > GOOD_RTT_MS and now - self._tried_at >= self._retry_s * 1000

    async def sync(self, server_time: Callable[[], Awaitable[tuple[int, int]]]) -> None:
        """Take a sample with `server_time`, which returns ``TIME``'s (seconds, µs)."""
        self._syncing = True
        try:
            before = _local_ms()
            seconds, micros = await server_time()
            after = _local_ms()
        finally:
            self._syncing = False
        server = seconds * 1000 + micros / 1000
        rtt = after - before
        self._tried_at = after
        kept = self._offset_ms
        aged = after - self._synced_at >= self.refresh_s * 1000
        # a retry of a poor sample still in use: if it finds no better, wait longer next time
        retried = kept is not None and not aged and self._rtt_ms > GOOD_RTT_MS
        if (
            kept is None
            or aged
            or rtt <= self._rtt_ms
            or server - before < kept  # the kept offset is ahead of this sample's latest
        ):
            self._offset_ms = server - after
            self._rtt_ms = rtt
            self._synced_at = after
        if retried and self._rtt_ms > GOOD_RTT_MS:
            self._retry_s = min(self._retry_s * 2, self.refresh_s)
        else:
            self._retry_s = RETRY_S

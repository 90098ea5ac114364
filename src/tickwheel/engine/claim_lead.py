"""`ClaimLead`: how far ahead of their due time a worker claims timers.

A timer must be in hand before its ms comes, so a claim takes what falls due within a lead and
the next claim starts half a lead before the next due time. The lead is the lookahead while the
store answers quickly; while claims are slow (a busy server, another tenant's flood) it grows to
a few of the slowest recent claims, so that timers are in hand on time however long the store
takes to hand them over, up to half a lease (a timer held longer would need a renewal first).
A consumer whose room holds many batches (`ClaimRoom.pace`) covers that many claims, so that
a burst it has room for is in hand before its ms.
"""

from __future__ import annotations

import time

from tickwheel.engine.settings import WorkerSettings

CLAIMS_AHEAD = 3
"""The lead covers this many of the slowest recent claims."""
SLOW_HALF_LIFE_S = 10.0
"""How fast a slow claim is forgotten: its weight halves in this time."""


class ClaimLead:
    """The lead of one dispatcher's claims, from its lookahead and its claims' round trips."""

    def __init__(self, settings: WorkerSettings) -> None:
        self._settings = settings
        self._most_ms = max(settings.lookahead_ms, settings.lease_ms // 2)
        self._slow_ms = 0.0
        self._slow_at = time.monotonic()
        self._claims = CLAIMS_AHEAD

    @property
    def ms(self) -> int:
        """Claim timers due this far ahead of now."""
        grown = int(self._claims * self._slow_ms)
        return min(self._most_ms, max(self._settings.lookahead_ms, grown))

    def cover(self, room: int) -> None:
        """Cover the claims of a `room` of timers, at least `CLAIMS_AHEAD`: as the next claim
        starts half a lead early, twice its batches, and twice again for claims slower than
        the slowest recent one (a burst's claims of a full batch each took up to 1.8 times
        the warm-up's)."""
        self._claims = max(CLAIMS_AHEAD, 4 * -(-room // self._settings.batch))

    def took(self, seconds: float) -> None:
        """Note that a claim took `seconds` from its call to its leases."""
        now = time.monotonic()
        faded = self._slow_ms * 0.5 ** ((now - self._slow_at) / SLOW_HALF_LIFE_S)
        self._slow_ms = max(seconds * 1000, faded)
        self._slow_at = now

    def idle_s(self, next_due_ms: int | None, horizon_ms: int, now_ms: int) -> float:
        """How long to sleep after a claim up to `horizon_ms` that took all there was, the
        queue's next due time being `next_due_ms` (None: nothing due)."""
        if next_due_ms is None:
            return self._settings.idle_s
        if next_due_ms > horizon_ms:
            # claim it half a lead early: in hand well before its ms, and each claim gathers
            # half a lead's worth of timers instead of one
            wake_ms = next_due_ms - self.ms // 2
        else:
            # the claim would have taken it were it scheduled: a lease deadline, and the
            # timer comes back only once that lapses (or it was added since: `wait` wakes)
            wake_ms = max(next_due_ms, now_ms + 1)
        return min(self._settings.idle_s, (wake_ms - now_ms) / 1000)
